"""The measured guard: levels the current work's own measured times and energies refuse under a
slowdown limit, whatever the model predicts (`govd.policy.guard`)."""

from __future__ import annotations

import math

import numpy as np

from govd.policy.energy import EnergyPolicy
from govd.policy.guard import MeasuredGuard
from govd.target import Target
from tests.policy_outlook import outlook, predictions

LEVELS = [200.0, 300.0, 400.0, 500.0]
TOP = 3
SLOW = Target(max_slowdown=0.10)
# the model calls level 2 2 % slower than the top and cheaper: feasible under 10 %
TIMES = [13.0, 12.0, 10.2, 10.0]
ENERGIES = [3.0, 4.0, 5.0, 6.0]


def tick(n, current, frame_ms, power_w=100.0, work_ticks=None, noise=0.0, target=SLOW,
         levels=LEVELS, mem=None, times=TIMES, energies=ENERGIES):
    """The view of tick ``n``, whose frames ran at ``current``; the same work since tick 0
    unless ``work_ticks`` says otherwise."""
    p = predictions(len(levels), time_ms=times, energy_mj=energies, ready=True,
                    spread_from_pairs=True, time_noise=noise,
                    work_ticks=n if work_ticks is None else work_ticks)
    return outlook(levels, current=current, target=target, tick=n, predicted=p,
                   frame_time_ms=frame_ms, power_w=power_w, mem_levels_mhz=mem)


def run(policy, ticks):
    """Feed ``ticks`` (views) to ``policy``; the last decision."""
    choice = -1
    for v in ticks:
        choice = policy.decide(v)
    return choice


def test_the_model_alone_chooses_the_level_it_calls_feasible() -> None:
    assert EnergyPolicy(probe_ticks=0).decide(tick(0, TOP, 10.0)) == 2


def test_a_level_measured_over_the_limit_is_refused_with_every_level_below_it() -> None:
    policy = EnergyPolicy(probe_ticks=0)
    # 11.5 ms at level 2 against 10 ms at the top: 15 % slower, the model said 2 %
    assert run(policy, [tick(0, TOP, 10.0), tick(1, 2, 11.5)]) == TOP
    refused = policy.guard.refused(tick(2, TOP, 10.0))
    assert refused is not None and refused.tolist() == [True, True, True, False]


def test_the_slope_measured_refuses_only_the_levels_it_puts_over_the_limit() -> None:
    guard = MeasuredGuard(confidence=2.0)
    levels = [400.0, 420.0, 440.0, 460.0, 480.0, 500.0]
    times = [10.0] * 6
    for n, (cur, ms) in enumerate([(5, 10.0), (0, 10.0 * 1.12)]):
        guard.observe(tick(n, cur, ms, levels=levels, times=times, energies=times))
    refused = guard.refused(tick(2, 5, 10.0, levels=levels, times=times, energies=times))
    # 12 % slower measured at log clock 0.223 below the top: at that slope the limit
    # (log 1.1) is crossed at 0.188 below it, between 420 and 400 MHz
    below = np.log(500.0 / np.array(levels))
    crossing = below[0] * math.log1p(0.10) / math.log(1.12)
    assert refused is not None
    assert refused.tolist() == [bool(b >= crossing) for b in below[:-1]] + [False]
    assert refused.tolist() == [True, False, False, False, False, False]


def test_a_unit_misses_when_its_own_ratio_does_so_the_noise_of_a_ratio_is_the_margin() -> None:
    # 8 % measured against a 10 % limit: inside on the mean, but with 1 % per-unit noise two
    # standard deviations of one unit's ratio (2 x 1.4 %) put it over
    quiet, noisy = EnergyPolicy(probe_ticks=0), EnergyPolicy(probe_ticks=0)
    assert run(quiet, [tick(0, TOP, 10.0), tick(1, 2, 10.8)]) == 2
    assert run(noisy, [tick(0, TOP, 10.0, noise=0.01), tick(1, 2, 10.8, noise=0.01)]) == TOP


