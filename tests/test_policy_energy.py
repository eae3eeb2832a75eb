"""The energy policy: least predicted energy under the target, margin, hysteresis, fallbacks."""

from __future__ import annotations

import math

import numpy as np
import pytest

from govd.policy.energy import EnergyPolicy
from govd.target import Target
from tests.policy_outlook import outlook, predictions

LEVELS = [200.0, 300.0, 400.0, 500.0]


def view(time_ms, energy_mj, current=0, target=None, ready=True, time_error=math.nan, lo=0,
         hi=None):
    return outlook(LEVELS, current=current, target=target or Target(fps=50), lo=lo, hi=hi,
                   time_error=time_error,
                   predicted=predictions(len(LEVELS), time_ms=time_ms, energy_mj=energy_mj,
                                         ready=ready))


def test_least_energy_among_levels_that_meet_the_deadline() -> None:
    # deadline 20 ms; level 0 too slow; level 2 cheapest of the rest
    v = view([30, 18, 12, 10], [5, 9, 7, 8], current=3)
    assert EnergyPolicy(margin=0.05).decide(v) == 2


def test_margin_excludes_a_level_that_only_just_fits() -> None:
    v = view([30, 19.5, 12, 10], [5, 1, 7, 8], current=3)
    assert EnergyPolicy(margin=0.0).decide(v) == 1
    assert EnergyPolicy(margin=0.05).decide(v) == 2  # 19.5 · 1.05 > 20


def test_recent_prediction_error_widens_the_margin() -> None:
    v = view([30, 17, 12, 10], [5, 1, 7, 8], current=3, time_error=0.1)
    assert EnergyPolicy(margin=0.05, error_weight=0.0).decide(v) == 1
    assert EnergyPolicy(margin=0.05, error_weight=2.0).decide(v) == 2  # 17 · 1.2 > 20


def test_hysteresis_keeps_a_feasible_running_level_unless_the_saving_is_real() -> None:
    v = view([30, 18, 12, 10], [5, 9, 7.0, 7.1], current=3)
    assert EnergyPolicy(hysteresis=0.02).decide(v) == 3
    v = view([30, 18, 12, 10], [5, 9, 7.0, 8.0], current=3)
    assert EnergyPolicy(hysteresis=0.02).decide(v) == 2


def _held_run(policy: EnergyPolicy, time_ms, energy_mj, ticks: int, current: int,
         target: Target | None = None) -> list[int]:
    """``ticks`` decisions on fixed predictions, each run by the device before the next."""
    choices = []
    for _ in range(ticks):
        current = policy.decide(view(time_ms, energy_mj, current=current, target=target))
        choices.append(current)
    return choices


def test_under_a_deadline_the_hysteresis_yields_to_a_saving_that_lasts() -> None:
    """A saving under the hysteresis, predicted tick after tick, is taken once the choice has
    held long enough (the hysteresis halves every ``probe_ticks``: under 1.4 % after 21 of
    40): on the game suite at 100 levels the choice sat at the lowest clock for thousands of
    ticks, 1.5 % dearer than a clock near the optimum. Then it stays."""
    choices = _held_run(EnergyPolicy(hysteresis=0.02, probe_ticks=40), [30, 18, 12, 10],
                   [5, 9, 7.0, 7.1], 39, current=3)  # level 2 saves 1.4 % of level 3's
    assert choices == [3] * 21 + [2] * 18


def test_a_new_choice_gets_the_whole_hysteresis_again() -> None:
    policy = EnergyPolicy(hysteresis=0.02, probe_ticks=40)
    assert _held_run(policy, [30, 18, 12, 10], [5, 9, 7.0, 7.1], 22, current=3)[-1] == 2
    # just moved, and now level 1 saves 1.4 % of level 2's: held, as any fresh choice is
    assert _held_run(policy, [30, 18, 12, 10], [5, 7.0, 7.1, 9], 15, current=2) == [2] * 15


