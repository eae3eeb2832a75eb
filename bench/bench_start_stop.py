"""A stop while `govd run` starts: SIGINT at a sweep of moments after its modules begin to import,
on a Mali devfreq fixture tree (`tests.sysfs_fixtures.mali_panfrost`, governor
``simple_ondemand``).

Each run starts ``python -X importtime -m govd run`` with SIGINT at its default (as a terminal
gives it; a pytest-xdist worker or a shell's background job would pass it on ignored), waits for
the import of `govd.conf.load` (the command's own modules loading), sleeps ``delay`` ms and
sends SIGINT. A run is good when the daemon ends within ``--timeout-s`` with exit status 0 or 130,
prints no traceback, leaves the fixture's governor as found and no state file. Counted apart:
exit by the signal itself (−2: a KeyboardInterrupt raised where CPython ends the process by
SIGINT after `main` returned), a daemon still running at the timeout (the signal lost), and
"Exception ignored" on stderr (a KeyboardInterrupt raised in a finalizer).

Writes `bench/results/start_stop.json`.
    python bench/bench_start_stop.py [--delays-ms 0,20,...] [--repeats 3]
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench.daemon_setup import machine, write_result  # noqa: E402
from tests.sysfs_fixtures import mali_panfrost  # noqa: E402

DELAYS_MS = (0, 20, 60, 100, 140, 152, 160, 170, 200, 232, 300, 400)
"""Moments after the import of `govd.conf.load`: from the command's own imports to the daemon
governing (~250 ms on the 2-core machine of 27 Nov)."""
FOUND = "simple_ondemand"


def start_importing(tmp: Path) -> subprocess.Popen[str]:
    """`govd run` over the tree under ``tmp / "sys"``, returned once its command's modules
    import (``-X importtime`` marks ``govd.conf.load``). SIGINT is delivered as a terminal
    delivers it: a pytest-xdist worker or a shell's background job ignores SIGINT, a child
    inherits that, and Python then installs no KeyboardInterrupt handler."""
    daemon = subprocess.Popen(
        [sys.executable, "-X", "importtime", "-m", "govd", "run", "--sysfs-root",
         str(tmp / "sys"), "--state-file", str(tmp / "state.json"), "--socket",
         str(tmp / "f.sock")],
        env={**os.environ, "PYTHONPATH": str(REPO)}, stderr=subprocess.PIPE, text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    assert daemon.stderr is not None
    for line in daemon.stderr:
        if line.rstrip().endswith("govd.conf.load"):
            break
    return daemon


def one_run(tmp: Path, delay_ms: int, timeout_s: float) -> dict[str, Any]:
    """Start `govd run` on a fresh tree, send SIGINT ``delay_ms`` after the import mark, and
    say how it ended."""
    mali, _ = mali_panfrost(tmp / "sys", governor=FOUND)
    daemon = start_importing(tmp)
    time.sleep(delay_ms / 1000.0)
    daemon.send_signal(signal.SIGINT)
    hung = False
    try:
        _, err = daemon.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        hung = True
        daemon.kill()
        _, err = daemon.communicate()
    said = [line for line in err.splitlines() if not line.startswith("import time:")]
    governor = (mali / "governor").read_text().strip()
    return {
        "delay_ms": delay_ms, "exit": daemon.returncode, "hung": hung,
        "traceback": any("Traceback" in line for line in said),
        "exception_ignored": any("Exception ignored" in line for line in said),
        "governor_as_found": governor == FOUND,
        "state_file_left": (tmp / "state.json").exists(),
        "last_line": said[-1] if said else "",
    }


def good(run: dict[str, Any]) -> bool:
    return (not run["hung"] and run["exit"] in (0, 130) and not run["traceback"]
            and not run["exception_ignored"] and run["governor_as_found"]
            and not run["state_file_left"])


def main(argv: list[str] | None = None) -> int:
    """Run the sweep, write the JSON; exit status 1 when any run was not good."""
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--delays-ms", default=",".join(map(str, DELAYS_MS)))
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--timeout-s", type=float, default=20.0)
    parser.add_argument("--out", type=Path, default=None,
                        help="result file (default bench/results/start_stop.json)")
    args = parser.parse_args(argv)
    delays = [int(d) for d in args.delays_ms.split(",")]
    started = time.monotonic()
    runs = []
    with tempfile.TemporaryDirectory(prefix="govd-start-stop-", dir="/tmp") as scratch:
        for repeat in range(args.repeats):
            for delay in delays:
                tmp = Path(scratch) / f"r{repeat}-d{delay}"
                tmp.mkdir()
                runs.append(one_run(tmp, delay, args.timeout_s))
                shutil.rmtree(tmp)
    bad = [run for run in runs if not good(run)]
    write_result("start_stop", {
        "benchmark": "start_stop: SIGINT at a sweep of moments while govd run starts, on a "
                     "Mali devfreq fixture tree",
        "command": f"python bench/bench_start_stop.py --delays-ms {args.delays_ms} "
                   f"--repeats {args.repeats}",
        "measured": {
            "runs": len(runs), "good": len(runs) - len(bad),
            "exits": {str(k): v for k, v in sorted(Counter(r["exit"] for r in runs).items())},
            "killed_by_sigint": sum(r["exit"] == -signal.SIGINT for r in runs),
            "hung": sum(r["hung"] for r in runs),
            "exception_ignored": sum(r["exception_ignored"] for r in runs),
            "not_as_found": sum(not r["governor_as_found"] for r in runs),
            "bad_runs": bad,
            "wall_s": round(time.monotonic() - started, 1),
        },
        "targets": {"good": len(runs)},
        "met": {"good": not bad},
        "machine": machine(),
    }, args.out)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
