"""`govd.policy.memory.MeasuredMemory`, the energy policy with its memory of what each work
measured, and the model's `Predictions.work_id` it keys on."""

from __future__ import annotations

import math
import sys
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from policy_outlook import outlook, predictions

from govd.eval.evaluate import evaluate
from govd.formats.sweep import SweepTable
from govd.model.online import OnlineModel
from govd.model.scaling_model import ScalingModel
from govd.model.settings import ModelSettings
from govd.policy import memory as measured
from govd.policy.energy import EnergyPolicy
from govd.policy.guard import LogMean
from govd.policy.memory import MeasuredMemory
from govd.policy.registry import make_policy
from govd.target import Target

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))
from decision_tables import POWER_LAW_GRID as FINE
from decision_tables import power_law_table as fine_table

sys.path.pop(0)


def test_the_scaling_model_numbers_each_remembered_work_and_knows_it_again() -> None:
    model = ScalingModel(FINE)
    ids = []
    for run in range(6):  # two works taking turns, 3x apart in time at the same clock
        t = 10.0 if run % 2 == 0 else 30.0
        for _ in range(5):
            model.update(t, float(FINE[-1]), power_w=100.0, busy=1.0)
            ids.append(model.predictions().work_id)
    first, second = ids[0], ids[5]
    assert first >= 0 and second >= 0 and first != second
    assert ids == ([first] * 5 + [second] * 5) * 3
    model.reset()
    model.update(10.0, float(FINE[-1]), power_w=100.0, busy=1.0)
    assert model.predictions().work_id >= 0


def test_a_slot_given_to_other_work_gets_a_new_number() -> None:
    model = ScalingModel(FINE, ModelSettings(work_slots=2))
    seen = []
    for t in (10.0, 30.0, 90.0, 10.0):  # three works through two slots
        for _ in range(3):
            model.update(t, float(FINE[-1]), power_w=100.0, busy=1.0)
        seen.append(model.predictions().work_id)
    assert len(set(seen)) == 4, "the first work's slot went to the third: it is not the first"


def test_a_form_that_does_not_tell_works_apart_says_so() -> None:
    model = OnlineModel(FINE)
    model.update(10.0, float(FINE[-1]))
    assert model.predictions().work_id == -1


def run(table: SweepTable, limit: float, memory: bool):
    target = Target(max_slowdown=limit)
    ((_, _, replay, score),) = evaluate([table], ["energy"], target,
                                        policy_params={"energy": {"memory": memory}})
    return replay, score


def test_energy_is_the_policy_with_its_memory_and_memory_false_is_the_model_alone() -> None:
    policy = make_policy("energy")
    assert isinstance(policy, MeasuredMemory) and policy.memory
    assert not make_policy("energy", memory=False).memory
    with pytest.raises(ValueError, match="memory must be true or false"):
        make_policy("energy", memory="yes")
    # it acts under a slowdown limit with a measured spread only
    assert "memory" in MeasuredMemory.inert_parameters(True, frame_rate=True)
    assert "memory" in MeasuredMemory.inert_parameters(False, frame_rate=False)
    assert "memory" not in MeasuredMemory.inert_parameters(True, frame_rate=False)
    assert EnergyPolicy.inert_parameters(True, False) <= \
        MeasuredMemory.inert_parameters(True, False)


@pytest.mark.parametrize("limit", [0.1, 0.25])
def test_on_a_fine_grid_it_spends_the_budget_the_energy_policy_leaves(limit: float) -> None:
    """Memory-bound work (time ∝ f^-0.2) on 101 clocks: measured clocks far enough apart to
    tell a slope from the noise take it further down than the model's curve does, inside the
    budget."""
    table = fine_table([0.2])
    replay, score = run(table, limit, memory=True)
    _, plain = run(table, limit, memory=False)
    # at 10 % the model alone keeps near the top; at 25 % every clock is inside the budget
    # and both come within a few percent of the oracle
    assert score.energy_ratio < plain.energy_ratio - (0.005 if limit < 0.2 else 0.0)
    assert score.violation_rate <= score.oracle_violation_rate + 0.01
    assert np.median(replay.levels) < FINE.size - 10


