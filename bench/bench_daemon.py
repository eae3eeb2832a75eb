"""Benchmark: the daemon governing the live simulated GPU through devfreq and the frame socket.

Starts `python -m govd.sim.live` (real time, game-medium) and `python -m govd run` against its
tree as two processes, as in production, and measures:

- start to ready: process spawn to READY=1 on a NOTIFY_SOCKET we bind (numba cache warm: one
  start is made and discarded first);
- CPU per tick: the daemon process's CPU time (utime + stime) over the steady window divided by
  the ticks in it, and the in-loop figure (thread time of the tick body) from its status file;
- tick jitter p50/p99 (tick start minus deadline) from the status file;
- steady RSS (VmRSS at the end).

Writes `bench/results/daemon.json`.   python bench/bench_daemon.py [--seconds 30]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import time
from pathlib import Path

from daemon_setup import (
    NotifyListener,
    cpu_s,
    machine,
    rss_mb,
    scratch_dir,
    start_daemon,
    start_sim,
    stop,
    write_result,
)

TARGETS = {"cpu_per_tick_us": 250, "jitter_p99_us": 2000, "rss_mb": 150, "start_to_ready_s": 1.5}


def _start_daemon(tmp: Path, root: Path,
                  notify: NotifyListener) -> tuple[subprocess.Popen[bytes], float]:
    start = time.perf_counter()
    daemon = start_daemon(tmp, root, notify.path)
    notify.wait_ready(daemon)
    return daemon, time.perf_counter() - start


def main() -> None:
    """Run the benchmark and write the JSON."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=float, default=30.0, help="steady window, wall s")
    args = parser.parse_args()
    with scratch_dir("govd-bench-") as tmp_name:
        tmp = Path(tmp_name)
        root = tmp / "gpu"
        sim = start_sim(root, tmp / "frames.sock")
        notify = NotifyListener(tmp / "notify.sock")
        try:
            first, _ = _start_daemon(tmp, root, notify)  # warms the numba cache
            stop(first)
            daemon, ready_s = _start_daemon(tmp, root, notify)
            notify.drain_in_background()
            time.sleep(2.0)  # let it settle: first ticks, first status
            status_file = tmp / "status.json"
            ticks0 = json.loads(status_file.read_text())["loop"]["ticks"]
            cpu0 = cpu_s(daemon.pid)
            time.sleep(args.seconds)
            cpu1 = cpu_s(daemon.pid)
            status = json.loads(status_file.read_text())
            rss = rss_mb(daemon.pid)
            loop = status["loop"]
            ticks = loop["ticks"] - ticks0
            stop(daemon)
        finally:
            notify.close()
            sim.terminate()
            sim.wait(timeout=60)
    measured = {
        "cpu_per_tick_us": round((cpu1 - cpu0) / ticks * 1e6, 1),
        "cpu_per_tick_in_loop_us": round(loop["cpu_mean_us"], 1),
        "jitter_p50_us": round(loop["jitter_p50_us"], 1),
        "jitter_p99_us": round(loop["jitter_p99_us"], 1),
        "rss_mb": round(rss, 1),
        "start_to_ready_s": round(ready_s, 3),
    }
    result = {
        "benchmark": "govd run on the live simulated GPU (devfreq backend, socket source)",
        "scenario": "game-medium at real time, 50 ms period",
        "steady_window_s": args.seconds, "ticks": ticks, "overruns": loop["overruns"],
        "measured": measured, "targets": TARGETS,
        "met": {k: measured[k] <= v for k, v in TARGETS.items()},
        "notes": "cpu_per_tick_us is the whole daemon process's CPU (utime+stime from /proc) "
                 "over the window divided by ticks; jitter is tick start minus its deadline.",
        "machine": machine(),
    }
    write_result("daemon", result)


if __name__ == "__main__":
    main()
