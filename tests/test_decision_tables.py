"""The tables bench/bench_decisions.py judges decisions on beyond nv-dvfs and hkbu
(bench/decision_tables.py): a coarse grid carried onto a fine one, a grid thinned, a fitted
level table sampled at 100 clocks, the SYnergy and dlbench files read whole, and a real GPU's
two sweeps made into the phased job's units, and the training stages made up from physics."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from govd.sim.levels import level_table
from govd.sim.nvdvfs import GpuData

REPO = Path(__file__).resolve().parent.parent
DATA = REPO.parent / "shared" / "data"
sys.path.insert(0, str(REPO / "bench"))

from decision_tables import (  # noqa: E402
    H200_SWEEPS,
    RESULTS,
    fine_grid,
    fine_level_table,
    h200_tables,
    load_dlbench,
    load_synergy,
    phased_sweeps,
    stage_tables,
    thin,
)

from govd.formats.sweep import SweepTable  # noqa: E402


def power_law_data() -> GpuData:
    levels = np.array([400.0, 800.0, 1200.0, 1600.0])
    time_ms = np.array([10.0 * 1600.0 / levels, np.full(4, 7.0)])  # compute- and memory-bound
    power_w = np.array([50.0 * (levels / 1600.0) ** 2, 30.0 * (levels / 1600.0)])
    return GpuData(levels, None, time_ms, power_w, {"sm": np.ones((2, 4))}, ["a", "b"], 5.0,
                   ("made up",))


def test_a_coarse_grid_carried_onto_a_fine_one_keeps_power_laws_and_its_ends() -> None:
    data = power_law_data()
    fine = fine_grid(data, step_mhz=15.0)
    f = fine.levels_mhz
    assert f[0] == 400.0 and f[-1] == 1600.0 and f.size == 81
    assert np.allclose(np.diff(f), 15.0)
    # log-linear in log clock: a power law between measured levels is carried exactly
    assert np.allclose(fine.time_ms[0], 10.0 * 1600.0 / f)
    assert np.allclose(fine.time_ms[1], 7.0)
    assert np.allclose(fine.power_w[0], 50.0 * (f / 1600.0) ** 2)
    assert fine.counters["sm"].shape == (2, 81)
    with pytest.raises(ValueError, match="one clock domain"):
        fine_grid(GpuData(data.levels_mhz, data.levels_mhz, data.time_ms, data.power_w, {},
                          data.kernels, 5.0, ()))


def test_a_thinned_grid_keeps_the_top_level_and_every_nth_below_it() -> None:
    data = fine_grid(power_law_data(), step_mhz=15.0)
    thinned = thin(data, 12)
    assert thinned.levels_mhz[-1] == 1600.0
    assert np.allclose(np.diff(thinned.levels_mhz), 12 * 15.0)
    assert thinned.time_ms.shape == (2, thinned.levels_mhz.size)


def test_a_fitted_table_sampled_at_100_clocks_agrees_with_it_at_its_own_levels() -> None:
    table = level_table("mobile")
    fine = fine_level_table(table, 100)
    assert fine.freqs_mhz.size == 100
    assert (fine.freqs_mhz[0], fine.freqs_mhz[-1]) == (table.freqs_mhz[0], table.freqs_mhz[-1])
    for end in (0, -1):
        assert fine.core_power_w[end] == pytest.approx(table.core_power_w[end])
        assert fine.scalable_time[end] == pytest.approx(table.scalable_time[end])
    assert np.all(np.diff(fine.core_power_w) > 0), "more clock, more dynamic power"


@pytest.mark.skipif(not (DATA / "synergy-train").is_dir(), reason="no SYnergy data beside")
def test_synergy_kernels_are_read_at_every_clock_with_positive_times_and_powers() -> None:
    data = load_synergy(DATA / "synergy-train", 40.0)
    assert data.levels_mhz.size >= 100 and np.all(np.diff(data.levels_mhz) > 0)
    assert data.time_ms.shape == data.power_w.shape == (len(data.kernels), data.levels_mhz.size)
    assert np.all(data.time_ms > 0) and np.all(data.power_w > 0)
    assert data.counters and all(v.shape == data.time_ms.shape for v in data.counters.values())


@pytest.mark.skipif(not (DATA / "dlbench").is_dir(), reason="no dlbench data beside")
def test_a_training_file_becomes_one_network_at_pairs_sorted_by_core_then_memory() -> None:
    data = load_dlbench(DATA / "dlbench" / "gtx980-resnet.csv", 15.0)
    assert data.mem_levels_mhz is not None and data.time_ms.shape[0] == 1
    order = np.lexsort((data.mem_levels_mhz, data.levels_mhz))
    assert np.array_equal(order, np.arange(data.levels_mhz.size))
    assert np.all(data.time_ms > 0) and np.all(data.power_w > 0)


def two_works() -> list[SweepTable]:
    levels = np.array([500.0, 1000.0, 2000.0])
    # work 0: 20 ms a frame at the top, time as 1/f; work 1: 5 ms, flat; frames differ by row
    rows = np.arange(1.0, 5.0)[:, None]
    slow = SweepTable(levels_mhz=levels, time_ms=20.0 * 2000.0 / levels * (1 + rows / 100),
                      power_w=np.tile([100.0, 200.0, 400.0], (4, 1)),
                      counters={"c": np.zeros((4, 3)), "only_here": np.ones((4, 3))},
                      meta={"idle_power_w": "50"})
    flat = SweepTable(levels_mhz=levels, time_ms=np.full((4, 3), 5.0) * (1 + rows / 100),
                      power_w=np.tile([150.0, 200.0, 300.0], (4, 1)),
                      counters={"c": np.ones((4, 3))}, meta={"idle_power_w": "60"})
    return [slow, flat]


def test_the_phased_units_take_turns_and_fill_50_ms_with_measured_frames() -> None:
    table = phased_sweeps(two_works(), "made-up", units=40, phase_units=10)
    work = (np.arange(40) // 10) % 2  # 10 units of each in turn
    assert table.path == "made-up" and table.time_ms.shape == (40, 3)
    assert list(table.counters) == ["c"]  # only counters both works measured
    np.testing.assert_array_equal(table.counters["c"][:, 0], work)
    # ~50 ms of each: 2 frames of ~20.5 ms, 10 of ~5 ms; each frame one of the measured rows
    top = table.time_ms[:, -1]
    assert np.all((top[work == 0] >= 40.4 - 1e-9) & (top[work == 0] <= 40.0 * 1.04 + 1e-9))
    assert np.all((top[work == 1] >= 50.5) & (top[work == 1] <= 50.0 * 1.04 + 1e-9))
    np.testing.assert_allclose(table.power_w[work == 0], [[100.0, 200.0, 400.0]] * 20)
    assert float(table.meta["idle_power_w"]) == 50.0
    again = phased_sweeps(two_works(), "made-up", units=40, phase_units=10)
    np.testing.assert_array_equal(again.time_ms, table.time_ms)  # seeded
    other = two_works()
    other[1].levels_mhz = np.array([500.0, 1000.0, 1900.0])
    with pytest.raises(ValueError, match="different levels"):
        phased_sweeps(other, "x", units=4, phase_units=2)


def test_the_h200_tables_are_skipped_with_a_message_where_the_sweeps_are_absent(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert h200_tables(tmp_path, quick=True) == []
    assert "skipping the H200 tables" in capsys.readouterr().err


def test_the_h200_tables_come_from_the_committed_sweeps_on_both_grids() -> None:
    if not all((RESULTS / name).exists() for name in H200_SWEEPS):
        pytest.skip("the H200 sweeps are not in bench/results")
    coarse, fine = h200_tables(RESULTS, quick=True)
    assert (coarse.path, fine.path) == ("h200-phased", "h200-phased-fine")
    assert coarse.units == fine.units == 300
    assert coarse.levels_mhz.size == 29 and fine.levels_mhz.size == 110
    assert np.all(np.diff(fine.levels_mhz) == pytest.approx(15.0))
    np.testing.assert_allclose(fine.time_ms[:, [0, -1]], coarse.time_ms[:, [0, -1]])


def test_stage_tables_are_training_stages_whose_time_grows_at_most_as_one_over_f() -> None:
    """The made-up stage tables: NVML-like grids ending at the top clock, time within 1/f of
    the top (a unit's 1 % noise aside) and power falling with the clock, the clock
    f_top / 1.1 inside a 10 % limit for the compute-bound micro-batches, the optimiser and
    exchange only in `-mixed`, and ``seed`` drawing other units on the same grids."""
    tables = {t.path: t for t in stage_tables(quick=True)}
    assert set(tables) == {"stage-a40", "stage-a100", "stage-h100", "stage-a100-mixed"}
    steps = {"stage-a40": (60, 15.0, 1740.0), "stage-a100": (38, 15.0, 1410.0),
             "stage-h100": (190, 5.0, 1980.0), "stage-a100-mixed": (38, 15.0, 1410.0)}
    for name, t in tables.items():
        clocks, step, top = steps[name]
        f = t.levels_mhz
        assert t.units == 300 and f.size == clocks and f[-1] == top
        assert np.allclose(np.diff(f), step)
        ratio = t.time_ms / t.time_ms[:, -1:]
        noise = np.exp(5 * 0.01 * np.sqrt(2.0))  # five deviations of a ratio's noise
        assert np.all(ratio <= f[-1] / f * noise)
        power = np.median(t.power_w, axis=0)
        assert np.all(np.diff(power[::-10]) < 0.0)  # every tenth clock down from the top
        compute = t.counters["sm_active"][:, -1] > 0.8
        at = int(np.searchsorted(f, f[-1] / 1.1))
        assert np.median(ratio[compute, at]) < 1.1
        extra = (~compute).mean()
        assert (0.1 < extra < 0.5) if name.endswith("-mixed") else extra == 0.0
    again = {t.path: t for t in stage_tables(quick=True)}
    other = {t.path: t for t in stage_tables(quick=True, seed=1)}
    for name, t in tables.items():
        assert np.array_equal(again[name].time_ms, t.time_ms)
        assert np.array_equal(other[name].levels_mhz, t.levels_mhz)
        assert not np.array_equal(other[name].time_ms, t.time_ms)
