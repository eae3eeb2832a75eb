"""Sysfs files holding what no driver prints: every such read is a `DeviceError` naming the file.

A number that is NaN or infinite, bytes that are not text, a GT range of billions of MHz, an
amdgpu table whose level numbers are not 0..n-1: each must pause the device or refuse it in one
line, never escape as a ValueError/MemoryError traceback that would kill the daemon, and never
lead to a write of a level the driver did not offer.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from govd.device.amdgpu import AmdgpuDevice
from govd.device.base import DeviceError
from govd.device.devfreq import DevfreqDevice
from govd.device.i915 import I915Device
from govd.device.sysfs import SysfsIO
from govd.device.xe import XeDevice
from tests.faults.rigs import RIGS, XE_FREQ0
from tests.sysfs_fixtures import amdgpu_polaris, i915_gen9, mali_panfrost, xe_lunarlake

GARBAGE = {"nan": b"nan\n", "inf": b"inf\n", "-inf": b"-inf\n", "not-utf8": b"\xff\xfe\n",
           "overflowing": b"1e400\n"}


@pytest.mark.parametrize("content", list(GARBAGE))
@pytest.mark.parametrize("backend", list(RIGS))
def test_garbage_in_the_file_read_each_tick_pauses_and_hands_back(tmp_path, backend, content):
    rig = RIGS[backend](tmp_path)
    found = rig.knob_state()
    rig.tick(0.0)
    assert rig.runner.paused is None
    rig.read_file.write_bytes(GARBAGE[content])
    rig.tick(1.0)  # raised DeviceError, not ValueError/UnicodeDecodeError: the runner copes
    assert rig.runner.paused is not None
    assert rig.knob_state() == found


@pytest.mark.parametrize("content", list(GARBAGE))
@pytest.mark.parametrize(("fixture", "device_type", "rel"), [
    (i915_gen9, I915Device, "gt_RP0_freq_mhz"),
    (i915_gen9, I915Device, "gt_min_freq_mhz"),
    (xe_lunarlake, XeDevice, f"{XE_FREQ0}/rp0_freq"),
], ids=["i915-rp0", "i915-min", "xe-rp0"])
def test_garbage_limit_is_a_device_error_before_any_write(tmp_path, fixture, device_type, rel,
                                                          content):
    path, kernel = fixture(tmp_path)
    (path / rel).write_bytes(GARBAGE[content])
    device = device_type(path, tmp_path, kernel)
    with pytest.raises(DeviceError, match=rel.rsplit("/", 1)[-1]):
        device.set_level(700)
    assert kernel.attempts == []


@pytest.mark.parametrize(("fixture", "device_type", "rpn", "rp0"), [
    (i915_gen9, I915Device, "gt_RPn_freq_mhz", "gt_RP0_freq_mhz"),
    (xe_lunarlake, XeDevice, f"{XE_FREQ0}/rpn_freq", f"{XE_FREQ0}/rp0_freq"),
], ids=["i915", "xe"])
@pytest.mark.parametrize(("low", "high"), [(300, 10_000_000), (1100, 300), (0, 1100)],
                         ids=["rp0-of-10-THz", "rp0-below-rpn", "rpn-zero"])
def test_implausible_gt_range_is_refused_without_building_its_levels(
        tmp_path, fixture, device_type, rpn, rp0, low, high):
    path, kernel = fixture(tmp_path)
    (path / rpn).write_text(f"{low}\n")
    (path / rp0).write_text(f"{high}\n")
    device = device_type(path, tmp_path, kernel)
    with pytest.raises(DeviceError, match="range"):
        _ = device.levels_mhz
    assert not device.controllable().ok
    with pytest.raises(DeviceError):
        device.set_level(700)
    assert kernel.attempts == []


@pytest.mark.parametrize("table", [
    "1: 300Mhz\n0: 600Mhz *\n2: 900Mhz\n3: 1000Mhz",  # levels numbered in another order
    "0: 600Mhz *\n1: 300Mhz\n2: 900Mhz\n3: 1000Mhz",  # clocks not ascending
    "0: 300Mhz *\n0: 600Mhz\n1: 900Mhz\n2: 1000Mhz",  # a level number twice
    "5: 300Mhz *\n6: 600Mhz\n7: 900Mhz\n8: 1000Mhz",  # numbers not from 0
], ids=["shuffled", "descending", "duplicate", "offset"])
def test_amdgpu_table_not_numbered_0_to_n_is_refused_without_a_write(tmp_path, table):
    path, kernel = amdgpu_polaris(tmp_path)
    (path / "device/pp_dpm_sclk").write_text(table + "\n")
    device = AmdgpuDevice(path, tmp_path, kernel)
    with pytest.raises(DeviceError, match="pp_dpm_sclk"):
        device.set_level(900)
    assert kernel.attempts == []


def test_device_error_for_bytes_that_are_not_text_is_one_line(tmp_path: Path) -> None:
    path, kernel = i915_gen9(tmp_path)
    (path / "gt_act_freq_mhz").write_bytes(b"\xff\n\xfe")
    with pytest.raises(DeviceError) as caught:
        I915Device(path, tmp_path, kernel).read()
    assert "\n" not in str(caught.value) and "gt_act_freq_mhz" in str(caught.value)


def _special(path: Path, kind: str) -> None:
    path.unlink()
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "dev-zero":
        path.symlink_to("/dev/zero")
    else:  # a sparse 1 GiB file: no disk used, but read whole it fills memory every tick
        with path.open("wb") as f:
            f.truncate(1 << 30)


@pytest.mark.timeout(20)
@pytest.mark.parametrize("kind", ["dev-zero", "1-GiB-file"])
def test_attribute_that_is_endless_is_refused_without_eating_memory(tmp_path, kind):
    """A tree given with --sysfs-root is no kernel: /dev/zero or a huge file there must not be
    read whole (a sysfs attribute is a page). A FIFO read blocks, as a hung driver's read
    does: the watchdog's case (tests/test_notify.py)."""
    path, _ = mali_panfrost(tmp_path)
    _special(path / "cur_freq", kind)
    device = DevfreqDevice(path, tmp_path, SysfsIO())
    with pytest.raises(DeviceError, match="cur_freq"):
        device.read()


