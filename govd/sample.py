"""What one tick observed on one device (`Sample`), made from the tick's frames by pure
functions: `target_for` (the target the frames put in force), `count_frames` (what they amount
to: count, mean time, share late) and `tick_sample` (with what the device read).

The daemon calls all three each tick; a run trace (`govd.formats.trace`) records the target,
the tally and the reading of each tick, and its replay (`govd.eval.trace_replay`) calls
`tick_sample` on them, so that the governor is fed the same samples as in the live run.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from govd.model.arrays import FloatArray
from govd.sources.base import Frame
from govd.target import Target

_NO_COUNTERS = np.zeros(0)
_NO_COUNTERS.flags.writeable = False  # shared by every tick of every device without counters


@dataclass(slots=True)
class Sample:
    """What one tick observed on one device."""

    freq_mhz: float
    """Frequency that actually ran (read back). Units: MHz."""
    frame_time_ms: float = math.nan
    """Mean GPU time per frame completed in the tick; NaN when none completed. Units: ms."""
    frame_count: float = 0
    """Frames completed in the tick; fractional where a row of a sampled log stands for
    several (`govd.sources.base.Frame.count`)."""
    interval_s: float = 0.05
    """Length of the tick. Units: s."""
    busy: float = math.nan
    """Device utilisation 0..1; NaN lets the governor derive it from the frames."""
    power_w: float = math.nan
    """Average power over the tick (idle included). Units: W."""
    mem_activity: float = math.nan
    """Memory activity 0..1, NaN when unknown."""
    counters: FloatArray = field(default_factory=lambda: _NO_COUNTERS)
    """The model's counters, in `ModelSettings.counters` order."""
    mem_freq_mhz: float = math.nan
    """Memory clock that actually ran, with two clock domains (NaN otherwise). Units: MHz."""
    late_share: float = math.nan
    """Share of the tick's frames that took longer than the frame deadline, 0..1 (NaN: not
    judged, e.g. pseudo-frames of busy time, which have no deadline)."""


@dataclass(slots=True)
class FrameTally:
    """What a tick's frames amount to for the governor (a run trace records it per tick)."""

    count: float
    """Frames completed; fractional where a row of a sampled log stands for several
    (`govd.sources.base.Frame.count`)."""
    mean_ms: float
    """Their mean time, weighted by what each stands for; NaN without frames. Units: ms."""
    late_share: float
    """Share of them over the frame deadline, 0..1; NaN when not judged."""


def count_frames(frames: Sequence[Frame], target: Target, pseudo: bool = False) -> FrameTally:
    """Tally a tick's ``frames`` (oldest first) under ``target``: their count and weighted
    mean time (a sampled row counts for the frames it stands for), and the share of them over
    the frame deadline (not judged without a frame-rate target, nor for ``pseudo`` frames of
    busy time, which have no deadline)."""
    # One loop, not a generator per sum: a tick holds a few frames, and each generator is an
    # object (this runs every 50 ms per device, with cold caches).
    count = 0.0
    weighted_ms = 0.0
    for f in frames:
        count += f.count
        weighted_ms += f.gpu_time_ms * f.count
    mean_ms = weighted_ms / count if count > 0 else math.nan
    late_share = math.nan
    if target.fps is not None and count > 0 and not pseudo:
        deadline_ms = target.deadline_ms
        late = 0.0
        for f in frames:
            if f.gpu_time_ms > deadline_ms:
                late += f.count
        late_share = late / count
    return FrameTally(count, mean_ms, late_share)


def tick_sample(
    frames: FrameTally,
    freq_mhz: float,
    interval_s: float,
    busy: float = math.nan,
    power_w: float = math.nan,
    counters: FloatArray = _NO_COUNTERS,
    mem_freq_mhz: float = math.nan,
) -> Sample:
    """The `Sample` of a tick: its ``frames`` (`count_frames` of the frames that came, or
    the tally a run trace recorded), and the rest as the device read it: ``freq_mhz``,
    ``mem_freq_mhz`` (MHz), ``interval_s`` (s), ``busy`` (0..1), ``power_w`` (W),
    ``counters`` (the model's, in order). The daemon and the replay of a run trace both make
    their samples here, so that the governor is fed alike."""
    return Sample(freq_mhz=freq_mhz, frame_time_ms=frames.mean_ms, frame_count=frames.count,
                  interval_s=interval_s, busy=busy, power_w=power_w, counters=counters,
                  mem_freq_mhz=mem_freq_mhz, late_share=frames.late_share)


def counter_values(values: Mapping[str, float], names: Sequence[str]) -> FloatArray:
    """The model's counters ``names`` in order from a device's ``values`` (NaN for one it did
    not report); a shared empty array without counters."""
    if not names:
        return _NO_COUNTERS
    return np.array([values.get(name, math.nan) for name in names], dtype=np.float64)


def target_for(frames: Sequence[Frame], apps: Mapping[str, Target], default: Target,
               in_force: Target) -> Target:
    """The target of the application that completed the most frames in the tick (``apps`` by
    name, ``default`` for others); ``in_force`` when no frame came (no news)."""
    if not frames:
        return in_force
    busiest = frames[0].app
    for f in frames:  # a loop, not any(generator): one object less every tick
        if f.app != busiest:
            break
    else:
        return apps.get(busiest, default)
    # several applications (rare)
    completed: dict[str, float] = {}  # a sampled row counts for the frames it stands for
    for frame in frames:
        completed[frame.app] = completed.get(frame.app, 0.0) + frame.count
    busiest = max(completed, key=completed.__getitem__)
    return apps.get(busiest, default)
