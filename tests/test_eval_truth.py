"""`govd.research.truth.TrueCurves`: a policy replayed on each phase's true curves, a unit late."""

from __future__ import annotations

import numpy as np
import pytest

from govd.eval.evaluate import evaluate
from govd.eval.reference import phase_means
from govd.eval.score import unit_energy_mj
from govd.research.truth import ScaledSpread, TrueCurves, smooth_curves
from govd.target import Target
from tests.policy_outlook import outlook, predictions
from tests.test_decision_references import LEVELS, two_phase_table


class Recorder:
    """Keeps what it was shown; runs the fastest level."""

    name = "recorder"
    uses_model = True

    def __init__(self) -> None:
        self.seen: list[tuple[np.ndarray, np.ndarray]] = []
        self.resets = 0

    def decide(self, view) -> int:
        self.seen.append((view.predictions.time_ms, view.predictions.energy_mj))
        return view.hi

    def reset(self) -> None:
        self.resets += 1


class Spreads:
    """Keeps the curve, the spreads and the noise it was shown; runs the fastest level."""

    name = "spreads"
    uses_model = True

    def __init__(self) -> None:
        self.seen: list[tuple[np.ndarray, np.ndarray, np.ndarray, float]] = []

    def decide(self, view) -> int:
        p = view.predictions
        self.seen.append((p.time_ms.copy(), p.time_sd_now.copy(), p.time_sd_top.copy(),
                          p.time_noise))
        return view.hi

    def reset(self) -> None:
        pass


def test_the_policy_sees_the_mean_curves_of_the_phase_of_the_unit_just_measured() -> None:
    table = two_phase_table(noise=0.01)
    target = Target(max_slowdown=0.1)
    inner = Recorder()
    wrapped = TrueCurves(inner, table, target, idle_power_w=5.0)
    phase_of, means = phase_means(table)
    energy = unit_energy_mj(means, target, 5.0)
    for unit in (0, 199, 200, 399):
        view = outlook(list(LEVELS), current=3, target=target, tick=unit,
                       predicted=predictions(len(LEVELS), ready=True))
        assert wrapped.decide(view) == 3
        time_ms, energy_mj = inner.seen[-1]
        np.testing.assert_array_equal(time_ms, means.time_ms[phase_of[unit]])
        np.testing.assert_array_equal(energy_mj, energy[phase_of[unit]])
    assert not np.array_equal(inner.seen[1][0], inner.seen[2][0]), "the phase changed at 200"
    wrapped.reset()
    assert inner.resets == 1


@pytest.mark.parametrize("part", ["time", "power"])
def test_one_input_replaced_keeps_the_models_other_curve(part: str) -> None:
    """Issue #11's method on the decisions: the true time with the model's busy power (or the
    true power over the model's time), the energy recomputed from the two, deadline idle
    included."""
    table = two_phase_table(noise=0.01)
    target = Target(fps=60.0)
    inner = Recorder()
    wrapped = TrueCurves(inner, table, target, idle_power_w=5.0, part=part)
    phase_of, means = phase_means(table)
    model_time, model_power = np.array([20.0, 15.0, 12.0, 10.0]), np.array([40.0, 50, 60, 70])
    view = outlook(list(LEVELS), current=3, target=target, tick=250,
                   predicted=predictions(len(LEVELS), time_ms=model_time, power_w=model_power,
                                         ready=True))
    wrapped.decide(view)
    truth_t, truth_p = means.time_ms[phase_of[250]], means.power_w[phase_of[250]]
    time_ms = truth_t if part == "time" else model_time
    power_w = model_power if part == "time" else truth_p
    seen_t, seen_e = inner.seen[-1]
    np.testing.assert_array_equal(seen_t, time_ms)
    np.testing.assert_allclose(seen_e, power_w * time_ms
                               + 5.0 * np.maximum(0.0, target.deadline_ms - time_ms))
    assert not np.allclose(seen_e, unit_energy_mj(means, target, 5.0)[phase_of[250]])


def test_an_unknown_part_is_refused_in_one_line() -> None:
    with pytest.raises(ValueError, match="part must be one of"):
        TrueCurves(Recorder(), two_phase_table(noise=0.01), Target(max_slowdown=0.1), 0.0,
                   part="energy")


def test_a_model_not_yet_ready_keeps_its_own_predictions() -> None:
    table = two_phase_table(noise=0.01)
    inner = Recorder()
    view = outlook(list(LEVELS), current=3, target=Target(max_slowdown=0.1), tick=5)
    TrueCurves(inner, table, Target(max_slowdown=0.1), 0.0).decide(view)
    assert np.all(np.isnan(inner.seen[-1][0]))


