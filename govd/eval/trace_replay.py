"""The governor of a recorded run, replayed over its trace: the decisions it takes again.

A run trace of format 2 (`govd.formats.trace`) holds, per tick, the target in force, what the
tick's frames amounted to, the device's reading and the level the governor chose; its ``#``
lines hold the levels, bounds, voltage table and period. `replay_decisions` builds the governor
again from the same configuration (`govd.from_config`), feeds it each tick's sample through the
daemon's own `govd.sample.tick_sample`, and compares what it chooses with what the live run
chose. They must be equal tick for tick: the governor reads no clock and no device, so a
difference is a bug (a decision that depends on the wall clock, or on something the trace does
not carry).

What a trace does not carry, a replay cannot follow: a device paused and taken back (its
governor starts afresh, `govd.daemon.device_runner`), a reload that rebuilds the governors, and
ticks the daemon took without deciding (paused, idle, waiting for frames), which write no row.
From such a point on the replay may differ.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from govd.conf.schema import Config
from govd.formats.trace import RunTrace, TraceFormatError
from govd.from_config import governor_from_config, model_settings
from govd.model.arrays import FloatArray
from govd.sample import FrameTally, tick_sample
from govd.target import Target


@dataclass
class TraceDecisions:
    """The levels a replayed governor chose, beside the ones the live run chose."""

    replayed_mhz: FloatArray
    """Core clock chosen at each tick by the replay. Units: MHz."""
    recorded_mhz: FloatArray
    """Core clock the live run chose (the trace's ``level_mhz``). Units: MHz."""
    replayed_mem_mhz: FloatArray
    """Memory clock chosen by the replay (NaN with one clock domain). Units: MHz."""
    recorded_mem_mhz: FloatArray
    """Memory clock the live run chose (NaN with one clock domain). Units: MHz."""

    @property
    def mismatches(self) -> FloatArray:
        """Indices of the ticks whose decisions differ."""
        same = (self.replayed_mhz == self.recorded_mhz) & (
            (self.replayed_mem_mhz == self.recorded_mem_mhz)
            | (np.isnan(self.replayed_mem_mhz) & np.isnan(self.recorded_mem_mhz)))
        return np.flatnonzero(~same)


def _target(fps: float, max_slowdown: float, in_force: Target) -> Target:
    if math.isfinite(fps):
        return Target(fps=fps)
    if math.isfinite(max_slowdown):
        return Target(max_slowdown=max_slowdown)
    return in_force


def replay_decisions(trace: RunTrace, config: Config) -> TraceDecisions:
    """Replay ``trace`` through a governor built from ``config`` as the daemon built it (the
    trace's levels, bounds, voltage table and period win over anything the configuration
    would give: they are what the live run had). Raises TraceFormatError for a trace that
    lacks what the replay needs (format 1), ValueError for a configuration that does not
    build (its counters missing from the trace...)."""
    levels = trace.numbers("levels_mhz")
    if levels is None or "level_mhz" not in trace.tick:
        raise TraceFormatError(f"{trace.path}: not a trace of format 2 (no levels_mhz or "
                               "level_mhz): record it again with this govd")
    mems = trace.numbers("mem_levels_mhz")
    bounds = trace.numbers("bounds_mhz")
    period = trace.numbers("period_s")
    volts = trace.numbers("volts")
    if period is not None:
        config = config.model_copy(update={"period_ms": round(float(period[0]) * 1000)})
    missing = [c for c in config.model.counters if c not in trace.counters]
    if missing:
        raise ValueError(f"{trace.path}: no counter column {', '.join(missing)} the "
                         "configuration's model reads")
    prior = None
    if config.model.prior and mems is None:  # as the daemon: a prior is for one clock domain
        from govd.formats.prior import read_prior

        prior = read_prior(config.model.prior)
    governor = governor_from_config(
        config, levels, mems, settings=model_settings(config, () if volts is None else volts),
        bounds_mhz=None if bounds is None else (float(bounds[0]), float(bounds[-1])),
        prior=prior)
    counters = (np.stack([trace.counters[c] for c in config.model.counters], axis=1)
                if config.model.counters else np.zeros((trace.ticks, 0)))
    columns = {name: trace.column(name) for name in (
        "interval_s", "busy", "mem_freq_mhz", "late_share", "target_fps", "max_slowdown",
        "level_mhz", "mem_level_mhz")}
    replayed = np.full(trace.ticks, math.nan)
    replayed_mem = np.full(trace.ticks, math.nan)
    for k in range(trace.ticks):
        governor.target = _target(float(columns["target_fps"][k]),
                                  float(columns["max_slowdown"][k]), governor.target)
        frames = FrameTally(float(trace.frame_count[k]), float(trace.frame_time_ms[k]),
                            float(columns["late_share"][k]))
        sample = tick_sample(frames, float(trace.freq_mhz[k]), float(columns["interval_s"][k]),
                             float(columns["busy"][k]), float(trace.power_w[k]),
                             np.ascontiguousarray(counters[k]),
                             float(columns["mem_freq_mhz"][k]))
        decision = governor.step(sample)
        replayed[k] = decision.freq_mhz
        if decision.mem_freq_mhz is not None:
            replayed_mem[k] = decision.mem_freq_mhz
    return TraceDecisions(replayed, columns["level_mhz"], replayed_mem,
                          columns["mem_level_mhz"])
