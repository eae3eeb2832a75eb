"""The simulated GPU's sweep tables: deterministic, physically sane, scenarios as advertised."""

from __future__ import annotations

import numpy as np
import pytest

from govd.formats.sweep import SweepTable
from govd.sim.gpu import SCENARIOS, simulate
from govd.sim.levels import LEVEL_TABLES

PERIOD_MS = 1000.0 / 60.0


def _energy_optimal_level(table: SweepTable) -> np.ndarray:
    """Per unit, the level of least energy that meets 60 FPS (the fastest where none does)."""
    time, power = table.time_ms, table.power_w
    if "target_fps" not in table.meta:
        return np.argmin(power * time, axis=1)
    energy = power * time + table.idle_power_w * np.maximum(0.0, PERIOD_MS - time)
    meets = time <= PERIOD_MS
    best = np.argmin(np.where(meets, energy, np.inf), axis=1)
    return np.where(meets.any(axis=1), best, time.shape[1] - 1)


def test_same_seed_gives_the_same_table_and_another_seed_does_not() -> None:
    a = simulate("game-medium", "seed9", 0.2, seed=5)
    b = simulate("game-medium", "seed9", 0.2, seed=5)
    c = simulate("game-medium", "seed9", 0.2, seed=6)
    np.testing.assert_array_equal(a.time_ms, b.time_ms)
    np.testing.assert_array_equal(a.counters["z_fail"], b.counters["z_fail"])
    assert not np.array_equal(a.time_ms, c.time_ms)


@pytest.mark.parametrize("levels", sorted(LEVEL_TABLES))
@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_time_falls_and_power_rises_with_the_clock(scenario: str, levels: str) -> None:
    table = simulate(scenario, levels, 0.1, seed=1)
    # noise is per (unit, level): compare each unit's step from level to level, median over units
    assert np.all(np.median(np.diff(np.log(table.time_ms), axis=1), axis=0) < 0)
    assert np.all(np.median(np.diff(np.log(table.power_w), axis=1), axis=0) > 0)
    assert table.busy is not None and np.all((table.busy > 0) & (table.busy <= 1))
    assert table.time_ms.shape == (table.units, LEVEL_TABLES[levels].core_levels().freqs_mhz.size)


def test_power_stays_in_each_tables_realistic_range() -> None:
    for name, (low_w, high_w) in {"seed9": (0.3, 3.0), "desktop": (10, 260),
                                  "datacenter": (60, 700)}.items():
        table = simulate("rendering-test", name, 0.2, seed=2)
        assert low_w <= table.idle_power_w < table.power_w.min()
        assert table.power_w.max() <= high_w


def test_voltage_rises_and_is_convex_near_the_top() -> None:
    for table in LEVEL_TABLES.values():
        if table.volts is None:  # fitted: voltage relative only, as the data give it
            continue
        volts = table.volts
        assert np.all(np.diff(volts) > 0)
        slopes = np.diff(volts) / np.diff(table.freqs_mhz)
        assert slopes[-1] > slopes[0]


HAND_SET = sorted(name for name, t in LEVEL_TABLES.items() if not t.provenance.get("fit"))


