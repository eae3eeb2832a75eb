"""amdgpu on fixture cards of each class whose kernel model enforces the driver's rules: discrete
DPM levels, overdrive pins on discrete GPUs and APUs, parts that offer only min and max, RDNA4."""

from __future__ import annotations

import errno
import logging

import numpy as np
import pytest

from govd.device.amdgpu import AmdgpuDevice
from govd.device.amdgpu_modes import MAX_OD_LEVELS, od_grid_mhz
from govd.device.base import DeviceError, WriteRefused
from tests.amdgpu_cards import hand_written
from tests.sysfs_fixtures import amdgpu_navi21, amdgpu_polaris

DEV = "devices/pci0000:00/0000:03:00.0/drm/card1/device"
PERF = f"{DEV}/power_dpm_force_performance_level"
SCLK = f"{DEV}/pp_dpm_sclk"
OD = f"{DEV}/pp_od_clk_voltage"


def tree_bytes(root):
    return {p.relative_to(root): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file() and not p.is_symlink()}


# -- discrete DPM (Polaris, Vega) -----------------------------------------------------------

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


def test_restore_writes_auto_back_and_the_tree_is_as_found(tmp_path):
    path, kernel = amdgpu_polaris(tmp_path)
    found = tree_bytes(tmp_path)
    device = AmdgpuDevice(path, tmp_path, kernel)
    device.set_level(300)
    device.set_level(1366)
    kernel.forget_writes()
    device.restore()
    device.restore()
    assert kernel.writes == [(PERF, "auto")]
    assert tree_bytes(tmp_path) == found


def test_restore_of_a_mask_another_tool_forced_says_it_puts_back_only_the_level_running(
        tmp_path, caplog):
    """Issue 28 item 7: pp_dpm_sclk shows a forced mask (``2 3 4``) only as the level running;
    govd cannot restore the mask, so it puts that level back and says exactly that, up front
    (devices, journal) and at restore, instead of claiming the device restored."""
    path, kernel, model = hand_written(tmp_path, "polaris", perf="manual")
    kernel.write_text(path / "device/pp_dpm_sclk", "2 3 4")  # another tool, before govd
    model.found_now()
    device = AmdgpuDevice(path, tmp_path, kernel)
    assert "a mask of several levels is narrowed" in device.controllable().reason
    device.set_level(300)
    saved = device.save()
    kernel.forget_writes()
    reopened = AmdgpuDevice.from_saved(saved, tmp_path, kernel)
    with caplog.at_level(logging.WARNING, logger="govd.device.amdgpu"):
        reopened.restore()
    assert kernel.writes == [(SCLK, "2")]
    assert model.state.mask == [2]  # what could be put back: not the mask of three
    assert reopened.unrestorable() is not None and "level 2" in reopened.unrestorable()
    assert any("level 2, the one running then" in r.getMessage() for r in caplog.records)


def test_device_found_in_auto_has_nothing_unrestorable(tmp_path):
    path, kernel = amdgpu_polaris(tmp_path)
    device = AmdgpuDevice(path, tmp_path, kernel)
    device.set_level(900)
    assert device.unrestorable() is None


def test_restore_of_a_forced_level_holds_though_the_gpu_sleeps_at_the_read_back(tmp_path):
    """Newer kernels mark an idle GPU's deep-sleep line ("S: 19Mhz *") instead of a level:
    the forced level put back cannot be read then, and restore must not call that a failure."""
    path, kernel, model = hand_written(tmp_path, "polaris", perf="manual")
    device = AmdgpuDevice(path, tmp_path, kernel)
    device.set_level(1300)
    model.sleep_mhz = 19
    kernel.forget_writes()
    device.restore()
    assert kernel.writes == [(SCLK, "0")]


def test_polaris_volts_come_from_od_sclk(tmp_path):
    path, kernel = amdgpu_polaris(tmp_path)
    volts = AmdgpuDevice(path, tmp_path, kernel).volts_by_level()
    assert volts is not None
    assert (volts[0], volts[-1]) == (pytest.approx(0.75), pytest.approx(1.15))


def test_volts_unknown_without_overdrive_table(tmp_path):
    path, kernel = amdgpu_polaris(tmp_path)
    (path / "device/pp_od_clk_voltage").unlink()
    assert AmdgpuDevice(path, tmp_path, kernel).volts_by_level() is None


