"""The sysfs read and write path the daemon uses every tick: by path (any tree), kept open (the
real /sys for reads)."""

from __future__ import annotations

import errno
import os

import pytest

from govd.device.base import DeviceGone
from govd.device.devfreq import DevfreqDevice
from govd.device.sysfs import KeptOpenSysfsIO, SysfsIO
from tests.sysfs_fixtures import mali_panfrost


def test_kept_open_file_is_read_afresh_each_time(tmp_path):
    attr = tmp_path / "cur_freq"
    attr.write_text("400000000\n")
    io = KeptOpenSysfsIO()
    assert io.read_text(attr) == "400000000"
    with open(attr, "r+") as f:  # the kernel changes an attribute in place, never replaces it
        f.write("800000000\n")
    assert io.read_text(attr) == "800000000"
    io.close()


def test_kept_open_file_is_dropped_after_a_failed_read_and_opened_again(tmp_path):
    io = KeptOpenSysfsIO()
    folder = tmp_path / "not_an_attribute"
    folder.mkdir()
    with pytest.raises(OSError) as failed:
        io.read_text(folder)
    assert failed.value.errno == errno.EISDIR
    before = len(os.listdir("/proc/self/fd"))
    with pytest.raises(OSError):
        io.read_text(folder)
    assert len(os.listdir("/proc/self/fd")) == before  # nothing left open by the failure


def test_read_by_path_sees_a_file_replaced_by_rename(tmp_path):
    attr = tmp_path / "power1_average"
    attr.write_text("1000000\n")
    io = SysfsIO()
    assert io.read_text(attr) == "1000000"
    (tmp_path / "new").write_text("2000000\n")
    os.replace(tmp_path / "new", attr)  # how the simulated GPU updates its tree
    assert io.read_text(attr) == "2000000"


def test_long_file_is_read_whole(tmp_path):
    attr = tmp_path / "trans_stat"
    text = "x" * 20000
    attr.write_text(text)
    assert SysfsIO().read_text(attr) == text
    assert KeptOpenSysfsIO().read_text(attr) == text


def test_device_gone_from_a_fixture_tree_is_still_device_gone(tmp_path):
    path, _ = mali_panfrost(tmp_path)
    device = DevfreqDevice(path, tmp_path)
    device.read()
    path.parent.parent.rename(tmp_path / "unplugged")
    with pytest.raises(DeviceGone):
        device.read()


def test_a_write_replaces_the_whole_value_as_open_w_did(tmp_path):
    attr = tmp_path / "set_freq"
    attr.write_text("311000000\n")
    SysfsIO().write_text(str(attr), "5")
    assert attr.read_bytes() == b"5"  # truncated first: no tail of the longer value left


def test_a_write_that_fails_leaves_no_file_open_and_raises_its_errno(tmp_path):
    folder = tmp_path / "not_an_attribute"
    folder.mkdir()
    before = len(os.listdir("/proc/self/fd"))
    with pytest.raises(OSError) as failed:
        SysfsIO().write_text(str(folder), "1")
    assert failed.value.errno == errno.EISDIR
    assert len(os.listdir("/proc/self/fd")) == before


def test_a_write_is_one_write_call_of_the_whole_value(tmp_path, monkeypatch):
    calls: list[bytes] = []
    real_write = os.write

    def recorded(fd: int, data: bytes) -> int:
        calls.append(bytes(data))
        return real_write(fd, data)

    monkeypatch.setattr(os, "write", recorded)
    SysfsIO().write_text(str(tmp_path / "governor"), "userspace")
    assert calls == [b"userspace"]
    assert (tmp_path / "governor").read_text() == "userspace"
