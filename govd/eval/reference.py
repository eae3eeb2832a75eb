"""The mean-curve reference: what a causal policy could at best reach.

The oracle knows every unit's time and power at every level, noise included, so part of its
advantage is reading noise that no policy can foresee. This reference knows each *phase* of the
work (a run of units doing the same thing) and its mean time and power curves over the levels,
but not the per-unit noise: it runs every unit of a phase at the level that is best for the
phase's mean curves under the target (the oracle's rule applied to the means). It is scored on
the real per-unit rows, like every policy.

Phases are cut where the time at the fastest level jumps by more than the convergence metric's
ratio (`govd.eval.convergence.CHANGE_RATIO`), or where the unit's curve (times relative to the
fastest level) moves by more than ``shape_change`` in log time at any level: two kernels that
take as long at the top may scale quite differently. "At any level" is read against the
table's own per-unit noise: the largest of L noisy moves grows with L, and on a grid of 187
clocks with 1 % noise per unit the largest passed 0.05 between most pairs of units of one
kernel (synergy-187: 1 091 phases where its units ran about 60 runs of one kernel each). A
reference that knows each "phase's" mean over two or three units knows a third of the noise of
the unit it runs, which no causal policy can. So a move counts only where it also exceeds
what the noise reaches at one level in ``NOISE_CHANCE`` of pairs of units across the L levels
(the noise's scale from the median move, robust to a minority of true changes), and never
more than ``NOISE_CEILING`` times ``shape_change`` (where most pairs are changes of work).
"""

from __future__ import annotations

from statistics import NormalDist

import numpy as np

from govd.eval.convergence import phase_changes
from govd.formats.sweep import SweepTable
from govd.model.arrays import IntArray
from govd.policy.oracle import oracle_levels
from govd.target import Target

SHAPE_CHANGE = 0.05
"""Change of a unit's log time ratio to the fastest level, at any level, that starts a new
phase (the measured tables' per-unit noise is ~1 %, a ratio's ~1.4 %)."""
NOISE_CHANCE = 0.01
"""Share of pairs of consecutive units of one work whose largest move over the levels, from
noise alone, may still cut a phase: the move must exceed the noise's (1 − NOISE_CHANCE / 2L)
quantile at one level as well as ``shape_change``."""
NOISE_CEILING = 3.0
"""The noise's threshold is at most this many times ``shape_change``. Where most pairs of
consecutive units are changes of work, the median move is a change's, not the noise's: work
alternating at every unit would otherwise make one phase of the whole table. On the measured
tables the threshold is 0.050-0.073 (1.0-1.5 times ``shape_change``)."""
_HALF_NORMAL_MEDIAN = NormalDist().inv_cdf(0.75)
"""Median of |x| for a standard normal x: a move's median over its standard deviation."""


def phase_starts(sweep: SweepTable, shape_change: float = SHAPE_CHANGE) -> IntArray:
    """First unit of every phase (0 included), ascending."""
    with np.errstate(all="ignore"):
        shape = np.log(sweep.time_ms / sweep.time_ms.min(axis=1, keepdims=True))
    move = np.abs(np.diff(shape, axis=0))
    threshold = shape_change
    if move.size and np.isfinite(move).any():
        noise_sd = float(np.nanmedian(move)) / _HALF_NORMAL_MEDIAN
        quantile = NormalDist().inv_cdf(1.0 - NOISE_CHANCE / (2.0 * shape.shape[1]))
        threshold = min(max(shape_change, quantile * noise_sd), NOISE_CEILING * shape_change)
    moved = (np.flatnonzero(np.nanmax(move, axis=1) > threshold) + 1 if move.size
             else np.zeros(0, dtype=np.intp))
    starts = np.union1d(np.union1d([0], phase_changes(sweep)), moved)
    return starts.astype(np.intp)


