"""A live simulated GPU: a devfreq device in a sysfs tree, rendering a scenario in scaled real time.

    python -m govd.sim.live --root DIR --socket PATH --scenario NAME [--levels seed9]
                            [--speed X] [--seed N] [--duration-s S] [--render-s S]

It lays out `DIR/class/devfreq/govd-sim0/` (see `govd.sim.devfreq_tree`), then every 50 ms of
sim time: reads the governor and bounds, picks the level (its own simple_ondemand, or
`userspace/set_freq` snapped by the kernel's rules, or performance/powersave), renders the
scenario's frames at that level, sends `F <gpu_time_us> app=<scenario>` to the Unix datagram
socket PATH for each finished frame (dropped and counted when nobody listens), and rewrites its
files. A frame runs at the level current when it starts. Graphics frames start on vsync (a frame
that overruns its period waits for the next one); compute launches follow each other.

`--speed X` runs the sim clock X times faster than the wall clock (as far as the machine keeps
up); the sim's own time is in `DIR/sim_clock` (`govd.sim.clock`), which the demo's daemon runs
on (`--lockstep`: never past the daemon's next deadline). It stops on SIGTERM/SIGINT or after
`--duration-s` sim seconds, prints its totals as one JSON line and writes them to
`DIR/summary.json`. The totals hold a progress record every simulated second (time, frames
completed, energy, GPU time of those frames), so that runs of the same scenario can be compared
on equal work: the energy and time another run took for the first N frames (`work_at`).
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import signal
import socket
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from govd.sim.clock import ClockWriter
from govd.sim.compute import LAUNCH_GAP_MS
from govd.sim.devfreq_tree import (
    DevfreqTree,
    TransStat,
    simple_ondemand_hz,
    snap_hz,
    write_atomically,
)
from govd.sim.gpu import SCENARIOS, simulate
from govd.sim.levels import LEVEL_TABLES, level_table

TICK_MS = 50.0
PROGRESS_EVERY_MS = 1000.0
"""How often the totals record their progress (sim time). Units: ms."""
CHUNK_MINUTES = 5.0
"""Frames are drawn in chunks of this much workload, each from its own seed."""


class LiveGpu:
    """The simulated device: its frame stream, its level, its energy, its sysfs files."""

    def __init__(self, root: Path, socket_path: str | None, scenario: str, levels: str = "seed9",
                 seed: int = 0, render_s: float = math.inf, lockstep: bool = False) -> None:
        """``render_s``: the application renders for this much sim time (s), then stops and
        the GPU idles (no frames, nothing busy) until the end. ``lockstep``: never run past
        the deadline the governing daemon waits for (`govd.sim.clock`)."""
        self.lockstep = lockstep
        self.render_until_ms = render_s * 1000.0
        self.table = level_table(levels).core_levels()
        self.scenario, self.seed = scenario, seed
        self.levels_hz = [round(f * 1e6) for f in self.table.freqs_mhz]
        Path(root).mkdir(parents=True, exist_ok=True)
        self.clock = ClockWriter(Path(root))  # before the tree: it exists once the tree does
        self.tree = DevfreqTree(root, self.levels_hz)
        self.trans_stat = TransStat(self.levels_hz)
        self.root = Path(root)
        self.level = len(self.levels_hz) - 1
        self.socket_path = socket_path
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.setblocking(False)
        self.chunk, self.unit = 0, 0
        self._load_chunk()
        n = len(self.levels_hz)
        self.transitions = np.zeros((n, n), dtype=np.int64)
        self.time_in_level_ms = np.zeros(n)
        self.now_ms = 0.0
        self.frame_end_ms = -1.0  # no frame running
        self.frame_power_w = 0.0
        self.frame_time_ms = 0.0
        self.next_start_ms = 0.0
        self.energy_j = 0.0
        self.frames = self.misses = self.sent = self.dropped = 0
        self.busy_ms = 0.0
        """GPU time of the frames completed. Units: ms."""
        self.last_frame: tuple[float, int, float, float] = (0.0, 0, 0.0, 0.0)
        """(sim s, frames, energy J, busy s) when the last frame completed."""
        self.progress: list[tuple[float, int, float, float]] = [self.last_frame]
        """(sim s, frames, energy J, busy s) after each `PROGRESS_EVERY_MS`, and at each
        frame's end on the last one."""
        self.tick_busy_ms = 0.0
        self.last_busy_us, self.last_total_us = 0, 0

    def _load_chunk(self) -> None:
        chunk_seed = self.seed * 1_000_003 + self.chunk
        sweep = simulate(self.scenario, self.table, CHUNK_MINUTES, chunk_seed)
        self.time_ms, self.power_w = sweep.time_ms, sweep.power_w
        fps = sweep.meta.get("target_fps")
        self.period_ms = 1000.0 / float(fps) if fps else None
        self.chunk += 1
        self.unit = 0

    def _advance(self, to_ms: float) -> None:
        """Run frames and idle gaps up to `to_ms`, accounting busy time and energy."""
        while self.now_ms < to_ms:
            if self.frame_end_ms > self.now_ms:
                until = min(self.frame_end_ms, to_ms)
                self.energy_j += self.frame_power_w * (until - self.now_ms) / 1000.0
                self.tick_busy_ms += until - self.now_ms
                self.now_ms = until
                if until == self.frame_end_ms:
                    self._finish_frame()
            elif self.now_ms >= self.render_until_ms:  # the application stopped: idle
                self.energy_j += self.table.idle_power_w * (to_ms - self.now_ms) / 1000.0
                self.now_ms = to_ms
            elif self.next_start_ms > self.now_ms:
                until = min(self.next_start_ms, to_ms)
                self.energy_j += self.table.idle_power_w * (until - self.now_ms) / 1000.0
                self.now_ms = until
            else:
                self._start_frame()

    def _start_frame(self) -> None:
        if self.unit >= self.time_ms.shape[0]:
            self._load_chunk()
        self.frame_time_ms = float(self.time_ms[self.unit, self.level])
        self.frame_power_w = float(self.power_w[self.unit, self.level])
        self.unit += 1
        self.frame_end_ms = self.now_ms + self.frame_time_ms

    def _finish_frame(self) -> None:
        self.frames += 1
        self.busy_ms += self.frame_time_ms
        end = self.frame_end_ms
        self.last_frame = (end / 1000.0, self.frames, self.energy_j, self.busy_ms / 1000.0)
        if self.period_ms is not None:
            if self.frame_time_ms > self.period_ms:
                self.misses += 1
            self.next_start_ms = np.ceil(end / self.period_ms - 1e-9) * self.period_ms
        else:
            self.next_start_ms = end + LAUNCH_GAP_MS
        line = f"F {round(self.frame_time_ms * 1000)} app={self.scenario}\n"
        if self.socket_path is None:
            self.dropped += 1
            return
        try:
            self.sock.sendto(line.encode(), self.socket_path)
            self.sent += 1
        except OSError:  # nobody listening, or the reader is behind
            self.dropped += 1

    def _choose_level(self, busy_ms: float) -> None:
        tree = self.tree
        tree.read_controls()
        cur = self.levels_hz[self.level]
        if tree.governor == "simple_ondemand":
            wanted = simple_ondemand_hz(round(busy_ms * 1000), round(TICK_MS * 1000), cur,
                                        self.levels_hz[-1])
        elif tree.governor == "userspace":
            wanted = tree.set_hz
        elif tree.governor == "performance":
            wanted = tree.max_hz
        else:
            wanted = tree.min_hz
        new = self.levels_hz.index(snap_hz(wanted, self.levels_hz, tree.min_hz, tree.max_hz))
        if new != self.level:
            self.transitions[self.level, new] += 1
            self.level = new

    def tick(self) -> None:
        """One 50 ms step of sim time: render, publish the files, let the governor act."""
        if self.lockstep:
            self.clock.wait_for_reader((self.now_ms + TICK_MS) / 1000.0)
        start_energy = self.energy_j
        self.tick_busy_ms = 0.0
        self._advance(self.now_ms + TICK_MS)
        self.time_in_level_ms[self.level] += TICK_MS
        if self.now_ms >= (len(self.progress)) * PROGRESS_EVERY_MS:
            self.progress.append(self.last_frame)
        busy_ms = self.tick_busy_ms
        power_w = (self.energy_j - start_energy) / (TICK_MS / 1000.0)
        self.tree.publish(self.levels_hz[self.level], min(100, round(100 * busy_ms / TICK_MS)),
                          round(self.energy_j * 1e6), round(power_w * 1e6),
                          self.trans_stat.text(self.transitions, self.time_in_level_ms,
                                               self.levels_hz[self.level]))
        self._choose_level(busy_ms)
        self.clock.publish(self.now_ms / 1000.0)  # last: this tick's frames and files are out

    def summary(self) -> dict[str, object]:
        """Running totals: sim time (s), energy (J), frames, deadline misses, datagrams."""
        sim_s = self.now_ms / 1000.0
        return {
            "scenario": self.scenario, "levels": self.table.name, "seed": self.seed,
            "sim_s": round(sim_s, 3), "energy_j": round(self.energy_j, 6),
            "mean_power_w": round(self.energy_j / sim_s, 6) if sim_s > 0 else 0.0,
            "frames": self.frames, "deadline_misses": self.misses,
            "datagrams_sent": self.sent, "datagrams_dropped": self.dropped,
            "transitions": int(self.transitions.sum()), "governor": self.tree.governor,
            "busy_s": round(self.busy_ms / 1000.0, 6),
            "lockstep": None if not self.lockstep else
            ("kept" if self.clock.gave_up_s is None
             else f"lost at {self.clock.gave_up_s:.2f} s: the daemon stopped answering"),
            "target_fps": 1000.0 / self.period_ms if self.period_ms else None,
            "progress": [[round(t, 4), n, round(e, 6), round(b, 6)]
                         for t, n, e, b in [*self.progress, self.last_frame]],
        }

    def close(self) -> dict[str, object]:
        """Write `summary.json` under the root, close the socket, return the totals."""
        totals = self.summary()
        write_atomically(self.root / "summary.json", json.dumps(totals) + "\n")
        self.sock.close()  # the clock stays mapped: a reader may still look at the last time
        return totals


