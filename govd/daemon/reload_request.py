"""``govd reload``: ask the running daemon to reread its configuration, and wait for its answer.

A SIGHUP alone cannot fail: ``ExecReload=kill -HUP $MAINPID`` made ``systemctl reload govd``
exit 0 whether govd applied the file or refused it (the refusal was only in the journal). So the
unit's ExecReload runs this command instead: it reads the reload counter in the status file
(`govd.daemon.status`), sends SIGHUP, waits until the daemon has written the next reload's
verdict there (it does at once), prints it, and exits 0 when the configuration is in force, 1
when it was refused (each reason on its own line) or no answer came, 2 for a usage error.

The daemon is the status file's process, or ``--pid`` (systemd's $MAINPID); a pid that is not
a running `govd run` (a status file left by a crashed run, its pid reused) is never signalled.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

from govd.cli import UsageError
from govd.daemon.status import MAX_STATUS_BYTES, status_path
from govd.formats.regular_file import read_regular_text

POLL_S = 0.05
"""How often the status file is read while waiting. Units: s."""


def _status(path: Path) -> dict[str, Any] | None:
    try:
        found = json.loads(read_regular_text(path, MAX_STATUS_BYTES))
    except (OSError, ValueError):
        return None
    return found if isinstance(found, dict) else None


def _is_govd_run(pid: int) -> bool:
    """Whether ``pid`` runs `govd run` (its command line names govd and run)."""
    try:
        words = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    return any(b"govd" in w for w in words) and b"run" in words


def _seq(status: dict[str, Any] | None) -> int:
    reload = (status or {}).get("reload") or {}
    seq = reload.get("seq", 0) if isinstance(reload, dict) else 0
    return seq if isinstance(seq, int) else 0


def request_reload(args: argparse.Namespace) -> int:
    """Signal the daemon to reload its configuration and wait for its verdict."""
    from govd.daemon.run import state_file_of

    path = status_path(state_file_of(args))
    status = _status(path)
    if status is None:
        raise UsageError(f"{path}: no readable status file; is govd running?")
    pid = args.pid if args.pid is not None else status.get("pid")
    if not isinstance(pid, int) or pid <= 0 or not _is_govd_run(pid):
        raise UsageError(f"pid {pid} is not a running `govd run` ({path} may be stale)")
    before = _seq(status) if status.get("pid") == pid else -1
    try:
        os.kill(pid, signal.SIGHUP)
    except OSError as exc:
        print(f"govd reload: cannot signal pid {pid}: {exc.strerror}", file=sys.stderr)
        return 1
    deadline = time.monotonic() + args.timeout_s
    while time.monotonic() < deadline:
        time.sleep(POLL_S)
        status = _status(path)
        if status is not None and status.get("pid") == pid and _seq(status) > max(before, 0):
            return _answer(status["reload"])
        if not _is_govd_run(pid):
            print(f"govd reload: govd (pid {pid}) exited before answering", file=sys.stderr)
            return 1
    print(f"govd reload: no answer from govd (pid {pid}) in {args.timeout_s:g} s; see "
          "`journalctl -u govd`", file=sys.stderr)
    return 1


def _answer(verdict: dict[str, Any]) -> int:
    if verdict.get("applied") is True:
        print("govd reload: configuration reloaded")
        return 0
    errors = verdict.get("errors") or ["refused (no reason given)"]
    for line in errors:
        print(f"govd reload: refused, old configuration kept: {str(line)[:500]}",
              file=sys.stderr)
    return 1
