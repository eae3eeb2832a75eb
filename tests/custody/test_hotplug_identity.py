"""A different GPU under the same name (issue 28 item 3): unplug a 300-1150 MHz ``card0``, plug a
100-600 MHz GPU in as ``card0``. It must not inherit the old one's saved state or levels, the
saved state must say which device it came from, and the lock must follow the new directory."""

from __future__ import annotations

import errno
import fcntl
import json
import logging
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from govd.conf.schema import Config
from govd.custody.custody import Custody, restore_custody
from govd.custody.state_file import SavedState, save_state
from govd.daemon.daemon import Daemon, Options
from govd.daemon.hotplug import DeviceWatch
from govd.device.discovery import HotplugEvent
from govd.device.i915 import I915Device
from tests.custody.test_state_file import dead_pid
from tests.sysfs_fixtures import i915_gen9

MAX_TICKS = 5000  # a bound only a broken daemon reaches


@pytest.fixture
def short_dir() -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix="govd-", dir="/tmp") as d:
        yield Path(d)


def config(tmp: Path) -> Config:
    return Config.model_validate({
        "period_ms": 10, "policy": {"name": "performance"}, "state_file": str(tmp / "state.json"),
        "frames": {"source": "socket", "socket": {"path": str(tmp / "f.sock"), "group": None}},
        "logging": {"summary_interval_s": 0}})


def unplug(root: Path, bdf: str = "0000:00:02.0") -> None:
    """The kernel removes the card: its PCI folder and its class link go."""
    (root / "devices/pci0000:00" / bdf).rename(root / f"unplugged-{bdf}")
    for link in (root / "class/drm").iterdir():  # card0, its render node and connector
        if not link.exists():
            link.unlink()


def plug_other(root: Path) -> Path:
    """A different GPU (another slot, another device id, 100-600 MHz) comes in as card0."""
    path, _ = i915_gen9(root, rpn=100, rp0=600, min_mhz=100, max_mhz=600, act_mhz=100,
                        bdf="0000:03:00.0", device_id=0x56A0)
    return path


def bounds(card: Path) -> tuple[str, str]:
    return ((card / "gt_min_freq_mhz").read_text().strip(),
            (card / "gt_max_freq_mhz").read_text().strip())


def locked_by_someone(path: Path) -> bool:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        assert exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN)
        return True
    finally:
        os.close(fd)
    return False


def test_a_different_gpu_plugged_in_under_the_name_is_taken_afresh_never_given_the_old_state(
        short_dir: Path, caplog: pytest.LogCaptureFixture) -> None:
    root = short_dir / "sys"
    i915_gen9(root, min_mhz=400, max_mhz=1000)  # as the user set it: what govd must restore
    seen: dict[str, Any] = {}

    def swap_gpus(daemon: Daemon) -> None:
        ticks = daemon.stats.ticks
        assert ticks < MAX_TICKS, "the new GPU was never taken"
        if ticks == 5:
            unplug(root)
        if ticks == 10:
            seen["new"] = plug_other(root)
        if "new" in seen and daemon.runners and "taken" not in seen:
            runner = daemon.runners[0]
            if runner.device.identity().get("parent") == "0000:03:00.0" and \
                    runner.paused is None and runner.counts["ticks"] > 2:
                seen["taken"] = True
                seen["levels"] = list(runner.governor.levels_mhz[[0, -1]])
                seen["locked"] = locked_by_someone(seen["new"])
                seen["state"] = json.loads((short_dir / "state.json").read_text())

    daemon = Daemon(Options(config(short_dir), sysfs_root=root, rescan_s=0.02))
    caplog.set_level(logging.WARNING, "govd.daemon")
    daemon.options.should_stop = lambda: (swap_gpus(daemon), "taken" in seen)[1]
    assert daemon.run() == 0
    # governed with its own levels, not the old GPU's 300-1150 MHz
    assert seen["levels"][0] < 150 and seen["levels"][1] < 650
    # its own state, found before the first write, with its identity; the old one's is gone
    [entry] = seen["state"]["devices"]
    assert entry["identity"]["parent"] == "0000:03:00.0"
    assert entry["state"]["min_freq_mhz"] == 100 and entry["state"]["max_freq_mhz"] == 600
    assert seen["locked"]  # the new directory is locked: a second govd cannot take it
    assert bounds(seen["new"]) == ("100", "600")  # put back as found, not 400-1000
    assert any("a different device took its name" in r.getMessage() for r in caplog.records)


