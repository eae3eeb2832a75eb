"""Real games' frame-rate curves (mlgov, `../shared/data/mlgov/`) and the game model fitted to them.

The data: 20 Android apps' frame rate at 6 GPU clocks on a Mali-T628, at 9 CPU clocks. A game's
curve is taken at the top CPU clock (where the GPU, not the CPU, limits it most often).

Model of one game: frame i costs the GPU t_i(f) = t_top · c_i · ((1 − m) · f_top/f + m) at clock f,
c_i lognormal with median 1 and spread σ (frame complexity); the display shows a frame no faster
than its cap T = 1000/cap ms (vsync at 60 FPS, or lower where the CPU limits the game), so the frame
interval is max(T, t_i) and the frame rate 1000 / E[max(T, t_i)]. Fitted per game: t_top, the
unscalable share m, σ and the cap, minimising the relative error of the curve (bounded least
squares from a grid of starts). `game_units` then draws frames of a fitted game for the simulator,
so the simulator's own curve can be compared with the measured one (`simulated_fps`).
"""

from __future__ import annotations

import csv
import hashlib
import json
from collections import defaultdict
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
from scipy.optimize import least_squares

from govd.sim.levels import FloatArray, LevelTable
from govd.sim.scenarios import Units, smooth_noise

VSYNC_FPS = 60.0
QUADRATURE_NODES = 48
COMPLEXITY_TAU_FRAMES = 30.0
"""Frame complexity wanders over about half a second (consecutive frames look alike)."""


class GamesDataError(ValueError):
    """The mlgov file is absent or not as expected; the message names the file."""


@dataclass(frozen=True)
class GameFit:
    """One game's fitted frame model and how well it follows the measured curve."""

    name: str
    frame_ms_at_top: float
    """Median GPU time of a frame at the top clock. Units: ms."""
    unscalable_share: float
    """Share (0..1) of that time that does not scale with the GPU clock."""
    spread: float
    """σ of the frames' lognormal cost around the median."""
    cap_fps: float
    """Frame-rate cap: vsync, or the CPU's limit where lower. Units: FPS."""
    measured_fps: list[float]
    model_fps: list[float]
    curve_error_pct: float
    """Mean absolute relative error of the model's curve against the measured one. Units: %."""


def default_data_file() -> Path:
    """`../shared/data/mlgov/games-fps-vs-gpu-clock.csv` relative to the repository root."""
    return (Path(__file__).resolve().parents[2].parent / "shared" / "data" / "mlgov"
            / "games-fps-vs-gpu-clock.csv")


def load_curves(path: Path) -> tuple[FloatArray, dict[str, FloatArray]]:
    """GPU clocks (MHz) and, per game, the mean frame rate (FPS) at each at the top CPU clock."""
    try:
        with open(path, newline="") as f:
            rows = list(csv.DictReader(f))
    except OSError as exc:
        raise GamesDataError(f"{path}: cannot read: {exc.strerror or exc}") from None
    samples: dict[tuple[str, float], list[float]] = defaultdict(list)
    try:
        top_cpu = max(float(r["Fc"]) for r in rows)
        for r in rows:
            if float(r["Fc"]) == top_cpu:
                samples[(r["Game"], float(r["Fg"]))].append(float(r["Q"]))
                samples[(r["Game"], float(r["Fg_new"]))].append(float(r["Q_new"]))
    except (KeyError, ValueError) as exc:
        raise GamesDataError(f"{path}: unexpected content ({exc})") from None
    clocks = np.array(sorted({clock for _, clock in samples}))
    games = sorted({game for game, _ in samples})
    curves = {}
    for game in games:
        if all((game, c) in samples for c in clocks):
            curves[game] = np.array([np.mean(samples[(game, c)]) for c in clocks])
    if clocks.size < 2 or not curves:
        raise GamesDataError(f"{path}: no game measured at every GPU clock")
    return clocks, curves


_NODES, _WEIGHTS = np.polynomial.hermite_e.hermegauss(QUADRATURE_NODES)
_WEIGHTS = _WEIGHTS / _WEIGHTS.sum()


def model_fps(clocks_mhz: FloatArray, frame_ms_at_top: float, unscalable_share: float,
              spread: float, cap_fps: float) -> FloatArray:
    """Expected frame rate (FPS) at each clock of the game model (module docstring)."""
    scale = (1 - unscalable_share) * clocks_mhz[-1] / clocks_mhz + unscalable_share
    frame_ms = frame_ms_at_top * scale[:, None] * np.exp(spread * _NODES)[None, :]
    interval = np.maximum(1000.0 / cap_fps, frame_ms)
    result: FloatArray = 1000.0 / (interval @ _WEIGHTS)
    return result


