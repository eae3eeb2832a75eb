"""`govd.research.misorder`: the model's Kendall tau with its time or power replaced by truth."""

from __future__ import annotations

import math

import numpy as np
import pytest

from govd.eval.reference import phase_means
from govd.eval.replay import Replay
from govd.research.misorder import misorder
from govd.target import Target
from tests.test_decision_references import two_phase_table

TARGET = Target(max_slowdown=0.1)


def replay_predicting(table, time_ms: np.ndarray, power_w: np.ndarray) -> Replay:
    """A replay whose model predicted ``time_ms``/``power_w`` (per unit, [U, L]) after every
    unit, at the top level throughout."""
    n, levels = table.time_ms.shape
    units = np.arange(n - 1)
    nan = np.full(n, math.nan)
    return Replay(levels=np.full(n, levels - 1), predicted_time_ms=nan, fitted_time_ms=nan,
                  sensitivity_ms_per_mhz=nan, energy_units=units,
                  predicted_energy_mj=(time_ms * power_w)[units],
                  predicted_times_ms=time_ms[units], model_stats={})


def test_exact_phase_curves_score_the_mean_curve_tau_and_no_error() -> None:
    table = two_phase_table(noise=0.01)
    phase_of, means = phase_means(table)
    found = misorder(table, replay_predicting(table, means.time_ms[phase_of],
                                              means.power_w[phase_of]), TARGET, 0.0)
    assert found.model == pytest.approx(found.mean_curves)
    assert found.true_time == pytest.approx(found.model)
    assert found.true_power == pytest.approx(found.model)
    np.testing.assert_allclose(found.time_error, 0.0, atol=1e-12)
    np.testing.assert_allclose(found.power_error, 0.0, atol=1e-12)
    assert found.run_share[-1] == 1.0


def test_a_wrong_power_shape_is_told_from_a_wrong_time_curve() -> None:
    table = two_phase_table(noise=0.01)
    phase_of, means = phase_means(table)
    time_ms, power_w = means.time_ms[phase_of], means.power_w[phase_of]
    flat = np.broadcast_to(power_w[:, -1:], power_w.shape)  # power that ignores the clock
    wrong_power = misorder(table, replay_predicting(table, time_ms, flat), TARGET, 0.0)
    assert wrong_power.true_power > wrong_power.model + 0.3
    assert wrong_power.true_time == pytest.approx(wrong_power.model)
    assert wrong_power.power_error[0] > 0.1  # the flat shape is too high at the lowest level
    np.testing.assert_allclose(wrong_power.time_error, 0.0, atol=1e-12)
    # the lowest level's truth alone repairs part of it: the cut is per level
    assert wrong_power.truth_below[1] > wrong_power.model


def test_windows_cover_the_run_and_a_model_with_nothing_to_score_is_refused() -> None:
    table = two_phase_table(noise=0.01)
    phase_of, means = phase_means(table)
    found = misorder(table, replay_predicting(table, means.time_ms[phase_of],
                                              means.power_w[phase_of]), TARGET, 0.0, windows=4)
    assert len(found.windows) == 4
    assert all(w["model"] == pytest.approx(w["mean_curves"]) for w in found.windows)
    nothing = replay_predicting(table, np.full(table.time_ms.shape, math.nan),
                                table.power_w)
    with pytest.raises(ValueError, match="predicted no energies"):
        misorder(table, nothing, TARGET, 0.0)
