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

With ``--free`` the timers are left out and each part in turn is made free instead: its results,
recorded in order over ``--ticks`` ticks just before, are handed back one per call (a list
lookup; the level written, the frames and readings stay those of a real run), and the tick body
is timed alone, interleaved with the whole tick over ``--rounds`` rounds. What a tick saves
when a part costs nothing is that part's real share of a cold tick, the callers' work on its
results included, without the timers' own system calls; "all" frees every part at once: what
is left is the daemon's own frame around them.

    python bench/profile_tick.py [--ticks 200] [--warmup 20] [--calls | --free [--rounds 3]]
                                 [--out FILE]
"""

from __future__ import annotations

import argparse
import cProfile
import itertools
import pstats
import statistics
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


def _parts_to_free(daemon: Daemon) -> dict[str, list[tuple[Any, str]]]:
    """Each part `--free` makes free, as the (owner, method name) pairs it stands for."""
    runner = daemon.runners[0]
    parts: dict[str, list[tuple[Any, str]]] = {
        "governor.step": [(runner.governor, "step")],
        "device.read": [(runner.device, "read")],
        "device.override": [(runner.device, "override")],
        "runner._apply": [(runner, "_apply")],
        "source.drain": [(daemon.source, "drain")],
    }
    if runner.summary is not None:
        parts["summary"] = [(runner.summary, "record_tick")]
    parts["all"] = [pair for pairs in list(parts.values()) for pair in pairs]
    return parts


def _free(daemon: Daemon, ticks: int, rounds: int, last_s: float) -> dict[str, Any]:
    """Per round: the whole tick, then each part in turn recorded over ``ticks`` ticks and
    replayed for as many (the tick timed alone each time). Returns the medians over the
    rounds and every round's figure. Units: µs of thread CPU time per tick."""
    figures: dict[str, list[float]] = {}

    def timed(label: str) -> None:
        nonlocal last_s
        spent: Counter[str] = Counter()
        last_s = _ticks(daemon, ticks, last_s, _timed(spent, label, daemon._tick))
        figures.setdefault(label, []).append(round(spent[label] / ticks / 1000, 1))

    for _ in range(rounds):
        for name, pairs in _parts_to_free(daemon).items():
            timed("whole tick")
            recorded: dict[tuple[int, str], list[Any]] = {}
            for owner, method in pairs:  # record: the real calls, their results kept in order
                real = getattr(owner, method)
                results = recorded[id(owner), method] = []

                def record(*args: Any, _real: Any = real, _into: list[Any] = results,
                           **kwargs: Any) -> Any:
                    result = _real(*args, **kwargs)
                    _into.append(result)
                    return result
                setattr(owner, method, record)
            last_s = _ticks(daemon, ticks, last_s)
            for owner, method in pairs:  # replay: each call hands back the next result
                results = recorded[id(owner), method]
                replay = itertools.cycle(results).__next__ if results else (lambda: None)
                setattr(owner, method, lambda *args, _next=replay, **kwargs: _next())
            timed(f"without {name}")
            for owner, method in pairs:
                delattr(owner, method)  # the class's method again
    return {"median_us": {k: statistics.median(v) for k, v in figures.items()},
            "rounds_us": figures}


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
    parser.add_argument("--free", action="store_true",
                        help="time the tick with each part made free in turn, no timers")
    parser.add_argument("--rounds", type=int, default=3, help="rounds of --free")
    args = parser.parse_args()
    freed: dict[str, Any] = {}
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
            elif args.free:
                freed = _free(daemon, args.ticks, args.rounds, last_s)
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
    if args.free:
        write_result("tick_free", {
            "benchmark": "the daemon's tick with each part made free in turn, one tick per 50 ms "
                         "on the live simulated GPU",
            "ticks": args.ticks, "rounds": args.rounds, "thread_cpu_us_per_tick": freed,
            "notes": "tick body alone, thread CPU time per tick; 'without P': P's results "
                     "recorded over the ticks just before are handed back in order (a list "
                     "lookup), so the tick saves P's own work and what P touches; 'all': every "
                     "part freed; each 'whole tick' is timed just before its variant",
            "machine": machine(),
        }, args.out)
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
