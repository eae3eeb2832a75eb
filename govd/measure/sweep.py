"""Sweep a real device's levels under a workload and record a sweep table (DESIGN §5).

For each level (each (core, memory) pair where the device has two clock domains) the device is set
there through its ordinary backend, left `settle_s` to get there, then given the work:

- a command (`CommandWork`): run `runs` times in its own process group; a unit is one run, its time
  the run's wall time;
- the frame socket (`FrameWork`): the first `frames` frames received after the settle; a unit is
  the i-th frame, its time the GPU time the sender reported.

While the work runs the device is read every `sample_s`: the power of a unit is the energy counter's
rise over the unit's time where the device has one, else the mean of the power samples; `busy` and
the backend's counters are averaged. Before the sweep, `idle_s` of readings at the lowest level with
no work give `# idle_power_w`. Which levels are swept and what was run are in the metadata.

Putting the device back is not done here: `govd.commands.measure` holds the state file and the
signal handling around `run_sweep` (the daemon's machinery), so every way out restores it.
"""

from __future__ import annotations

import itertools
import math
import os
import signal
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from govd.device.base import Device, Reading
from govd.formats.sweep import SweepTable
from govd.sim.levels import FloatArray
from govd.sources.socket import SocketSource


class MeasureError(Exception):
    """A sweep that cannot go on (the work failed, no frames came); the message says why."""


class Interrupted(Exception):
    """A stop signal arrived during the sweep."""


@dataclass
class Samples:
    """Device readings over one unit of work."""

    readings: list[tuple[float, Reading]] = field(default_factory=list)
    """(monotonic time in s, reading)."""

    def add(self, device: Device) -> None:
        """Read the device now."""
        self.readings.append((time.monotonic(), device.read()))

    def power_w(self) -> float:
        """Energy rise over elapsed time, or the mean power sample; NaN when neither. Units: W.

        An energy counter advances in steps (NVML's every 100 ms on an H200, measured in
        bench/results/nvml-nvidia-h200.json): the rise between the first and the last reading
        counts a whole number of steps over a time that is not one, off by up to a step over
        the window (±40 % over the 160 ms of 25 frames of 6 ms, as the first real sweep
        showed). So the rise is taken between the first and the last change of the counter,
        over the time between them, each change placed midway between the reading before it
        and the reading that saw it; the whole window only when the counter changed less
        than twice."""
        energy = [(t, r.energy_mj) for t, r in self.readings if math.isfinite(r.energy_mj)]
        changes = [((t0 + t1) / 2, e1) for (t0, e0), (t1, e1) in itertools.pairwise(energy)
                   if e1 != e0]
        if len(changes) >= 2 and changes[-1][1] > changes[0][1]:
            (t0, e0), (t1, e1) = changes[0], changes[-1]
            return (e1 - e0) / 1000.0 / (t1 - t0)
        (t0, first), (t1, last) = self.readings[0], self.readings[-1]
        if t1 > t0 and math.isfinite(first.energy_mj) and math.isfinite(last.energy_mj):
            rise = last.energy_mj - first.energy_mj
            if rise >= 0:  # a counter that wrapped or was reset says nothing this time
                return rise / 1000.0 / (t1 - t0)
        powers = [r.power_w for _, r in self.readings if math.isfinite(r.power_w)]
        return float(np.mean(powers)) if powers else math.nan

    def busy(self) -> float:
        """Mean utilisation (0..1), NaN when the device reports none."""
        values = [r.busy for _, r in self.readings[1:] if math.isfinite(r.busy)]
        return float(np.mean(values)) if values else math.nan

    def counters(self) -> dict[str, float]:
        """Mean of each backend counter over the unit."""
        names = {name for _, r in self.readings for name in r.counters}
        return {name: float(np.mean([r.counters[name] for _, r in self.readings
                                     if name in r.counters])) for name in sorted(names)}


StopCheck = Callable[[], bool]
"""True once a stop signal arrived."""