@pytest.mark.parametrize("backend", ["i915", "amdgpu"])
def test_gpu_with_a_single_clock_level_is_not_controllable(tmp_path, backend):
    if backend == "i915":
        path, kernel = i915_gen9(tmp_path, rpn=700, rp0=700, min_mhz=700, max_mhz=700,
                                 act_mhz=700)
        device: I915Device | AmdgpuDevice = I915Device(path, tmp_path, kernel)
    else:
        path, kernel = amdgpu_polaris(tmp_path)
        (path / "device/pp_dpm_sclk").write_text("0: 300Mhz *\n")
        device = AmdgpuDevice(path, tmp_path, kernel)
    verdict = device.controllable()
    assert not verdict.ok and verdict.reason == "1 clock level: nothing to choose"


@pytest.mark.timeout(20)
def test_knob_that_is_a_link_is_never_written_through(tmp_path):
    """Sysfs attributes are never links: in a tree given with --sysfs-root, a knob linked to a
    file elsewhere must not have that file truncated and overwritten (govd runs as root): a
    DeviceError naming the file. (A FIFO knob blocks the read before the write, as a hung
    driver's read does: the watchdog's case, tests/test_notify.py.)"""
    path, _ = mali_panfrost(tmp_path, governor="userspace")
    knob = path / "userspace/set_freq"
    knob.unlink()
    outside = tmp_path / "precious"
    outside.write_text("keep me\n")
    knob.symlink_to(outside)
    device = DevfreqDevice(path, tmp_path, SysfsIO())
    with pytest.raises(DeviceError, match="set_freq"):
        device.set_level(400)
    assert outside.read_text() == "keep me\n"
    assert knob.read_text().strip() == "keep me"