# -- overdrive: a grid of clocks pinned with s 0 / s 1 / c ---------------------------------

def test_grid_spans_the_range_with_at_least_eight_and_at_most_the_cap():
    for low, high in [(500, 2660), (200, 1600), (800, 835), (500, 5000)]:
        grid = od_grid_mhz(low, high)
        assert (grid[0], grid[-1]) == (low, high) and 8 <= grid.size <= MAX_OD_LEVELS
        assert np.all(np.diff(grid) > 0) and np.all(grid == np.round(grid))


def test_discrete_gpu_with_overdrive_offers_a_grid_within_the_range_found(tmp_path):
    path, kernel = amdgpu_navi21(tmp_path)
    device = AmdgpuDevice(path, tmp_path, kernel)
    levels = device.levels_mhz
    # OD_RANGE goes to 3150 MHz, but govd does not overclock: up to the maximum found
    assert (levels[0], levels[-1]) == (500, 2660) and 8 <= levels.size <= MAX_OD_LEVELS
    assert device.controllable().ok
    assert device.read().freq_mhz == 1283


def test_pin_below_the_maximum_writes_the_minimum_first_then_commits(tmp_path):
    path, kernel = amdgpu_navi21(tmp_path)
    device = AmdgpuDevice(path, tmp_path, kernel)
    device.set_level(1500)
    assert kernel.writes == [(PERF, "manual"), (OD, "s 0 1500"), (OD, "s 1 1500"), (OD, "c")]
    assert device.read().freq_mhz == 1500
    kernel.forget_writes()
    device.set_level(1000)  # lowering from a pin: the minimum first again
    assert kernel.writes == [(OD, "s 0 1000"), (OD, "s 1 1000"), (OD, "c")]


def test_pin_above_the_maximum_in_force_writes_the_maximum_first(tmp_path):
    path, kernel = amdgpu_navi21(tmp_path)
    device = AmdgpuDevice(path, tmp_path, kernel)
    device.set_level(1000)
    kernel.forget_writes()
    device.set_level(2000)
    assert kernel.writes == [(OD, "s 1 2000"), (OD, "s 0 2000"), (OD, "c")]
    kernel.forget_writes()
    device.set_level(2000)
    assert kernel.writes == []  # already pinned there


def test_refused_second_edit_puts_the_first_back_and_commits_nothing(tmp_path):
    path, kernel, model = hand_written(tmp_path, "rdna2_od")
    device = AmdgpuDevice(path, tmp_path, kernel)
    kernel.fail(path / "device/pp_od_clk_voltage", "write", errno.EINVAL, times=1, skip=1)
    with pytest.raises(WriteRefused):
        device.set_level(1500)
    assert model.state.pending == model.state.committed == [500, 2660]
    assert [v for _, v, code in kernel.attempts if code == 0][-1] == "s 0 500"


def test_nothing_runs_at_the_pin_before_commit(tmp_path):
    path, kernel, _ = hand_written(tmp_path, "rdna2_od")
    kernel.write_text(path / "device/power_dpm_force_performance_level", "manual")
    kernel.write_text(path / "device/pp_od_clk_voltage", "s 0 1200")
    kernel.write_text(path / "device/pp_od_clk_voltage", "s 1 1200")
    assert AmdgpuDevice(path, tmp_path, kernel).read().freq_mhz == 500
    kernel.write_text(path / "device/pp_od_clk_voltage", "c")
    assert AmdgpuDevice(path, tmp_path, kernel).read().freq_mhz == 1200


def test_restore_puts_back_the_od_table_and_level_found_byte_for_byte(tmp_path):
    path, kernel = amdgpu_navi21(tmp_path)
    found = tree_bytes(tmp_path)
    device = AmdgpuDevice(path, tmp_path, kernel)
    device.set_level(1800)
    device.set_level(900)
    kernel.forget_writes()
    device.restore()
    assert kernel.writes == [(OD, "s 0 500"), (OD, "s 1 2660"), (OD, "c"), (PERF, "auto")]
    assert tree_bytes(tmp_path) == found


