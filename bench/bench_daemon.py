"""Benchmark: what the daemon costs, governing the live simulated GPU through devfreq and the
frame socket, as in production (two processes).

The simulated game (game-medium, real time) renders for the frames phase, then stops: the GPU
idles. Measured:

- start to READY: process spawn to READY=1 on a NOTIFY_SOCKET we bind (numba cache warm: one
  start is made and discarded first);
- frames flowing (50 ms period): whole-process CPU per tick, from the pairs of status files the
  daemon writes every 5 s (its process CPU time and its tick count in each): the median of those
  windows, the share of a core it means, and the same over the whole window from /proc; the
  in-loop figure (thread time of the tick body) and tick jitter p50/p99 from the status file;
  wake-ups per second (voluntary context switches of all its threads);
- memory at the end of the frames phase: anonymous memory from /proc/PID/smaps_rollup after a
  sync (what the service really costs), private dirty, PSS and RSS beside it;
- idle (no frames, GPU not busy): once the daemon says it idles, its wake-ups per second
  (voluntary context switches of all its threads) and CPU per second (schedstat);
- waking: a frame datagram sent while it idles, to the first decision at the normal period
  (the status file's ``idle.woke_s``: loop time is CLOCK_MONOTONIC at real time), several times.

``--python`` runs the daemon with another interpreter, e.g. the venv `make install DESTDIR=...`
created (no test extras), and then the govd installed there. The result says which kernels that
govd runs (compiled ahead of time or numba's JIT, `govd.kernels.loader`). The previous result's
figures are kept beside the new ones under ``previous``.

Writes `bench/results/daemon.json`.
    python bench/bench_daemon.py [--seconds 30] [--idle-seconds 60] [--wakes 3] [--python PY]
"""

from __future__ import annotations

import argparse
import itertools
import json
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from daemon_setup import (
    RESULTS,
    NotifyListener,
    cpu_s,
    env,
    machine,
    memory_mb,
    scratch_dir,
    start_daemon,
    start_sim,
    stop,
    task_totals,
    wait_for,
    write_result,
)

PERIOD_S = 0.05
SETTLE_S = 2.0
"""After READY, before measuring: first ticks, first status."""
TARGETS = {"cpu_per_tick_us": 150, "jitter_p99_us": 2000, "anon_mb": 50,
           "start_to_ready_s": 0.5, "idle_wakeups_per_s": 2, "idle_cpu_ms_per_s": 1.0,
           "wake_to_decision_s": PERIOD_S}


def _start_daemon(tmp: Path, root: Path, notify: NotifyListener,
                  python: str | None) -> tuple[subprocess.Popen[bytes], float]:
    start = time.perf_counter()
    daemon = start_daemon(tmp, root, notify.path, python=python)
    notify.wait_ready(daemon)
    return daemon, time.perf_counter() - start


def _status(tmp: Path) -> dict[str, Any]:
    status: dict[str, Any] = json.loads((tmp / "status.json").read_text())
    return status


def _next_status(tmp: Path, daemon: subprocess.Popen[bytes],
                 after: dict[str, Any] | None = None) -> dict[str, Any]:
    """The first status file written after ``after`` (any, when None)."""
    written = after["written_unix_s"] if after else 0.0
    found: list[dict[str, Any]] = []

    def fresh() -> bool:
        try:
            status = _status(tmp)
        except (FileNotFoundError, ValueError):
            return False
        found[:] = [status]
        return bool(status["written_unix_s"] > written)

    wait_for(fresh, "a fresh status file", daemon)
    return found[0]


def _frames_phase(tmp: Path, daemon: subprocess.Popen[bytes], seconds: float) -> dict[str, Any]:
    first = _next_status(tmp, daemon)
    cpu0, wall0, (_, switches0) = cpu_s(daemon.pid), time.monotonic(), task_totals(daemon.pid)
    statuses = [first]
    while statuses[-1]["written_unix_s"] - first["written_unix_s"] < seconds - 0.5:
        statuses.append(_next_status(tmp, daemon, statuses[-1]))
    cpu1, wall1, (_, switches1) = cpu_s(daemon.pid), time.monotonic(), task_totals(daemon.pid)
    per_window = []
    for a, b in itertools.pairwise(statuses):
        ticks = b["loop"]["ticks"] - a["loop"]["ticks"]
        if ticks and not b["idle"]["idle"]:
            per_window.append((b["loop"]["process_cpu_s"] - a["loop"]["process_cpu_s"]) / ticks)
    loop = statuses[-1]["loop"]
    median_s = statistics.median(per_window)
    return {
        "cpu_per_tick_us": round(median_s * 1e6, 1),
        "cpu_per_tick_windows_us": [round(w * 1e6, 1) for w in per_window],
        "core_share_percent": round(median_s / PERIOD_S * 100, 3),
        "cpu_per_tick_proc_us": round((cpu1 - cpu0) / ((wall1 - wall0) / PERIOD_S) * 1e6, 1),
        "cpu_per_tick_in_loop_us": round(loop["cpu_mean_us"], 1),
        "wakeups_per_s": round((switches1 - switches0) / (wall1 - wall0), 1),
        "jitter_p50_us": round(loop["jitter_p50_us"], 1),
        "jitter_p99_us": round(loop["jitter_p99_us"], 1),
        "overruns": loop["overruns"],
    }


