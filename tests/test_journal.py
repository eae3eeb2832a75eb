"""govd's structured fields read back from a real systemd-journald.

journald runs in a private mount namespace (`unshare -m`) with tmpfs over /run/systemd and
/run/log, so it neither sees nor touches the host's journal; a drop-in in
/run/systemd/journald.conf.d (inside that tmpfs) makes its storage volatile, so nothing is
flushed to the host's /var/log/journal either. Needs root, unshare, journald and journalctl.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent
JOURNALD_CANDIDATES = ("/lib/systemd/systemd-journald", "/usr/lib/systemd/systemd-journald")

JOURNALD_CONF = "[Journal]\nStorage=volatile\nReadKMsg=no\nForwardToSyslog=no\nForwardToWall=no\n"

# Runs inside the namespace: start journald, run the Python snippet, read the journal back.
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
"$PYTHON" -c "$SNIPPET"
journalctl --sync
journalctl --directory=/run/log/journal/"$(ls /run/log/journal)" -t govd -o json --no-pager
"""

SNIPPET = textwrap.dedent(
    """
    import logging
    from govd.telemetry.log import EpisodeLimiter, log_fields, setup_logging

    setup_logging("info", under_systemd=True)
    logger = logging.getLogger("govd.daemon")
    log_fields(logger, logging.DEBUG, "per-tick decision", device="card0")
    log_fields(
        logger, logging.INFO, "card0: 900 MHz, 16.2 ms/frame",
        device="card0", policy="energy", level_mhz=900, frame_ms=16.2,
        pred_frame_ms=16.0, power_w=41.5, energy_j=1234.5,
    )
    limiter = EpisodeLimiter(logger, report_every_s=60.0)
    for t in (0.0, 0.05, 0.1):
        limiter.warn(("card0", "overrun"), t, "tick overran")
    limiter.clear(("card0", "overrun"), 0.15)
    """
)


def journald_path() -> str | None:
    return next((p for p in JOURNALD_CANDIDATES if os.access(p, os.X_OK)), None)


@pytest.fixture(scope="module")
def journal_entries() -> list[dict[str, str]]:
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
    env = {
        **os.environ,
        "JOURNALD": str(journald),
        "JOURNALD_CONF": JOURNALD_CONF,
        "PYTHON": sys.executable,
        "SNIPPET": SNIPPET,
        "PYTHONPATH": str(REPO_ROOT),
    }
    result = subprocess.run(
        ["unshare", "--mount", "--propagation", "private", "sh", "-c", NAMESPACE_SCRIPT],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    return [json.loads(line) for line in result.stdout.splitlines() if line.strip()]


def test_info_summary_carries_govd_fields(journal_entries: list[dict[str, str]]) -> None:
    (summary,) = [e for e in journal_entries if e["MESSAGE"].startswith("card0: 900 MHz")]
    assert {k: v for k, v in summary.items() if k.startswith("GOVD_")} == {
        "GOVD_DEVICE": "card0",
        "GOVD_POLICY": "energy",
        "GOVD_LEVEL_MHZ": "900",
        "GOVD_FRAME_MS": "16.2",
        "GOVD_PRED_FRAME_MS": "16.0",
        "GOVD_POWER_W": "41.5",
        "GOVD_ENERGY_J": "1234.5",
    }
    assert summary["PRIORITY"] == "6"
    assert summary["SYSLOG_IDENTIFIER"] == "govd"
    assert summary["LOGGER"] == "govd.daemon"


def test_debug_decisions_stay_out_of_the_journal_at_info(
    journal_entries: list[dict[str, str]],
) -> None:
    assert not [e for e in journal_entries if e["MESSAGE"] == "per-tick decision"]


def test_warning_episode_is_two_entries(journal_entries: list[dict[str, str]]) -> None:
    warnings = [e for e in journal_entries if e.get("GOVD_WARNING_KIND") == "overrun"]
    assert [e["MESSAGE"] for e in warnings] == [
        "tick overran",
        "tick overran … repeated 2 times over 0.1 s (ended)",
    ]
    assert {e["PRIORITY"] for e in warnings} == {"4"}
    assert warnings[1]["GOVD_REPEATS"] == "2"