def test_noise_that_leaves_no_room_refuses_every_level_below_the_top_without_a_crash() -> None:
    # 6 % of noise per unit: 2 x 1.4 x 6 % of margin exceeds the 10 % limit, and frame times
    # of whole milliseconds measure level 2 exactly as fast as the top (a ratio of 0)
    guard = MeasuredGuard(confidence=2.0)
    for n, cur in enumerate([TOP, 2]):
        guard.observe(tick(n, cur, 10.0, noise=0.06))
    refused = guard.refused(tick(2, TOP, 10.0, noise=0.06))
    assert refused is not None and refused.tolist() == [True, True, True, False]


def test_a_level_measured_dearer_than_the_top_is_refused_alone() -> None:
    policy = EnergyPolicy(probe_ticks=0)
    top = [tick(n, TOP, 10.0, power_w=100.0 + (n % 2)) for n in range(4)]
    # inside the limit (1 % slower) but 9 % more energy per unit than at the top
    held = [tick(n, 2, 10.1, power_w=108.0 + (n % 2)) for n in range(4, 8)]
    assert run(policy, top + held) == TOP
    refused = policy.guard.refused(tick(8, TOP, 10.0))
    assert refused is not None and refused.tolist() == [False, False, True, False]


def test_energies_within_their_noise_refuse_nothing() -> None:
    guard = MeasuredGuard(confidence=2.0)
    for n in range(4):
        guard.observe(tick(n, TOP, 10.0, power_w=100.0 + 4.0 * (n % 2)))
    for n in range(4, 6):
        guard.observe(tick(n, 2, 10.0, power_w=101.0 + 4.0 * (n % 2)))
    assert guard.refused(tick(6, 2, 10.0)) is None


def test_refusals_end_when_the_work_changes() -> None:
    policy = EnergyPolicy(probe_ticks=0)
    run(policy, [tick(0, TOP, 10.0), tick(1, 2, 11.5)])
    # the model judges the next tick other work (work_ticks 0): its curve, not the last one's
    assert policy.decide(tick(2, TOP, 20.0, work_ticks=0)) == 2
    assert policy.guard.refused(tick(3, 2, 20.0, work_ticks=1)) is None


def test_work_never_measured_at_the_top_is_never_refused() -> None:
    policy = EnergyPolicy(probe_ticks=0)
    assert run(policy, [tick(n, 2, 15.0) for n in range(5)]) == 2
    assert policy.guard.refused(tick(5, 2, 15.0)) is None


def test_pairs_refuse_every_pair_no_faster_on_either_clock() -> None:
    cores = [1000.0, 1000.0, 1500.0, 1500.0]
    mems = [800.0, 1200.0, 800.0, 1200.0]
    guard = MeasuredGuard(confidence=2.0)
    kw = dict(levels=cores, mem=mems, times=[14.0, 12.0, 11.0, 10.0], energies=ENERGIES)
    guard.observe(tick(0, 3, 10.0, **kw))
    guard.observe(tick(1, 1, 12.0, **kw))  # the slower core clock: 20 % slower
    refused = guard.refused(tick(2, 3, 10.0, **kw))
    assert refused is not None and refused.tolist() == [True, True, False, False]


def test_a_frame_rate_target_is_not_guarded() -> None:
    policy = EnergyPolicy(probe_ticks=0)
    fps = Target(fps=50.0)  # 20 ms: every level's predicted time fits
    run(policy, [tick(0, TOP, 10.0, target=fps), tick(1, 2, 11.5, target=fps)])
    assert policy.guard.refused(tick(2, TOP, 10.0, target=fps)) is None


def test_frames_or_power_the_device_does_not_give_teach_nothing() -> None:
    guard = MeasuredGuard(confidence=2.0)
    for n, (cur, ms) in enumerate([(TOP, 10.0), (2, math.nan), (2, -1.0), (2, 0.0)]):
        guard.observe(tick(n, cur, ms, power_w=math.nan))
    assert guard.refused(tick(4, 2, 10.0)) is None


