"""Workload scenarios of the simulated GPU: what each unit of work (a frame, a kernel launch) asks.

A scenario turns a seed, a level table and a duration into `Units`: per unit, the GPU time it
takes at the table's highest level, the share of that time that does not scale with the core
clock (memory stalls), the core activity while it runs, and its frequency-independent counters.

Graphics (after seed 000 §III and §V): each frame has a complexity C in 1..64 (the seed's number of
cubes). C drives the counters linearly and sets the lowest clock at which the frame just fits its
vsync period, `need`: linear in C between f_min·R^x_lo (C = 1) and f_min·R^x_hi (C = 64), R the
table's f_max/f_min. Positions x are in the table's own log-range, so "light" means "fits at the
lowest level" on every table, and "heavy" "needs the top levels". Frame time at clock f is then
t(f) = t_max·((1 − m)·S(f) + m·M(f)) with t(need) = the frame period, S and M the table's scalable
and memory time curves (`govd.sim.levels`; 1/f and 1 on the hand-set tables).

- `rendering-test`: seed §V-C: 5 s of random complexity, then the sawtooth C = 1, 2, …, 64,
  repeated (the seed also changed the clock each tooth; here the clock is the governor's to pick).
- `art3`: the seed's memory-bound custom app (pyramids in one buffer): 60 % of the time does not
  scale with the clock, complexity wanders slowly.
- `game-light`, `game-medium`, `game-heavy`: phases (menus, exploring, fights, cut-scenes) of random
  length with slowly varying complexity and short bursts (explosions, effects).
- `gpgpu`: see `govd.sim.compute`.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache
from importlib import resources

import numpy as np

from govd.sim.levels import FloatArray, LevelTable

TARGET_FPS = 60.0
MAX_COMPLEXITY = 64.0


@dataclass
class Units:
    """What each unit of a scenario asks of the GPU, arrays of shape [U]."""

    time_at_max_ms: FloatArray
    """GPU time at the table's highest level. Units: ms."""
    memory_share: FloatArray
    """Share (0..1) of the time at the highest level that does not scale with the core clock."""
    core_activity: FloatArray
    """Share (0..1) of the cores switching while the scalable part runs."""
    counters: dict[str, FloatArray]
    """Frequency-independent counters per unit (the cycle counter is added per level later)."""
    busy_counter: str
    """Name of the frequency-dependent counter: cycles the engine is busy."""
    target_fps: float | None
    """Frame-rate cap (vsync), or None for throughput work."""
    meta: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Phase:
    """One kind of stretch of a game."""

    complexity: float
    """Mean complexity (1..64)."""
    spread: float
    """Standard deviation of the slow wander of complexity around the mean."""
    mean_s: float
    """Mean duration. Units: s."""


def smooth_noise(rng: np.random.Generator, n: int, tau_units: float) -> FloatArray:
    """Zero-mean, unit-variance noise correlated over about `tau_units` units (AR(1)-like)."""
    taps = max(1, int(4 * tau_units))
    kernel = np.exp(-np.arange(taps) / max(tau_units, 1e-9))
    kernel /= np.sqrt(np.sum(kernel**2))
    white = rng.standard_normal(n + taps - 1)
    return np.convolve(white, kernel, mode="valid")


def phase_stream(rng: np.random.Generator, weights: FloatArray, mean_units: FloatArray,
                 n: int, min_units: int) -> np.ndarray:
    """Phase of each of `n` units: phases drawn by weight, with exponential lengths."""
    expected = n / float(np.dot(weights / weights.sum(), mean_units)) * 2 + 8
    picks = rng.choice(weights.size, size=int(expected), p=weights / weights.sum())
    lengths = np.maximum(min_units, rng.exponential(mean_units[picks])).astype(np.int64)
    while lengths.sum() < n:  # rare: a run of short phases
        lengths = np.concatenate([lengths, lengths])
        picks = np.concatenate([picks, picks[::-1]])
    return np.repeat(picks, lengths)[:n]