def test_a_clock_slow_for_the_work_is_run_only_to_measure_it() -> None:
    """A clock 20 % slower than 1/f allows (inside the 10 % budget's range) is refused once
    measured there, while the clocks on either side stay in use: the guard's slope, which
    would carry the slow clock's ratio to every clock below it, does not refuse clocks this
    work measured inside the budget."""
    slow = 80  # 1400 MHz
    table = fine_table([0.3], slow=slow)
    replay, score = run(table, 0.1, memory=True)
    assert int((replay.levels == slow).sum()) <= 10
    assert score.violation_rate <= score.oracle_violation_rate + 0.01
    assert (replay.levels < slow).mean() > 0.5, "it went past the slow clock"


def test_new_work_runs_a_tick_at_the_top_before_its_clocks_are_judged() -> None:
    """The budget is a ratio to the work's fastest clock: each work the model tells apart,
    when it first comes, is anchored there (one tick), then measured below. (Works the model
    cannot tell apart, with the same time at the top and no counters, share one record until
    a jump in time at a clock the record knows drops it: `JUMP_Z`.)"""
    table = fine_table([0.2, 0.9], units=1200, run=200)
    replay, _ = run(table, 0.25, memory=True)
    top = FINE.size - 1
    assert top in replay.levels[200:204].tolist()  # the second work, new
    # the first work again: remembered with its time at the top, so not anchored again
    assert top not in replay.levels[400:404].tolist()



def test_work_that_comes_back_is_not_sent_to_the_top_every_other_tick() -> None:
    """The memory-bound work (f^-0.2) comes back at unit 400 with a record that knows its top
    and 1005 MHz inside a 25 % limit: the phase should run there. The global curve, taught
    f^-0.9 by the other work meanwhile, expects no such move; judged by it alone each tick at
    1005 MHz read as new work, whose slot had no time at the top and was anchored there, and
    the top and 1005 MHz alternated for the whole phase (the table cost 1.100 x the oracle;
    the test above passed by the grid's next clock, 99 of 100). The work's own slot, which
    knows its curve, now judges the move (`govd.model.scaling._slot_expects`)."""
    table = fine_table([0.2, 0.9], units=1200, run=200)
    replay, _ = run(table, 0.25, memory=True)
    phase = np.asarray(replay.levels[410:600])
    assert np.mean(phase >= FINE.size - 2) < 0.1


def test_records_are_bounded_and_a_reset_forgets_them() -> None:
    policy = MeasuredMemory()
    table = fine_table([0.2])
    target = Target(max_slowdown=0.1)
    evaluate([table], ["energy"], target, wrap=lambda p, s, i: policy)
    assert 1 <= len(policy._records) <= measured.MAX_RECORDS
    assert policy._pool_dof > 100  # the noise measured where it is the noise alone
    noise = math.sqrt(policy._pool_squares / policy._pool_dof)
    assert 0.007 < noise < 0.013  # the table's 1 % per unit
    policy.reset()
    assert not policy._records and policy._pool_dof == 0


def timed_record(entries) -> measured._Record:
    """A work's record holding ``entries`` (level, log time over the top's, ticks), the top's
    time 20 ms."""
    record = measured._Record()
    for level, log_t, n in entries:
        stats = record.time.setdefault(level, LogMean())
        for _ in range(n):
            stats.add(math.log(20.0) + log_t)
    return record


