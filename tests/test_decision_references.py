"""The evaluator's references beside the oracle (`govd.eval.reference`) and the counter
selection of the scaling form (`govd.research.scaling_selection`)."""

from __future__ import annotations

import numpy as np

from govd.eval.reference import (
    hedged_reference_levels,
    mean_curve_levels,
    phase_starts,
    safe_reference_levels,
    static_reference_level,
)
from govd.eval.score import violations
from govd.formats.sweep import SweepTable
from govd.policy.oracle import oracle_levels
from govd.research.scaling_selection import scaling_counters
from govd.target import Target

LEVELS = np.array([500.0, 700.0, 900.0, 1100.0])


def two_phase_table(noise: float, units: int = 400, seed: int = 0,
                    phase_units: int | None = None) -> SweepTable:
    """A memory-bound phase (time flat in f) then a compute-bound one (time ∝ 1/f); with
    ``phase_units`` the two alternate every that many units."""
    rng = np.random.default_rng(seed)
    phase_units = phase_units or units // 2
    share = np.where(np.arange(units) // phase_units % 2 == 0, 0.05, 0.95)[:, None]
    time_ms = (1 - share + share * LEVELS[-1] / LEVELS) * rng.lognormal(0, noise, (units, 4))
    power_w = (30 + 70 * (LEVELS / LEVELS[-1]) ** 2) * rng.lognormal(0, noise, (units, 4))
    return SweepTable(LEVELS, time_ms, power_w)


def test_phases_are_cut_where_the_scaling_changes_even_at_equal_top_times() -> None:
    table = two_phase_table(noise=0.001)
    assert list(phase_starts(table)) == [0, 200]


def test_mean_curve_reference_is_the_oracle_without_noise_and_causal_one_unit_late() -> None:
    table = two_phase_table(noise=0.0)
    target = Target(max_slowdown=0.1)
    oracle = oracle_levels(table, target, 0.0)
    np.testing.assert_array_equal(mean_curve_levels(table, target, 0.0), oracle)
    lagged = mean_curve_levels(table, target, 0.0, lag=1)
    assert lagged[0] == len(LEVELS) - 1
    np.testing.assert_array_equal(lagged[1:], oracle[:-1])


def test_safe_reference_keeps_its_violations_inside_the_budget() -> None:
    table = two_phase_table(noise=0.02)
    target = Target(max_slowdown=0.1)
    plain = mean_curve_levels(table, target, 0.0)
    safe, margin = safe_reference_levels(table, target, 0.0, excess=0.01)
    units = np.arange(table.units)
    missed = violations(table, target)
    allowed = missed[units, oracle_levels(table, target, 0.0)].mean() + 0.01
    assert missed[units, safe].mean() <= allowed
    assert margin >= 0.0
    assert (safe >= plain).all(), "a margin only ever raises the level"


def test_hedged_reference_stays_in_the_budget_where_work_changes_every_few_units() -> None:
    """The lag-1 reference runs the unit after a change of work at the level of the work
    before: memory-bound work's lowest clock runs compute-bound work 2.2x slower, a miss at
    every change to compute-bound work. The hedged reference only takes levels few phases
    miss at."""
    table = two_phase_table(noise=0.005, phase_units=3)
    target = Target(max_slowdown=0.1)
    units = np.arange(table.units)
    missed = violations(table, target)
    budget = missed[units, oracle_levels(table, target, 0.0)].mean() + 0.01
    lagged = mean_curve_levels(table, target, 0.0, lag=1)
    assert missed[units, lagged].mean() > 0.15  # one unit in six
    hedged, q = hedged_reference_levels(table, target, 0.0)
    assert missed[units, hedged].mean() <= budget
    assert q < 0.5


def test_selection_keeps_the_counter_that_tells_how_work_scales() -> None:
    """DRAM activity tells memory-bound from compute-bound work; a counter that follows the
    clock within each unit (clock ticks) or says nothing about scaling (noise) is left out."""
    rng = np.random.default_rng(1)
    units = 300
    share = rng.uniform(0.0, 1.0, (units, 1))
    time_ms = (1 - share + share * LEVELS[-1] / LEVELS) * rng.lognormal(0, 0.01, (units, 4))
    dram = np.broadcast_to(1.0 - share, time_ms.shape) * rng.lognormal(0, 0.02, time_ms.shape)
    clock = np.broadcast_to(LEVELS, time_ms.shape) * rng.lognormal(0, 0.01, time_ms.shape)
    noise = np.broadcast_to(rng.uniform(0, 1, (units, 1)), time_ms.shape).copy()
    chosen = scaling_counters(time_ms, LEVELS, {"noise": noise, "clock_ticks": clock,
                                                "dram": dram})
    assert chosen == ["dram"]


def test_mean_curve_tau_is_one_without_noise_and_falls_where_levels_tie_within_the_noise(
) -> None:
    from govd.eval.reference import mean_curve_kendall_tau
    target = Target(max_slowdown=0.1)
    assert mean_curve_kendall_tau(two_phase_table(noise=0.0), target, 0.0, lag=0) == 1.0
    # one unit late, the unit after the change of phase is ranked by the other phase's curve
    late = mean_curve_kendall_tau(two_phase_table(noise=0.0), target, 0.0, lag=1, stride=1)
    assert 0.98 < late < 1.0
    tied = two_phase_table(noise=0.0)
    rng = np.random.default_rng(3)
    # every level the same energy, up to 1 % noise per unit and level
    tied.power_w = 100.0 * tied.time_ms[:, -1:] / tied.time_ms * rng.lognormal(
        0.0, 0.01, tied.time_ms.shape)
    assert abs(mean_curve_kendall_tau(tied, target, 0.0, lag=0)) < 0.3


def test_static_reference_runs_one_level_for_the_whole_mix_inside_the_budget() -> None:
    """Half the units compute-bound (1.22x slower one level down): no level below the top
    keeps them inside a 10 % slowdown, so the one level for the whole mix is the top, where
    the hedged reference, which tells the phases apart, saves on the memory-bound half."""
    target = Target(max_slowdown=0.1)
    mixed = two_phase_table(noise=0.005)
    top = len(LEVELS) - 1
    assert static_reference_level(mixed, target, 0.0) == top
    units = np.arange(mixed.units)
    hedged, _ = hedged_reference_levels(mixed, target, 0.0)
    assert (hedged < top).any()
    # memory-bound work alone: every level is inside the limit and the lowest costs least
    memory = two_phase_table(noise=0.005, phase_units=mixed.units)
    level = static_reference_level(memory, target, 0.0)
    assert level == 0
    missed = violations(memory, target)
    budget = missed[units, oracle_levels(memory, target, 0.0)].mean() + 0.01
    assert missed[:, level].mean() <= budget


def test_on_a_fine_grid_the_noise_of_one_work_does_not_cut_its_phase() -> None:
    """187 clocks, 1 % noise per unit and level, two works of 1 500 units each: the largest of
    187 noisy moves passes 0.05 between most pairs of units of one work (the rule before cut
    this table into hundreds of phases); the change of work is still found."""
    rng = np.random.default_rng(3)
    levels = np.linspace(135.0, 1530.0, 187)
    share = np.where(np.arange(3000) < 1500, 0.2, 0.9)[:, None]
    time_ms = (1 - share + share * levels[-1] / levels) * rng.lognormal(0, 0.01, (3000, 187))
    table = SweepTable(levels, time_ms, np.full_like(time_ms, 100.0))
    starts = list(phase_starts(table))
    assert 1500 in starts
    assert len(starts) <= 2 + 60  # about 1 % of the 2 998 pairs within a work: 2 % at most


def test_work_that_changes_at_every_unit_is_still_cut_at_every_unit() -> None:
    """Where nearly every pair of units is a change of work, the median move is a change's:
    the noise's threshold is capped, so the phases are still the units."""
    rng = np.random.default_rng(4)
    levels = np.linspace(700.0, 1500.0, 187)
    share = np.where(np.arange(600) % 2 == 0, 0.2, 0.9)[:, None]
    time_ms = (1 - share + share * levels[-1] / levels) * rng.lognormal(0, 0.01, (600, 187))
    table = SweepTable(levels, time_ms, np.full_like(time_ms, 100.0))
    assert list(phase_starts(table)) == list(range(600))
