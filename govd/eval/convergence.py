"""Convergence after phase changes (seed 000 §V-E: RLS 50 ms–0.3 s, AR-NLMS 1.6 s).

Phase changes are detected from the oracle's data, not taken from the scenario: the simulator's
sweep tables do not record where a game's phase or an nv-dvfs kernel changes, and a measured
table never could. A change is a unit whose time at the fastest level differs from the
previous unit's by more than `CHANGE_RATIO` either way: at one fixed level, frame-to-frame
noise (1–4 % in our tables) stays far below it, while a new kernel, the sawtooth's fall from
64 to 1 or a burst is well above it.

Convergence time after a change: from the change until the a-priori prediction error stays
within `WITHIN` for `HOLD_UNITS` consecutive units, in seconds of the run (the ticks' lengths).
A change followed by fewer than `HOLD_UNITS` units before the next one is not counted; one
whose error never settles before the next change counts as not converged.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from govd.formats.sweep import SweepTable
from govd.model.arrays import FloatArray, IntArray

CHANGE_RATIO = 1.25
WITHIN = 0.10
HOLD_UNITS = 10


def phase_changes(sweep: SweepTable, ratio: float = CHANGE_RATIO) -> IntArray:
    """Units where the time at the fastest level jumps by more than ``ratio`` (either way)."""
    top = sweep.time_ms[:, -1]
    with np.errstate(all="ignore"):
        jump = np.abs(np.log(top[1:] / top[:-1]))
    return np.flatnonzero(jump > np.log(ratio)) + 1


@dataclass(frozen=True)
class Convergence:
    """Convergence after the phase changes of one run."""

    changes: int
    """Phase changes counted (each followed by at least `HOLD_UNITS` units)."""
    converged: int
    """Of those, the ones whose error settled before the next change."""
    median_s: float | None
    """Median convergence time of the converged ones; None when none. Units: s."""
    mean_s: float | None
    """Mean convergence time of the converged ones; None when none. Units: s."""

    @property
    def converged_share(self) -> float | None:
        """Share of the counted changes that converged; None when none was counted."""
        return self.converged / self.changes if self.changes else None


def convergence_times(ape: FloatArray, changes: IntArray, tick_s: FloatArray,
                      within: float = WITHIN, hold: int = HOLD_UNITS) -> tuple[int, FloatArray]:
    """(changes counted, convergence time in s of each converged one) for the a-priori errors
    ``ape`` per unit (NaN = no prediction, never within) and tick lengths ``tick_s`` (s)."""
    n = ape.size
    if changes.size == 0:
        return 0, np.zeros(0)
    ok = np.nan_to_num(ape, nan=np.inf) <= within
    # run[u]: how many consecutive units from u on are within the bound
    run = np.zeros(n + 1, dtype=np.int64)
    for u in range(n - 1, -1, -1):
        run[u] = run[u + 1] + 1 if ok[u] else 0
    elapsed = np.concatenate(([0.0], np.cumsum(tick_s)))
    ends = np.append(changes[1:], n)
    counted = 0
    times = []
    for start, end in zip(changes, ends, strict=True):
        if end - start < hold:
            continue
        counted += 1
        settled = np.flatnonzero(run[start:end - hold + 1] >= hold)
        if settled.size:
            times.append(elapsed[start + settled[0]] - elapsed[start])
    return counted, np.asarray(times)


def convergence(ape: FloatArray, changes: IntArray, tick_s: FloatArray) -> Convergence:
    """`convergence_times` summarised."""
    counted, times = convergence_times(ape, changes, tick_s)
    return Convergence(counted, int(times.size),
                       float(np.median(times)) if times.size else None,
                       float(times.mean()) if times.size else None)
