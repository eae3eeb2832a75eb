"""performance, powersave and fixed: the bounds and the nearest level."""

from __future__ import annotations

import math

import pytest
from policy_outlook import outlook

from govd.policy.base import Policy
from govd.policy.registry import make_policy
from govd.policy.static import Fixed, Performance, Powersave

LEVELS_MHZ = [300.0, 600.0, 900.0, 1200.0, 1500.0]


def test_performance_takes_highest_allowed_level() -> None:
    assert Performance().decide(outlook(LEVELS_MHZ)) == 4
    assert Performance().decide(outlook(LEVELS_MHZ, lo=1, hi=2, current=0)) == 2


def test_powersave_takes_lowest_allowed_level() -> None:
    assert Powersave().decide(outlook(LEVELS_MHZ, current=4)) == 0
    assert Powersave().decide(outlook(LEVELS_MHZ, lo=3, current=4)) == 3


@pytest.mark.parametrize(("freq_mhz", "level"), [
    (900.0, 2), (1000.0, 2), (1100.0, 3), (1.0, 0), (9000.0, 4), (750.0, 1),
])
def test_fixed_takes_nearest_level(freq_mhz: float, level: int) -> None:
    assert Fixed(freq_mhz).decide(outlook(LEVELS_MHZ)) == level


def test_fixed_takes_nearest_allowed_level_within_bounds() -> None:
    assert Fixed(300.0).decide(outlook(LEVELS_MHZ, lo=2, hi=3)) == 2
    assert Fixed(1500.0).decide(outlook(LEVELS_MHZ, lo=2, hi=3)) == 3
    assert Fixed(1100.0).decide(outlook(LEVELS_MHZ, lo=1, hi=3)) == 3


@pytest.mark.parametrize("freq_mhz", [0.0, -100.0, math.nan, math.inf])
def test_fixed_rejects_a_frequency_that_is_not_positive(freq_mhz: float) -> None:
    with pytest.raises(ValueError, match="freq_mhz"):
        Fixed(freq_mhz)


@pytest.mark.parametrize(("name", "params", "cls"), [
    ("performance", {}, Performance),
    ("powersave", {}, Powersave),
    ("fixed", {"freq_mhz": 600.0}, Fixed),
])
def test_registered_by_name_and_meet_the_protocol(
    name: str, params: dict[str, float], cls: type
) -> None:
    policy = make_policy(name, **params)
    assert isinstance(policy, cls) and isinstance(policy, Policy)
    assert (policy.name, policy.uses_model) == (name, False)
    policy.reset()
