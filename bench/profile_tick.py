"""Where a steady tick's CPU goes: the daemon's tick on the live simulated GPU, one tick per 50 ms
(caches as cold as in production, unlike back-to-back ticks), each part timed by thread CPU time.

Builds `Daemon` in this process on the simulated tree (game-medium, real time, frames through
the socket) and calls the tick body every 50 ms, after ``--warmup`` ticks left out (the first
ones compile or load numba's kernels): ``--ticks`` ticks timed as a whole ("tick alone", the
figure to compare), then as many with the parts of a tick wrapped in thread-time counters. A
part's figure includes the parts it calls (``source.drain`` includes ``receive``, which includes
``_take``, which includes ``parse`` and ``credentials``). Writes `bench/results/tick_parts.json`.
With ``--calls`` the same ticks run under cProfile instead (no timers), and the Python calls a
tick makes, by function, are printed: what a tick touches, not what it costs.

    python bench/profile_tick.py [--ticks 200] [--warmup 20] [--calls] [--out FILE]
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from daemon_setup import machine, scratch_dir, start_sim, write_result

from govd.conf.schema import Config
from govd.daemon.daemon import Daemon, Options
from govd.daemon.loop import Tick

PERIOD_S = 0.05


def _timed(spent: Counter[str], label: str, func: Callable[..., Any]) -> Callable[..., Any]:
    def timed(*args: Any, **kwargs: Any) -> Any:
        start = time.thread_time_ns()
        try:
            return func(*args, **kwargs)
        finally:
            spent[label] += time.thread_time_ns() - start
    return timed


class _TimedSocket:
    """The frame socket with its ``recvmsg`` timed (a C method cannot be wrapped in place)."""

    def __init__(self, sock: Any, spent: Counter[str]) -> None:
        self._sock = sock
        self.recvmsg = _timed(spent, "recvmsg", sock.recvmsg)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._sock, name)


def _wrap(daemon: Daemon, spent: Counter[str]) -> None:
    import govd.sources.socket as socket_source

    runner = daemon.runners[0]
    source = daemon.source
    assert source is not None
    parts: list[tuple[Any, str, str]] = [
        (daemon, "_tick", "tick"), (runner, "tick", "runner.tick"),
        (runner.device, "read", "device.read"), (runner.device, "override", "device.override"),
        (runner.governor, "step", "governor.step"), (runner, "_apply", "runner._apply"),
        (source, "drain", "source.drain"), (source, "receive", "source.receive"),
        (source, "_take", "source._take"), (socket_source, "parse_frame_line", "parse"),
        (socket_source, "_credentials", "credentials"), (daemon._watch, "rescan_due", "rescan"),
        (daemon, "_take_new", "rescan"),
    ]
    if runner.summary is not None:
        parts.append((runner.summary, "record_tick", "summary"))
    for owner, name, label in parts:
        setattr(owner, name, _timed(spent, label, getattr(owner, name)))
    source._sock = _TimedSocket(source._sock, spent)  # type: ignore[attr-defined]


def _ticks(daemon: Daemon, ticks: int, last_s: float,
           tick: Callable[[Tick], None] | None = None) -> float:
    """Run ``ticks`` tick bodies (``tick``, default the daemon's), one per `PERIOD_S`; returns
    when the last one started (s)."""
    body = tick or daemon._tick
    for _ in range(ticks):
        time.sleep(PERIOD_S)
        now_s = time.monotonic()
        body(Tick(now_s, now_s, now_s - last_s, 0))
        last_s = now_s
    return last_s


def _print_calls(profile: cProfile.Profile, ticks: int) -> None:
    """Python calls per tick, in all and by function (most called first)."""
    stats = pstats.Stats(profile).stats  # type: ignore[attr-defined]
    rows = sorted(((calls / ticks, f"{Path(file).name}:{line}({name})")
                   for (file, line, name), (_, calls, *_) in stats.items()), reverse=True)
    total = sum(n for n, _ in rows)
    print(f"calls per tick: {total:.1f} over {ticks} ticks")
    for n, where in rows:
        if n >= 0.1:
            print(f"{n:8.2f}  {where}")


def main() -> None:
    """Run the profile and write the JSON."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--ticks", type=int, default=200)
    parser.add_argument("--warmup", type=int, default=20,
                        help="ticks run first and left out of the figures")
    parser.add_argument("--out", type=Path, default=None,
                        help="where the JSON goes (default bench/results/tick_parts.json)")
    parser.add_argument("--calls", action="store_true",
                        help="print the Python calls per tick (cProfile) instead of timing")
    args = parser.parse_args()
    spent: Counter[str] = Counter()
    with scratch_dir("govd-profile-") as tmp_name:
        tmp = Path(tmp_name)
        root = tmp / "gpu"
        sim = start_sim(root, tmp / "frames.sock")
        config = Config.model_validate({
            "state_file": str(tmp / "state.json"),
            "frames": {"source": "socket",
                       "socket": {"path": str(tmp / "frames.sock"), "group": None}},
        })
        daemon = Daemon(Options(config, sysfs_root=root))
        try:
            daemon._start()
            last_s = _ticks(daemon, args.warmup, time.monotonic())
            if args.calls:
                profile = cProfile.Profile()
                profile.enable()
                _ticks(daemon, args.ticks, last_s)
                profile.disable()
            else:
                # The whole tick alone first: each timed part adds two system calls, which a
                # cold tick pays dearly (~40 of them a tick), so the parts inflate the total.
                whole = _timed(spent, "tick alone", daemon._tick)
                last_s = _ticks(daemon, args.ticks, last_s, whole)
                _wrap(daemon, spent)
                _ticks(daemon, args.ticks, last_s)
        finally:
            daemon._shutdown()
            sim.terminate()
            sim.wait(timeout=60)
    if args.calls:
        _print_calls(profile, args.ticks)
        return
    result = {
        "benchmark": "parts of the daemon's tick, one tick per 50 ms on the live simulated GPU",
        "ticks": args.ticks,
        "thread_cpu_us_per_tick": {k: round(v / args.ticks / 1000, 1)
                                   for k, v in spent.most_common()},
        "notes": "thread CPU time per tick of each part, parts included in their callers; "
                 "'tick alone': the tick body timed alone, over as many ticks before the parts "
                 "were wrapped (the figure to compare); "
                 "each timed call adds two clock_gettime(CLOCK_THREAD_CPUTIME_ID) system calls, "
                 "which inflate the small parts called per frame (parse, credentials); the "
                 "whole-process figure (bench_daemon) adds the wait and the kernel's side",
        "machine": machine(),
    }
    write_result("tick_parts", result, args.out)


if __name__ == "__main__":
    main()