def burst_mask(rng: np.random.Generator, n: int, rate_per_unit: float,
               length_units: tuple[float, float]) -> np.ndarray:
    """Boolean mask of units inside a burst; bursts start as a Poisson process."""
    count = rng.poisson(rate_per_unit * n)
    starts = rng.integers(0, n, count)
    ends = np.minimum(n, starts + rng.uniform(*length_units, count).astype(np.int64) + 1)
    edges = np.zeros(n + 1, dtype=np.int64)
    np.add.at(edges, starts, 1)
    np.add.at(edges, ends, -1)
    return np.cumsum(edges[:n]) > 0


def graphics_units(rng: np.random.Generator, table: LevelTable, complexity: FloatArray,
                   memory_share: FloatArray, core_activity: float,
                   need_position: tuple[float, float], fps: float = TARGET_FPS) -> Units:
    """Frames of the given complexity on `table` (see the module docstring for the mapping)."""
    f = table.freqs_mhz
    ratio = f[-1] / f[0]
    need_lo, need_hi = (f[0] * ratio**x for x in need_position)
    need_mhz = need_lo + (need_hi - need_lo) * (complexity - 1) / (MAX_COMPLEXITY - 1)
    period_ms = 1000.0 / fps
    time_at_max = period_ms / ((1 - memory_share) * table.scalable_at(need_mhz)
                               + memory_share * table.memory_at(need_mhz))
    n = complexity.size
    counters = {
        # vertex-shader work and pixels failing the Z test follow the content, not the clock
        "vs_active": complexity * 1.2e4 * rng.lognormal(0.0, 0.02, n),
        "z_fail": complexity * 3.0e3 * rng.lognormal(0.0, 0.06, n),
    }
    return Units(time_at_max_ms=time_at_max, memory_share=memory_share,
                 core_activity=np.clip(core_activity * rng.lognormal(0.0, 0.05, n), 0.05, 1.0),
                 counters=counters, busy_counter="render_busy", target_fps=fps)


def _frames(minutes: float, fps: float = TARGET_FPS) -> int:
    return max(1, round(minutes * 60.0 * fps))


def rendering_test(rng: np.random.Generator, table: LevelTable, minutes: float) -> Units:
    """Seed 000's RenderingTest: 5 s random complexity, then the 1..64 sawtooth, compute-bound."""
    n = _frames(minutes)
    random_frames = min(n, int(5 * TARGET_FPS))
    complexity = np.empty(n)
    complexity[:random_frames] = rng.integers(1, 65, random_frames)
    complexity[random_frames:] = np.arange(n - random_frames) % 64 + 1
    units = graphics_units(rng, table, complexity, np.full(n, 0.08), 0.9, (-1.2, 1.15))
    units.meta["sawtooth_start_unit"] = str(random_frames)
    return units


def art3(rng: np.random.Generator, table: LevelTable, minutes: float) -> Units:
    """Seed 000's Art3: memory-bound (60 % of the time does not scale), slowly wandering load."""
    n = _frames(minutes)
    complexity = np.clip(32 + 14 * smooth_noise(rng, n, 3 * TARGET_FPS), 1, MAX_COMPLEXITY)
    memory_share = np.clip(0.6 + 0.03 * rng.standard_normal(n), 0.4, 0.8)
    return graphics_units(rng, table, complexity, memory_share, 0.6, (-0.8, 0.9))


GAME_DATA = "govd.sim.gamedata"
SATURATED = 0.95
"""A measured game reaches its cap at the lowest clock where it makes 95 % of it."""