def phase_means(sweep: SweepTable) -> tuple[IntArray, SweepTable]:
    """The phase of every unit (shape [U]) and a table of one row per phase: its mean time
    (ms) and mean busy power (W, weighted by time) at every level."""
    starts = phase_starts(sweep)
    ends = np.append(starts[1:], sweep.units)
    phase_of = np.repeat(np.arange(starts.size), ends - starts)
    counts = (ends - starts)[:, None]
    mean_time = np.add.reduceat(sweep.time_ms, starts, axis=0) / counts
    mean_power = np.add.reduceat(sweep.power_w * sweep.time_ms, starts, axis=0) / (
        mean_time * counts)
    means = SweepTable(levels_mhz=sweep.levels_mhz, time_ms=mean_time, power_w=mean_power,
                       mem_levels_mhz=sweep.mem_levels_mhz)
    return phase_of, means


def mean_curve_levels(sweep: SweepTable, target: Target, idle_power_w: float,
                      lag: int = 0, allowed: np.ndarray | None = None) -> IntArray:
    """Level per unit: the best level for the mean curves of the unit's phase, or with
    ``lag`` = 1 of the previous unit's phase (what a causal policy that knew every phase's
    curve could do: it learns of a change of work only from the unit that ran it; the first
    unit runs at the top level). ``allowed``: a mask of the levels it may choose (bool [L])."""
    phase_of, means = phase_means(sweep)
    if allowed is not None:
        means.time_ms = np.where(allowed, means.time_ms, np.inf)
    per_phase = oracle_levels(means, target, idle_power_w)
    levels: IntArray = per_phase[phase_of]
    if lag:
        levels = np.concatenate((np.full(lag, sweep.levels_mhz.size - 1), levels[:-lag]))
    return levels


def safe_reference_levels(sweep: SweepTable, target: Target, idle_power_w: float,
                          excess: float = 0.01, lag: int = 0,
                          allowed: np.ndarray | None = None) -> tuple[IntArray, float]:
    """`mean_curve_levels` under the tightest target (the slowdown limit or the frame deadline
    shrunk by a margin) that keeps its violation rate within ``excess`` of the oracle's: what a
    causal policy that knows each phase's curve, but not the per-unit noise, can at best reach
    inside the violation budget (``lag``, ``allowed``: see `mean_curve_levels`). Where no
    margin keeps it in the budget, the largest margin's levels. Returns (levels, margin
    used)."""
    levels, margin, _ = _margin_search(sweep, target, idle_power_w, excess, lag, allowed)
    return levels, margin


def _margin_search(sweep: SweepTable, target: Target, idle_power_w: float, excess: float,
                   lag: int, allowed: np.ndarray | None) -> tuple[IntArray, float, bool]:
    """`safe_reference_levels`, and whether its levels keep within the budget."""
    from govd.eval.score import violations  # scoring sits above the references

    missed = violations(sweep, target)
    units = np.arange(sweep.units)
    budget = float(missed[units, oracle_levels(sweep, target, idle_power_w)].mean()) + excess

    def levels_at(margin: float) -> IntArray:
        if target.fps is not None:
            tight = Target(fps=target.fps * (1.0 + margin))
        else:
            assert target.max_slowdown is not None
            tight = Target(max_slowdown=(1.0 + target.max_slowdown) / (1.0 + margin) - 1.0)
        return mean_curve_levels(sweep, tight, idle_power_w, lag, allowed)

    def within(levels: IntArray) -> bool:
        return float(missed[units, levels].mean()) <= budget

    lo, hi = 0.0, (0.5 if target.max_slowdown is None else target.max_slowdown)
    plain = levels_at(lo)
    if within(plain):
        return plain, 0.0, True
    best = levels_at(hi)
    found = within(best)
    for _ in range(12):  # bisection on the margin, to ~1e-4
        mid = 0.5 * (lo + hi)
        at = levels_at(mid)
        if within(at):
            hi, best, found = mid, at, True
        else:
            lo = mid
    return best, hi, found