# on fitted tables the optimum is wherever the measured hardware puts it (on the boost-only
# GeForce grids often the top): that is a finding, reported by bench_sim, not a property to pin
@pytest.mark.parametrize("levels", HAND_SET)
@pytest.mark.parametrize("scenario", ["game-heavy", "game-medium", "gpgpu"])
def test_energy_optimal_level_is_neither_always_lowest_nor_always_highest(
        scenario: str, levels: str) -> None:
    best = _energy_optimal_level(simulate(scenario, levels, 0.5, seed=3))
    top = LEVEL_TABLES[levels].core_levels().freqs_mhz.size - 1
    assert np.mean(best == 0) < 0.5
    assert np.mean(best == top) < 0.5
    assert np.unique(best).size >= min(3, (top + 1) // 3)  # 2 of the mobile table's 6


@pytest.mark.parametrize("levels", sorted(LEVEL_TABLES))
def test_light_game_reaches_60_fps_at_the_lowest_level(levels: str) -> None:
    table = simulate("game-light", levels, 0.5, seed=4)
    # the measured light games' frame spread (σ ≈ 0.12, govd/sim/gamedata) lets a few frames miss
    assert np.mean(table.time_ms[:, 0] <= PERIOD_MS) > 0.95


@pytest.mark.parametrize("levels", sorted(LEVEL_TABLES))
def test_heavy_game_needs_the_top_levels_for_60_fps(levels: str) -> None:
    table = simulate("game-heavy", levels, 0.5, seed=4)
    n_levels = table.levels_mhz.size
    assert np.mean(table.time_ms[:, 0] <= PERIOD_MS) < 0.02
    assert np.mean(table.time_ms[:, -1] <= PERIOD_MS) > 0.7
    lowest_meeting = np.argmax(table.time_ms <= PERIOD_MS, axis=1)
    assert np.median(lowest_meeting) >= (2 * n_levels) // 3 - 1


def test_art3_is_less_frequency_sensitive_than_rendering_test() -> None:
    def slowdown(scenario: str) -> float:
        table = simulate(scenario, "seed9", 0.5, seed=7)
        return float(np.median(table.time_ms[:, 0] / table.time_ms[:, -1]))

    assert slowdown("art3") < slowdown("rendering-test") - 0.5


def test_rendering_test_runs_the_sawtooth_after_five_random_seconds() -> None:
    table = simulate("rendering-test", "seed9", 1.0, seed=8)
    start = int(table.meta["sawtooth_start_unit"])
    assert start == 300
    vs = table.counters["vs_active"].mean(axis=1)
    tooth = vs[start:start + 64]
    assert np.corrcoef(np.arange(64), tooth)[0, 1] > 0.99
    assert vs[start + 64] < vs[start + 63] / 10
    # frame time grows with complexity at every level within a tooth
    assert np.corrcoef(np.arange(64), table.time_ms[start:start + 64, 0])[0, 1] > 0.99


def test_complexity_counters_do_not_depend_on_the_clock_but_busy_cycles_do() -> None:
    table = simulate("game-medium", "seed9", 0.5, seed=9)
    freq = np.broadcast_to(table.levels_mhz, table.time_ms.shape).ravel()
    for name in ("vs_active", "z_fail"):
        assert abs(np.corrcoef(freq, table.counters[name].ravel())[0, 1]) < 0.1
    ratio = table.counters["render_busy"][:, -1] / table.counters["render_busy"][:, 0]
    assert np.median(ratio) > 1.05


def test_metadata_names_scenario_seed_levels_and_target() -> None:
    table = simulate("art3", "desktop", 0.05, seed=11)
    assert table.meta["scenario"] == "art3" and table.meta["seed"] == "11"
    assert table.meta["levels"] == "desktop" and table.meta["target_fps"] == "60"
    assert table.idle_power_w == LEVEL_TABLES["desktop"].idle_power_w
    assert len(table.meta["voltage_v"].split()) == 16
    assert "target_fps" not in simulate("gpgpu", "seed9", 0.05).meta


def test_unknown_scenario_and_level_table_name_the_known_ones() -> None:
    with pytest.raises(KeyError, match="game-heavy"):
        simulate("doom", "seed9", 1)
    with pytest.raises(KeyError, match="datacenter"):
        simulate("art3", "laptop", 1)


def test_a_faster_level_is_not_slower_by_noise_for_the_same_frame() -> None:
    # seed9's top two levels are 4.5 % apart: with 3 % noise per (frame, level) the slower one
    # was faster for many frames, which only an oracle reading the noise could exploit
    table = simulate("game-heavy", "seed9", 2.0, seed=11)
    assert np.mean(np.diff(table.time_ms, axis=1) > 0) < 1e-3


def test_frame_variation_is_common_to_every_level() -> None:
    table = simulate("game-heavy", "seed9", 1.0, seed=12)
    # each unit's step from one level to the next varies by the per-level noise only (0.5 %),
    # while the frames themselves vary far more (complexity and the 3 % per-unit variation)
    steps = np.diff(np.log(table.time_ms), axis=1)
    assert np.std(steps - np.median(steps, axis=0), axis=0).max() < 0.01
    assert np.std(np.log(table.time_ms[:, -1])) > 0.05