@dataclass
class CommandWork:
    """Run a command per unit."""

    command: Sequence[str]
    runs: int = 3

    @property
    def units(self) -> int:
        """Units per level."""
        return self.runs

    def describe(self) -> dict[str, str]:
        """Metadata lines naming the work."""
        return {"work": "command", "command": " ".join(self.command), "runs": str(self.runs)}

    def measure(self, device: Device, sample_s: float,
                stop: StopCheck) -> list[tuple[float, Samples]]:
        """(time in ms, samples) of each run."""
        out = []
        for _ in range(self.runs):
            samples = Samples()
            samples.add(device)
            start = time.monotonic()
            try:
                child = subprocess.Popen(list(self.command), start_new_session=True,
                                         stdin=subprocess.DEVNULL)
            except OSError as exc:
                raise MeasureError(f"cannot run {self.command[0]}: {exc.strerror or exc}") from None
            try:
                while child.poll() is None:
                    if stop():
                        raise Interrupted
                    time.sleep(sample_s)
                    samples.add(device)
            finally:
                _end(child)
            elapsed_ms = (time.monotonic() - start) * 1000.0
            samples.add(device)
            if child.returncode != 0:
                raise MeasureError(f"{self.command[0]} exited with status {child.returncode}")
            out.append((elapsed_ms, samples))
        return out


def _end(child: subprocess.Popen[bytes]) -> None:
    """Stop `child`'s process group if it still runs (on an interruption), and reap it."""
    if child.poll() is None:
        try:
            os.killpg(child.pid, signal.SIGTERM)
            child.wait(timeout=5)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            os.killpg(child.pid, signal.SIGKILL)
            child.wait()


@dataclass
class FrameWork:
    """Take frames from the frame socket."""

    source: SocketSource
    frames: int = 300
    timeout_s: float = 30.0
    """Longest wait for a level's frames."""
    level_s: float = 2.0
    """Shortest time the device is read at each level: the power of a level comes from an
    energy counter that advances in steps (100 ms on NVML), so a level whose frames come in
    a fraction of a second still gets enough of them for a power within a few per cent. The
    frames after the first `frames` only lengthen the window."""

    @property
    def units(self) -> int:
        """Units per level."""
        return self.frames

    def describe(self) -> dict[str, str]:
        """Metadata lines naming the work."""
        return {"work": "frame socket", "socket": str(self.source.path),
                "frames": str(self.frames), "level_s": f"{self.level_s:g}"}

    def measure(self, device: Device, sample_s: float,
                stop: StopCheck) -> list[tuple[float, Samples]]:
        """(GPU time in ms, samples of the whole level) of each of the first `frames` frames."""
        self.source.drain()  # frames rendered before the level settled belong to another level
        samples = Samples()
        samples.add(device)
        times: list[float] = []
        start = time.monotonic()
        deadline = start + max(self.timeout_s, self.level_s)
        while len(times) < self.frames or time.monotonic() - start < self.level_s:
            if stop():
                raise Interrupted
            if len(times) < self.frames and time.monotonic() > deadline:
                raise MeasureError(f"{len(times)} of {self.frames} frames in {self.timeout_s:g} s "
                                   f"on {self.source.path}: is the application sending?")
            time.sleep(sample_s)
            samples.add(device)
            times.extend(frame.gpu_time_ms for frame in self.source.drain())
        return [(t, samples) for t in times[:self.frames]]


Work = CommandWork | FrameWork


@dataclass
class SweepPlan:
    """What to sweep and how."""

    settle_s: float = 0.5
    sample_s: float = 0.05
    idle_s: float = 1.0
    levels: list[int] | None = None
    """Indices of the device's levels to sweep (all when None)."""
    rounds: int = 1
    """Times the levels are swept, upwards then downwards in turn; each level's units are its
    rounds' units, in the order the rounds ran. A work or a GPU that drifts over the sweep (a
    training step 3.7-6.2 % slower from one minute to the next at one clock, on the H200 of 27
    Nov) then drifts over every level alike instead of reading as the clock's effect."""