def test_restore_never_writes_a_saved_state_into_another_device_under_the_name(
        tmp_path: Path) -> None:
    root = tmp_path / "sys"
    i915_gen9(root, min_mhz=400, max_mhz=1000)
    device = I915Device(root / "class/drm/card0", root)  # as discovery finds it
    entry = {**device.save(), "identity": device.identity()}
    save_state(tmp_path / "state.json", SavedState([entry], str(root), pid=dead_pid()))
    unplug(root)
    new = plug_other(root)
    (new / "gt_min_freq_mhz").write_text("200\n")  # as its user set it
    done = restore_custody(tmp_path / "state.json")
    assert done.restored == []
    [line] = done.failures
    assert line.startswith("card0: now a different device (") and "0000:03:00.0" in line
    assert bounds(new) == ("200", "600")  # nothing of the old GPU's state written
    assert not (tmp_path / "state.json").exists()  # it can never apply: dropped, said above


def test_the_saved_state_names_the_device_it_came_from(tmp_path: Path) -> None:
    root = tmp_path / "sys"
    i915_gen9(root)
    custody = Custody(tmp_path / "state.json", root)
    device = I915Device(root / "class/drm/card0", root)
    custody.take(device)
    try:
        [entry] = json.loads((tmp_path / "state.json").read_text())["devices"]
        assert entry["identity"] == {"backend": "i915", "name": "card0",
                                     "parent": "0000:00:02.0", "pci_id": "8086:1912"}
    finally:
        assert custody.end() == []


def test_a_udev_add_of_the_name_at_another_path_retires_the_paused_runner(
        tmp_path: Path) -> None:
    from tests.daemon.test_device_runner import make_runner

    runner, _, _ = make_runner(tmp_path, [2])
    watch = DeviceWatch(tmp_path, rescan_s=0)
    watch.start([runner.name])
    replaced: list[object] = []
    runner.on_replaced = replaced.append
    watch.on_event(HotplugEvent("remove", "devfreq", runner.name, Path("/sys/x")), 1.0, [runner])
    assert runner.paused == "gone"
    watch.on_event(HotplugEvent("add", "devfreq", runner.name, Path("/sys/devices/other")), 1.1,
                   [runner])
    assert runner.paused == "replaced" and replaced == [runner]


def test_a_replugged_device_of_the_same_identity_is_governed_again_and_its_lock_moves(
        short_dir: Path) -> None:
    root = short_dir / "sys"
    i915_gen9(root)
    seen: dict[str, Any] = {}

    def replug(daemon: Daemon) -> None:
        ticks = daemon.stats.ticks
        assert ticks < MAX_TICKS, "the GPU was never taken back"
        if ticks == 5:
            unplug(root)
        if ticks == 10:
            seen["new"], _ = i915_gen9(root)  # the same GPU, a new directory (a new inode)
        runner = daemon.runners[0]
        if "new" in seen and runner.paused is None and runner.counts["resumed"] == 1:
            seen["locked"] = locked_by_someone(seen["new"])
            seen["runners"] = len(daemon.runners)

    daemon = Daemon(Options(config(short_dir), sysfs_root=root, rescan_s=0.02))
    daemon.options.should_stop = lambda: (replug(daemon), "locked" in seen)[1]
    assert daemon.run() == 0
    assert seen == {"new": seen["new"], "locked": True, "runners": 1}
