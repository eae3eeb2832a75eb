"""Soak: 24 hours of 50 ms ticks (1.728 M) of the daemon, on a simulated clock.

What runs is the daemon itself (`govd.daemon.daemon.Daemon`, in this process): discovery of the
simulated devfreq tree, the devfreq backend reading and writing its files, the socket source, a
Governor (RLS model + energy policy) in a DeviceRunner, the journal summary (to a log file), the
status file (every wall second) and the state file. Only the clock is simulated: loop time stands
still while a tick runs and, when the loop waits for its next deadline, the simulated GPU
(`govd.sim.live.LiveGpu`, game-medium, rendering, publishing its files, sending its frames to the
daemon's socket, in a child process run in lockstep) runs for that long instead of the process
sleeping. So the 1.7 M ticks cost only
their CPU time, not 24 hours.

Every ``--sample-every`` ticks: the process's RSS (/proc/self/statm) and a check that the model's
state and predictions hold no NaN/inf. At the end: the state file still holds what was found,
then the daemon stops as on SIGTERM and the tree must be back as found.

Writes `bench/results/soak.json`.   python bench/bench_soak.py [--ticks 1728000]
"""

from __future__ import annotations

import argparse
import logging
import math
import multiprocessing
import os
import resource
import sys
import time
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import numpy as np
from daemon_setup import (
    governed_state,
    machine,
    restored_as_found,
    saved_as_found,
    scratch_dir,
    set_found_state,
    write_result,
)

from govd.conf.schema import Config
from govd.custody.state_file import load_state
from govd.daemon.daemon import Daemon, Options
from govd.daemon.loop import Clock
from govd.daemon.status import status_path
from govd.sim.live import TICK_MS, LiveGpu

TICKS_24H = 1_728_000
RSS_GROWTH_MB = 2.0
WARMUP_TICKS = 20_000
"""RSS growth is counted from here: numba, caches and the status deques are filled by then."""
FOUND = {"governor": "simple_ondemand", "min_freq": "244000000", "max_freq": "489000000"}
"""A non-default state for the daemon to find (bounds narrowed by 'another tool')."""


def _gpu_process(conn: Connection, root: Path, frames: str) -> None:
    """The simulated GPU, in its own process (so the daemon's RSS is measured alone): lays out
    the tree with the state to be found, then ticks up to each loop time it is sent (ms)."""
    gpu = LiveGpu(root, frames, "game-medium")
    set_found_state(root, FOUND)
    gpu.tick()  # the 'kernel' takes the bounds in before govd looks
    conn.send(gpu.now_ms)
    while (until_ms := conn.recv()) is not None:
        while gpu.now_ms + TICK_MS <= until_ms + 1e-6:
            gpu.tick()
        conn.send(gpu.now_ms)
    conn.send(gpu.close())


class SimulatedClock(Clock):
    """Loop time that advances only when the loop waits; the simulated GPU runs meanwhile."""

    def __init__(self, conn: Connection) -> None:
        super().__init__(1.0)
        self.conn = conn
        self.gpu_ms: float = conn.recv()
        self.loop_s: float = self.gpu_ms / 1000.0

    def now_s(self) -> float:
        """Loop time now (s): the simulated GPU's time."""
        return self.loop_s

    def wait(self, duration_s: float, wait_wall_s: Any) -> None:
        """Run the GPU for ``duration_s`` of loop time (whole 50 ms GPU ticks), then poll the
        signal pipe without sleeping."""
        self.loop_s += duration_s
        if self.gpu_ms + TICK_MS <= self.loop_s * 1000.0 + 1e-6:
            self.conn.send(self.loop_s * 1000.0)
            self.gpu_ms = self.conn.recv()
        wait_wall_s(0.0)

    def close(self) -> dict[str, Any]:
        """Stop the GPU; returns its totals."""
        self.conn.send(None)
        totals: dict[str, Any] = self.conn.recv()
        return totals


class Soak:
    """Polled once per tick by the daemon (its ``should_stop``): samples, checks, says when done."""

    def __init__(self, daemon_ref: list[Daemon], ticks: int, sample_every: int) -> None:
        self.daemon_ref = daemon_ref
        self.ticks = ticks
        self.sample_every = sample_every
        self.page_mb = os.sysconf("SC_PAGE_SIZE") / 2**20
        self.rss: list[tuple[int, float]] = []
        self.non_finite: list[str] = []
        self.checks = 0
        self._next = 0
        self.progress_every = 10
        """Samples between progress lines on stderr (0: none)."""

    def rss_mb(self) -> float:
        """Resident set of this process (/proc/self/statm). Units: MiB."""
        return int(Path("/proc/self/statm").read_text().split()[1]) * self.page_mb

    def __call__(self) -> bool:
        daemon = self.daemon_ref[0]
        ticks = daemon.stats.ticks
        if ticks >= self._next:
            self._next = ticks + self.sample_every
            self.rss.append((ticks, round(self.rss_mb(), 3)))
            if self.progress_every and len(self.rss) % self.progress_every == 0:
                print(f"soak: {ticks} ticks, RSS {self.rss[-1][1]:.1f} MiB, "
                      f"{len(self.non_finite)} non-finite, {time.strftime('%H:%M:%S')}",
                      file=sys.stderr, flush=True)
            self.check_finite(daemon, ticks)
        return ticks >= self.ticks

    def check_finite(self, daemon: Daemon, tick: int) -> None:
        """Record any NaN/inf in a model's state, or in its predictions once it is ready."""
        self.checks += 1
        for runner in daemon.runners:
            model = runner.governor.model
            arrays = {"vecs": model.vecs, "P": model.P, "pw": model.pw, "Pc": model.Pc}
            if model.ready:
                arrays["predictions"] = model.out
            for name, array in arrays.items():
                if not np.isfinite(array).all() and len(self.non_finite) < 20:
                    self.non_finite.append(f"tick {tick}: {runner.name} {name}")


