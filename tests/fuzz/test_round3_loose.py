"""The third hostile round's loose ends (issue 28, medium and low): a device disabled by a reload
kept its lock, device names with newlines forged journal lines, fdinfo values in other scripts'
digits raised, and a sysfs file of 60 000 NUL bytes was quoted whole into the journal."""

from __future__ import annotations

import errno
import fcntl
import json
import logging
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from govd.device.base import DeviceError
from govd.device.devfreq import DevfreqDevice
from govd.device.discovery import discover_sysfs
from govd.sources.fdinfo import parse_fdinfo
from govd.telemetry.log import MAX_MESSAGE_CHARS, setup_logging
from tests.daemon.test_reload import ADRENO, daemon_for, settings, write
from tests.sysfs_fixtures import adreno_msm, devfreq_soc, mali_panfrost


@pytest.fixture
def short_dir() -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix="govd-", dir="/tmp") as d:
        yield Path(d)


def lock_is_free(path: Path) -> bool:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        assert exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN)
        return False
    finally:
        os.close(fd)
    return True


def test_a_device_disabled_by_a_reload_is_let_go_lock_and_all(short_dir: Path) -> None:
    root = short_dir / "sys"
    mali_panfrost(root)
    adreno, _ = adreno_msm(root)
    daemon = daemon_for(short_dir, root, settings(short_dir))
    seen: dict[str, bool] = {}

    def should_stop() -> bool:
        ticks = daemon.stats.ticks
        if ticks == 2 and "before" not in seen:
            seen["before"] = lock_is_free(adreno)
        if ticks == 3 and "reloaded" not in seen:
            assert daemon.options.config_path is not None
            write(daemon.options.config_path,
                  settings(short_dir, devices=[{"name": ADRENO, "enabled": False}]))
            seen["reloaded"] = daemon.reload()
        if ticks == 6 and "after" not in seen:
            seen["after"] = lock_is_free(adreno)  # another govd could take it now
        return "after" in seen

    daemon.options.should_stop = should_stop
    assert daemon.run() == 0
    assert seen == {"before": False, "reloaded": True, "after": True}


def test_a_device_name_with_a_newline_cannot_forge_a_journal_line(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = tmp_path / "sys"
    devfreq_soc(root, "gpu0\ngovd: INFO govd.daemon: every device restored", "panfrost",
                [200_000_000, 400_000_000])
    [device] = discover_sysfs(root)
    assert device.name.isprintable() and "\n" not in device.name
    setup_logging("info", under_systemd=False)
    logging.getLogger("govd.test").warning("%s: hello", "card0\nforged: line")
    assert capsys.readouterr().err.count("\n") == 1


def test_a_sysfs_file_of_nul_bytes_is_not_quoted_whole_in_the_journal(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path, _ = mali_panfrost(tmp_path)
    (path / "cur_freq").write_bytes(b"\0" * 60_000)
    with pytest.raises(DeviceError) as raised:
        DevfreqDevice(path, tmp_path).read()
    setup_logging("info", under_systemd=False)
    logging.getLogger("govd.daemon").error("%s", raised.value)
    line = capsys.readouterr().err
    assert line.count("\n") == 1 and len(line) < MAX_MESSAGE_CHARS + 100


@pytest.mark.parametrize("digits", ["²", "١٢٣", "9" * 400])
def test_fdinfo_numbers_in_other_digits_are_not_numbers(digits: str) -> None:
    client = parse_fdinfo(f"drm-driver:\ti915\ndrm-client-id:\t7\n"
                          f"drm-engine-render:\t{digits} ns\ndrm-engine-copy:\t5 ns\n")
    assert client is not None
    assert client.engine_ns == {"copy": 5}


def test_the_state_file_names_the_device_by_its_printable_name(tmp_path: Path) -> None:
    root = tmp_path / "sys"
    devfreq_soc(root, "gpu\x1b[2J", "panfrost", [200_000_000, 400_000_000])
    [device] = discover_sysfs(root)
    assert json.dumps(device.save()["name"]) == '"gpu?[2J"'