def test_the_1_over_f_bound_of_a_probe_starts_from_the_best_clock_measured_above_it() -> None:
    """A choice held above the lowest verified clock (their energies equal within the noise)
    must not hide it: the probe's bound runs from whichever clock measured twice gives the
    least (on the H200's memory-bound step, 1905 MHz held for 900 ticks, 1785 MHz verified
    0.1 % slower, 1725 MHz out of reach from 1905 MHz at a 10 % limit)."""
    levels = np.array([1665.0, 1725.0, 1785.0, 1845.0, 1905.0, 1980.0])
    view = SimpleNamespace(levels_mhz=levels, hi=5)
    policy = MeasuredMemory()
    policy._record = timed_record(((5, 0.0, 5), (4, 0.0, 40), (2, 0.001, 2), (1, 0.5, 1)))
    from_choice = math.log(1905.0 / 1725.0)
    assert from_choice > math.log1p(0.1)  # one step from the choice alone: past the budget
    assert policy._bound(view, 1, 4) == pytest.approx(0.001 + math.log(1785.0 / 1725.0))
    # a clock measured once (1725 MHz) does not bound the one below it
    assert policy._bound(view, 0, 4) == pytest.approx(0.001 + math.log(1785.0 / 1665.0))
    assert policy._bound(view, 3, 4) == pytest.approx(math.log(1905.0 / 1845.0))


LEVELS = np.array([1500.0, 1600.0, 1700.0, 1800.0, 1900.0, 2000.0])


def judged(entries: list[tuple[int, float, int]], noise: float = 0.01, limit: float = 0.25,
           energy: dict[int, list[float]] | None = None) -> tuple[MeasuredMemory, SimpleNamespace]:
    """A policy whose current work's record holds ``entries`` (level, log time over the top's,
    ticks) on LEVELS, judged under ``limit``; a ``miss_budget`` of 0.5 % (z_u = 2.58), which
    the figures of the tests that use it are worked out for."""
    policy = MeasuredMemory(miss_budget=0.005)
    record = timed_record(entries)
    for level, values in (energy or {}).items():
        stats = record.energy.setdefault(level, LogMean())
        for value in values:
            stats.add(value)
    policy._record, policy._noise, policy._z = record, noise, 2.0
    view = SimpleNamespace(levels_mhz=LEVELS, lo=0, hi=LEVELS.size - 1,
                           target=Target(max_slowdown=limit))
    assert policy._judge(view)
    return policy, view


def test_a_clock_measured_near_the_limit_is_undecided_and_the_top_is_measured_again() -> None:
    """A clock measured 40 times whose ratio, against a top measured once, lies within the
    doubt of that one tick is neither verified nor refused: the model may not choose it (on
    the H200's training step its curve called 1365 MHz 8 % slower than the top where 100
    ticks there measured 17 %, and 26 % of the units run there missed), and the top, whose
    single tick is the doubt, is measured again."""
    policy, view = judged([(5, 0.0, 1), (2, 0.18, 40)])
    limit = policy._limit(view)
    assert 0.18 - 2.0 * 0.01 < limit < 0.18 + 2.0 * 0.01 * math.sqrt(1 + 1 / 40)
    assert policy._undecided is not None and policy._undecided[2]
    assert not policy._verified[2] and not policy._refused_here[2]
    assert policy._top_short
    # with the top measured as often, the same mean is judged either way
    policy, _ = judged([(5, 0.0, 40), (2, 0.18, 40)])
    assert policy._refused_here[2] or policy._verified[2]
    assert not policy._top_short


def test_a_clock_is_verified_by_one_units_deviation_not_by_the_means_doubt_added_to_it() -> None:
    """Ten ticks at the top and at 1800 MHz, 18.1 % slower, under a 25 % limit: the next
    unit's ratio there, its noise and the mean's error added as independent deviations
    (2.58 · √(2σ² + sd²) = 3.8 %), stays inside log 1.25 = 22.3 %, so the clock is verified.
    The mean's ``z`` deviations added to a unit's margin (2 · 0.45 % + 3.6 %) would leave it
    undecided for as long as the work runs: on the made-up A40 stage at 10 % the clock one fixed
    clock runs sat 0.1 % inside the limit after the margin and was never verified."""
    policy, view = judged([(5, 0.0, 10), (3, 0.181, 10)])
    sd = 0.01 * math.sqrt(1 / 10 + 1 / 10)
    assert 0.181 + 2.0 * sd > policy._limit(view)  # both doubts added: not verified
    assert policy._verified is not None and policy._verified[3]
    policy, _ = judged([(5, 0.0, 10), (3, 0.186, 10)])  # 0.186 + 3.8 % is over the budget
    assert not policy._verified[3] and policy._undecided[3]