def _config(tmp: Path) -> Config:
    config = Config()
    socket = config.frames.socket.model_copy(update={"path": str(tmp / "frames.sock"),
                                                     "group": None})
    frames = config.frames.model_copy(update={"source": "socket", "socket": socket})
    return config.model_copy(update={"frames": frames, "state_file": str(tmp / "state.json")})


def soak(ticks: int, sample_every: int) -> dict[str, Any]:
    """Run the soak; returns the figures."""
    with scratch_dir("govd-bench-") as tmp_name:
        tmp = Path(tmp_name)
        root = tmp / "gpu"
        config = _config(tmp)
        ours, theirs = multiprocessing.get_context("fork").Pipe()
        gpu = multiprocessing.get_context("fork").Process(
            target=_gpu_process, args=(theirs, root, config.frames.socket.path), daemon=True)
        gpu.start()
        clock = SimulatedClock(ours)
        found = governed_state(root)
        handler = logging.FileHandler(tmp / "govd.log")
        logging.getLogger("govd").addHandler(handler)
        logging.getLogger("govd").setLevel(logging.INFO)
        holder: list[Daemon] = []
        monitor = Soak(holder, ticks, sample_every)
        state_differs: list[list[str]] = []

        def stop_when_done() -> bool:
            done = monitor()
            if done and not state_differs:
                state = load_state(Path(config.state_file))
                saved = state.devices[0] if state is not None and state.devices else None
                state_differs.append(saved_as_found(found, saved))
            return done

        daemon = Daemon(Options(config=config, sysfs_root=root, clock=clock,
                                should_stop=stop_when_done,
                                status_file=status_path(Path(config.state_file))))
        holder.append(daemon)
        wall_start = time.monotonic()
        cpu_start = time.process_time()
        exit_status = daemon.run()
        wall_s = time.monotonic() - wall_start
        cpu_s = time.process_time() - cpu_start
        after = governed_state(root)
        log_lines = (tmp / "govd.log").read_text().count("\n")
        logging.getLogger("govd").removeHandler(handler)
        handler.close()
        runner = daemon.runners[0]
        stats = daemon.stats.summary()
        frames = daemon.source.stats() if daemon.source is not None else {}
        gpu_totals = clock.close()
        gpu.join(timeout=60)
    ticks_run = int(stats["ticks"] or 0)
    after_warmup = [mb for t, mb in monitor.rss if t >= min(WARMUP_TICKS, ticks // 2)]
    growth_mb = (max(after_warmup) - after_warmup[0]) if after_warmup else math.nan
    return {
        "ticks": ticks_run, "loop_time_h": round(ticks_run * 0.05 / 3600, 3),
        "wall_s": round(wall_s, 1), "cpu_per_tick_us": round(cpu_s / max(ticks_run, 1) * 1e6, 1),
        "rss_mb_start": monitor.rss[0][1] if monitor.rss else None,
        "rss_mb_after_warmup": after_warmup[0] if after_warmup else None,
        "rss_mb_end": monitor.rss[-1][1] if monitor.rss else None,
        "rss_growth_mb": round(growth_mb, 3),
        "max_rss_mb_getrusage": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                                      1),
        "rss_samples": monitor.rss[:: max(1, len(monitor.rss) // 50)],
        "finite_checks": monitor.checks, "non_finite": monitor.non_finite,
        "model_stats": runner.governor.model.stats_dict(),
        "runner_counts": dict(runner.counts),
        "frames": frames, "gpu": gpu_totals, "log_lines": log_lines,
        "found": found, "after_stop": after,
        "state_file_differs": state_differs[0] if state_differs else ["not read"],
        "not_restored": restored_as_found(found, after), "exit_status": exit_status,
    }


def main() -> None:
    """Run the soak and write the JSON."""
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ticks", type=int, default=TICKS_24H, help="50 ms ticks to run")
    parser.add_argument("--sample-every", type=int, default=5000,
                        help="ticks between RSS samples and NaN checks")
    parser.add_argument("--out", type=Path, default=None,
                        help="result file (default bench/results/soak.json)")
    args = parser.parse_args()
    figures = soak(args.ticks, args.sample_every)
    met = {
        "rss_growth_mb": figures["rss_growth_mb"] <= RSS_GROWTH_MB,
        "no_nan": not figures["non_finite"],
        "state_file_held_found": not figures["state_file_differs"],
        "restored_as_found": not figures["not_restored"] and figures["exit_status"] == 0,
    }
    write_result("soak", {
        "benchmark": "soak: govd's Daemon on the simulated devfreq GPU, simulated clock",
        "command": f"python bench/bench_soak.py --ticks {args.ticks} "
                   f"--sample-every {args.sample_every}",
        "measured": figures,
        "targets": {"ticks": TICKS_24H, "rss_growth_mb": RSS_GROWTH_MB, "no_nan": True,
                    "state_file_held_found": True, "restored_as_found": True},
        "met": {**met, "full_24h": figures["ticks"] >= TICKS_24H},
        "notes": "RSS growth is the largest RSS after the warm-up minus the RSS at the warm-up "
                 f"(tick {WARMUP_TICKS}, or half the run when shorter), of the process running "
                 "the daemon (the simulated GPU runs in a child process in lockstep). Loop time "
                 "is simulated: wall_s is CPU time of both plus waiting on a shared machine; "
                 "cpu_per_tick_us is the daemon's process only.",
        "machine": machine(),
    }, args.out)


if __name__ == "__main__":
    main()