def test_under_a_slowdown_limit_the_hysteresis_does_not_decay() -> None:
    """Across (core, memory) pairs a decaying hysteresis let the choice follow the model's
    noise (dl-gtx1080Ti-googlenet at 25 %: 1.007 -> 1.030 x the oracle)."""
    slowdown = Target(max_slowdown=0.30)
    choices = _held_run(EnergyPolicy(hysteresis=0.02, probe_ticks=1000), [1.3, 1.2, 1.01, 1.0],
                   [1.1, 1.0, 1.014, 1.05], 999, current=2, target=slowdown)
    assert choices == [2] * 999  # level 1 saves 1.4 %: never taken


def test_hysteresis_never_holds_a_level_slower_and_dearer_than_the_fastest() -> None:
    """A probe one level below the top of a 15 MHz grid, predicted 1.5 % dearer than the top
    once it ran, was kept by the 2 % hysteresis for a whole run (the H200 rows of
    bench_decisions.py: 5 % of units over a 10 % limit, more energy than the top)."""
    slowdown = Target(max_slowdown=0.10)
    for spread in (False, True):  # the seed form's choice, and the measured spread's
        make = (lambda t, e, c: _spread_view(t, e, [0.005] * 4, c, slowdown)) if spread else (
            lambda t, e, c: view(t, e, current=c, target=slowdown))
        dearer = make([1.3, 1.2, 1.01, 1.0], [1.1, 1.05, 1.015, 1.0], 2)
        assert EnergyPolicy(hysteresis=0.02, probe_ticks=0).decide(dearer) == 3
        # a cheaper running level, or one the winner beats by less than the hysteresis
        # where the winner is not the fastest, is still held
        cheaper = make([1.3, 1.2, 1.01, 1.0], [1.1, 1.05, 0.995, 1.0], 2)
        assert EnergyPolicy(hysteresis=0.02, probe_ticks=0).decide(cheaper) == 2
        near = make([1.3, 1.05, 1.01, 1.0], [1.1, 0.99, 1.0, 1.02], 2)
        assert EnergyPolicy(hysteresis=0.02, probe_ticks=0).decide(near) == 2
    # under a frame deadline too
    v = view([30, 18, 12, 10], [5, 9, 7.1, 7.0], current=2)
    assert EnergyPolicy(hysteresis=0.02).decide(v) == 3


def test_fastest_allowed_level_when_nothing_is_feasible_or_model_not_ready() -> None:
    assert EnergyPolicy().decide(view([40, 35, 30, 25], [1, 2, 3, 4], hi=2)) == 2
    assert EnergyPolicy().decide(view([1, 1, 1, 1], [1, 2, 3, 4], ready=False)) == 3


def test_slowdown_target_is_relative_to_the_fastest_predicted_time() -> None:
    v = view([13, 11.5, 10.5, 10], [3, 4, 5, 6], current=3, target=Target(max_slowdown=0.2))
    assert EnergyPolicy(margin=0.0).decide(v) == 1  # 11.5 <= 12, 13 > 12
    assert EnergyPolicy(margin=0.05).decide(v) == 2  # 11.5 · 1.05 > 12


def test_bounds_are_respected() -> None:
    v = view([30, 18, 12, 10], [5, 1, 7, 8], current=3, lo=2)
    assert EnergyPolicy().decide(v) == 2


@pytest.mark.parametrize("kwargs", [{"margin": -0.1}, {"margin": 1.0}, {"hysteresis": math.nan},
                                    {"error_weight": -1.0}, {"miss_budget": 0.0},
                                    {"miss_budget": 0.5}, {"margin_rate": math.inf},
                                    {"margin_rate": -0.1}, {"price_misses": 1}])
def test_invalid_parameters_are_refused(kwargs) -> None:
    with pytest.raises(ValueError):
        EnergyPolicy(**kwargs)


