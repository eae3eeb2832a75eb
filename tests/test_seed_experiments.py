"""The seed's model experiments: AR-NLMS baseline, convergence, μ sweep, offline vs online."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from govd.eval.convergence import convergence_times, phase_changes
from govd.eval.evaluate import evaluate
from govd.eval.experiments import (
    offline_fit,
    offline_vs_online,
    param_sweep,
    parse_sweep_param,
)
from govd.formats.sweep import SweepTable, write_sweep
from govd.model.online import OnlineModel
from govd.model.settings import ModelSettings
from govd.research.arnlms import ArNlmsModel, arnlms_update, arnlms_update_ref
from govd.target import Target

ROOT = Path(__file__).resolve().parents[1]
LEVELS = np.array([200, 300, 400, 511.0])


def hand_nlms(w: list[float], hist: list[float], t: float, step: float, eps: float) -> float:
    """NLMS written out from the formula, one element at a time."""
    y = sum(wi * hi for wi, hi in zip(w, hist, strict=True))
    norm = eps + sum(hi * hi for hi in hist)
    for i, hi in enumerate(hist):
        w[i] += step * (t - y) * hi / norm
    hist.insert(0, t)
    hist.pop()
    return y


def test_arnlms_kernel_and_numpy_reference_match_the_hand_written_update() -> None:
    rng = np.random.default_rng(1)
    series = 10 + np.cumsum(rng.normal(0, 0.3, 200))
    w1, h1 = np.zeros(10), np.zeros(10)
    w2, h2 = np.zeros(10), np.zeros(10)
    w3, h3 = [0.0] * 10, [0.0] * 10
    for t in series:
        y1 = arnlms_update(w1, h1, float(t), 0.5, 1e-9)
        y2 = arnlms_update_ref(w2, h2, float(t), 0.5, 1e-9)
        y3 = hand_nlms(w3, h3, float(t), 0.5, 1e-9)
        assert y1 == y2
        assert y1 == pytest.approx(y3, rel=1e-12, abs=1e-12)
    np.testing.assert_array_equal(w1, w2)
    np.testing.assert_allclose(w1, w3, rtol=1e-10)
    np.testing.assert_array_equal(h1, series[::-1][:10])


def test_arnlms_learns_a_steady_frame_time_within_one_percent() -> None:
    w, hist = np.zeros(10), np.zeros(10)
    errors = [abs(arnlms_update(w, hist, 16.0, 0.5, 1e-9) - 16.0) for _ in range(60)]
    assert errors[0] == 16.0
    assert errors[-1] < 0.16


def test_arnlms_model_predicts_the_same_time_at_every_level_and_no_sensitivity() -> None:
    model = ArNlmsModel(OnlineModel(LEVELS))
    for i in range(12):
        model.update(10.0 + 0.1 * i, 400.0, np.zeros(0), 2.0, 0.5, math.nan, 16.7)
    assert model.ready
    assert np.all(model.time_ms == model.time_ms[0])
    assert math.isnan(model.sensitivity_ms_per_mhz)
    assert np.all(np.isfinite(model.energy_mj))
    assert math.isfinite(model.fitted_time_ms)


def steps_table(units: int = 600, seed: int = 0) -> SweepTable:
    """Phases of 100 units alternating 5 ms and 12 ms at the top level, t ∝ 1/f, a counter."""
    rng = np.random.default_rng(seed)
    load = np.where((np.arange(units) // 100) % 2 == 0, 5.0, 12.0)
    load = load * rng.lognormal(0, 0.01, units)
    time_ms = load[:, None] * (0.9 * 511 / LEVELS + 0.1)
    power = np.broadcast_to(1 + 2 * LEVELS / 511, time_ms.shape).copy()
    work = np.broadcast_to(load[:, None] * 1e3, time_ms.shape) * rng.lognormal(0, 0.01,
                                                                               time_ms.shape)
    return SweepTable(LEVELS, time_ms, power, counters={"work": work},
                      meta={"idle_power_w": "0.5"}, path=f"steps{seed}")


def test_phase_changes_are_found_where_the_fastest_level_time_jumps() -> None:
    assert phase_changes(steps_table()).tolist() == [100, 200, 300, 400, 500]


def test_convergence_is_time_until_the_error_stays_within_ten_percent() -> None:
    ape = np.full(40, 0.01)
    ape[10:13] = 0.5  # settles 3 units after the change at 10
    ape[25:40] = 0.5  # never settles after the change at 25
    counted, times = convergence_times(ape, np.array([10, 25, 37]), np.full(40, 0.02))
    assert counted == 2  # the change at 37 leaves fewer than 10 units
    assert times.tolist() == pytest.approx([0.06])
    assert convergence_times(ape, np.zeros(0, dtype=np.int64), np.full(40, 0.02))[0] == 0


def test_rls_converges_faster_than_arnlms_after_phase_changes() -> None:
    sweep = steps_table()
    settings = ModelSettings(counters=("work",), counter_scales=(1000.0,))
    (_, _, _, rls), = evaluate([sweep], ["energy"], Target(fps=60), settings)
    (_, _, _, ar), = evaluate([sweep], ["energy"], Target(fps=60), settings, algo="arnlms")
    assert rls.phase_changes == 5
    assert rls.convergence_median_s is not None and ar.convergence_median_s is not None
    assert rls.convergence_median_s < ar.convergence_median_s
    assert rls.time_mape is not None and ar.time_mape is not None
    assert rls.time_mape < ar.time_mape
    assert ar.sensitivity_mape is None


def test_sweep_param_grid_is_log_per_decade_for_mu_and_linear_for_forgetting() -> None:
    name, values = parse_sweep_param("mu=1e-4:1e2")
    assert name == "mu" and values.tolist() == pytest.approx([10.0**e for e in range(-4, 3)])
    assert parse_sweep_param("mu=1:100:2")[1].size == 5
    assert parse_sweep_param("forgetting=0.9:1:3")[1].tolist() == pytest.approx([0.9, 0.95, 1])
    for bad in ("mu=0:1", "lam=0.9:1", "mu=1:x", "mu=10:1", "mu"):
        with pytest.raises(ValueError):
            parse_sweep_param(bad)


def test_large_mu_pins_the_coefficients_and_raises_the_error() -> None:
    # every unit's time follows its counter: learned, the counter explains it; pinned at 0,
    # each prediction is the previous unit's time
    sweep = steps_table()
    load = np.random.default_rng(3).lognormal(0, 0.3, sweep.units)
    sweep.time_ms *= load[:, None]
    sweep.counters["work"] *= load[:, None]
    result = param_sweep([sweep], "mu", np.array([1e-14, 1e12]), Target(fps=60),
                         ModelSettings(a_init=0.0))
    low, high = result["overall"]["mape"]
    assert 2 * low < high, (low, high)
    assert result["best"] == 1e-14
    assert list(result["workloads"]) == ["steps0"]


def test_offline_fit_recovers_the_coefficients_of_an_exact_model() -> None:
    # t ∝ 1/f exactly: the change of time is t_prev·(f_prev/f − 1), so a0 = 1, a1 = 0
    time_ms = np.outer(np.full(300, 5.0), 511 / LEVELS)
    sweep = SweepTable(LEVELS, time_ms, np.ones_like(time_ms))
    coef = offline_fit([sweep], [], [], 1e-14, 0.0, seed=0)
    np.testing.assert_allclose(coef, [1.0, 0.0], atol=1e-9)


def test_offline_vs_online_scores_both_on_held_out_tables() -> None:
    tables = [steps_table(seed=s) for s in range(3)]
    result = offline_vs_online(tables, [0.3, 0.9], Target(fps=60), ModelSettings(), splits=2)
    assert result["counters"] == ["work"]
    assert [r["train_tables"] for r in result["ratios"]] == [1, 2]
    for row in result["ratios"]:
        assert 0 < row["online_mape"] < 0.1 and 0 < row["offline_mape"] < 1
    with pytest.raises(ValueError, match="two sweep tables"):
        offline_vs_online(tables[:1], [0.5], Target(fps=60), ModelSettings())


def _govd(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "govd", *args], capture_output=True, text=True,
                          env=env, timeout=120)


def test_eval_command_runs_both_experiments_as_json(tmp_path: Path) -> None:
    paths = []
    for s in range(2):
        path = tmp_path / f"steps{s}.csv"
        write_sweep(path, steps_table(units=300, seed=s))
        paths.append(str(path))
    done = _govd("eval", "--sweep", *paths, "--target-fps", "60", "--sweep-param",
                 "mu=1e-2:1e2", "--offline-ratios", "0.5", "--splits", "1", "--json")
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert len(out["sweep_param"]["values"]) == 5
    assert out["offline_vs_online"]["ratios"][0]["train_tables"] == 1
    bad = _govd("eval", "--sweep", *paths, "--target-fps", "60", "--offline-ratios", "1.5")
    assert bad.returncode == 2 and "in (0, 1)" in bad.stderr
    bad = _govd("eval", "--sweep", *paths, "--target-fps", "60", "--sweep-param", "mu=1e-2:1",
                "--driver", "energy")
    assert bad.returncode == 2 and "reads the model" in bad.stderr
    arnlms = _govd("eval", "--sweep", paths[0], "--target-fps", "60", "--policy", "energy",
                   "--algo", "arnlms", "--json")
    assert arnlms.returncode == 0, arnlms.stderr
    record = json.loads(arnlms.stdout)["results"][0]
    assert record["algo"] == "arnlms" and record["phase_changes"] == 2
