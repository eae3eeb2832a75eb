"""bench/bench_fixed_clock_reach.py: the idealised learners of one clock it holds the static
reference against, on small tables whose answer is known. The learners are numba-compiled for
the benchmark's tables of 187 000 units; here their Python source runs (``py_func``: the same
code, without a compile of several seconds in the suite), except in `check`."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))

import bench_fixed_clock_reach as reach
from bench_fixed_clock_reach import check

from govd.eval.score import unit_energy_mj, violations
from govd.formats.sweep import SweepTable
from govd.target import Target

LEVELS = np.array([900.0, 1000.0, 1100.0, 1200.0, 1300.0, 1400.0, 1500.0])
COMPUTE = 10.0 * LEVELS[-1] / LEVELS
"""A kernel whose time scales as 1/f: at a 10 % limit 1400 MHz is inside, 1300 MHz is not."""
POWER = 100.0 * (LEVELS / LEVELS[-1]) ** 2
"""Power falling with the clock: energy per unit falls as the clock falls."""


follow_the_leader = reach.follow_the_leader.py_func
search = reach.search.py_func
anchored_search = reach.anchored_search.py_func
thompson = reach.thompson.py_func


def table(*curves: np.ndarray, units: int = 50) -> SweepTable:
    """``units`` units of each curve in turn (times in ms at LEVELS), one phase per curve."""
    time_ms = np.concatenate([np.repeat(c[None, :], units, axis=0) for c in curves])
    return SweepTable(levels_mhz=LEVELS.copy(), time_ms=time_ms,
                      power_w=np.repeat(POWER[None, :], time_ms.shape[0], axis=0))


def test_the_leader_runs_the_static_level_after_the_first_unit() -> None:
    sweep = table(COMPUTE, units=40)
    target = Target(max_slowdown=0.10)
    energy, missed = unit_energy_mj(sweep, target, 0.0), violations(sweep, target)
    levels = follow_the_leader(energy, missed, np.zeros(sweep.units))
    assert levels[0] == LEVELS.size - 1
    assert set(levels[1:].tolist()) == {5}  # 1400 MHz: the cheapest clock that never misses


def test_the_search_settles_at_the_edge_of_the_budget_and_misses_what_it_aims_at() -> None:
    sweep = table(COMPUTE, units=2000)
    missed = violations(sweep, Target(max_slowdown=0.10))
    levels = search(np.log(LEVELS), missed, step=0.05, aim=0.01)
    assert levels[0] == LEVELS.size - 1
    tail = levels[500:]
    assert set(tail.tolist()) <= {4, 5, 6} and np.mean(tail == 5) > 0.9
    assert missed[np.arange(sweep.units), levels].mean() == pytest.approx(0.01, abs=0.005)


def test_the_anchored_search_learns_only_from_a_unit_of_the_anchor_s_own_work() -> None:
    log_f = np.log(LEVELS)
    steady = table(COMPUTE, units=800)
    levels = anchored_search(log_f, np.log(steady.time_ms), np.zeros(800, dtype=np.intp),
                             0.10, every=4, step=0.05, aim=0.01)
    assert np.all(levels[::4] == LEVELS.size - 1)  # the anchors run at the top
    assert np.mean(levels[400:] == 5) > 0.5  # the others found 1400 MHz
    # the work changes at every unit: no sample is ever taken, the clock never leaves the top
    changing = np.arange(800, dtype=np.intp)
    levels = anchored_search(log_f, np.log(steady.time_ms), changing, 0.10, every=4, step=0.05,
                             aim=0.01)
    assert np.all(levels == LEVELS.size - 1)


def test_the_bandit_finds_a_cheap_clock_that_never_misses() -> None:
    """With an optimistic prior of the miss rates it tries the clocks below the top, drops
    those that miss, and settles on the cheapest that does not (the top now and then: a Beta
    posterior trusts a 1 % aim only after hundreds of clean units)."""
    sweep = table(COMPUTE, units=600)
    target = Target(max_slowdown=0.10)
    energy, missed = unit_energy_mj(sweep, target, 0.0), violations(sweep, target)
    arms = np.arange(LEVELS.size)
    levels = thompson(LEVELS, arms, missed, energy / energy[:, -1:], aim=0.01, seed=0,
                      miss_prior=0.1)
    assert np.mean(levels[300:] == 5) > 0.6
    assert np.mean(levels < 5) < 0.05


def test_check_reports_the_static_reference_and_counts_an_inverted_clock() -> None:
    slow_top = 20.0 * LEVELS[-1] / LEVELS
    slow_top[6] = slow_top[5] * 1.05  # the top runs this work slower than 1400 MHz does
    r = check(table(COMPUTE, slow_top, units=100), 0.10)
    # 1400 MHz: inside the limit for both works (each unit against its own fastest), cheaper
    assert r["static_mhz"] == 1400.0
    assert r["static"] >= 1.0 and r["leader"] >= r["static"]
    assert float(r["leader_excess"]) <= 0.01 + 1e-12
    # at 10 % the range searched is 1400-1500 MHz (from 1500 / 1.1^1.5 = 1300.2 MHz up):
    # 2 works x 1 pair of adjacent levels, one inverted
    assert r["inverted"] == pytest.approx(1 / 2)
    assert r["levels"] == LEVELS.size
    assert math.isfinite(float(r["search"])) and math.isfinite(float(r["anchored"]))
    assert math.isfinite(float(r["bandit"]))


def test_check_also_holds_one_fixed_clock_to_the_energy_policy_s_own_aim(monkeypatch) -> None:
    """A clock that lets 0.8 % of units over the limit is inside the static reference's budget
    (the oracle's rate + 1 pp) but not inside a ``miss_budget`` of 0.5 pp: the column at the
    policy's own aim runs the clock above it. At the default aim (1 pp, the static reference's
    own) the two columns agree."""
    sweep = table(COMPUTE, units=1000)
    sweep.time_ms[:8, 5] = sweep.time_ms[:8, 6] * 1.2  # 8 units of 1000 over at 1400 MHz
    assert reach.OWN_EXCESS == reach.EXCESS
    r = check(sweep, 0.10)
    assert r["static_own"] == r["static"]
    monkeypatch.setattr(reach, "OWN_EXCESS", 0.005)
    r = check(sweep, 0.10)
    assert reach.OWN_EXCESS < 0.008 <= reach.EXCESS  # the case this table sets up
    assert r["static_mhz"] == 1400.0
    assert float(r["static_own"]) > float(r["static"])
    assert float(r["static_own_excess"]) <= reach.OWN_EXCESS