def test_found_minimum_below_the_range_the_kernel_takes_is_restored_with_r_and_c(tmp_path):
    """An RDNA1 boots with OD_SCLK 500 MHz below its OD_RANGE minimum of 800: "s 0 500" is
    refused, so the table the GPU booted with comes back through r + c."""
    od = ("OD_SCLK:\n0: 500Mhz\n1: 1900Mhz\nOD_MCLK:\n1: 875MHz\nOD_RANGE:\n"
          "SCLK:     800Mhz       2100Mhz\n")
    path, kernel, _ = hand_written(tmp_path, "rdna2_od", od=od, sclk="0: 800Mhz *\n1: 1900Mhz\n")
    found = tree_bytes(tmp_path)
    device = AmdgpuDevice(path, tmp_path, kernel)
    assert device.bounds_mhz == (800, 1900)
    device.set_level(1200)
    kernel.forget_writes()
    device.restore()
    assert [v for _, v in kernel.writes if v in ("r", "c")] == ["r", "c"]
    assert tree_bytes(tmp_path) == found


def test_another_section_of_the_od_table_not_held_after_restore_is_named():
    found = {"performance_level": "auto", "od_sclk_mhz": [500, 2660],
             "od_other": "OD_MCLK: 0: 97Mhz | 1: 1000MHz\nOD_VDDGFX_OFFSET: -10mV"}
    now = dict(found, od_other="OD_MCLK: 0: 97Mhz | 1: 1000MHz\nOD_VDDGFX_OFFSET: 0mV")
    differ = AmdgpuDevice._not_held(AmdgpuDevice.__new__(AmdgpuDevice), found, now)
    assert differ == ["OD_VDDGFX_OFFSET is '0mV', not '-10mV'"]


def test_apu_pins_through_overdrive_and_never_writes_pp_dpm_sclk(tmp_path):
    path, kernel, _ = hand_written(tmp_path, "phoenix")
    device = AmdgpuDevice(path, tmp_path, kernel)
    assert device.bounds_mhz == (400, 2400) and device.controllable().ok
    device.set_level(1000)
    assert kernel.writes == [(PERF, "manual"), (OD, "s 0 1000"), (OD, "s 1 1000"), (OD, "c")]
    assert device.read().freq_mhz == 1000
    with pytest.raises(OSError) as refused:  # the kernel's answer to a level index on an APU
        kernel.write_text(path / "device/pp_dpm_sclk", "1")
    assert refused.value.errno == errno.EINVAL


def test_steam_deck_whose_od_file_reads_empty_outside_manual_is_governed_and_restored(
        tmp_path):
    path, kernel, _ = hand_written(tmp_path, "deck")
    found = tree_bytes(tmp_path)
    device = AmdgpuDevice(path, tmp_path, kernel)
    assert device.bounds_mhz == (200, 1600) and device.levels_mhz.size >= 8
    device.set_level(800)
    assert device.read().freq_mhz == 800
    kernel.forget_writes()
    device.restore()
    assert kernel.writes == [(OD, "r"), (OD, "c"), (PERF, "auto")]
    assert tree_bytes(tmp_path) == found


def test_apu_found_pinned_in_manual_gets_its_pin_back(tmp_path):
    """SteamOS's GPU clock setting leaves a Deck in manual with min = max: that is restored."""
    od = "OD_SCLK:\n0:       1000Mhz\n1:       1000Mhz\nOD_RANGE:\nSCLK:     200Mhz       1600Mhz\n"
    path, kernel, _ = hand_written(tmp_path, "phoenix", od=od, perf="manual",
                                   sclk="0: 1000Mhz \n1: 1100Mhz \n2: 1000Mhz *\n")
    found = tree_bytes(tmp_path)
    device = AmdgpuDevice(path, tmp_path, kernel)
    assert device.bounds_mhz == (200, 1600)  # an APU's whole range, not the pin found
    device.set_level(1400)
    device.restore()
    assert tree_bytes(tmp_path) == found