def _spread_view(time_ms, energy_mj, sd, current, target):
    """A view of a model whose spread is measured between levels (the scaling form), ``sd``
    the whole spread of a measured ratio at each level (no part of it per-unit noise)."""
    n = len(time_ms)
    return outlook(np.linspace(500.0, 1000.0, n), current=current, target=target, tick=100,
                   busy=1.0, time_error=0.01,
                   predicted=predictions(n, time_ms=time_ms, power_w=[1.0] * n,
                                         energy_mj=energy_mj, sd_now=sd, sd_top=sd, ready=True,
                                         spread_from_pairs=True))


def test_each_levels_margin_is_its_own_spread_not_a_fixed_share_of_the_budget() -> None:
    """Issue #11 item 1: a fixed 5 % margin shrank a 10 % budget to 4.8 %, so the level at
    1.05x the top was never allowed. With the model's spread per level, a well-known level
    close to the limit is allowed and a poorly known one is not."""
    from govd.policy.energy import EnergyPolicy
    from govd.target import Target
    target = Target(max_slowdown=0.10)
    time_ms = [1.30, 1.07, 1.05, 1.0]
    energy = [0.5, 0.7, 0.8, 1.0]
    known = _spread_view(time_ms, energy, [0.2, 0.005, 0.005, 0.005], 3, target)
    assert EnergyPolicy(probe_ticks=0).decide(known) == 1
    vague = _spread_view(time_ms, energy, [0.2, 0.03, 0.005, 0.005], 3, target)
    assert EnergyPolicy(probe_ticks=0).decide(vague) == 2


def test_no_probe_into_a_level_the_model_confidently_calls_too_slow() -> None:
    from govd.policy.energy import EnergyPolicy
    from govd.target import Target
    target = Target(max_slowdown=0.10)
    policy = EnergyPolicy(probe_ticks=2)
    # the level below is known (spread = the noise) to run 1.2x: never probed
    view = _spread_view([1.2, 1.0], [0.5, 1.0], [0.01, 0.01], 1, target)
    assert all(policy.decide(view) == 1 for _ in range(50))
    # the same prediction, but barely known: probed once the wait is over
    vague = _spread_view([1.2, 1.0], [0.5, 1.0], [0.2, 0.01], 1, target)
    assert 0 in [EnergyPolicy(probe_ticks=2).decide(vague) for _ in range(5)]


def test_the_seed_form_keeps_probing_at_a_fixed_cadence() -> None:
    """A model without a spread (the seed form) learns its scaling only from probes: the wait
    between them must not grow when a probe changes nothing (it left the seed form at the top
    level for good on a calibrated game scene)."""
    policy = EnergyPolicy(probe_ticks=4)
    # level 2 is predicted to fit the deadline (20 ms) and to cost more: the choice stays 3
    v = view([30, 25, 15, 10], [5, 6, 9, 8], current=3)
    picks = [policy.decide(v) for _ in range(200)]
    probes = [i for i, level in enumerate(picks) if level == 2]
    assert len(probes) >= 35
    assert max(np.diff(probes)) <= 5


def test_a_model_that_gives_its_spread_probes_less_often_when_probes_teach_nothing() -> None:
    target = Target(max_slowdown=0.10)
    policy = EnergyPolicy(probe_ticks=4)
    # level 0 barely known to miss the budget (a probe may still show it fits), cheaper
    v = _spread_view([1.09, 1.0], [0.8, 1.0], [0.014, 0.01], 1, target)
    picks = [policy.decide(v) for _ in range(400)]
    gaps = np.diff([i for i, level in enumerate(picks) if level == 0])
    assert gaps[-1] > 4 * gaps[0]


def _run(policy, times, energy, frame_ms, ticks, time_error=0.05):
    """``ticks`` decisions, each next view reporting the level that ran and ``frame_ms`` for it
    (a function of that level); returns the levels chosen."""
    current, picks = 3, []
    for _ in range(ticks):
        v = view(times, energy, current=current, time_error=time_error)
        late = frame_ms(current) > 20.0  # Target(fps=50)
        v.late_share = float(late) if picks else math.nan
        current = policy.decide(v)
        picks.append(current)
    return picks


