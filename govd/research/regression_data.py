"""The samples of seed 000's eq. 10 regression, built from sweep tables or run traces.

One sample is a pair of consecutive units (or ticks): the change in frame time
d = t − t_prev, the two frequency terms [t_prev·(f_prev/f − 1), (f − f_prev)/1000] and the
changes of the counters Δx_i/s_i, exactly the features `govd.model.tick` feeds the online model.

A sweep table has every unit at every level, so it holds many runs at once; the regression needs
frequency *changes*, so `walk_levels` draws one level per unit by a seeded random walk and each
sample joins unit u−1 at its level with unit u at its own.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from govd.formats.sweep import SweepTable
from govd.formats.trace import RunTrace
from govd.model.arrays import FloatArray, IntArray

MAX_STEP_LEVELS = 2
"""The level walk moves by -2..+2 levels per unit (uniform, reflected at the ends): four in
five samples change the frequency, by one or two levels as a governor does."""


@dataclass(frozen=True)
class RegressionData:
    """Eq. 10 samples: row k is one pair of consecutive units or ticks."""

    delta_time_ms: FloatArray
    """d = t − t_prev, shape [K]. Units: ms."""
    frequency_terms: FloatArray
    """[t_prev·(f_prev/f − 1) in ms, (f − f_prev)/1000 in GHz], shape [K, 2]."""
    counter_deltas: FloatArray
    """Δx_i/s_i per counter, shape [K, N]."""
    counter_names: tuple[str, ...]
    """The counters of `counter_deltas`' columns, in order."""

    @property
    def samples(self) -> int:
        """Number of samples K."""
        return int(self.delta_time_ms.size)


def walk_levels(units: int, levels: int, seed: int) -> IntArray:
    """A level index per unit: a random walk with steps uniform in ±`MAX_STEP_LEVELS`,
    reflected at the lowest and highest level, starting at a uniformly drawn level."""
    rng = np.random.default_rng(seed)
    out = np.zeros(units, dtype=np.int64)
    if units == 0 or levels < 2:
        return out
    steps = rng.integers(-MAX_STEP_LEVELS, MAX_STEP_LEVELS + 1, size=units)
    period = 2 * (levels - 1)
    # Reflection folds the unbounded walk onto 0..levels-1 (a triangle wave of the position).
    position = (int(rng.integers(levels)) + np.cumsum(steps) - steps[0]) % period
    out[:] = np.where(position < levels, position, period - position)
    return out


def _samples(t_ms: FloatArray, f_mhz: FloatArray, x: FloatArray,
             names: Sequence[str]) -> RegressionData:
    """Samples from per-step series (t, f, scaled counters [T, N]); pairs with a missing value
    in either step are left out."""
    t_prev, t = t_ms[:-1], t_ms[1:]
    f_prev, f = f_mhz[:-1], f_mhz[1:]
    dx = x[1:] - x[:-1]
    with np.errstate(all="ignore"):
        freq_terms = np.stack([t_prev * (f_prev / f - 1.0), (f - f_prev) * 1e-3], axis=1)
    d = t - t_prev
    ok = (np.isfinite(d) & np.isfinite(freq_terms).all(axis=1) & np.isfinite(dx).all(axis=1)
          & (t_prev > 0) & (t > 0))
    return RegressionData(d[ok], freq_terms[ok], dx[ok], tuple(names))


def sweep_regression(sweep: SweepTable, names: Sequence[str], scales: Sequence[float],
                     seed: int) -> RegressionData:
    """Samples from a sweep table along a `walk_levels` path (U−1 samples); counters divided
    by `scales`."""
    return path_regression(sweep, walk_levels(sweep.units, sweep.levels_mhz.size, seed), names,
                           scales)


def path_regression(sweep: SweepTable, level: IntArray, names: Sequence[str],
                    scales: Sequence[float]) -> RegressionData:
    """Samples from a sweep table along a given level path (a level index per unit, e.g. the
    levels a governor chose); counters divided by `scales`."""
    rows = np.arange(sweep.units)
    x = np.stack([sweep.counters[n][rows, level] / s for n, s in zip(names, scales, strict=True)],
                 axis=1) if names else np.zeros((sweep.units, 0))
    return _samples(sweep.time_ms[rows, level], sweep.levels_mhz[level], x, names)


def trace_regression(trace: RunTrace, names: Sequence[str],
                     scales: Sequence[float]) -> RegressionData:
    """Samples from a run trace's consecutive ticks as recorded; ticks without a frame time or
    a counter value break the chain."""
    x = np.stack([trace.counters[n] / s for n, s in zip(names, scales, strict=True)],
                 axis=1) if names else np.zeros((trace.ticks, 0))
    return _samples(trace.frame_time_ms, trace.freq_mhz, x, names)


def concatenate(parts: Sequence[RegressionData]) -> RegressionData:
    """The samples of several files together (pairs never cross a file boundary)."""
    if not parts:
        raise ValueError("no regression data to concatenate")
    names = parts[0].counter_names
    if any(p.counter_names != names for p in parts):
        raise ValueError("regression data with different counters cannot be concatenated")
    return RegressionData(np.concatenate([p.delta_time_ms for p in parts]),
                          np.concatenate([p.frequency_terms for p in parts]),
                          np.concatenate([p.counter_deltas for p in parts]), names)
