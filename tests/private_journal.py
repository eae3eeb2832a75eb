"""Run a command beside a private systemd-journald and read back what govd logged to it.

journald runs in a private mount namespace (`unshare -m`) with tmpfs over /run/systemd and
/run/log, so it neither sees nor touches the host's journal; a drop-in in
/run/systemd/journald.conf.d (inside that tmpfs) makes its storage volatile, so nothing is
flushed to the host's /var/log/journal either. Needs root, unshare, journald, journalctl and
systemd-python; `journal_of` skips the calling test cleanly where one is missing.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Mapping, Sequence

import pytest

JOURNALD_CANDIDATES = ("/lib/systemd/systemd-journald", "/usr/lib/systemd/systemd-journald")

JOURNALD_CONF = "[Journal]\nStorage=volatile\nReadKMsg=no\nForwardToSyslog=no\nForwardToWall=no\n"

# Runs inside the namespace: start journald, run the command ("$@"), read the journal back.
NAMESPACE_SCRIPT = r"""
set -eu
mount -t tmpfs tmpfs /run/systemd
mount -t tmpfs tmpfs /run/log
mkdir -p /run/systemd/journald.conf.d
printf '%s' "$JOURNALD_CONF" > /run/systemd/journald.conf.d/govd-test.conf
"$JOURNALD" &
journald_pid=$!
trap 'kill $journald_pid; wait $journald_pid || true' EXIT
i=0
until [ -S /run/systemd/journal/socket ]; do
  i=$((i + 1)); [ $i -le 100 ] || { echo "journald did not start" >&2; exit 1; }
  sleep 0.05
done
"$@"
journalctl --sync
journalctl --directory=/run/log/journal/"$(ls /run/log/journal)" -t govd -o json --no-pager
"""


def journald_path() -> str | None:
    """The systemd-journald binary, or None."""
    return next((p for p in JOURNALD_CANDIDATES if os.access(p, os.X_OK)), None)


def skip_without_private_journal() -> str:
    """Skip the test unless a private journald can run here; returns journald's path."""
    journald = journald_path()
    missing = [
        name
        for name, found in [
            ("systemd-journald", journald),
            ("journalctl", shutil.which("journalctl")),
            ("unshare", shutil.which("unshare")),
        ]
        if not found
    ]
    if missing:
        pytest.skip(f"needs {', '.join(missing)} to run a private journald")
    if os.geteuid() != 0:
        pytest.skip("needs root to mount tmpfs in a private mount namespace")
    pytest.importorskip("systemd.journal", reason="systemd-python is not installed")
    assert journald is not None
    return journald


def journal_of(command: Sequence[str], env: Mapping[str, str],
               timeout_s: float = 60.0) -> list[dict[str, str]]:
    """Run `command` (in the private mount namespace, beside a private journald) and return
    the journal entries with SYSLOG_IDENTIFIER=govd, oldest first. Fails the test when the
    command fails (its stderr is the message)."""
    journald = skip_without_private_journal()
    result = subprocess.run(
        ["unshare", "--mount", "--propagation", "private", "sh", "-c", NAMESPACE_SCRIPT, "sh",
         *command],
        env={**env, "JOURNALD": journald, "JOURNALD_CONF": JOURNALD_CONF},
        capture_output=True, text=True, timeout=timeout_s, check=False,
    )
    assert result.returncode == 0, result.stderr
    return [json.loads(line) for line in result.stdout.splitlines() if line.strip()]