def test_the_unit_margin_follows_the_miss_budget() -> None:
    assert MeasuredMemory()._unit_z == pytest.approx(2.3263, abs=1e-4)
    assert MeasuredMemory(miss_budget=0.005)._unit_z == pytest.approx(2.5758, abs=1e-4)
    assert MeasuredMemory(miss_budget=0.02)._unit_z == pytest.approx(2.0537, abs=1e-4)
    levels = np.array([1500.0, 2000.0])
    view = SimpleNamespace(levels_mhz=levels, lo=0, hi=1, target=Target(max_slowdown=0.1))
    strict, loose = MeasuredMemory(miss_budget=0.005), MeasuredMemory(miss_budget=0.02)
    strict._noise = loose._noise = 0.01
    assert loose._limit(view) - strict._limit(view) == pytest.approx(
        (2.5758 - 2.0537) * math.sqrt(2.0) * 0.01, abs=1e-5)


def test_the_top_is_measured_again_only_where_its_ticks_could_verify_the_clock() -> None:
    """A clock whose own mean keeps it from being verified however often the top is measured
    (18.9 % slower, 40 ticks: 18.9 % + 2.58 · σ · √(2 + 1/40) is over log 1.25) sends no more
    ticks to the top: on the made-up A100 stage with an optimiser step at 25 %, 1155 MHz sat on
    the limit for the forward micro-batch, and the top ran every time its count fell behind
    the clock's (1.105 of the oracle's energy against one fixed clock's 1.059)."""
    policy, _ = judged([(5, 0.0, 1), (2, 0.189, 40)])
    assert policy._undecided is not None and policy._undecided[2]
    assert not policy._top_short
    policy, _ = judged([(5, 0.0, 1), (2, 0.18, 40)])  # the top's ticks could verify this one
    assert policy._undecided[2] and policy._top_short


def test_between_two_verified_clocks_the_cheaper_runs_without_hysteresis() -> None:
    """1900 MHz and 1800 MHz both verified, 1800 MHz 1 % cheaper by their measured energies
    (less than the 2 % hysteresis): the work moves there, as it would not from a clock the
    memory had not verified (the A40 stage held the first clock it verified, 1665 MHz, 0.6 %
    dearer than 1650 MHz, which it had verified too)."""
    energy = {5: [0.0] * 20, 4: [-0.02] * 20, 3: [-0.03] * 20}
    entries = [(5, 0.0, 20), (4, 0.05, 20), (3, 0.10, 20)]
    policy, _ = judged(entries, energy=energy)
    assert policy._verified is not None and policy._verified[3] and policy._verified[4]
    limit = Target(max_slowdown=0.25)
    predicted = predictions(LEVELS.size, time_ms=20.0 * np.exp([0.5, 0.4, 0.3, 0.1, 0.05, 0.0]),
                            energy_mj=[1.0] * LEVELS.size, ready=True, spread_from_pairs=True,
                            work_ticks=60)
    sd = np.zeros(LEVELS.size)

    def chosen(current: int) -> int:
        view = outlook(LEVELS, current=current, target=limit, predicted=predicted)
        return policy._choose_with_spread(view, sd, sd)

    assert chosen(4) == 3
    assert chosen(3) == 3
    policy._verified[4] = False  # feasible by the model alone: the hysteresis holds it
    assert chosen(4) == 4