def test_missed_deadlines_widen_the_margin_until_they_stop() -> None:
    # deadline 20 ms, margin 2 x 5 %: level 1 (18 ms) just fits; its frames all miss
    policy = EnergyPolicy(probe_ticks=0)
    picks = _run(policy, [30, 18, 17, 10], [5, 6, 7, 8], lambda level: 21.0, 10)
    assert picks[0] == 1
    assert picks[-1] == 2  # three misses moved it


def test_deadlines_made_narrow_the_margin_to_what_the_work_needs() -> None:
    # level 1 (18.8 ms) is outside the 10 % margin; every frame makes the deadline by far
    policy = EnergyPolicy(probe_ticks=0)
    picks = _run(policy, [30, 18.8, 17, 10], [5, 6, 7, 8], lambda level: 15.0, 3000)
    assert picks[0] == 2
    assert picks[-1] == 1
    fixed = _run(EnergyPolicy(probe_ticks=0, margin_rate=0.0), [30, 18.8, 17, 10],
                 [5, 6, 7, 8], lambda level: 15.0, 3000)
    assert set(fixed) == {2}


def test_a_missed_frame_at_a_probe_or_at_the_top_does_not_widen_the_margin() -> None:
    # probes into level 1 (predicted to fit the deadline, outside the margin) miss every time:
    # they are meant to find that out, the margin was not too thin
    policy = EnergyPolicy(probe_ticks=3)
    picks = _run(policy, [25, 19, 17, 10], [5, 6, 7, 8],
                 lambda level: 21.0 if level == 1 else 15.0, 400)
    assert picks.count(1) > 50 and set(picks) == {1, 2}
    assert policy._scale < 1.0
    # nothing but the top fits, and its frames miss: no margin can help
    policy = EnergyPolicy(probe_ticks=0)
    assert set(_run(policy, [30, 25, 22, 10], [5, 6, 7, 8], lambda level: 21.0, 100)) == {3}
    assert policy._scale == 1.0


def test_a_missed_frame_at_a_level_held_below_the_choice_widens_the_margin() -> None:
    """The daemon's min_dwell_ms (and a change in flight) can run a lower level than the one
    chosen: its misses count too, so misses settle at miss_budget of the frames run below the
    top (judging only ticks that ran the chosen level, the demo missed 1.5 % for a 0.5 %
    budget)."""
    policy = EnergyPolicy(probe_ticks=0)
    times, energy = [30, 18.8, 17, 10], [5, 6, 7, 8]
    assert policy.decide(view(times, energy, current=3, time_error=0.05)) == 2
    for _ in range(5):
        # held at level 1 a while; its frames miss
        v = view(times, energy, current=1, time_error=0.05)
        v.late_share = 1.0
        policy.decide(v)
    assert policy._scale > 1.2


# work A is memory-bound (level 0 as fast as the top, and cheapest), work B compute-bound (1.3x
# at level 0, beyond a 10 % budget); level 1 suits both
_MEMORY_BOUND = ([1.0, 1.02, 1.0], [0.6, 0.9, 1.0])
_COMPUTE_BOUND = ([1.3, 1.05, 1.0], [0.9, 0.95, 1.0])


def _work_changes(policy, ticks, every, current=2, move_level=False):
    """Decisions over ``ticks`` ticks whose work alternates every ``every`` ticks; with
    ``move_level`` the running level changes every tick."""
    target = Target(max_slowdown=0.10)
    picks = []
    for tick in range(ticks):
        times, energy = _MEMORY_BOUND if tick // every % 2 == 0 else _COMPUTE_BOUND
        at = tick % 3 if move_level else current
        picks.append(policy.decide(_spread_view(times, energy, [0.005] * 3, at, target)))
    return picks


