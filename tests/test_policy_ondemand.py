"""simple_ondemand held against a line-by-line transcription of the kernel's C."""

from __future__ import annotations

import math
import random

import pytest
from policy_outlook import outlook

from govd.policy.base import Policy
from govd.policy.ondemand import (
    DEVFREQ_MAX_FREQ,
    Ondemand,
    lowest_level_at_least,
    simple_ondemand_target_hz,
)
from govd.policy.registry import make_policy

# --- The kernel, transcribed: drivers/devfreq/governor_simpleondemand.c and devfreq.c ----------
EINVAL = 22
U64 = (1 << 64) - 1
U32 = (1 << 32) - 1
ULONG_MAX = U64


def u64(x: int) -> int:
    return x & U64


def div_u64(dividend: int, divisor: int) -> int:
    divisor = divisor & U32  # static inline u64 div_u64(u64 dividend, u32 divisor)
    return dividend // divisor  # ZeroDivisionError where the kernel would trap


def kernel_func(busy_time: int, total_time: int, current_frequency: int,
                data_up: int, data_down: int) -> tuple[int, int]:
    """devfreq_simple_ondemand_func: (err, *freq)."""
    dfso_upthreshold = 90  # DFSO_UPTHRESHOLD
    dfso_downdifferential = 5  # DFSO_DOWNDIFFERENCTIAL
    if data_up:
        dfso_upthreshold = data_up
    if data_down:
        dfso_downdifferential = data_down
    if dfso_upthreshold > 100 or dfso_upthreshold < dfso_downdifferential:
        return -EINVAL, 0
    if total_time == 0:
        return 0, ULONG_MAX
    if busy_time >= (1 << 24) or total_time >= (1 << 24):
        busy_time >>= 7
        total_time >>= 7
    if u64(busy_time * 100) > u64(total_time * dfso_upthreshold):
        return 0, ULONG_MAX
    if current_frequency == 0:
        return 0, ULONG_MAX
    if u64(busy_time * 100) > u64(total_time * ((dfso_upthreshold - dfso_downdifferential) & U32)):
        return 0, current_frequency
    a = busy_time
    a = u64(a * current_frequency)
    b = div_u64(a, total_time)
    b = u64(b * 100)
    b = div_u64(b, (dfso_upthreshold - dfso_downdifferential // 2) & U32)
    return 0, b


def kernel_pick(freq: int, opp_hz: list[int], lo: int, hi: int) -> int:
    """update_devfreq's clamp, then devfreq_recommended_opp over the whole OPP table."""
    min_freq, max_freq = opp_hz[lo], opp_hz[hi]
    least_upper_bound = False
    if freq < min_freq:
        freq = min_freq
        least_upper_bound = False
    if freq > max_freq:
        freq = max_freq
        least_upper_bound = True
    ceil = [i for i, f in enumerate(opp_hz) if f >= freq]
    floor = [i for i, f in enumerate(opp_hz) if f <= freq]
    if least_upper_bound:
        return floor[-1] if floor else ceil[0]
    return ceil[0] if ceil else floor[-1]


# --- The pure function ------------------------------------------------------------------------

def _random_u64(rng: random.Random) -> int:
    """Magnitudes spread over every bit width, so the shift and the wrap-arounds get exercised."""
    kind = rng.random()
    if kind < 0.05:
        return rng.choice([0, 1, (1 << 24) - 1, 1 << 24, (1 << 31), (1 << 32), U64])
    return rng.getrandbits(rng.randint(1, 64))


def test_matches_kernel_on_100k_random_inputs() -> None:
    rng = random.Random(20240611)
    outcomes = {"max": 0, "keep": 0, "computed": 0, "shifted": 0, "trap": 0, "einval": 0}
    for _ in range(100_000):
        total = _random_u64(rng)
        busy = rng.randint(0, total) if rng.random() < 0.6 else _random_u64(rng)
        cur = rng.choice([0, rng.randint(1, 3_000_000_000), _random_u64(rng)])
        up = rng.randint(1, 100)
        down = rng.randint(0, up)
        try:
            err, expected = kernel_func(busy, total, cur, up, down)
        except ZeroDivisionError:
            outcomes["trap"] += 1
            assert simple_ondemand_target_hz(busy, total, cur, up, down) == DEVFREQ_MAX_FREQ
            continue
        if err == -EINVAL:  # down 0 means the default 5, above a small up
            outcomes["einval"] += 1
            with pytest.raises(ValueError):
                simple_ondemand_target_hz(busy, total, cur, up, down)
            continue
        got = simple_ondemand_target_hz(busy, total, cur, up, down)
        assert got == expected, (busy, total, cur, up, down)
        outcomes["shifted"] += busy >= 1 << 24 or total >= 1 << 24
        if expected == ULONG_MAX:
            outcomes["max"] += 1
        elif expected == cur:
            outcomes["keep"] += 1
        else:
            outcomes["computed"] += 1
    # Every branch is taken often; the trap (divisor ≡ 0 mod 2^32) has its own test.
    assert all(n > 1000 for k, n in outcomes.items() if k not in ("trap", "einval")), outcomes
    assert outcomes["einval"] > 0, outcomes


def test_zero_total_time_asks_for_max_even_when_idle() -> None:
    assert simple_ondemand_target_hz(0, 0, 500_000_000) == DEVFREQ_MAX_FREQ


def test_unknown_current_frequency_asks_for_max() -> None:
    assert simple_ondemand_target_hz(10, 100, 0) == DEVFREQ_MAX_FREQ


def test_busy_exactly_at_upthreshold_is_not_max() -> None:
    # 90 % is not > 90 %: it falls in the keep band (> 85 %).
    assert simple_ondemand_target_hz(90, 100, 1_000_000) == 1_000_000
    assert simple_ondemand_target_hz(91, 100, 1_000_000) == DEVFREQ_MAX_FREQ


def test_busy_exactly_at_keep_band_edge_is_scaled() -> None:
    # 85 % is not > 85 %: scaled, 85·1e6/100·100 / (90 − 5/2 = 88) in integers.
    assert simple_ondemand_target_hz(85, 100, 1_000_000) == 85_000_000 // 88
    assert simple_ondemand_target_hz(86, 100, 1_000_000) == 1_000_000


def test_large_times_are_shifted_right_by_7_before_use() -> None:
    busy, total = (1 << 23) + 127, (1 << 24) + 127  # shifted: exactly 1/2
    got = simple_ondemand_target_hz(busy, total, 1_000_000_000)
    assert got == (65536 * 1_000_000_000 // 131072) * 100 // 88
    assert got != (busy * 1_000_000_000 // total) * 100 // 88


def test_busy_times_frequency_wraps_like_a_u64() -> None:
    # 2^20 · 2^50 = 2^70 ≡ 0 (mod 2^64): the kernel asks for 0 Hz.
    assert simple_ondemand_target_hz(1 << 20, (1 << 24) - 1, 1 << 50) == 0


def test_divisor_keeps_only_its_low_32_bits_like_div_u64() -> None:
    total = ((1 << 32) + 3) << 7  # after the shift, div_u64 divides by 3
    assert simple_ondemand_target_hz(1 << 7, total, 1000) == (1000 // 3) * 100 // 88
    assert simple_ondemand_target_hz(1 << 7, (1 << 32) << 7, 1000) == DEVFREQ_MAX_FREQ


def test_equal_thresholds_keep_any_nonzero_load() -> None:
    assert simple_ondemand_target_hz(1, 1000, 700, upthreshold=10, downdifferential=10) == 700
    assert simple_ondemand_target_hz(0, 1000, 700, upthreshold=10, downdifferential=10) == 0


def test_zero_threshold_means_the_default_like_the_kernel() -> None:
    for args in [(80, 100, 1000), (88, 100, 1000), (95, 100, 1000)]:
        assert simple_ondemand_target_hz(*args, 0, 0) == simple_ondemand_target_hz(*args, 90, 5)


@pytest.mark.parametrize(("up", "down"), [(101, 5), (50, 60), (-1, 5), (90, -5), (0, 95)])
def test_invalid_thresholds_are_rejected_like_einval(up: int, down: int) -> None:
    with pytest.raises(ValueError, match="threshold"):
        simple_ondemand_target_hz(50, 100, 1000, up, down)
    with pytest.raises(ValueError, match="threshold"):
        Ondemand(upthreshold=up, downdifferential=down)


def test_values_beyond_unsigned_long_are_rejected() -> None:
    with pytest.raises(ValueError, match="64-bit"):
        simple_ondemand_target_hz(1, 1 << 64, 1000)
    with pytest.raises(ValueError, match="64-bit"):
        simple_ondemand_target_hz(-1, 100, 1000)


# --- The devfreq core's rounding to a level ---------------------------------------------------

OPP_HZ = [200_000_000, 400_000_000, 600_000_000, 800_000_000, 1_000_000_000]


@pytest.mark.parametrize(("target", "level"), [
    (0, 0), (200_000_000, 0), (200_000_001, 1), (599_999_999, 2), (600_000_000, 2),
    (1_000_000_000, 4), (DEVFREQ_MAX_FREQ, 4),
])
def test_level_is_the_lowest_at_or_above_the_target(target: int, level: int) -> None:
    assert lowest_level_at_least(OPP_HZ, target, 0, 4) == level


def test_level_respects_the_bounds() -> None:
    assert lowest_level_at_least(OPP_HZ, 0, 2, 3) == 2
    assert lowest_level_at_least(OPP_HZ, 900_000_000, 1, 3) == 3
    assert lowest_level_at_least(OPP_HZ, DEVFREQ_MAX_FREQ, 1, 3) == 3
    assert lowest_level_at_least(OPP_HZ, 500_000_000, 1, 3) == 2


def test_level_rounding_matches_devfreq_core_on_random_targets() -> None:
    rng = random.Random(7)
    for _ in range(5000):
        opp = sorted(rng.sample(range(100, 3000), rng.randint(1, 12)))
        opp_hz = [f * 1_000_000 for f in opp]
        lo = rng.randrange(len(opp))
        hi = rng.randrange(lo, len(opp))
        target = rng.choice([rng.randint(0, 3_500_000_000), rng.choice(opp_hz), ULONG_MAX])
        assert lowest_level_at_least(opp_hz, target, lo, hi) == kernel_pick(target, opp_hz, lo, hi)


# --- The policy on an Outlook -----------------------------------------------------------------

LEVELS_MHZ = [300.0, 600.0, 900.0, 1200.0]


def test_half_busy_at_top_scales_down_to_the_next_level_up() -> None:
    # 25 000 of 50 000 µs at 1200 MHz → 681.8 MHz → the 900 MHz level.
    view = outlook(LEVELS_MHZ, current=3, busy=0.5, interval_s=0.05)
    assert Ondemand().decide(view) == 2


def test_busy_above_upthreshold_goes_to_highest_allowed() -> None:
    assert Ondemand().decide(outlook(LEVELS_MHZ, current=0, busy=0.95)) == 3
    assert Ondemand().decide(outlook(LEVELS_MHZ, current=0, busy=0.95, hi=2)) == 2


def test_busy_in_keep_band_keeps_level_clamped_to_bounds() -> None:
    assert Ondemand().decide(outlook(LEVELS_MHZ, current=1, busy=0.87)) == 1
    assert Ondemand().decide(outlook(LEVELS_MHZ, current=3, busy=0.87, hi=2)) == 2


def test_idle_goes_to_lowest_allowed() -> None:
    assert Ondemand().decide(outlook(LEVELS_MHZ, current=3, busy=0.0)) == 0
    assert Ondemand().decide(outlook(LEVELS_MHZ, current=3, busy=0.0, lo=1)) == 1


def test_zero_interval_goes_to_highest_allowed() -> None:
    assert Ondemand().decide(outlook(LEVELS_MHZ, current=0, busy=0.2, interval_s=0.0)) == 3


def test_unknown_utilisation_keeps_level_and_is_counted() -> None:
    policy = Ondemand()
    assert policy.decide(outlook(LEVELS_MHZ, current=2, busy=math.nan)) == 2
    assert policy.decide(outlook(LEVELS_MHZ, current=3, busy=math.nan, hi=1)) == 1
    assert policy.undecided == 2
    policy.reset()
    assert policy.undecided == 0


def test_decide_matches_kernel_on_random_views() -> None:
    rng = random.Random(11)
    for _ in range(3000):
        levels = sorted(rng.sample(range(100, 2500, 5), rng.randint(2, 10)))
        lo = rng.randrange(len(levels))
        hi = rng.randrange(lo, len(levels))
        current = rng.randrange(len(levels))
        busy = rng.random()
        interval_s = rng.uniform(0.001, 40.0)  # up to past 2^24 µs
        up = rng.randint(10, 100)
        down = rng.randint(0, up)
        view = outlook(levels, current=current, lo=lo, hi=hi, busy=busy, interval_s=interval_s)
        total_us = round(interval_s * 1e6)
        _, freq = kernel_func(round(busy * total_us), total_us, levels[current] * 1_000_000,
                              up, down)
        expected = kernel_pick(freq, [f * 1_000_000 for f in levels], lo, hi)
        assert Ondemand(up, down).decide(view) == expected


def test_registered_as_ondemand_and_meets_the_protocol() -> None:
    policy = make_policy("ondemand", upthreshold=80, downdifferential=10)
    assert isinstance(policy, Ondemand) and isinstance(policy, Policy)
    assert (policy.name, policy.uses_model) == ("ondemand", False)


def test_over_pairs_it_governs_the_core_clock_with_the_memory_clock_at_its_top() -> None:
    """Issue #11: over (core, memory) pairs it picked the lowest memory clock (80 % of units
    missed a slowdown limit); it now runs the core clock by simple_ondemand at the top memory."""
    import numpy as np

    from govd.policy.base import Outlook
    from govd.policy.ondemand import Ondemand
    from govd.target import Target

    cores = np.array([500.0, 500.0, 800.0, 800.0, 1000.0, 1000.0])
    mems = np.array([400.0, 900.0, 400.0, 900.0, 400.0, 900.0])

    def view(busy: float, current: int) -> Outlook:
        return outlook(cores, lo=0, hi=5, current=current, busy=busy,
                       target=Target(max_slowdown=0.1), mem_levels_mhz=mems)

    policy = Ondemand()
    assert policy.decide(view(1.0, 1)) == 5          # busy: the top pair
    low = policy.decide(view(0.2, 5))                # idle enough: a lower core clock
    assert mems[low] == 900.0 and cores[low] < 1000.0
    assert all(mems[policy.decide(view(b, 5))] == 900.0 for b in np.linspace(0, 1, 21))
