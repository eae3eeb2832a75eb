"""Model stress (issue #6): detected, model reset, fallback for the grace period, then back."""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import pytest

from govd.governor import Decision, Governor, Sample
from govd.model.settings import ModelSettings
from govd.model.stress import DIVERGED, ILL_CONDITIONED, JUMP, SATURATED, StressSettings
from govd.model.tick import STRESS_RESET
from govd.policy.energy import EnergyPolicy
from govd.policy.static import Powersave
from govd.target import Target

LEVELS_MHZ = np.array([200.0, 300.0, 400.0, 500.0, 600.0])
TICK_S = 0.05
GRACE_S = 2.0
GRACE_TICKS = round(GRACE_S / TICK_S)


def governor(algorithm: str = "rls", **stress: int) -> Governor:
    """An energy governor with one counter, a 2 s grace and Powersave as an easy-to-spot
    fallback, on the seed form, whose absolute a-priori errors the jump detector reads (the
    scaling form takes a jump as a change of work: `tests/test_model_scaling.py`)."""
    return Governor(
        LEVELS_MHZ, EnergyPolicy(), Target(fps=60.0),
        ModelSettings(form="seed", algorithm=algorithm, counters=("vs",)),
        fallback=Powersave(), fallback_grace_s=GRACE_S,
        stress_settings=StressSettings(**stress) if stress else None,
    )


Reported = Callable[[float], float]


def drive(gov: Governor, ticks: int, rng: np.random.Generator,
          reported: Reported = lambda x: x, scale: float = 1.0,
          scalable: float = 0.7) -> list[Decision]:
    """A counter-driven workload t = scale·x·(scalable·400/f + 1 − scalable) at random levels;
    ``reported`` maps the true counter to what the device says. Asserts no NaN in any
    prediction once the model is ready."""
    decisions = []
    x = 8.0
    for _ in range(ticks):
        f = float(rng.choice(LEVELS_MHZ))
        x = float(np.clip(x + rng.normal(0, 0.3), 2, 20))
        t_ms = scale * x * (scalable * 400 / f + 1 - scalable)
        d = gov.step(Sample(freq_mhz=f, frame_time_ms=t_ms, frame_count=3, interval_s=TICK_S,
                            busy=0.6, power_w=20.0, counters=np.array([reported(x)])))
        if d.outlook.predictions.ready:
            assert np.all(np.isfinite(d.outlook.predictions.time_ms))
            assert np.all(np.isfinite(d.outlook.predictions.energy_mj))
        decisions.append(d)
    return decisions


def episodes(decisions: list[Decision]) -> list[int]:
    return [i for i, d in enumerate(decisions) if d.model_flags & STRESS_RESET]


@pytest.mark.parametrize("algorithm", ["rls", "dcd"])
def test_a_hundredfold_counter_jump_is_absorbed_without_an_episode(algorithm: str) -> None:
    """A counter whose unit changes 100x: one outlying error, then the update refits the
    counter's coefficient (its regressor is 100x larger too): nothing to reset."""
    gov = governor(algorithm)
    rng = np.random.default_rng(2)
    drive(gov, 600, rng)
    drive(gov, 1500, rng, reported=lambda x: 100.0 * x)
    assert gov.stress_episodes == 0


@pytest.mark.parametrize("algorithm", ["rls", "dcd"])
def test_a_steady_workload_never_trips_the_detector(algorithm: str) -> None:
    gov = governor(algorithm)
    decisions = drive(gov, 5000, np.random.default_rng(1))
    assert gov.stress_episodes == 0
    assert all(d.fallback is None for d in decisions)


def test_a_hundredfold_workload_jump_resets_and_falls_back_for_the_grace() -> None:
    """Memory-bound 1 ms frames become compute-bound 100 ms ones: RLS (λ = 1) refits to the
    two outlying samples and keeps coefficients nothing else supports. (DCD-RLS, whose step
    is bounded by H, moves a0 to 1 in two updates with the second error under the floor.)"""
    gov = governor("rls")
    rng = np.random.default_rng(2)
    drive(gov, 600, rng, scalable=0.05)
    after = drive(gov, 1500, rng, scale=100.0, scalable=1.0)
    found = episodes(after)
    assert found and found[0] < 40, "the jump is found within a few ticks"
    first = found[0]
    assert after[first].fallback == JUMP
    assert gov.model.stats_dict()["updates"] < 1500, "the model was reset"
    # Powersave decides through the grace, then the main policy again.
    grace = after[first:first + GRACE_TICKS]
    assert all(d.fallback == JUMP and d.level == 0 for d in grace)
    assert after[first + GRACE_TICKS].fallback is None
    assert found == [first], "relearned on the new scale: one episode"
    assert after[-1].outlook.predictions.ready