def work_at(summary: dict[str, Any], frames: float) -> tuple[float, float, float] | None:
    """(sim s, energy J, busy s) when the run of ``summary`` had completed ``frames`` frames,
    interpolated between its progress records; None when it never completed that many."""
    points = summary.get("progress") or []
    for (t0, n0, e0, b0), (t1, n1, e1, b1) in itertools.pairwise(points):
        if n0 <= frames <= n1:
            w = (frames - n0) / (n1 - n0) if n1 > n0 else 1.0
            return t0 + w * (t1 - t0), e0 + w * (e1 - e0), b0 + w * (b1 - b0)
    return None


def run(gpu: LiveGpu, speed: float, duration_s: float | None) -> dict[str, object]:
    """Tick `gpu` paced at `speed` × wall time until a signal or `duration_s` of sim time."""
    stop = []

    def on_signal(signum: int, frame: object) -> None:
        stop.append(signum)

    previous = {s: signal.signal(s, on_signal) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        wall_start = time.monotonic()
        ticks = 0
        while not stop and (duration_s is None or gpu.now_ms < duration_s * 1000.0):
            gpu.tick()
            ticks += 1
            delay = wall_start + ticks * TICK_MS / 1000.0 / speed - time.monotonic()
            if delay > 0:
                time.sleep(delay)
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
    return gpu.close()


def main(argv: list[str] | None = None) -> int:
    """Command line of the live simulated GPU; returns the exit status."""
    parser = argparse.ArgumentParser(prog="python -m govd.sim.live", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--root", required=True, type=Path, help="sysfs root to lay out")
    parser.add_argument("--socket", required=True, help="frame socket (Unix datagram) to send to")
    parser.add_argument("--scenario", required=True, choices=sorted(SCENARIOS))
    parser.add_argument("--levels", default="seed9", choices=sorted(LEVEL_TABLES))
    parser.add_argument("--speed", type=float, default=1.0, help="sim seconds per wall second")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--duration-s", type=float, default=None, help="stop after this sim time")
    parser.add_argument("--render-s", type=float, default=math.inf,
                        help="the application stops rendering after this sim time (GPU idle)")
    parser.add_argument("--lockstep", action="store_true",
                        help="never run past the governing daemon's next deadline (sim_clock)")
    args = parser.parse_args(argv)
    if not args.speed > 0:
        parser.error("--speed must be positive")
    gpu = LiveGpu(args.root, args.socket, args.scenario, args.levels, args.seed, args.render_s,
                  args.lockstep)
    print(json.dumps(run(gpu, args.speed, args.duration_s)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
