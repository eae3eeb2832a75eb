"""devfreq: userspace governor, set_freq in Hz, read back, restore of governor and bounds."""

from __future__ import annotations

import errno
import math

import pytest

from govd.device.base import DeviceError, DeviceGone, WriteRefused
from govd.device.devfreq import DevfreqDevice
from tests.sysfs_fixtures import adreno_msm, mali_panfrost

MALI = "devices/platform/fde60000.gpu/devfreq/fde60000.gpu"


def test_levels_are_available_frequencies_in_mhz(tmp_path):
    path, kernel = mali_panfrost(tmp_path)
    device = DevfreqDevice(path, tmp_path, kernel)
    assert list(device.levels_mhz) == [200, 300, 400, 600, 700, 800]
    assert device.bounds_mhz == (200, 800)


def test_governor_switched_to_userspace_then_set_freq_in_hz(tmp_path):
    path, kernel = mali_panfrost(tmp_path)
    device = DevfreqDevice(path, tmp_path, kernel)
    device.set_level(590)
    assert kernel.writes == [(f"{MALI}/governor", "userspace"),
                             (f"{MALI}/userspace/set_freq", "600000000")]
    assert device.read().freq_mhz == 600


def test_nothing_written_when_already_running_the_level(tmp_path):
    path, kernel = mali_panfrost(tmp_path)
    device = DevfreqDevice(path, tmp_path, kernel)
    device.set_level(400)
    kernel.forget_writes()
    device.set_level(400)
    assert kernel.writes == []


def test_level_writes_read_the_list_of_levels_once_until_forget_applied(tmp_path):
    path, kernel = mali_panfrost(tmp_path)
    device = DevfreqDevice(path, tmp_path, kernel)
    read = []
    real = kernel.read_text
    kernel.read_text = lambda p: read.append(str(p).rsplit("/", 1)[-1]) or real(p)
    for mhz in (300, 700, 200):
        device.set_level(mhz)
    assert read.count("available_frequencies") == 1
    # The driver now lists other levels (reloaded): taken into account once govd is told.
    (path / "available_frequencies").write_text("250000000 500000000 800000000\n")
    device.set_level(450)
    assert kernel.writes[-1] == (f"{MALI}/userspace/set_freq", "400000000")
    device.forget_applied()
    device.set_level(450)
    assert kernel.writes[-1] == (f"{MALI}/userspace/set_freq", "500000000")
    assert read.count("available_frequencies") == 2


def test_level_clamped_to_min_max(tmp_path):
    path, kernel = mali_panfrost(tmp_path)
    (path / "max_freq").write_text("600000000\n")
    device = DevfreqDevice(path, tmp_path, kernel)
    device.set_level(800)
    assert kernel.writes[-1] == (f"{MALI}/userspace/set_freq", "600000000")


def test_restore_puts_governor_back_and_bounds_in_accepted_order(tmp_path):
    path, kernel = mali_panfrost(tmp_path)
    device = DevfreqDevice(path, tmp_path, kernel)
    device.set_level(300)
    saved = device.save()
    # Someone pinned the bounds at 700 MHz meanwhile: widening lowers min first, then max.
    (path / "min_freq").write_text("700000000\n")
    (path / "max_freq").write_text("700000000\n")
    kernel.forget_writes()
    DevfreqDevice.from_saved(saved, tmp_path, kernel).restore()
    assert kernel.writes == [(f"{MALI}/min_freq", "200000000"), (f"{MALI}/max_freq", "800000000"),
                             (f"{MALI}/governor", "simple_ondemand")]
    assert not (path / "userspace").exists()


def test_raised_bounds_restore_max_before_min(tmp_path):
    path, kernel = mali_panfrost(tmp_path)
    device = DevfreqDevice(path, tmp_path, kernel)
    device.set_level(300)
    (path / "min_freq").write_text("200000000\n")
    (path / "max_freq").write_text("300000000\n")
    device._saved_state = dict(device._saved_state or {}, min_freq_hz=600000000)
    kernel.forget_writes()
    device.restore()
    assert kernel.writes[:2] == [(f"{MALI}/max_freq", "800000000"),
                                 (f"{MALI}/min_freq", "600000000")]


def test_userspace_set_freq_restored_when_it_was_userspace(tmp_path):
    path, kernel = mali_panfrost(tmp_path, governor="userspace")
    kernel.write_text(path / "userspace/set_freq", "700000000")
    device = DevfreqDevice(path, tmp_path, kernel)
    assert "another tool" in device.controllable().reason
    device.set_level(200)
    kernel.forget_writes()
    device.restore()
    assert kernel.writes == [(f"{MALI}/userspace/set_freq", "700000000")]