def test_a_counter_stuck_at_its_maximum_is_a_saturation_episode() -> None:
    gov = governor(stuck_ticks=50)
    rng = np.random.default_rng(3)
    drive(gov, 300, rng)
    stuck = drive(gov, 400, rng, reported=lambda x: float(2**32 - 1))
    # Jumping to 2**32 makes RLS diverge at once; 50 unchanged ticks after it, saturation.
    assert episodes(stuck) == [0, 50]
    assert stuck[50].fallback == SATURATED
    assert stuck[50 + GRACE_TICKS].fallback is None


def test_a_counter_that_stops_being_finite_is_a_saturation_episode() -> None:
    gov = governor(stuck_ticks=30)
    rng = np.random.default_rng(4)
    drive(gov, 300, rng)
    gone = drive(gov, 100, rng, reported=lambda x: math.inf)
    assert episodes(gone) == [30 - 1]
    assert all(d.fallback == SATURATED for d in gone[29:29 + GRACE_TICKS])


def test_a_constant_counter_is_not_saturated() -> None:
    gov = governor(stuck_ticks=30)
    drive(gov, 500, np.random.default_rng(5), reported=lambda x: 7.0)
    assert gov.stress_episodes == 0


@pytest.mark.parametrize(("algorithm", "condition"),
                         [("rls", DIVERGED), ("dcd", ILL_CONDITIONED)])
def test_a_covariance_that_stops_factorising_is_reset(algorithm: str, condition: str) -> None:
    """RLS's own update notices an indefinite P first (and resets); DCD's R is checked here."""
    gov = governor(algorithm, condition_every=8)
    rng = np.random.default_rng(6)
    drive(gov, 200, rng)
    gov.model.P[0, 1] = gov.model.P[1, 0] = 10.0 * math.sqrt(gov.model.P[0, 0] * gov.model.P[1, 1])
    broken = drive(gov, 50, rng)
    found = episodes(broken)
    assert len(found) == 1 and found[0] < 8
    assert broken[found[0]].fallback == condition
    assert np.linalg.eigvalsh(gov.model.P)[0] > 0


def test_stress_during_the_grace_restarts_it() -> None:
    gov = governor()
    rng = np.random.default_rng(7)
    drive(gov, 200, rng)
    gov.model.P[:] = -1.0
    first = drive(gov, 30, rng)  # settled again, still within the grace
    assert first[0].fallback == DIVERGED
    gov.model.P[:] = -1.0
    second = drive(gov, GRACE_TICKS + 1, rng)
    assert all(d.fallback == DIVERGED for d in second[:GRACE_TICKS])
    assert second[GRACE_TICKS].fallback is None
    assert gov.stress_episodes == 2


def test_governor_reset_ends_a_fallback() -> None:
    gov = governor()
    rng = np.random.default_rng(8)
    drive(gov, 100, rng)
    gov.model.P[:] = np.nan
    assert drive(gov, 1, rng)[0].fallback == DIVERGED
    gov.reset()
    assert drive(gov, 1, rng)[0].fallback is None


def test_the_default_fallback_is_the_top_level_for_one_second() -> None:
    gov = Governor(LEVELS_MHZ, EnergyPolicy(), Target(fps=60.0))
    assert gov.fallback.name == "performance"
    assert gov.fallback_grace_s == 1.0
    with pytest.raises(ValueError, match="fallback_grace_s"):
        Governor(LEVELS_MHZ, EnergyPolicy(), Target(fps=60.0), fallback_grace_s=-1.0)


def test_jump_ratio_zero_turns_jump_detection_off() -> None:
    """For work that alternates kernels 100x apart, where every switch would reset."""
    gov = governor("rls", jump_ratio=0)
    rng = np.random.default_rng(2)
    drive(gov, 600, rng, scalable=0.05)
    after = drive(gov, 1500, rng, scale=100.0, scalable=1.0)
    assert JUMP not in {d.fallback for d in after}