def test_the_work_change_hedge_remembers_the_curve_no_steeper_than_the_work_measured() -> None:
    """The hedge keeps each tick's curve to judge what the next work may miss. Where the work
    measured a clock at least twice it keeps that clock's ratio no higher than its measured
    mean plus ``z`` deviations of that mean, whatever the model's curve says; the model's
    curve stays where it is lower, and at clocks measured once or never. On the made-up H100
    stage at 10 % the model called 1870 MHz 6.9 % slower than the top where the table's mean
    is 5.1 %, and the hedge refused the clock the work had verified for the whole run."""
    policy, _ = judged([(5, 0.0, 20), (4, 0.01, 20), (3, 0.05, 20), (1, 0.30, 1)])
    model = np.array([0.5, 0.35, 0.2, 0.12, 0.005, 0.0])
    predicted = predictions(LEVELS.size, time_ms=20.0 * np.exp(model), energy_mj=[1.0] * 6,
                            ready=True, spread_from_pairs=True, work_ticks=60)
    view = outlook(LEVELS, current=5, target=Target(max_slowdown=0.25), predicted=predicted)
    seen = []
    hedge = policy._change_risk

    def remember(curve, *args):
        seen.append(np.array(curve))
        return hedge(curve, *args)

    policy._change_risk = remember
    sd = np.zeros(LEVELS.size)
    policy._choose_with_spread(view, sd, sd)
    upper = 0.05 + 2.0 * 0.01 * math.sqrt(1 / 20 + 1 / 20)
    assert seen[0][3] == pytest.approx(upper)  # measured 20 times: no steeper than measured
    assert seen[0][4] == pytest.approx(0.005)  # the model's, lower than measured
    assert seen[0][[0, 1, 2, 5]] == pytest.approx(model[[0, 1, 2, 5]])  # once, never, the top


def test_a_coarse_step_below_the_lowest_verified_clock_is_probed_where_the_model_vouches() -> None:
    """The choice (1102 MHz) held above the lowest verified clock (1087 MHz, the level just
    below it): the next coarse step, 945 MHz, 14 % lower in clock and out of the 1/f bound's
    reach, is probed where the model, its spread included, calls it inside the limit (on the
    simulated V100 at 10 % memory-bound kernels held 1102 MHz and never measured 945 MHz);
    not where the model calls it slow, nor from the choice alone (the level below it is
    verified)."""
    levels = np.array([945.0, 1087.0, 1102.0, 1237.0, 1380.0])
    policy = MeasuredMemory()
    record = timed_record(((4, 0.0, 30), (3, 0.0, 30), (2, 0.001, 30), (1, 0.008, 3)))
    policy._record, policy._noise, policy._z = record, 0.01, 2.0
    policy._spreads = (np.zeros(levels.size), np.full(levels.size, 0.005))

    def probe(model: list[float]) -> int:
        predicted = predictions(levels.size, time_ms=20.0 * np.exp(model),
                                energy_mj=[1.0] * levels.size, ready=True,
                                spread_from_pairs=True, work_ticks=100)
        view = outlook(levels, current=2, target=Target(max_slowdown=0.10), predicted=predicted)
        assert policy._judge(view)
        assert policy._verified is not None and policy._verified.tolist() == [
            False, True, True, True, False]
        return policy._below(view, 2)

    assert probe([0.008, 0.005, 0.005, 0.003, 0.0]) == 0  # the model: 0.8 % slower
    assert probe([0.14, 0.005, 0.005, 0.003, 0.0]) == -1  # the model: 14 % slower
    assert probe([math.nan, 0.005, 0.005, 0.003, 0.0]) == -1  # no prediction vouches
    assert probe([0.008, 0.005, 0.005, 0.003, -math.inf]) == -1  # a top predicted at 0 ms