def test_another_tool_repinning_the_od_clock_is_an_override(tmp_path):
    path, kernel = amdgpu_navi21(tmp_path)
    device = AmdgpuDevice(path, tmp_path, kernel)
    device.set_level(1500)
    assert device.override() is None
    kernel.write_text(path / "device/pp_od_clk_voltage", "s 1 2000")
    assert device.override() == "OD_SCLK is 1500-2000 MHz, not 1500 MHz"
    kernel.write_text(path / "device/power_dpm_force_performance_level", "auto")
    assert device.override() == "performance level is 'auto'"


# -- what cannot be governed finely ---------------------------------------------------------

@pytest.mark.parametrize(("kind", "says"), [
    ("rdna2", "amdgpu.ppfeaturemask=0xfff7ffff"),
    ("laptop", "offers no OD_SCLK minimum and maximum"),
    ("rdna4", "OD_SCLK_OFFSET"),
    ("rdna4_old", "OD_SCLK_OFFSET"),
])
def test_part_offering_no_clock_between_min_and_max_says_why_and_is_left_alone(
        tmp_path, kind, says):
    path, kernel, _ = hand_written(tmp_path, kind)
    found = tree_bytes(tmp_path)
    device = AmdgpuDevice(path, tmp_path, kernel)
    verdict = device.controllable()
    assert not verdict.ok and says in verdict.reason and "\n" not in verdict.reason
    with pytest.raises(DeviceError):
        device.set_level(1000)
    assert kernel.attempts == [] and tree_bytes(tmp_path) == found


def test_overdrive_hint_names_the_bit_and_the_taint(tmp_path):
    path, kernel, _ = hand_written(tmp_path, "rdna2")
    reason = AmdgpuDevice(path, tmp_path, kernel).controllable().reason
    assert "0x4000" in reason and "6.13" in reason and "tainted" in reason


def test_rdna4_shows_its_minimum_and_maximum_and_the_deep_sleep_clock(tmp_path):
    path, kernel, _ = hand_written(tmp_path, "rdna4")
    device = AmdgpuDevice(path, tmp_path, kernel)
    assert list(device.levels_mhz) == [600, 2400] and device.read().freq_mhz == 12


def test_nul_padded_performance_level_is_not_another_tool(tmp_path):
    path, kernel, _ = hand_written(tmp_path, "rdna2_od", perf=b"auto\n" + b"\0" * 4091)
    verdict = AmdgpuDevice(path, tmp_path, kernel).controllable()
    assert verdict.ok and verdict.reason == ""


def test_clock_unmarked_in_the_table_comes_from_hwmon_or_is_unknown(tmp_path):
    path, kernel, _ = hand_written(tmp_path, "rdna2_od", sclk="0: 500Mhz\n1: 2660Mhz\n")
    device = AmdgpuDevice(path, tmp_path, kernel)
    assert np.isnan(device.read().freq_mhz)
    (path / "device/hwmon/hwmon1/freq1_input").write_text("2104000000\n")
    assert AmdgpuDevice(path, tmp_path, kernel).read().freq_mhz == 2104


def test_od_table_refusing_the_restore_still_gets_the_level_back_and_says_what_failed(tmp_path):
    path, kernel = amdgpu_navi21(tmp_path)
    device = AmdgpuDevice(path, tmp_path, kernel)
    device.set_level(1500)
    kernel.fail(path / "device/pp_od_clk_voltage", "write", errno.EBUSY)
    with pytest.raises(DeviceError, match="Device or resource busy"):
        device.restore()
    assert device.performance_level() == "auto"  # not left in manual by the OD failure
    kernel.heal()
    device.restore()  # a later restore finishes the job
    assert device._od_sclk() == (500, 2660)


@pytest.mark.parametrize("state", [
    {"performance_level": "auto", "od_sclk_mhz": [2660, 500]},
    {"performance_level": "auto", "od_sclk_mhz": [500]},
    {"performance_level": "auto", "od_sclk_mhz": [500.5, 2660]},
    {"performance_level": "auto", "od_sclk_mhz": [True, 2660]},
    {"performance_level": "auto", "od_other": "x" * 100_000},
], ids=["min-above-max", "one-clock", "fraction", "boolean", "huge-text"])
def test_state_file_entry_no_save_writes_is_refused_in_one_line(state):
    with pytest.raises(ValueError) as refused:
        AmdgpuDevice.check_state(state)
    assert "\n" not in str(refused.value) and len(str(refused.value)) < 200