def hedged_reference_levels(sweep: SweepTable, target: Target, idle_power_w: float,
                            excess: float = 0.01) -> tuple[IntArray, float]:
    """What a causal policy that knows every phase's mean curves, but learns of a change of
    work only from the unit that ran it, can reach inside the violation budget (the oracle's
    rate plus ``excess``): `safe_reference_levels` one unit late, choosing only among the
    levels where at most a share q of the units' phases miss the target on their mean curve,
    so that the unit after a change of work seldom misses; the q (one level's share after
    another) whose levels use the least energy inside the budget, the highest level always
    allowed. The lag-1 reference without this restriction misses 5.7 % of units on the GTX
    1080 Ti pairs at a 10 % slowdown however much margin it takes (a memory-bound kernel's
    lowest core clock runs the compute-bound kernel after it 1.2x slower). Returns (levels,
    q)."""
    from govd.eval.score import unit_energy_mj, violations  # scoring sits above

    phase_of, means = phase_means(sweep)
    share = violations(means, target)[phase_of].mean(axis=0)  # per level, share of units
    energy = unit_energy_mj(sweep, target, idle_power_w)
    units = np.arange(sweep.units)
    best = np.full(sweep.units, sweep.levels_mhz.size - 1, dtype=np.intp)
    best_mj, best_q = float(energy[units, best].sum()), 0.0
    for q in np.unique(share):
        allowed = share <= q
        allowed[-1] = True
        levels, _, found = _margin_search(sweep, target, idle_power_w, excess, 1, allowed)
        mj = float(energy[units, levels].sum())
        if found and mj < best_mj:
            best, best_mj, best_q = levels, mj, float(q)
    return best, best_q


def static_reference_level(sweep: SweepTable, target: Target, idle_power_w: float,
                           excess: float = 0.01) -> int:
    """The one level that runs every unit with the least energy inside the violation budget
    (the oracle's rate plus ``excess``; the highest level when none is): what a policy that
    knows the mix of work a table holds, but never which work runs, can reach. Where it sits
    near the hedged reference, telling the work apart buys little; where it sits near
    `performance` and the hedged reference far below, the saving is in recognising each
    work, and a policy that cannot see the work (no counters, equal times at the top level)
    cannot reach it."""
    from govd.eval.score import unit_energy_mj, violations  # scoring sits above

    missed = violations(sweep, target)
    units = np.arange(sweep.units)
    budget = float(missed[units, oracle_levels(sweep, target, idle_power_w)].mean()) + excess
    energy = unit_energy_mj(sweep, target, idle_power_w).sum(axis=0)
    top = sweep.levels_mhz.size - 1
    inside = missed.mean(axis=0) <= budget
    inside[top] = True
    return int(np.argmin(np.where(inside, energy, np.inf)))


def mean_curve_kendall_tau(sweep: SweepTable, target: Target, idle_power_w: float,
                           lag: int = 1, stride: int = 16) -> float:
    """Kendall τ-b of each phase's mean energy curve against the energies of the unit
    ``lag`` units later, averaged over every ``stride``-th unit: the τ that predictions
    knowing every phase's curve, but not the per-unit noise, would score as `govd.eval.score`
    scores a model's (predicted after unit u, compared with unit u + 1). Where the levels'
    energies lie within the per-unit noise of each other (the GTX 1080 Ti and RTX 2070 Super
    boost-clock tables: 0.57-0.66 one unit late) no causal model reaches a τ above it."""
    from govd.eval.score import kendall_tau_b, unit_energy_mj  # scoring sits above

    phase_of, means = phase_means(sweep)
    energy = unit_energy_mj(sweep, target, idle_power_w)
    curves = unit_energy_mj(means, target, idle_power_w)
    units = np.arange(0, max(sweep.units - lag, 0), stride)
    if units.size == 0:
        return float("nan")
    tau = kendall_tau_b(curves[phase_of[units]], energy[units + lag])
    return float(np.nanmean(tau)) if np.isfinite(tau).any() else float("nan")