def run_sweep(device: Device, work: Work, plan: SweepPlan, stop: StopCheck,
              progress: Callable[[str], None] = lambda _line: None) -> SweepTable:
    """Measure `work` at each level of `device` (module docstring). Writes the device's level;
    the caller restores it. Raises Interrupted, MeasureError, DeviceError."""
    core = np.asarray(device.levels_mhz, dtype=np.float64)
    mem = device.mem_levels_mhz
    chosen = list(range(core.size)) if plan.levels is None else plan.levels
    idle_w, idle_frames = _idle_power(device, core, mem, plan, stop, work)
    if idle_frames:
        progress(f"no idle power: {idle_frames} frames arrived in the {plan.idle_s:g} s without "
                 "work (the application kept the GPU busy); the table records none")
    n = work.units
    time_ms = np.empty((n * plan.rounds, len(chosen)))
    power_w = np.empty_like(time_ms)
    busy = np.empty_like(time_ms)
    counters: dict[str, FloatArray] = {}
    for round_index in range(plan.rounds):
        columns = list(enumerate(chosen))
        if round_index % 2:
            columns.reverse()
        rows = slice(round_index * n, (round_index + 1) * n)
        for done, (column, index) in enumerate(columns):
            _set(device, core, mem, index)
            if mem is not None and device.mem_levels_mhz is None:
                raise MeasureError(
                    f"{device.name}: the memory clock's lock was refused in the sweep: the "
                    "pairs planned would be recorded at memory clocks nothing set; sweep again")
            _pause(plan.settle_s, stop)
            units = work.measure(device, plan.sample_s, stop)
            for row, (ms, samples) in enumerate(units, start=rows.start):
                time_ms[row, column] = ms
                power_w[row, column] = samples.power_w()
                busy[row, column] = samples.busy()
                for name, value in samples.counters().items():
                    counters.setdefault(name, np.full(time_ms.shape, np.nan))[row, column] = value
            running = device.read().freq_mhz
            step = (f"round {round_index + 1}/{plan.rounds}, " if plan.rounds > 1 else "")
            progress(f"{step}level {done + 1}/{len(chosen)}: asked {core[index]:g} MHz, "
                     f"running {running:g} MHz, {np.median(time_ms[rows, column]):.3g} ms, "
                     f"{np.nanmedian(power_w[rows, column]):.3g} W")
    if not np.all(np.isfinite(power_w)):
        raise MeasureError(f"{device.name}: reports neither energy nor power; nothing to record")
    meta = {"source": "govd measure", "device": device.name, "backend": device.backend,
            **work.describe(), "settle_s": f"{plan.settle_s:g}", "sample_s": f"{plan.sample_s:g}"}
    if plan.rounds > 1:
        meta["rounds"] = (f"{plan.rounds}: levels swept upwards then downwards in turn, each "
                          f"level's {n} units per round in the order the rounds ran")
    if math.isfinite(idle_w):
        meta["idle_power_w"] = f"{idle_w:.6g}"
        meta["idle_power_note"] = f"measured: {plan.idle_s:g} s at the lowest level, no work"
    elif idle_frames:
        meta["idle_power_note"] = (f"not measured: {idle_frames} frames arrived in the "
                                   f"{plan.idle_s:g} s meant to be without work")
    return SweepTable(
        levels_mhz=core[chosen].copy(), time_ms=time_ms, power_w=power_w,
        mem_levels_mhz=None if mem is None else np.asarray(mem, dtype=np.float64)[chosen].copy(),
        busy=busy if np.all(np.isfinite(busy)) else None,
        counters={k: v for k, v in counters.items() if np.all(np.isfinite(v))}, meta=meta)


def _set(device: Device, core: FloatArray, mem: FloatArray | None, index: int) -> None:
    if mem is None:
        device.set_level(float(core[index]))
    else:
        device.set_pair(float(core[index]), float(mem[index]))


def _pause(seconds: float, stop: StopCheck) -> None:
    deadline = time.monotonic() + seconds
    while (left := deadline - time.monotonic()) > 0:
        if stop():
            raise Interrupted
        time.sleep(min(left, 0.05))


def _idle_power(device: Device, core: FloatArray, mem: FloatArray | None, plan: SweepPlan,
                stop: StopCheck, work: Work) -> tuple[float, int]:
    """Power at the lowest level with no work (W), NaN when `idle_s` is 0 or none is read; and
    how many frames the frame socket received meanwhile. A command runs only at the levels, but
    the frame socket's application runs as it likes: the H200's memory-bound step kept running
    through its sweep's "idle" second (288.6 W, above the 281 W of its lowest level under
    work). Where frames arrived the power is not idle power, and is NaN."""
    if plan.idle_s <= 0:
        return math.nan, 0
    _set(device, core, mem, 0)
    _pause(plan.settle_s, stop)
    frames = work.source if isinstance(work, FrameWork) else None
    if frames is not None:
        frames.drain()  # what came before the window
    samples = Samples()
    samples.add(device)
    deadline = time.monotonic() + plan.idle_s
    while time.monotonic() < deadline:
        _pause(plan.sample_s, stop)
        samples.add(device)
    arrived = len(frames.drain()) if frames is not None else 0
    return (math.nan if arrived else samples.power_w()), arrived
