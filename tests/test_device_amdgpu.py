"""amdgpu: pp_dpm_sclk parsing, manual-first writes, fine-grained parts, voltages, restore."""

from __future__ import annotations

import errno

import numpy as np
import pytest

from govd.device.amdgpu import AmdgpuDevice, parse_dpm_levels, parse_voltage_curve
from govd.device.base import WriteRefused
from tests.sysfs_fixtures import NAVI21_OD, amdgpu_navi21, amdgpu_polaris

DEV = "devices/pci0000:00/0000:03:00.0/drm/card1/device"
CARD = "devices/pci0000:00/0000:03:00.0/drm/card1"
PERF = f"{DEV}/power_dpm_force_performance_level"
SCLK = f"{DEV}/pp_dpm_sclk"


@pytest.mark.parametrize("unit", ["Mhz", "MHz"])
def test_discrete_table_parses_levels_and_running_index(unit):
    levels, index, current, fine = parse_dpm_levels(
        f"0: 300{unit}\n1: 600{unit} *\n2: 900{unit}\n3: 1100{unit}\n")
    assert (levels, index, current, fine) == ([300, 600, 900, 1100], 1, 600, False)


def test_deep_sleep_line_is_no_level():
    levels, index, current, _ = parse_dpm_levels(
        "S: 19Mhz *\n0: 300Mhz\n1: 600Mhz\n2: 900Mhz\n3: 1100Mhz")
    assert levels == [300, 600, 900, 1100] and index is None and current == 19


def test_fine_grained_middle_line_is_the_running_clock_not_a_level():
    levels, index, current, fine = parse_dpm_levels("0: 500Mhz \n1: 1283Mhz *\n2: 2660Mhz ")
    assert (levels, index, current, fine) == ([500, 2660], None, 1283, True)


def test_garbage_table_is_refused_with_its_text():
    with pytest.raises(ValueError, match="no clock levels"):
        parse_dpm_levels("nothing here")


def test_manual_is_written_before_the_level_index(tmp_path):
    path, kernel = amdgpu_polaris(tmp_path)
    AmdgpuDevice(path, tmp_path, kernel).set_level(1150)
    assert kernel.writes == [(PERF, "manual"), (SCLK, "3")]


def test_level_index_refused_unless_manual(tmp_path):
    path, kernel = amdgpu_polaris(tmp_path)
    kernel.inject[path / "device/power_dpm_force_performance_level"] = errno.EACCES
    with pytest.raises(WriteRefused):
        AmdgpuDevice(path, tmp_path, kernel).set_level(1150)
    with pytest.raises(OSError) as info:
        kernel.write_text(path / "device/pp_dpm_sclk", "3")
    assert info.value.errno == errno.EINVAL


def test_nothing_written_when_the_level_already_runs(tmp_path):
    path, kernel = amdgpu_polaris(tmp_path, current=5, perf_level="manual")
    AmdgpuDevice(path, tmp_path, kernel).set_level(1257)
    assert kernel.writes == []


def test_read_gives_running_clock_busy_and_average_power(tmp_path):
    path, kernel = amdgpu_polaris(tmp_path, current=2, unit="MHz")
    reading = AmdgpuDevice(path, tmp_path, kernel).read()
    assert (reading.freq_mhz, reading.busy, reading.power_w) == (900, 0.37, 45.0)


def test_restore_writes_auto_back(tmp_path):
    path, kernel = amdgpu_polaris(tmp_path)
    device = AmdgpuDevice(path, tmp_path, kernel)
    device.set_level(300)
    device.set_level(1366)
    kernel.forget_writes()
    device.restore()
    device.restore()
    assert kernel.writes == [(PERF, "auto")]


def test_restore_puts_back_a_level_another_tool_had_forced(tmp_path):
    path, kernel = amdgpu_polaris(tmp_path, current=6, perf_level="manual")
    device = AmdgpuDevice(path, tmp_path, kernel)
    assert "another tool" in device.controllable().reason
    device.set_level(300)
    saved = device.save()
    kernel.forget_writes()
    AmdgpuDevice.from_saved(saved, tmp_path, kernel).restore()
    assert kernel.writes == [(SCLK, "6")]


def test_fine_grained_part_offers_min_and_max_only(tmp_path):
    path, kernel = amdgpu_navi21(tmp_path)
    device = AmdgpuDevice(path, tmp_path, kernel)
    assert list(device.levels_mhz) == [500, 2660]
    assert device.read().freq_mhz == 1283
    device.set_level(2000)
    assert kernel.writes == [(PERF, "manual"), (SCLK, "1")]
    assert device.read().freq_mhz == 2660
    kernel.forget_writes()
    device.set_level(2600)
    assert kernel.writes == []


def test_polaris_volts_come_from_od_sclk(tmp_path):
    path, kernel = amdgpu_polaris(tmp_path)
    volts = AmdgpuDevice(path, tmp_path, kernel).volts_by_level()
    assert volts is not None
    assert (volts[0], volts[-1]) == (pytest.approx(0.75), pytest.approx(1.15))


def test_vddc_curve_is_interpolated_at_the_levels(tmp_path):
    assert parse_voltage_curve(NAVI21_OD) == [(500, 0.7), (1580, 0.85), (2660, 1.15)]
    path, kernel = amdgpu_navi21(tmp_path)
    volts = AmdgpuDevice(path, tmp_path, kernel).volts_by_level()
    np.testing.assert_allclose(volts, [0.7, 1.15])


def test_volts_unknown_without_overdrive_table(tmp_path):
    path, kernel = amdgpu_polaris(tmp_path)
    (path / "device/pp_od_clk_voltage").unlink()
    assert AmdgpuDevice(path, tmp_path, kernel).volts_by_level() is None


def test_restore_of_a_forced_level_holds_though_the_gpu_sleeps_at_the_read_back(tmp_path):
    """Newer kernels mark an idle GPU's deep-sleep line ("S: 19Mhz *") instead of a level:
    the forced level put back cannot be read then, and restore must not call that a failure
    (the daemon would keep the device in the state file and exit 1)."""
    path, kernel = amdgpu_polaris(tmp_path, current=6, perf_level="manual")
    device = AmdgpuDevice(path, tmp_path, kernel)
    device.set_level(300)
    sclk = kernel.rules[path / "device/pp_dpm_sclk"]

    def asleep(k, p, value):
        return "S: 19Mhz *\n" + sclk(k, p, value).replace(" *", "")

    kernel.rules[path / "device/pp_dpm_sclk"] = asleep
    kernel.forget_writes()
    device.restore()
    assert kernel.writes == [(SCLK, "6")]