def test_reset_forgets_the_refusals() -> None:
    policy = EnergyPolicy(probe_ticks=0)
    run(policy, [tick(0, TOP, 10.0), tick(1, 2, 11.5)])
    policy.reset()
    assert policy.guard.refused(tick(2, TOP, 10.0)) is None


# level 1 predicted 7 % slower than the top ± 2 %: outside a 10 % limit at two standard
# deviations, inside at one; level 2 3 % slower ± 1 %: inside at two
SPREAD_TIMES = [14.0, 10.0 * math.exp(0.07), 10.0 * math.exp(0.03), 10.0]
SPREAD_ENERGIES = [9.0, 5.0, 6.0, 7.0]
SPREAD_SD = [0.5, 0.02, 0.01, 0.0]


def spread_tick(n, current, frame_ms, work_ticks=None):
    p = predictions(len(LEVELS), time_ms=SPREAD_TIMES, energy_mj=SPREAD_ENERGIES, ready=True,
                    spread_from_pairs=True, sd_top=SPREAD_SD, sd_now=SPREAD_SD,
                    work_ticks=n if work_ticks is None else work_ticks)
    power = 100.0 if current == TOP else 80.0
    return outlook(LEVELS, current=current, target=SLOW, tick=n, predicted=p,
                   frame_time_ms=frame_ms, power_w=power)


def test_slowdown_margins_shrink_where_the_works_measured_ratio_keeps_the_limit() -> None:
    """Choices below the top that the work's own time at the top shows inside the limit lower
    the margin, as missed frames move the deadline margins: level 1, refused at two
    deviations, is chosen once the scale has fallen below ~0.6."""
    policy = EnergyPolicy(probe_ticks=0)
    assert policy.decide(spread_tick(0, TOP, 10.0)) == 2
    choice, n = 2, 1
    while choice == 2 and n < 3000:
        choice = policy.decide(spread_tick(n, 2, 10.3))
        n += 1
    assert choice == 1 and n > 500  # ~730 ticks at 0.05 · 0.01 / 0.99 a tick


def test_a_miss_measured_against_the_top_widens_the_slowdown_margins_again() -> None:
    policy = EnergyPolicy(probe_ticks=0)
    run(policy, [spread_tick(0, TOP, 10.0)] + [spread_tick(n, 2, 10.3) for n in range(1, 1800)])
    assert policy.decide(spread_tick(1800, 1, 10.5)) == 1
    # three ticks at level 1 over the limit (12 % slower than the work's top): the guard
    # refuses the level, and the margins widen by 0.05 a miss
    choices = [policy.decide(spread_tick(n, 1, 11.2)) for n in range(1801, 1804)]
    assert choices[-1] == 2
    fresh = EnergyPolicy(probe_ticks=0)
    run(fresh, [spread_tick(0, TOP, 10.0)] + [spread_tick(n, 2, 10.3) for n in range(1, 1800)])
    assert policy._limit_z(spread_tick(1804, 2, 10.3)) > fresh._limit_z(spread_tick(1800, 2, 10.3))


def test_work_never_run_at_the_top_keeps_the_full_slowdown_margin() -> None:
    """The margins fall only where the work's ratio to the top is measured: new work that has
    not run there is judged at ``confidence`` deviations, whatever the scale learned."""
    policy = EnergyPolicy(probe_ticks=0)
    run(policy, [spread_tick(0, TOP, 10.0)] + [spread_tick(n, 2, 10.3) for n in range(1, 2500)])
    assert policy.decide(spread_tick(2500, 1, 10.5)) == 1
    # other work starts at level 1 (work_ticks 0) and has never run at the top
    assert policy.decide(spread_tick(2501, 1, 20.0, work_ticks=0)) == 2