def test_the_models_word_reaches_no_further_than_1_over_f_from_what_was_measured() -> None:
    """Unmeasured clocks are bounded by time growing at most as 1/f below the clocks the work
    measured: from the top (ratio 0) and 1800 MHz (ratio 0.05, measured twice) the bound at
    1500 MHz is the lesser of log(2000/1500) and 0.05 + log(1800/1500); a clock measured
    once bounds nothing."""
    policy, _ = judged([(5, 0.0, 3), (3, 0.05, 2), (1, 0.0, 1)])
    bound = policy._physics
    assert bound[0] == pytest.approx(min(math.log(2000 / 1500), 0.05 + math.log(1800 / 1500)))
    assert bound[2] == pytest.approx(0.05 + math.log(1800 / 1700))
    assert bound[4] == pytest.approx(math.log(2000 / 1900))
    assert math.isinf(bound[5])


def test_the_cheapest_of_many_measured_clocks_pays_for_being_picked_from_many() -> None:
    """Four clocks measured at the top's energy within their noise: each one's measured
    energy is raised by √(2 ln 4) of its deviation, so none beats the top by noise alone (on
    a 28-clock table whose clocks cost the same within 1 %, the choice went to whichever
    measured cheapest, and cost 0.3-1.1 % over one fixed clock)."""
    top = [0.0, 0.0]
    energy = {5: top, 1: [-0.004, 0.0], 2: [0.0, 0.0], 3: [0.0, 0.004], 4: [0.002, 0.0]}
    entries = [(5, 0.0, 2), (1, 0.0, 2), (2, 0.0, 2), (3, 0.0, 2), (4, 0.0, 2)]
    policy, _ = judged(entries, energy=energy)
    rel = policy._energy_rel
    assert rel is not None
    sd = math.sqrt(policy._noise ** 2) * math.sqrt(1 / 2 + 1 / 2)  # the prior alone
    assert rel[1] == pytest.approx(-0.002 + math.sqrt(2 * math.log(4)) * sd)
    assert np.nanmin(rel[:5]) > 0.0
    assert measured._energy_penalty(np.array([0.0, np.nan]), np.array([0.01, 0.0]))[0] == \
        pytest.approx(0.01)


def test_a_work_noisier_than_the_rest_gets_its_own_noise_and_never_less_than_the_pool() -> None:
    record = measured._Record()
    assert record.noise(0.01) == pytest.approx(0.01)
    record.squares, record.dof = 0.05 ** 2 * 200, 200
    assert 0.04 < record.noise(0.01) < 0.05
    record.squares, record.dof = 0.001 ** 2 * 200, 200
    assert record.noise(0.01) == pytest.approx(0.01)


def test_work_too_noisy_for_any_clock_to_be_verified_is_left_to_the_model() -> None:
    """Ticks 5 % apart at one clock leave a unit's margin wider than a 10 % limit: no clock
    could ever be verified, so the memory stands aside and the model decides as it does with
    ``memory: false`` (holding the top instead cost the simulated gpgpu demo its whole
    saving, 2.7 % -> 0.05 %)."""
    levels = [1000.0, 1500.0, 2000.0]
    predicted = predictions(3, time_ms=[20.8, 20.4, 20.0], energy_mj=[0.8, 0.9, 1.0],
                            sd_now=[0.01] * 3, sd_top=[0.01] * 3, time_noise=0.05,
                            ready=True, spread_from_pairs=True, work_ticks=5)
    predicted = replace(predicted, work_id=0)
    memory, model = make_policy("energy"), make_policy("energy", memory=False)
    chosen = []
    for tick in range(60):
        view = outlook(levels, current=2, target=Target(max_slowdown=0.1), tick=tick,
                       predicted=predicted, frame_time_ms=20.0 * (1.05 if tick % 2 else 0.95),
                       power_w=100.0)
        chosen.append((memory.decide(view), model.decide(view)))
    assert all(a == b for a, b in chosen[20:]), chosen
    assert any(b < 2 for _, b in chosen[20:]), "the model leaves the top"