def fit_game(name: str, clocks_mhz: FloatArray, fps: FloatArray) -> GameFit:
    """The game model closest (relative error) to the measured curve `fps` at `clocks_mhz`."""
    def unpack(x: FloatArray) -> tuple[float, float, float, float]:
        return float(np.exp(x[0])), float(x[1]), float(x[2]), float(x[3])

    def residuals(x: FloatArray) -> FloatArray:
        return model_fps(clocks_mhz, *unpack(x)) / fps - 1

    best = None
    cap0 = min(VSYNC_FPS, float(fps.max()) * 1.01)
    for share in (0.05, 0.3, 0.6):
        for spread in (0.05, 0.2, 0.4):
            for t_top in (0.6, 0.9, 1.1):
                x0 = np.array([np.log(1000.0 / cap0 * t_top), share, spread, cap0])
                result = least_squares(residuals, x0, bounds=(
                    [np.log(0.1), 0.0, 0.0, 1.0], [np.log(1000.0), 0.95, 1.0, VSYNC_FPS]))
                if best is None or result.cost < best.cost:
                    best = result
    assert best is not None
    params = unpack(best.x)
    curve = model_fps(clocks_mhz, *params)
    return GameFit(name=name, frame_ms_at_top=round(params[0], 4),
                   unscalable_share=round(params[1], 4), spread=round(params[2], 4),
                   cap_fps=round(params[3], 3), measured_fps=[round(float(v), 3) for v in fps],
                   model_fps=[round(float(v), 3) for v in curve],
                   curve_error_pct=round(float(np.mean(np.abs(curve / fps - 1))) * 100, 3))


def fit_games(path: Path) -> dict[str, Any]:
    """Every game of the mlgov file fitted, with provenance: the JSON of `govd sim fit-games`."""
    clocks, curves = load_curves(path)
    fits = [fit_game(name, clocks, fps) for name, fps in curves.items()]
    errors = [f.curve_error_pct for f in fits]
    return {
        "provenance": {
            "made_by": "govd sim fit-games",
            "source": f"{Path(path).name} (mlgov, OD-ML/MLGov_ext e23cc46), top CPU clock",
            "source_sha256": hashlib.sha256(Path(path).read_bytes()).hexdigest(),
            "median_curve_error_pct": round(float(np.median(errors)), 3),
            "max_curve_error_pct": round(float(np.max(errors)), 3),
        },
        "clocks_mhz": clocks.tolist(),
        "games": [asdict(f) for f in fits],
    }


def read_games(path: Path) -> tuple[FloatArray, list[GameFit]]:
    """Clocks and fitted games of a `fit-games` JSON file."""
    data = json.loads(Path(path).read_text())
    return np.array(data["clocks_mhz"], dtype=float), [GameFit(**g) for g in data["games"]]


def game_units(rng: np.random.Generator, table: LevelTable, minutes: float, game: GameFit,
               unit_variation: float = 0.0) -> Units:
    """Frames of `minutes` of a fitted game on `table`: complexity wandering with the game's
    spread (less `unit_variation`, the simulator's own per-frame variation, so the total is the
    fitted σ), its unscalable share, capped at its frame rate."""
    n = max(1, round(minutes * 60.0 * game.cap_fps))
    sigma = float(np.sqrt(max(game.spread**2 - unit_variation**2, 0.0)))
    complexity = np.exp(sigma * smooth_noise(rng, n, COMPLEXITY_TAU_FRAMES))
    time_at_max = game.frame_ms_at_top * complexity
    return Units(time_at_max_ms=time_at_max, memory_share=np.full(n, game.unscalable_share),
                 core_activity=np.full(n, 0.8), counters={"complexity": complexity},
                 busy_counter="render_busy", target_fps=game.cap_fps,
                 meta={"game": game.name})


def simulated_fps(time_ms: FloatArray, cap_fps: float) -> FloatArray:
    """Frame rate (FPS) per level of a sweep's frame times [U, L] under the cap."""
    result: FloatArray = 1000.0 / np.mean(np.maximum(1000.0 / cap_fps, time_ms), axis=0)
    return result