def test_evaluate_wraps_only_the_policies_that_use_the_model() -> None:
    table = two_phase_table(noise=0.01)
    wrapped: list[str] = []

    def wrap(policy, sweep, idle_w):
        wrapped.append(policy.name)
        return TrueCurves(policy, sweep, Target(max_slowdown=0.1), idle_w)

    results = evaluate([table], ["energy", "oracle", "performance"], Target(max_slowdown=0.1),
                       wrap=wrap)
    assert wrapped == ["energy"]
    assert [name for name, *_ in results] == ["energy", "oracle", "performance"]


def test_smooth_curves_fit_a_quadratic_in_log_clock_near_the_top_and_keep_the_rest() -> None:
    levels = np.array([500.0, 800.0, 1000.0, 1100.0, 1200.0, 1300.0])
    u = np.log(levels[-1] / levels)
    smooth = np.exp(0.3 + 0.8 * u + 0.4 * u * u)
    bumpy = smooth.copy()
    bumpy[3] *= 1.06  # 1100 MHz slow for this work: no quadratic holds it
    curves = np.stack([smooth, bumpy])
    out = smooth_curves(levels, curves, 1.5)  # 1300 / 1.5 = 867 MHz: the top four levels
    np.testing.assert_allclose(out[0], smooth, rtol=1e-9)  # a quadratic is its own fit
    assert out[1, 3] < bumpy[3] and out[1, 2] > bumpy[2]  # the bump spread over its neighbours
    np.testing.assert_array_equal(out[:, :2], curves[:, :2])  # below the span: kept
    with pytest.raises(ValueError, match="fewer than three levels"):
        smooth_curves(levels, curves, 1.1)


def test_the_smooth_replay_shows_the_policy_the_fitted_curves() -> None:
    table = two_phase_table(noise=0.01)
    target = Target(max_slowdown=0.1)
    inner = Recorder()
    wrapped = TrueCurves(inner, table, target, idle_power_w=5.0, smooth_span=10.0)
    phase_of, means = phase_means(table)
    view = outlook(list(LEVELS), current=3, target=target, tick=250,
                   predicted=predictions(len(LEVELS), ready=True))
    wrapped.decide(view)
    fitted = smooth_curves(table.levels_mhz, means.time_ms, 10.0)[phase_of[250]]
    np.testing.assert_allclose(inner.seen[-1][0], fitted)


def test_the_sure_replay_takes_away_the_models_spread_of_time_and_keeps_its_noise() -> None:
    """``ScaledSpread(TrueCurves(...), 0.0)``: each phase's true curve, no spread of the model's
    own, the per-unit noise kept; without the wrapper the spread is the model's."""
    table = two_phase_table(noise=0.01)
    target = Target(max_slowdown=0.1)
    spreads = Spreads()
    seen = spreads.seen

    phase_of, means = phase_means(table)
    view = outlook(list(LEVELS), current=3, target=target, tick=250,
                   predicted=predictions(len(LEVELS), ready=True, time_noise=0.013))
    view.predictions.time_sd_now[:] = 0.1
    view.predictions.time_sd_top[:] = 0.2
    ScaledSpread(TrueCurves(spreads, table, target, 0.0), 0.0).decide(view)
    time_ms, sd_now, sd_top, noise = seen[-1]
    np.testing.assert_array_equal(time_ms, means.time_ms[phase_of[250]])
    assert not sd_now.any() and not sd_top.any()
    assert noise == 0.013
    view = outlook(list(LEVELS), current=3, target=target, tick=250,
                   predicted=predictions(len(LEVELS), ready=True))
    view.predictions.time_sd_top[:] = 0.2
    TrueCurves(spreads, table, target, 0.0).decide(view)
    assert np.all(seen[-1][2] == 0.2)


def test_a_scaled_spread_multiplies_the_models_spread_and_keeps_its_curves_and_noise() -> None:
    spreads = Spreads()
    seen = spreads.seen
    target = Target(max_slowdown=0.1)
    view = outlook(list(LEVELS), current=3, target=target, tick=3,
                   predicted=predictions(len(LEVELS), time_ms=[20.0, 15.0, 12.0, 10.0],
                                         ready=True, time_noise=0.013))
    view.predictions.time_sd_now[:] = 0.1
    view.predictions.time_sd_top[:] = 0.2
    assert ScaledSpread(spreads, 0.25).decide(view) == 3
    time_ms, sd_now, sd_top, noise = seen[-1]
    np.testing.assert_array_equal(time_ms, [20.0, 15.0, 12.0, 10.0])
    np.testing.assert_allclose(sd_now, 0.025)
    np.testing.assert_allclose(sd_top, 0.05)
    assert noise == 0.013
    for bad in (-1.0, float("nan"), float("inf")):
        with pytest.raises(ValueError, match="scale must be"):
            ScaledSpread(Spreads(), bad)
