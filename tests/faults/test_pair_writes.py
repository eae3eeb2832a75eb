"""i915/xe: a min/max pair that fails half-way is rolled back, write by write."""

from __future__ import annotations

import errno

import pytest

from govd.device.base import WriteRefused
from govd.device.i915 import I915Device
from govd.device.xe import XeDevice
from tests.faults.rigs import RIGS
from tests.sysfs_fixtures import i915_gen9, xe_lunarlake

I915_PAIR = ("gt_min_freq_mhz", "gt_max_freq_mhz")
XE_PAIR = ("device/tile0/gt0/freq0/min_freq", "device/tile0/gt0/freq0/max_freq")


def pinned(tmp_path, backend, mhz):
    """A GT another run left pinned at ``mhz``: (device, kernel, min path, max path)."""
    if backend == "i915":
        path, kernel = i915_gen9(tmp_path, min_mhz=mhz, max_mhz=mhz, act_mhz=mhz)
        device, (lo, hi) = I915Device(path, tmp_path, kernel), I915_PAIR
    else:
        path, kernel = xe_lunarlake(tmp_path, min_mhz=mhz, max_mhz=mhz, act_mhz=mhz)
        device, (lo, hi) = XeDevice(path, tmp_path, kernel), XE_PAIR
    return device, kernel, path / lo, path / hi


def pair(min_path, max_path):
    return int(min_path.read_text()), int(max_path.read_text())


@pytest.mark.parametrize(("found_mhz", "wanted_mhz", "first", "code"), [
    (1100, 700, "min", errno.EBUSY),  # lowering moves min first; max refused
    (700, 1100, "max", errno.EINVAL),  # raising moves max first; min refused
])
@pytest.mark.parametrize("backend", ["i915", "xe"])
def test_pair_refused_half_way_has_its_first_write_rolled_back(
    tmp_path, backend, found_mhz, wanted_mhz, first, code
):
    device, kernel, min_path, max_path = pinned(tmp_path, backend, found_mhz)
    first_path, second_path = (min_path, max_path) if first == "min" else (max_path, min_path)
    kernel.fail(second_path, "write", code, times=1)
    with pytest.raises(WriteRefused):
        device.set_level(wanted_mhz)
    assert kernel.attempts == [(kernel.rel(first_path), str(wanted_mhz), 0),
                               (kernel.rel(second_path), str(wanted_mhz), code),
                               (kernel.rel(first_path), str(found_mhz), 0)]
    assert pair(min_path, max_path) == (found_mhz, found_mhz)


@pytest.mark.parametrize("backend", ["i915", "xe"])
def test_refused_first_write_leaves_the_pair_untouched(tmp_path, backend):
    device, kernel, min_path, max_path = pinned(tmp_path, backend, 1100)
    kernel.fail(min_path, "write", errno.EACCES, times=1)
    with pytest.raises(WriteRefused):
        device.set_level(700)
    assert kernel.attempts == [(kernel.rel(min_path), "700", errno.EACCES)]
    assert pair(min_path, max_path) == (1100, 1100)


@pytest.mark.parametrize("backend", ["i915", "xe"])
def test_runner_restores_the_pair_when_the_rollback_itself_failed(tmp_path, backend):
    rig = RIGS[backend](tmp_path)
    min_path, max_path = rig.knobs[0], rig.knobs[1]
    found = rig.knob_state()
    rig.kernel.fail(max_path, "write", errno.EBUSY, times=1)
    rig.kernel.fail(min_path, "write", errno.EIO, times=1, skip=1)  # the rollback
    rig.tick(0.0)
    assert rig.runner.paused == "write"
    assert rig.knob_state() == found  # the hand-back put the pair back as found
    assert [code for *_, code in rig.kernel.attempts] == [0, errno.EBUSY, errno.EIO, 0]