def test_without_userspace_governor_not_controllable_and_says_why(tmp_path):
    path, kernel = mali_panfrost(tmp_path, governors="simple_ondemand performance")
    verdict = DevfreqDevice(path, tmp_path, kernel).controllable()
    assert not verdict.ok and "userspace" in verdict.reason


def test_busy_and_energy_from_the_parent_device(tmp_path):
    path, kernel = adreno_msm(tmp_path, busy_percent=42, energy_uj=5_000_000)
    reading = DevfreqDevice(path, tmp_path, kernel).read()
    assert reading.busy == 0.42 and reading.energy_mj == 5000 and math.isnan(reading.power_w)


def test_hwmon_renumbered_after_a_reload_is_found_again(tmp_path):
    """The energy file's location is looked up once; when it vanishes (a driver reload
    renumbers hwmon) the read fails once, typed, and the next read finds the new one."""
    path, kernel = adreno_msm(tmp_path, busy_percent=42, energy_uj=5_000_000)
    device = DevfreqDevice(path, tmp_path, kernel)
    assert device.read().energy_mj == 5000
    hwmon0 = next((path / "device").resolve().glob("hwmon/hwmon0"))
    hwmon0.rename(hwmon0.with_name("hwmon7"))
    (hwmon0.with_name("hwmon7") / "energy1_input").write_text("6000000\n")
    with pytest.raises(DeviceGone):
        device.read()
    assert device.read().energy_mj == 6000


def test_busy_is_nan_where_the_driver_has_none(tmp_path):
    path, kernel = mali_panfrost(tmp_path)
    assert math.isnan(DevfreqDevice(path, tmp_path, kernel).read().busy)


def test_refused_governor_write_is_typed(tmp_path):
    path, kernel = mali_panfrost(tmp_path)
    kernel.inject[path / "governor"] = errno.EBUSY
    with pytest.raises(WriteRefused):
        DevfreqDevice(path, tmp_path, kernel).set_level(400)


def test_removed_device_is_gone(tmp_path):
    path, kernel = mali_panfrost(tmp_path)
    device = DevfreqDevice(path, tmp_path, kernel)
    kernel.inject[path / "governor"] = errno.ENODEV
    with pytest.raises(DeviceGone):
        device.set_level(400)


def test_own_request_not_yet_applied_is_never_another_tools(tmp_path):
    # The device applies set_freq later than govd writes it (the live simulator every 50 ms):
    # govd asks 400, then 600 again while 600 still runs; when 400 lands late, set_freq must
    # still read as govd's own request.
    path, kernel = mali_panfrost(tmp_path)
    device = DevfreqDevice(path, tmp_path, kernel)
    device.set_level(600)
    device.set_level(400)
    (path / "cur_freq").write_text("600000000\n")  # 400 not applied yet
    device.set_level(600)
    (path / "cur_freq").write_text("400000000\n")  # the older request lands now
    assert device.override() is None
    assert kernel.value(path / "userspace/set_freq") == "600000000"


def test_own_request_clamped_by_a_thermal_limit_then_released_is_not_another_tools(tmp_path):
    path, kernel = mali_panfrost(tmp_path)
    device = DevfreqDevice(path, tmp_path, kernel)
    device.set_level(800)
    kernel.write_text(path / "max_freq", "600000000")  # thermal cap: cur_freq falls to 600
    device.set_level(600)
    kernel.write_text(path / "max_freq", "800000000")  # released
    (path / "cur_freq").write_text("800000000\n")  # the kernel re-runs the standing request
    assert device.override() is None


def test_another_tools_set_freq_is_seen_even_while_the_clock_matches(tmp_path):
    path, kernel = mali_panfrost(tmp_path)
    device = DevfreqDevice(path, tmp_path, kernel)
    device.set_level(600)
    kernel.write_text(path / "userspace/set_freq", "550000000")  # rounds up to 600 too
    assert device.override() == "userspace/set_freq is 550000000"


def test_restore_that_does_not_hold_raises_naming_what_differs(tmp_path):
    path, kernel = mali_panfrost(tmp_path)
    device = DevfreqDevice(path, tmp_path, kernel)
    device.set_level(400)
    kernel.rules[path / "governor"] = lambda k, p, value: "userspace"  # ignores the write
    with pytest.raises(DeviceError, match="governor is 'userspace', not 'simple_ondemand'"):
        device.restore()
