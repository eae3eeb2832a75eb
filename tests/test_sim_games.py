"""Game scenarios fitted to real games' frame-rate curves (mlgov)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from govd.cli import main
from govd.sim.games import (
    default_data_file,
    fit_game,
    game_units,
    model_fps,
    read_games,
    simulated_fps,
)
from govd.sim.gpu import UNIT_VARIATION_SIGMA, sweep_of_units
from govd.sim.levels import level_table
from govd.sim.scenarios import game_calibration

CLOCKS = np.array([177.0, 266, 350, 420, 480, 543])
SHIPPED = Path(__file__).resolve().parents[1] / "govd" / "sim" / "gamedata" / "mlgov.json"
needs_data = pytest.mark.skipif(not default_data_file().is_file(),
                                reason=f"mlgov data absent ({default_data_file()})")


def test_frame_rate_saturates_at_the_cap_and_falls_at_low_clocks() -> None:
    fps = model_fps(CLOCKS, 12.0, 0.2, 0.1, 60.0)
    assert np.all(np.diff(fps) >= 0)
    assert fps[-1] == pytest.approx(60.0, rel=0.02)
    assert fps[0] < 40


def test_cpu_limited_game_is_flat_below_vsync() -> None:
    fps = model_fps(CLOCKS, 3.0, 0.5, 0.05, 45.0)
    np.testing.assert_allclose(fps, 45.0, rtol=1e-3)


def test_fit_recovers_a_curve_made_by_the_model() -> None:
    fps = model_fps(CLOCKS, 14.0, 0.15, 0.12, 60.0)
    fit = fit_game("synthetic", CLOCKS, fps)
    assert fit.curve_error_pct < 0.2
    assert fit.frame_ms_at_top == pytest.approx(14.0, rel=0.1)


def test_simulated_frames_follow_the_fitted_curve() -> None:
    fit = fit_game("synthetic", CLOCKS, model_fps(CLOCKS, 14.0, 0.15, 0.12, 60.0))
    rng = np.random.default_rng(1)
    table = level_table("mobile")
    sweep = sweep_of_units(rng, table, game_units(rng, table, 3.0, fit, UNIT_VARIATION_SIGMA), {})
    fps = simulated_fps(sweep.time_ms, fit.cap_fps)
    np.testing.assert_allclose(fps, fit.model_fps, rtol=0.03)


def test_game_classes_take_share_and_spread_from_the_shipped_fit() -> None:
    classes = game_calibration()
    assert set(classes) == {"light", "medium", "heavy"}
    for share, spread in classes.values():
        assert 0 <= share <= 0.95 and 0 <= spread <= 1


@pytest.fixture(scope="module")
def refit(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """What `govd sim fit-games` writes for the mlgov data (`fit_games`' result as JSON), made
    once for the tests below: fitting the 20 games costs ~8 s of CPU."""
    out = tmp_path_factory.mktemp("fit-games") / "g.json"
    assert main(["sim", "fit-games", "-o", str(out)]) == 0
    fitted: dict[str, Any] = json.loads(out.read_text())
    return fitted


@needs_data
def test_shipped_game_fit_is_what_fit_games_makes_of_the_data(refit: dict[str, Any]) -> None:
    shipped = json.loads(SHIPPED.read_text())
    assert refit["provenance"]["source_sha256"] == shipped["provenance"]["source_sha256"]
    assert [g["name"] for g in refit["games"]] == [g["name"] for g in shipped["games"]]
    for a, b in zip(refit["games"], shipped["games"], strict=True):
        assert a["curve_error_pct"] == pytest.approx(b["curve_error_pct"], abs=0.05)


@needs_data
def test_every_measured_game_is_fitted(refit: dict[str, Any]) -> None:
    assert len(refit["games"]) == 20
    _, games = read_games(SHIPPED)
    assert len(games) == 20


def test_missing_games_file_is_a_one_line_usage_error(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    status = main(["sim", "fit-games", str(tmp_path / "none.csv"), "-o", str(tmp_path / "g.json")])
    assert status == 2
    assert "none.csv" in capsys.readouterr().err