def _wait_idle(tmp: Path, daemon: subprocess.Popen[bytes]) -> None:
    wait_for(lambda: _status(tmp)["idle"]["idle"], "the daemon to idle", daemon)


def _idle_phase(tmp: Path, daemon: subprocess.Popen[bytes], seconds: float) -> dict[str, Any]:
    _wait_idle(tmp, daemon)
    time.sleep(1.0)  # past the transition's own status write
    cpu0, switches0 = task_totals(daemon.pid)
    wall0 = time.monotonic()
    time.sleep(seconds)
    cpu1, switches1 = task_totals(daemon.pid)
    wall1 = time.monotonic()
    still_idle = _status(tmp)["idle"]
    return {
        "idle_seconds": round(wall1 - wall0, 1),
        "idle_wakeups_per_s": round((switches1 - switches0) / (wall1 - wall0), 2),
        "idle_cpu_ms_per_s": round((cpu1 - cpu0) / (wall1 - wall0) * 1e3, 3),
        "idle_episodes": still_idle["episodes"],
        "idle_throughout": still_idle["idle"] and still_idle["episodes"] == 1,
    }


def _wakes(tmp: Path, daemon: subprocess.Popen[bytes], count: int) -> list[float]:
    sender = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    latencies = []
    try:
        for _ in range(count):
            _wait_idle(tmp, daemon)
            woke_before = _status(tmp)["idle"]["woke_s"]
            sent_s = time.monotonic()
            sender.sendto(b"F 16000 app=bench\n", str(tmp / "frames.sock"))
            wait_for(lambda before=woke_before: _status(tmp)["idle"]["woke_s"] != before,
                     "the wake", daemon)
            latencies.append(_status(tmp)["idle"]["woke_s"] - sent_s)
    finally:
        sender.close()
    return latencies


def _kernels(python: str | None, folder: Path) -> str:
    """Which kernels the daemon's govd runs (`govd.kernels.loader.MODE_REASON`), asked from
    ``folder`` as `start_daemon` starts it (an installed interpreter imports its own govd)."""
    code = "from govd.kernels import loader; print(loader.MODE_REASON)"
    done = subprocess.run(
        [python or sys.executable, "-c", code],
        env=env(repo=python is None), cwd=folder, capture_output=True, text=True, timeout=120)
    return (done.stdout.strip() or done.stderr.strip()).splitlines()[-1]


def main() -> None:
    """Run the benchmark and write the JSON."""
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=30.0, help="frames phase, wall s")
    parser.add_argument("--idle-seconds", type=float, default=60.0, help="idle phase, wall s")
    parser.add_argument("--wakes", type=int, default=3, help="wakes by a frame datagram")
    parser.add_argument("--python", default=None,
                        help="the daemon's interpreter (an installed venv's); default: this one")
    parser.add_argument("--out", type=Path, default=RESULTS / "daemon.json")
    args = parser.parse_args()
    previous = json.loads(args.out.read_text()) if args.out.exists() else {}
    with scratch_dir("govd-bench-") as tmp_name:
        tmp = Path(tmp_name)
        kernels = _kernels(args.python, tmp)
        root = tmp / "gpu"
        notify = NotifyListener(tmp / "notify.sock")
        # The game stops once the frames phase is over (a margin for the two starts).
        render_s = 120.0 + SETTLE_S + args.seconds
        sim = start_sim(root, tmp / "frames.sock", 1.0, "game-medium",
                        "--render-s", str(render_s))
        sim_started = time.monotonic()
        try:
            first, _ = _start_daemon(tmp, root, notify, args.python)  # warms the numba cache
            stop(first)
            daemon, ready_s = _start_daemon(tmp, root, notify, args.python)
            notify.drain_in_background()
            time.sleep(SETTLE_S)
            frames = _frames_phase(tmp, daemon, args.seconds)
            memory = memory_mb(daemon.pid)
            time.sleep(max(0.0, render_s - (time.monotonic() - sim_started)))
            idle = _idle_phase(tmp, daemon, args.idle_seconds)
            wakes = _wakes(tmp, daemon, args.wakes)
            stop(daemon)
        finally:
            notify.close()
            sim.terminate()
            sim.wait(timeout=60)
    measured = {**frames, **memory, "start_to_ready_s": round(ready_s, 3), **idle,
                "wake_to_decision_s": round(max(wakes), 4),
                "wake_to_decision_all_s": [round(w, 4) for w in wakes]}
    result = {
        "benchmark": "govd run on the live simulated GPU (devfreq backend, socket source)",
        "scenario": "game-medium at real time, 50 ms period; then the game stops: GPU idle",
        "daemon_python": args.python or "this checkout's interpreter and govd",
        "kernels": kernels,
        "frames_window_s": args.seconds,
        "measured": measured, "targets": TARGETS,
        "met": {k: bool(measured[k] <= v) for k, v in TARGETS.items()},
        "previous": {"measured": previous.get("measured"),
                     "machine": previous.get("machine")},
        "notes": "cpu_per_tick_us: median over the 5 s windows between status files of the "
                 "daemon's process CPU (time.process_time, all threads) per tick; "
                 "cpu_per_tick_proc_us: the same over the whole window from /proc utime+stime "
                 "(10 ms clock ticks). anon_mb: Anonymous of smaps_rollup after sync. "
                 "wake_to_decision_s: the worst of the wakes.",
        "machine": machine(),
    }
    write_result("daemon", result, args.out)


if __name__ == "__main__":
    main()
