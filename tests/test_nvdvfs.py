"""Sweep tables from the measured V100 / GTX 980 data (skipped where the data are absent)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from govd.cli import main
from govd.formats.sweep import read_sweep
from govd.sim.nvdvfs import NvDvfsError, default_data_dir, load_gtx980, load_v100, nvdvfs_sweep

DATA = default_data_dir()
needs_data = pytest.mark.skipif(not DATA.is_dir(), reason=f"nv-dvfs data absent ({DATA})")


@needs_data
@pytest.mark.needs_data
def test_v100_has_ten_core_levels_and_dcgm_counters() -> None:
    table = nvdvfs_sweep("v100", DATA, 0.05, seed=1)
    assert table.levels_mhz.size == 10 and table.mem_levels_mhz is None
    assert table.levels_mhz[0] == 405 and table.levels_mhz[-1] == 1380
    assert {"DRAMA", "FP32A", "SMACT", "SMOCC"} <= set(table.counters)
    assert table.meta["gpu"] == "v100" and table.idle_power_w == 40
    assert np.sum(table.time_ms[:, -1]) >= 0.05 * 60e3


@needs_data
@pytest.mark.needs_data
def test_each_launch_is_its_kernels_measurement_within_the_noise() -> None:
    data = load_v100(DATA)
    table = nvdvfs_sweep("v100", DATA, 0.05, seed=2)
    # a launch's time profile across levels matches exactly one measured kernel
    ratio = table.time_ms[:, None, :] / data.time_ms[None, :, :]
    spread = np.max(np.abs(np.log(ratio)), axis=2)
    assert np.all(spread.min(axis=1) < 0.06)
    kernel = spread.argmin(axis=1)
    assert np.count_nonzero(np.diff(kernel)) >= 1  # more than one phase
    assert np.mean(np.diff(kernel) == 0) > 0.9  # launches come in runs of one kernel


@needs_data
@pytest.mark.needs_data
def test_gtx980_levels_are_the_six_by_six_grid_where_time_and_power_exist() -> None:
    data = load_gtx980(DATA)
    assert data.levels_mhz.size == 36 and data.mem_levels_mhz is not None
    assert sorted(set(data.levels_mhz)) == [500, 600, 700, 800, 900, 1000]
    assert sorted(set(data.mem_levels_mhz)) == [500, 600, 700, 800, 900, 1000]
    assert np.all(np.isfinite(data.power_w)) and len(data.kernels) >= 15


@needs_data
@pytest.mark.needs_data
def test_from_nvdvfs_cli_writes_memory_clocks(tmp_path: Path) -> None:
    out = tmp_path / "gtx.csv"
    assert main(["sim", "from-nvdvfs", "--gpu", "gtx980", "--minutes", "0.01", "--seed", "3",
                 "-o", str(out)]) == 0
    table = read_sweep(out)
    assert table.mem_levels_mhz is not None and table.levels_mhz.size == 36
    assert table.meta["idle_power_w"] == "15" and "ipc" in table.counters


@needs_data
@pytest.mark.needs_data
def test_lowest_energy_clock_is_mostly_inside_the_range() -> None:
    table = nvdvfs_sweep("v100", DATA, 0.05, seed=4)
    best = np.argmin(table.time_ms * table.power_w, axis=1)
    assert np.mean((best > 0) & (best < table.levels_mhz.size - 1)) > 0.5


def test_missing_data_folder_is_a_clear_error(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(NvDvfsError, match="no such folder; --data names the folder"):
        nvdvfs_sweep("v100", tmp_path / "absent", 1.0)
    status = main(["sim", "from-nvdvfs", "--gpu", "v100", "--data", str(tmp_path),
                   "--minutes", "1", "-o", str(tmp_path / "x.csv")])
    assert status == 2 and "v100-dvfs-real-profile.csv" in capsys.readouterr().err
