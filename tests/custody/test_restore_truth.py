"""Restores that are restores (issue 28 item 7, the devfreq half): a devfreq device found under
``userspace`` with ``set_freq`` reading ``undefined`` was left at govd's last level, and the
daemon logged "every device restored". What was found is put back, or what could not be is said,
and "every device restored" is said only when it is true."""

from __future__ import annotations

import logging
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from govd.conf.schema import Config
from govd.daemon.daemon import Daemon, Options
from govd.device.base import DeviceError
from govd.device.devfreq import DevfreqDevice
from tests.sysfs_fixtures import mali_panfrost


def read(path: Path, name: str) -> str:
    return (path / name).read_text().strip()


def test_a_request_found_undefined_reads_undefined_again_after_the_restore(
        tmp_path: Path) -> None:
    path, kernel = mali_panfrost(tmp_path, governor="userspace", set_freq="undefined")
    (path / "cur_freq").write_text("600000000\n")  # what it ran at, nothing asked yet
    device = DevfreqDevice(path, tmp_path, kernel)
    device.save()
    device.set_level(200)
    assert read(path, "userspace/set_freq") == "200000000"
    device.restore()
    assert read(path, "governor") == "userspace"
    assert read(path, "userspace/set_freq") == "undefined"
    assert (read(path, "min_freq"), read(path, "max_freq")) == ("200000000", "800000000")
    assert read(path, "cur_freq") == "600000000"  # where the kernel keeps an undefined request


def test_without_another_governor_the_restore_says_exactly_what_stayed(tmp_path: Path) -> None:
    path, kernel = mali_panfrost(tmp_path, governor="userspace", governors="userspace",
                                 set_freq="undefined")
    device = DevfreqDevice(path, tmp_path, kernel)
    device.save()
    device.set_level(400)
    with pytest.raises(DeviceError, match=r"set_freq read undefined when govd took it.* offers "
                                          r"none: set_freq left at 400000000"):
        device.restore()


@pytest.fixture
def short_dir() -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix="govd-", dir="/tmp") as d:
        yield Path(d)


def test_the_daemon_says_every_device_restored_only_when_it_is_true(
        short_dir: Path, caplog: pytest.LogCaptureFixture) -> None:
    root = short_dir / "sys"
    mali_panfrost(root, governor="userspace", governors="userspace", set_freq="undefined")
    config = Config.model_validate({
        "period_ms": 10, "policy": {"name": "powersave"},
        "state_file": str(short_dir / "state.json"),
        "frames": {"source": "socket", "socket": {"path": str(short_dir / "f.sock"),
                                                  "group": None}},
        "logging": {"summary_interval_s": 0}})
    daemon = Daemon(Options(config, sysfs_root=root))
    daemon.options.should_stop = lambda: daemon.stats.ticks >= 5
    caplog.set_level(logging.INFO, "govd")
    assert daemon.run() == 1
    said = [r.getMessage() for r in caplog.records]
    assert not any("every device restored" in line for line in said)
    assert any("could not restore fde60000.gpu" in line and "undefined" in line
               for line in said)
    assert (short_dir / "state.json").exists()  # kept for `govd restore`


def test_a_mask_put_back_only_as_the_level_running_is_said_as_such_at_the_end(
        tmp_path: Path) -> None:
    """The amdgpu half: a ``manual`` mask another tool forced (``2 3 4``) reads back as the
    level running only, so the custody's end lists what went back only that far, and the
    daemon and `govd measure` say that instead of "every device restored"."""
    from govd.custody.custody import Custody
    from govd.device.amdgpu import AmdgpuDevice
    from tests.amdgpu_cards import hand_written

    root = tmp_path / "sys"
    path, kernel, model = hand_written(root, "polaris", perf="manual")
    kernel.write_text(path / "device/pp_dpm_sclk", "2 3 4")  # another tool, before govd
    model.found_now()
    device = AmdgpuDevice(path, root, kernel)
    custody = Custody(tmp_path / "state.json", root)
    custody.take(device)
    device.set_level(300)
    assert custody.end() == []
    [caveat] = custody.caveats
    assert caveat.startswith(f"{device.name}: ") and "level 2" in caveat
    # a device found as the driver can show it leaves nothing to say
    clean = tmp_path / "clean"
    path, kernel, model = hand_written(clean / "sys", "polaris")
    device = AmdgpuDevice(path, clean / "sys", kernel)
    custody = Custody(clean / "state.json", clean / "sys")
    custody.take(device)
    device.set_level(300)
    assert custody.end() == [] and custody.caveats == []
