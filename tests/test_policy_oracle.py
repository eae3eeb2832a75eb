"""The oracle on small sweep tables whose answers are worked out by hand."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest
from policy_outlook import outlook

from govd.formats.sweep import SweepTable
from govd.policy.base import Policy
from govd.policy.oracle import OraclePolicy, oracle_levels
from govd.policy.registry import make_policy
from govd.target import Target

LEVELS_MHZ = [500.0, 1000.0, 1500.0]
AT_60_FPS = Target(fps=60.0)  # T = 16.67 ms


def table(time_ms: list[list[float]], power_w: list[list[float]], **meta: str) -> SweepTable:
    """A sweep table over `LEVELS_MHZ` built in memory."""
    return SweepTable(
        levels_mhz=np.array(LEVELS_MHZ),
        time_ms=np.array(time_ms, dtype=np.float64),
        power_w=np.array(power_w, dtype=np.float64),
        meta=dict(meta),
    )


# unit 0: busy energies 300, 450, 800 mJ; only levels 1 and 2 meet 60 FPS.
# unit 1: busy energies 300, 250, 300 mJ; all meet 60 FPS; idle power decides.
# unit 2: no level meets 60 FPS.
TIMES = [[30.0, 15.0, 10.0], [15.0, 8.0, 5.0], [40.0, 25.0, 20.0]]
POWERS = [[10.0, 30.0, 80.0], [20.0, 31.25, 60.0], [10.0, 20.0, 40.0]]


def test_least_energy_feasible_level_without_idle_power() -> None:
    assert oracle_levels(table(TIMES, POWERS), AT_60_FPS).tolist() == [1, 1, 2]


def test_idle_power_after_the_deadline_favours_the_slower_level() -> None:
    # unit 1 with 20 W idle: 300 + 20·1.67 = 333 mJ at level 0 against 250 + 20·8.67 = 423 mJ.
    sweep = table(TIMES, POWERS, idle_power_w="20")
    assert oracle_levels(sweep, AT_60_FPS).tolist() == [1, 0, 2]
    assert oracle_levels(sweep, AT_60_FPS, idle_power_w=0.0).tolist() == [1, 1, 2]
    assert oracle_levels(table(TIMES, POWERS), AT_60_FPS, idle_power_w=20.0).tolist() == [1, 0, 2]


def test_unmeetable_unit_runs_at_fastest_allowed_level() -> None:
    sweep = table(TIMES, POWERS)
    assert oracle_levels(sweep, AT_60_FPS, None, 0, 1)[2] == 1
    assert oracle_levels(sweep, AT_60_FPS, None, 0, 0).tolist() == [0, 0, 0]


def test_choices_stay_within_bounds() -> None:
    assert oracle_levels(table(TIMES, POWERS), AT_60_FPS, None, 2, 2).tolist() == [2, 2, 2]
    sweep = table(TIMES, POWERS, idle_power_w="20")
    assert oracle_levels(sweep, AT_60_FPS, None, 1, 2).tolist() == [1, 1, 2]


@pytest.mark.parametrize(("slowdown", "unit0_level"), [(0.0, 2), (0.5, 1), (2.0, 0)])
def test_slowdown_limit_is_relative_to_the_units_fastest_time(
    slowdown: float, unit0_level: int
) -> None:
    # unit 0 times 30, 15, 10 ms: the limit is (1 + S)·10 ms; energy is power·time only.
    sweep = table(TIMES, POWERS, idle_power_w="1000")
    assert oracle_levels(sweep, Target(max_slowdown=slowdown))[0] == unit0_level


def test_slowdown_limit_counts_the_fastest_level_even_outside_the_bounds() -> None:
    # Bounded to levels 0..1, unit 0's fastest allowed time (15 ms) breaks 1.2 · 10 ms: run fast.
    sweep = table(TIMES, POWERS)
    assert oracle_levels(sweep, Target(max_slowdown=0.2), None, 0, 1)[0] == 1


def test_finishing_exactly_at_the_limit_meets_it() -> None:
    sweep = table([[25.0, 20.0, 10.0]], [[1.0, 1.0, 10.0]])
    assert oracle_levels(sweep, Target(fps=50.0)).tolist() == [1]  # T = 20 ms
    sweep = table([[25.0, 10.0, 5.0]], [[1.0, 1.0, 10.0]])
    assert oracle_levels(sweep, Target(max_slowdown=1.0)).tolist() == [1]  # limit 2 · 5 ms


def test_unmeasured_rows_are_never_chosen_over_measured_ones() -> None:
    sweep = table([[10.0, math.nan, 5.0]], [[10.0, 1.0, 50.0]])
    assert oracle_levels(sweep, AT_60_FPS).tolist() == [0]
    sweep = table([[30.0, math.nan, 20.0]], [[10.0, 1.0, 50.0]])
    assert oracle_levels(sweep, AT_60_FPS).tolist() == [2]


def test_agrees_with_unit_by_unit_scoring_on_random_tables() -> None:
    rng = random.Random(3)
    for _ in range(200):
        units, n_levels = rng.randint(1, 8), rng.randint(1, 6)
        base = [rng.uniform(5.0, 40.0) for _ in range(units)]
        time_ms = np.array([[b * rng.uniform(0.5, 1.5) for _ in range(n_levels)] for b in base])
        power_w = np.array([[rng.uniform(5.0, 80.0) for _ in range(n_levels)] for _ in base])
        sweep = SweepTable(levels_mhz=np.arange(1.0, n_levels + 1), time_ms=time_ms,
                           power_w=power_w)
        target = rng.choice([Target(fps=rng.uniform(20, 120)), Target(max_slowdown=rng.random())])
        idle_w = rng.uniform(0.0, 10.0)
        lo = rng.randrange(n_levels)
        hi = rng.randrange(lo, n_levels)
        chosen = oracle_levels(sweep, target, idle_w, lo, hi)
        for u in range(units):
            t, p = time_ms[u], power_w[u]
            if target.fps is not None:
                limit = target.deadline_ms
                energy = p * t + idle_w * np.maximum(0, limit - t)
            else:
                assert target.max_slowdown is not None
                limit, energy = (1 + target.max_slowdown) * t.min(), p * t
            ok = [level for level in range(lo, hi + 1) if t[level] <= limit]
            if ok:
                assert chosen[u] in ok and energy[chosen[u]] == min(energy[ok])
            else:
                assert t[chosen[u]] == t[lo : hi + 1].min()


def test_bad_bounds_and_idle_power_are_rejected() -> None:
    sweep = table(TIMES, POWERS)
    with pytest.raises(ValueError, match="bounds"):
        oracle_levels(sweep, AT_60_FPS, None, 2, 1)
    with pytest.raises(ValueError, match="bounds"):
        oracle_levels(sweep, AT_60_FPS, None, 0, 3)
    with pytest.raises(ValueError, match="idle power"):
        oracle_levels(sweep, AT_60_FPS, -1.0)


# --- The policy replaying the table -----------------------------------------------------------

def test_decision_at_step_k_is_the_choice_for_unit_k_plus_one() -> None:
    policy = OraclePolicy(table(TIMES, POWERS, idle_power_w="20"))
    picks = [policy.decide(outlook(LEVELS_MHZ, tick=k, target=AT_60_FPS)) for k in range(4)]
    assert picks == [0, 2, 2, 2]  # units 1, 2, then the last unit again past the end


def test_constructor_idle_power_overrides_the_table() -> None:
    policy = OraclePolicy(table(TIMES, POWERS, idle_power_w="20"), idle_power_w=0.0)
    assert policy.decide(outlook(LEVELS_MHZ, tick=0, target=AT_60_FPS)) == 1


def test_target_and_bounds_of_each_step_are_honoured() -> None:
    policy = OraclePolicy(table(TIMES, POWERS, idle_power_w="20"))
    assert policy.decide(outlook(LEVELS_MHZ, tick=0, target=AT_60_FPS, lo=1)) == 1
    assert policy.decide(outlook(LEVELS_MHZ, tick=1, target=AT_60_FPS, hi=1)) == 1
    assert policy.decide(outlook(LEVELS_MHZ, tick=0, target=Target(max_slowdown=0.0))) == 2


def test_choices_are_computed_once_per_target_and_bounds() -> None:
    policy = OraclePolicy(table(TIMES, POWERS))
    first = policy.levels(AT_60_FPS, 0, 2)
    assert policy.levels(Target(fps=60.0), 0, 2) is first
    assert policy.levels(AT_60_FPS, 0, 1) is not first


def test_device_with_other_levels_than_the_table_is_refused() -> None:
    policy = OraclePolicy(table(TIMES, POWERS))
    with pytest.raises(ValueError, match="levels"):
        policy.decide(outlook([500.0, 1000.0]))


def test_empty_table_is_refused() -> None:
    with pytest.raises(ValueError, match="no units"):
        OraclePolicy(SweepTable(levels_mhz=np.array(LEVELS_MHZ), time_ms=np.empty((0, 3)),
                                power_w=np.empty((0, 3))))


def test_registered_as_oracle_and_meets_the_protocol() -> None:
    policy = make_policy("oracle", sweep=table(TIMES, POWERS))
    assert isinstance(policy, OraclePolicy) and isinstance(policy, Policy)
    assert (policy.name, policy.uses_model) == ("oracle", False)
    policy.reset()
