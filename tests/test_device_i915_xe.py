"""i915 and xe backends against fixture trees whose double enforces the kernel's write rules."""

from __future__ import annotations

import errno
import itertools

import pytest

from govd.device.base import DeviceGone, WriteRefused
from govd.device.i915 import I915Device, gt_levels_mhz
from govd.device.xe import XeDevice
from tests.sysfs_fixtures import i915_gen9, xe_lunarlake

CARD = "devices/pci0000:00/0000:00:02.0/drm/card0"


def test_gen9_levels_step_in_fifty_thirds_rounded_like_the_kernel(tmp_path):
    path, kernel = i915_gen9(tmp_path)
    levels = I915Device(path, tmp_path, kernel).levels_mhz
    assert levels[0] == 300 and levels[-1] == 1150
    assert len(levels) == 69 - 18 + 1
    assert list(levels[:4]) == [300, 317, 333, 350]


def test_pre_gen9_unit_is_fifty_mhz():
    assert gt_levels_mhz(300, 450, 50, 1) == [300, 350, 400, 450]


def test_raising_writes_max_before_min_then_boost(tmp_path):
    path, kernel = i915_gen9(tmp_path, min_mhz=300, max_mhz=400)
    I915Device(path, tmp_path, kernel).set_level(800)
    assert kernel.writes == [
        (f"{CARD}/gt_max_freq_mhz", "800"),
        (f"{CARD}/gt_min_freq_mhz", "800"),
        (f"{CARD}/gt_boost_freq_mhz", "800"),
    ]
    assert kernel.value(path / "gt_act_freq_mhz") == "800"


def test_min_written_before_max_when_lowering(tmp_path):
    path, kernel = i915_gen9(tmp_path)
    I915Device(path, tmp_path, kernel).set_level(500)
    assert [w[0].rsplit("/", 1)[1] for w in kernel.writes] == [
        "gt_min_freq_mhz", "gt_max_freq_mhz", "gt_boost_freq_mhz"]
    # 500 MHz is 30 units of 50/3 MHz: written and read back as the kernel rounds it.
    assert kernel.value(path / "gt_max_freq_mhz") == "500"


def test_nothing_written_when_already_pinned_at_the_level(tmp_path):
    path, kernel = i915_gen9(tmp_path)
    device = I915Device(path, tmp_path, kernel)
    device.set_level(617)
    kernel.forget_writes()
    device.set_level(617)
    device.set_level(616)  # snaps to the same level
    assert kernel.writes == []


def test_read_returns_the_actual_frequency_and_hwmon_energy(tmp_path):
    path, kernel = i915_gen9(tmp_path, act_mhz=450, hwmon=True)
    reading = I915Device(path, tmp_path, kernel).read()
    assert reading.freq_mhz == 450
    assert reading.energy_mj == 123_000


def test_restore_puts_back_limits_and_boost_in_an_accepted_order(tmp_path):
    path, kernel = i915_gen9(tmp_path, min_mhz=300, max_mhz=700)
    device = I915Device(path, tmp_path, kernel)
    device.set_level(1000)
    kernel.forget_writes()
    device.restore()
    assert kernel.writes == [
        (f"{CARD}/gt_min_freq_mhz", "300"),
        (f"{CARD}/gt_max_freq_mhz", "700"),
        (f"{CARD}/gt_boost_freq_mhz", "1150"),
    ]
    kernel.forget_writes()
    device.restore()
    assert kernel.writes == []


def test_second_write_refused_puts_the_first_back(tmp_path):
    path, kernel = i915_gen9(tmp_path, min_mhz=300, max_mhz=400)
    kernel.inject[path / "gt_min_freq_mhz"] = errno.EBUSY
    with pytest.raises(WriteRefused):
        I915Device(path, tmp_path, kernel).set_level(800)
    assert kernel.writes == [(f"{CARD}/gt_max_freq_mhz", "800"), (f"{CARD}/gt_max_freq_mhz", "400")]


@pytest.mark.parametrize(
    ("code", "error"),
    [(errno.ENODEV, DeviceGone), (errno.EACCES, WriteRefused), (errno.EPERM, WriteRefused)],
)
def test_errno_becomes_a_typed_error(tmp_path, code, error):
    path, kernel = i915_gen9(tmp_path)
    kernel.inject[path / "gt_min_freq_mhz"] = code
    with pytest.raises(error):
        I915Device(path, tmp_path, kernel).set_level(500)


def test_eio_is_a_device_error_not_a_refusal(tmp_path):
    from govd.device.base import DeviceError

    path, kernel = i915_gen9(tmp_path)
    kernel.inject[path / "gt_min_freq_mhz"] = errno.EIO
    with pytest.raises(DeviceError) as info:
        I915Device(path, tmp_path, kernel).set_level(500)
    assert type(info.value) is DeviceError


def test_unplugged_card_reads_as_gone(tmp_path):
    path, kernel = i915_gen9(tmp_path)
    device = I915Device(path, tmp_path, kernel)
    (path / "gt_act_freq_mhz").unlink()
    with pytest.raises(DeviceGone):
        device.read()


def test_read_only_limits_make_the_card_uncontrollable(tmp_path):
    path, kernel = i915_gen9(tmp_path)
    kernel.read_only.add(path / "gt_max_freq_mhz")
    verdict = I915Device(path, tmp_path, kernel).controllable()
    assert not verdict.ok and "gt_max_freq_mhz" in verdict.reason


def test_xe_levels_every_fifty_mhz_from_rpn_to_rp0(tmp_path):
    path, kernel = xe_lunarlake(tmp_path, rpn=420, rp0=2050)
    levels = XeDevice(path, tmp_path, kernel).levels_mhz
    assert list(levels[:3]) == [420, 450, 500] and levels[-1] == 2050
    assert all(b - a <= 50 for a, b in itertools.pairwise(levels))


def test_xe_raising_writes_max_first_and_reads_back_act_freq(tmp_path):
    path, kernel = xe_lunarlake(tmp_path, min_mhz=400, max_mhz=900)
    device = XeDevice(path, tmp_path, kernel)
    device.set_level(1500)
    freq0 = f"{CARD}/device/tile0/gt0/freq0"
    assert kernel.writes == [(f"{freq0}/max_freq", "1500"), (f"{freq0}/min_freq", "1500")]
    # The firmware has the last word: whatever act_freq says is what runs.
    (path / "device/tile0/gt0/freq0/act_freq").write_text("1200\n")
    assert device.read().freq_mhz == 1200


def test_xe_save_and_restore_saved_round_trip(tmp_path):
    path, kernel = xe_lunarlake(tmp_path, min_mhz=400, max_mhz=900)
    device = XeDevice(path, tmp_path, kernel)
    device.set_level(1500)
    saved = device.save()
    assert saved["backend"] == "xe" and saved["path"] == CARD
    again = XeDevice.from_saved(saved, tmp_path, kernel)
    kernel.forget_writes()
    again.restore()
    freq0 = f"{CARD}/device/tile0/gt0/freq0"
    assert kernel.writes == [(f"{freq0}/min_freq", "400"), (f"{freq0}/max_freq", "900")]