@cache
def game_calibration() -> dict[str, tuple[float, float]]:
    """Per class of the measured mlgov games (`govd sim fit-games`, shipped as
    govd/sim/gamedata/mlgov.json): the median unscalable share and frame spread σ. Classes by the
    lowest clock reaching the cap: `light` the lowest, `medium` the next two, `heavy` higher."""
    data = json.loads(resources.files(GAME_DATA).joinpath("mlgov.json").read_text())
    classes: dict[str, list[tuple[float, float]]] = {"light": [], "medium": [], "heavy": []}
    for game in data["games"]:
        fps = np.array(game["measured_fps"])
        reach = int(np.argmax(fps >= SATURATED * game["cap_fps"]))
        name = "light" if reach == 0 else "medium" if reach <= 2 else "heavy"
        classes[name].append((game["unscalable_share"], game["spread"]))
    return {name: (float(np.median([m for m, _ in games])), float(np.median([s for _, s in games])))
            for name, games in classes.items()}


@dataclass(frozen=True)
class Game:
    """A game: its phases, their weights, its bursts and where its frames need the clock."""

    phases: tuple[Phase, ...]
    weights: tuple[float, ...]
    need_position: tuple[float, float]
    burst_rate_hz: float
    burst_gain: float
    core_activity: float
    mlgov_class: str
    """Which class of the measured games sets its unscalable share and frame spread."""

    def units(self, rng: np.random.Generator, table: LevelTable, minutes: float) -> Units:
        """Frames of `minutes` of this game on `table`."""
        n = _frames(minutes)
        mean_frames = np.array([p.mean_s for p in self.phases]) * TARGET_FPS
        phase = phase_stream(rng, np.array(self.weights), mean_frames, n, int(TARGET_FPS))
        mean = np.array([p.complexity for p in self.phases])[phase]
        spread = np.array([p.spread for p in self.phases])[phase]
        wander = smooth_noise(rng, n, 0.5 * TARGET_FPS)
        share, frame_spread = game_calibration()[self.mlgov_class]
        jitter = rng.lognormal(0.0, frame_spread, n)
        bursts = burst_mask(rng, n, self.burst_rate_hz / TARGET_FPS,
                            (0.15 * TARGET_FPS, 0.8 * TARGET_FPS))
        complexity = (mean + spread * wander) * jitter * np.where(bursts, self.burst_gain, 1.0)
        complexity = np.clip(complexity, 1.0, MAX_COMPLEXITY)
        memory_share = np.clip(share + 0.03 * rng.standard_normal(n), 0.02, 0.9)
        return graphics_units(rng, table, complexity, memory_share, self.core_activity,
                              self.need_position)


_MENU = Phase(complexity=8, spread=2, mean_s=8)
GAMES: dict[str, Game] = {
    "game-light": Game(
        phases=(_MENU, Phase(24, 6, 25), Phase(38, 8, 12)),
        weights=(0.2, 0.5, 0.3), need_position=(-2.0, -0.15),
        burst_rate_hz=0.1, burst_gain=1.4, core_activity=0.7, mlgov_class="light"),
    "game-medium": Game(
        phases=(_MENU, Phase(30, 6, 25), Phase(42, 8, 15)),
        weights=(0.1, 0.5, 0.4), need_position=(-0.6, 0.85),
        burst_rate_hz=0.15, burst_gain=1.35, core_activity=0.8, mlgov_class="medium"),
    "game-heavy": Game(
        phases=(Phase(30, 4, 10), Phase(40, 6, 30), Phase(50, 6, 15)),
        weights=(0.15, 0.5, 0.35), need_position=(0.0, 1.1),
        burst_rate_hz=0.2, burst_gain=1.3, core_activity=0.9, mlgov_class="heavy"),
}

ScenarioFn = Callable[[np.random.Generator, LevelTable, float], Units]
GRAPHICS: dict[str, tuple[str, ScenarioFn]] = {
    "rendering-test": ("seed 000 RenderingTest: 5 s random complexity, then the 1..64 sawtooth",
                       rendering_test),
    "art3": ("seed 000 Art3: memory-bound, slowly wandering complexity", art3),
    "game-light": ("light game: 60 FPS at the lowest levels", GAMES["game-light"].units),
    "game-medium": ("medium game: needs the middle levels", GAMES["game-medium"].units),
    "game-heavy": ("heavy game: needs the top levels, bursts miss even there",
                   GAMES["game-heavy"].units),
}