def test_a_level_that_the_next_work_would_miss_is_refused_when_the_work_changes_often() -> None:
    """Issue #11 (v100-units: 2.2 % violations, nearly all the unit after a change of work):
    the memory-bound work's cheapest level runs the compute-bound work after it 1.3x slower.
    Where the work changes every 3 ticks, the memory-bound work gets the level that suits
    both."""
    picks = _work_changes(EnergyPolicy(probe_ticks=0), 120, every=3)
    memory_ticks = [p for t, p in enumerate(picks) if t // 3 % 2 == 0]
    assert memory_ticks[:4] == [0, 0, 0, 0], "no history yet: the cheapest level"
    assert set(memory_ticks[-20:]) == {1}


def test_work_that_seldom_changes_keeps_its_cheapest_level() -> None:
    picks = _work_changes(EnergyPolicy(probe_ticks=0), 400, every=200)
    assert set(picks[:200]) == {0}


def test_a_curve_that_moves_with_the_running_level_is_learning_not_other_work() -> None:
    """A pair of ticks at two levels teaches the model: the curve it then predicts moves
    without any change of work, and must not make the policy hedge."""
    picks = _work_changes(EnergyPolicy(probe_ticks=0), 120, every=1, move_level=True)
    memory_ticks = picks[0::2]
    assert set(memory_ticks) == {0}


def test_reset_forgets_how_often_the_work_changed() -> None:
    policy = EnergyPolicy(probe_ticks=0)
    _work_changes(policy, 120, every=3)
    policy.reset()
    assert _work_changes(policy, 3, every=3) == [0, 0, 0]


def test_a_level_within_two_spreads_of_the_limit_is_taken_where_its_miss_chance_buys_enough(
) -> None:
    """Issue #11 (v100-sim: convolution kernels at 1.075x the top with a spread of 1.5 % ran at
    the top, 1.049x the oracle against 1.015x for the hedged reference): a fixed two standard
    deviations refused a level with a 6 % chance of a miss however much it saved. Priced, the
    chance is worth a 40 % saving."""
    target = Target(max_slowdown=0.10)
    view = _spread_view([1.075, 1.0], [0.6, 1.0], [0.015, 0.015], 1, target)
    assert EnergyPolicy(probe_ticks=0, price_misses=True).decide(view) == 0
    assert EnergyPolicy(probe_ticks=0).decide(view) == 1, "the default keeps two spreads"
    dear = _spread_view([1.075, 1.0], [0.97, 1.0], [0.015, 0.015], 1, target)
    assert EnergyPolicy(probe_ticks=0, price_misses=True).decide(dear) == 1, \
        "3 % is not worth a 6 % chance"


def test_the_price_of_a_miss_settles_where_the_chances_taken_average_the_budget() -> None:
    target = Target(max_slowdown=0.10)
    policy = EnergyPolicy(probe_ticks=0, price_misses=True)
    chance = 0.5 * math.erfc((math.log(1.1) - math.log(1.075)) / (math.sqrt(2) * 0.015))
    level, low = 1, 0
    for _ in range(20000):
        level = policy.decide(_spread_view([1.075, 1.0], [0.6, 1.0], [0.015, 0.015], level,
                                           target))
        low += level == 0
    assert abs(low / 20000 * chance - policy.miss_budget) < 0.2 * policy.miss_budget


def test_one_change_of_work_in_hundreds_of_ticks_does_not_refuse_the_cheapest_level() -> None:
    """With priced misses the chance that the work changes is counted over CHANGE_TICKS: over
    the 128 ticks of curves the hedge keeps (the default), one change already reads 1/128 >
    a 0.5 % budget, and every level the previous work missed at is refused for most of the
    next phase."""
    def after_change(policy: EnergyPolicy) -> set[int]:
        picks = _work_changes(policy, 2400, every=300)
        return {picks[t] for t in range(1200, 2400) if t // 300 % 2 == 0 and t % 300 < 100}

    assert after_change(EnergyPolicy(probe_ticks=0, price_misses=True, miss_budget=0.005)) == {0}
    assert 1 in after_change(EnergyPolicy(probe_ticks=0, miss_budget=0.005))


@pytest.mark.parametrize("levels", [5, 190])
def test_without_a_spread_the_first_least_energy_level_inside_the_limit_is_chosen(
        levels: int) -> None:
    """The seed form's choice (no per-level spread): a level with no energy prediction (NaN) is
    never chosen, of two equal energies the lower level is, whatever the table's size."""
    time_ms = np.full(levels, 30.0)
    energy_mj = np.full(levels, 9.0)
    time_ms[-4:] = [11.0, 11.0, 10.5, 10.0]  # inside 1.25 x 10 ms / 1.05
    energy_mj[-4:] = [math.nan, 4.0, 4.0, 6.0]
    view = outlook(np.linspace(300.0, 1500.0, levels), current=0,
                   target=Target(max_slowdown=0.25),
                   predicted=predictions(levels, time_ms=list(time_ms),
                                         energy_mj=list(energy_mj), ready=True))
    assert EnergyPolicy().decide(view) == levels - 3


def _fine(levels_mhz, time_ms, energy_mj, current, target):
    n = len(levels_mhz)
    return outlook(levels_mhz, current=current, target=target,
                   predicted=predictions(n, time_ms=time_ms, energy_mj=energy_mj, ready=True))


def test_under_a_deadline_a_probe_spans_as_much_clock_as_the_1_over_f_bound_keeps_safe() -> None:
    """On a fine grid a probe one level down (1 % of clock) teaches nothing against the noise;
    time grows at most as 1/f as the clock falls, so the lowest level whose 1/f time from the
    choice, with the margin, still fits the deadline is probed."""
    levels = np.linspace(200.0, 600.0, 101)
    times = 10.0 * 600.0 / levels  # 10 ms at the top, predicted 1/f
    energy = 100.0 + (levels - 400.0) ** 2 / 100.0  # the top is dearest, the choice stays there
    energy[-1] = 50.0
    target = Target(fps=60.0)  # 16.67 ms
    policy = EnergyPolicy(probe_ticks=2, margin=0.05)
    picks = [policy.decide(_fine(levels, times, energy, 100, target)) for _ in range(3)]
    floor = 600.0 * 10.0 * 1.05 / (1000.0 / 60.0)  # 378 MHz
    expected = int(np.flatnonzero(levels >= floor)[0])
    assert picks[:2] == [100, 100]
    assert picks[2] == expected
    assert levels[expected] < 400.0 and 10.0 * 600.0 / levels[expected] * 1.05 <= 1000.0 / 60.0


def test_a_choice_near_its_deadline_probes_one_level_down() -> None:
    levels = np.linspace(200.0, 600.0, 101)
    times = 16.5 * 600.0 / levels  # the top already near the 16.67 ms deadline
    energy = np.full(101, 100.0)
    energy[-1] = 50.0
    policy = EnergyPolicy(probe_ticks=2, margin=0.0)
    picks = [policy.decide(_fine(levels, times, energy, 100, Target(fps=60.0)))
             for _ in range(3)]
    assert picks == [100, 100, 99]


@pytest.mark.parametrize("level", [0, 3])
def test_a_single_allowed_level_is_never_probed_away_from(level: int) -> None:
    """lo = hi (a pinned range): no level above or below to probe, the top one included."""
    v = view([10, 9, 8, 7], [1, 2, 3, 4], current=level, lo=level, hi=level)
    policy = EnergyPolicy(probe_ticks=1)
    assert [policy.decide(v) for _ in range(4)] == [level] * 4


def test_under_a_slowdown_limit_a_probe_steps_one_level() -> None:
    levels = np.linspace(200.0, 600.0, 101)
    times = 10.0 * (600.0 / levels) ** 0.1
    energy = np.full(101, 100.0)
    energy[-1] = 50.0
    policy = EnergyPolicy(probe_ticks=2)
    picks = [policy.decide(_fine(levels, times, energy, 100, Target(max_slowdown=0.25)))
             for _ in range(3)]
    assert picks == [100, 100, 99]


def test_the_hedge_counts_the_chance_that_one_unit_of_the_next_work_misses() -> None:
    """Issue #24 (v100-units at 25 %: 1.9 % of units missed, 27 of 39 on the first unit of new
    work): the compute-bound work's curve at the memory-bound work's cheapest level lies just
    inside the limit (1.09x against 1.10x), so counting only the curves over the limit let
    the memory-bound work run there; with 1 % of noise per unit a quarter of the compute-bound
    work's units miss there, and with work changing every 3 ticks that is refused."""
    target = Target(max_slowdown=0.10)
    memory = ([1.0, 1.0, 1.0], [0.6, 0.9, 1.0])
    compute = ([1.09, 1.02, 1.0], [0.9, 0.95, 1.0])

    def picks(noise: float) -> list[int]:
        policy, out = EnergyPolicy(probe_ticks=0), []
        for tick in range(120):
            times, energy = memory if tick // 3 % 2 == 0 else compute
            v = outlook(np.linspace(500.0, 1000.0, 3), current=2, target=target, tick=tick,
                        busy=1.0, predicted=predictions(
                            3, time_ms=times, power_w=[1.0] * 3, energy_mj=energy,
                            sd_now=[0.002] * 3, sd_top=[0.002] * 3, time_noise=noise,
                            ready=True, spread_from_pairs=True))
            out.append(policy.decide(v))
        return [p for t, p in enumerate(out) if t // 3 % 2 == 0][-20:]

    assert set(picks(0.0)) == {0}, "no noise: the compute-bound curve is inside the limit"
    assert set(picks(0.01)) == {1}


def test_the_miss_chance_is_the_normal_tail() -> None:
    from govd.policy.energy import _miss_chance
    curve = np.linspace(-0.2, 0.4, 61)
    got = _miss_chance(curve, 0.1, 0.03)
    want = [0.5 * math.erfc((0.1 - c) / (0.03 * math.sqrt(2.0))) for c in curve]
    assert np.max(np.abs(got - np.array(want))) < 3e-6
    assert _miss_chance(np.array([0.05, 0.1, 0.15]), 0.1, 0.0).tolist() == [0.0, 0.0, 1.0]


def test_the_hedge_keeps_the_mean_chance_of_its_remembered_curves() -> None:
    """The work-change hedge's running sum of remembered miss chances is their mean, over
    several rounds of its memory and a change of target (it replaced a mean over 128 curves
    per tick, whose cost grew with the level count)."""
    from govd.policy.energy import HEDGE_TICKS, EnergyPolicy, _miss_chance

    rng = np.random.default_rng(3)
    policy = EnergyPolicy()
    levels = 40
    curves, spreads = [], []
    checked = 0
    for tick in range(3 * HEDGE_TICKS + 17):
        budget = math.log1p(0.10 if tick < 2 * HEDGE_TICKS + 5 else 0.25)
        curve = np.sort(rng.uniform(0.0, 0.4, levels))[::-1].copy()
        if tick % 7:  # same work as the tick before: the curve stays
            curve = curves[-1] if curves else curve
        noise = float(rng.uniform(0.005, 0.02))
        got = policy._change_risk(curve, budget, current=3, noise=noise)
        curves.append(curve)
        spreads.append(math.sqrt(2.0) * noise)
        kept = zip(curves[-HEDGE_TICKS:], spreads[-HEDGE_TICKS:], strict=True)
        mean = np.mean([_miss_chance(c, budget, s) for c, s in kept], axis=0)
        if got.any():
            moved = got / mean
            assert np.allclose(moved[mean > 1e-6], moved[mean > 1e-6][0], rtol=1e-9)
            assert np.allclose(got, moved[mean > 1e-6][0] * mean, rtol=1e-9, atol=1e-15)
            checked += 1
    assert checked > 2 * HEDGE_TICKS
