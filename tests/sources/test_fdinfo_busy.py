"""GPU busy time from DRM fdinfo, on real-format i915, xe and amdgpu files (sources/fdinfo/)."""

from __future__ import annotations

import logging
import math
import os
import re
from pathlib import Path

import pytest

from govd.sources.fdinfo import (
    FDS_PER_SAMPLE,
    MAX_DRM_FILES,
    PIDS_PER_SAMPLE,
    DrmBusyMeter,
    parse_fdinfo,
    pci_slot,
)

FIXTURES = Path(__file__).with_name("fdinfo")


def fixture(driver: str) -> str:
    return (FIXTURES / f"{driver}.txt").read_text()


def with_value(text: str, key: str, value: int) -> str:
    """``text`` with ``key``'s number replaced (the rest of the line, e.g. " ns", kept)."""
    out, n = re.subn(rf"^({re.escape(key)}:\s*)\d+", rf"\g<1>{value}", text, flags=re.M)
    assert n == 1, key
    return out


class FakeProc:
    """A /proc tree: processes with open files, each an fd link and its fdinfo text."""

    def __init__(self, root: Path) -> None:
        self.root = root
        root.mkdir(exist_ok=True)

    def open(self, pid: int, fd: int, text: str, target: str = "/dev/dri/renderD128") -> None:
        (self.root / str(pid) / "fd").mkdir(parents=True, exist_ok=True)
        (self.root / str(pid) / "fdinfo").mkdir(exist_ok=True)
        link = self.root / str(pid) / "fd" / str(fd)
        if not link.is_symlink():
            os.symlink(target, link)
        (self.root / str(pid) / "fdinfo" / str(fd)).write_text(text)


def test_i915_engines_in_ns_with_capacity() -> None:
    client = parse_fdinfo(fixture("i915"))
    assert client is not None
    assert client.key == ("i915", "0000:00:02.0", "39")
    assert client.engine_ns == {"render": 346249, "copy": 0, "video": 0, "video-enhance": 0}
    assert client.capacity == {"video": 2}


def test_xe_cycles_and_total_cycles_per_engine_class() -> None:
    client = parse_fdinfo(fixture("xe"))
    assert client is not None
    assert client.key == ("xe", "0000:03:00.0", "3")
    assert client.engine_ns == {}
    assert client.cycles["rcs"] == (28257900, 7655183225)
    assert set(client.cycles) == {"rcs", "bcs", "vcs", "vecs", "ccs"}
    assert client.capacity == {"vcs": 2, "vecs": 2, "ccs": 4}


def test_amdgpu_engines_and_memory_keys_left_alone() -> None:
    client = parse_fdinfo(fixture("amdgpu"))
    assert client is not None
    assert client.key == ("amdgpu", "0000:03:00.0", "12")
    assert client.engine_ns == {"gfx": 10781351614, "compute": 99508474}


def test_file_that_is_no_drm_client_is_none() -> None:
    assert parse_fdinfo("pos:\t0\nflags:\t02100002\nmnt_id:\t26\nino:\t284\n") is None


@pytest.mark.parametrize(("driver", "key", "step", "expected"), [
    ("i915", "drm-engine-render", 30_000_000, 0.6),  # 30 ms of render in 50 ms
    ("i915", "drm-engine-video", 40_000_000, 0.4),   # two video engines: 40 ms of 100 ms
    ("amdgpu", "drm-engine-gfx", 45_000_000, 0.9),
])
def test_busy_is_engine_time_over_the_interval(tmp_path: Path, driver: str, key: str, step: int,
                                               expected: float) -> None:
    proc, now = FakeProc(tmp_path / "proc"), [100.0]
    text = fixture(driver)
    client = parse_fdinfo(text)
    assert client is not None
    start = {**client.engine_ns}[key.removeprefix("drm-engine-")]
    proc.open(1234, 5, text)
    meter = DrmBusyMeter(pdev=client.pdev, proc=proc.root, clock=lambda: now[0])
    assert math.isnan(meter.sample())  # no interval yet
    now[0] += 0.05
    proc.open(1234, 5, with_value(text, key, start + step))
    assert meter.sample() == pytest.approx(expected)


def test_xe_busy_is_cycles_over_timestamp_cycles(tmp_path: Path) -> None:
    proc, now = FakeProc(tmp_path / "proc"), [0.0]
    text = fixture("xe")
    proc.open(77, 9, text)
    meter = DrmBusyMeter(pdev="0000:03:00.0", proc=proc.root, clock=lambda: now[0])
    meter.sample()
    now[0] = 0.05
    after = with_value(with_value(text, "drm-cycles-rcs", 28257900 + 750_000),
                       "drm-total-cycles-rcs", 7655183225 + 1_000_000)
    proc.open(77, 9, after)
    assert meter.sample() == pytest.approx(0.75)


def test_one_client_open_twice_or_in_two_processes_counts_once(tmp_path: Path) -> None:
    proc, now = FakeProc(tmp_path / "proc"), [0.0]
    text = fixture("i915")
    for pid, fd in ((10, 3), (10, 4), (11, 3)):  # dup'ed and inherited: one drm-client-id
        proc.open(pid, fd, text)
    meter = DrmBusyMeter(pdev="0000:00:02.0", proc=proc.root, clock=lambda: now[0])
    meter.sample()
    now[0] = 0.1
    for pid, fd in ((10, 3), (10, 4), (11, 3)):
        proc.open(pid, fd, with_value(text, "drm-engine-render", 346249 + 20_000_000))
    assert meter.sample() == pytest.approx(0.2)


def test_clients_of_other_devices_and_other_files_are_left_out(tmp_path: Path) -> None:
    proc, now = FakeProc(tmp_path / "proc"), [0.0]
    amd = fixture("amdgpu")
    proc.open(20, 3, amd)
    proc.open(21, 3, fixture("i915").replace("drm-client-id:\t39", "drm-client-id:\t40"),
              target="/home/u/notes.txt")  # not a DRM node: not even read
    meter = DrmBusyMeter(pdev="0000:00:02.0", proc=proc.root, clock=lambda: now[0])
    meter.sample()
    now[0] = 0.1
    proc.open(20, 3, with_value(amd, "drm-engine-gfx", 10781351614 + 90_000_000))
    assert meter.sample() == 0.0
    assert meter.counts["clients"] == 0


def test_two_clients_add_up_and_the_busiest_engine_class_wins(tmp_path: Path) -> None:
    proc, now = FakeProc(tmp_path / "proc"), [0.0]
    game = fixture("amdgpu")
    compositor = game.replace("drm-client-id:\t12", "drm-client-id:\t13")
    proc.open(30, 3, game)
    proc.open(31, 7, compositor)
    meter = DrmBusyMeter(pdev="0000:03:00.0", proc=proc.root, clock=lambda: now[0])
    meter.sample()
    now[0] = 0.1
    proc.open(31, 7, with_value(compositor, "drm-engine-gfx", 10781351614 + 10_000_000))
    proc.open(30, 3, with_value(with_value(game, "drm-engine-gfx", 10781351614 + 50_000_000),
                                "drm-engine-compute", 99508474 + 30_000_000))
    assert meter.sample() == pytest.approx(0.6)


def test_client_first_seen_is_not_counted_with_its_whole_past(tmp_path: Path) -> None:
    proc, now = FakeProc(tmp_path / "proc"), [0.0]
    meter = DrmBusyMeter(pdev="0000:03:00.0", proc=proc.root, clock=lambda: now[0])
    meter.sample()
    now[0] = 5.0  # past the rescan: the new client is found, with hours of gfx time behind it
    proc.open(40, 3, fixture("amdgpu"))
    assert meter.sample() == 0.0


def test_platform_gpu_is_matched_by_driver(tmp_path: Path) -> None:
    proc, now = FakeProc(tmp_path / "proc"), [0.0]
    text = "drm-driver:\tpanfrost\ndrm-client-id:\t2\ndrm-engine-fragment:\t100 ns\n"
    proc.open(50, 3, text)
    meter = DrmBusyMeter(driver="panfrost", proc=proc.root, clock=lambda: now[0])
    meter.sample()
    now[0] = 0.01
    proc.open(50, 3, with_value(text, "drm-engine-fragment", 100 + 5_000_000))
    assert meter.sample() == pytest.approx(0.5)


def test_refused_process_is_reported_once_and_gives_nan(tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    proc = FakeProc(tmp_path / "proc")
    proc.open(60, 3, fixture("i915"))
    real_listdir = os.listdir

    def listdir(path: os.PathLike[str]) -> list[str]:
        if Path(path) == proc.root / "60" / "fd":  # what the kernel says without CAP_SYS_PTRACE
            raise PermissionError(13, "Permission denied")
        return real_listdir(path)

    monkeypatch.setattr("govd.sources.fdinfo.os.listdir", listdir)
    meter = DrmBusyMeter(pdev="0000:00:02.0", proc=proc.root)
    assert math.isnan(meter.sample()) and math.isnan(meter.sample())
    assert len(meter.problems()) == 1 and "CAP_SYS_PTRACE" in meter.problems()[0]
    assert meter.counts["denied"] == 1  # one look at the processes: the next looks in 2 s


def test_pci_slot_of_a_card(tmp_path: Path) -> None:
    pci = tmp_path / "devices" / "pci0000:00" / "0000:00:02.0"
    pci.mkdir(parents=True)
    card = tmp_path / "class" / "drm" / "card0"
    card.mkdir(parents=True)
    (card / "device").symlink_to(pci)
    assert pci_slot(card) == "0000:00:02.0"
    platform = tmp_path / "devices" / "platform" / "fde60000.gpu"
    platform.mkdir(parents=True)
    other = tmp_path / "class" / "drm" / "card1"
    other.mkdir()
    (other / "device").symlink_to(platform)
    assert pci_slot(other) is None


def test_many_processes_are_looked_at_a_batch_per_sample(tmp_path: Path) -> None:
    proc, now = FakeProc(tmp_path / "proc"), [0.0]
    text = fixture("amdgpu")
    count = PIDS_PER_SAMPLE + 36
    for pid in range(1000, 1000 + count):
        proc.open(pid, 3, text.replace("drm-client-id:\t12", f"drm-client-id:\t{pid}"))
    meter = DrmBusyMeter(pdev="0000:03:00.0", proc=proc.root, clock=lambda: now[0])
    meter.sample()
    assert meter.counts["clients"] == PIDS_PER_SAMPLE
    now[0] = 0.05
    meter.sample()
    assert meter.counts["clients"] == count


def test_process_with_many_open_files_is_looked_at_over_several_samples(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Any user may hold half a million descriptors open: a readlink each in one tick would
    # stall the loop for seconds (every RESCAN_S).
    import govd.sources.fdinfo as fdinfo

    proc, now = FakeProc(tmp_path / "proc"), [0.0]
    text = fixture("amdgpu")
    hoarder = proc.root / "1000" / "fd"
    hoarder.mkdir(parents=True)
    for fd in range(3 * FDS_PER_SAMPLE):
        os.symlink("/dev/null", hoarder / str(fd + 100))
    proc.open(1000, 3 * FDS_PER_SAMPLE + 100, text)
    proc.open(1001, 3, text.replace("drm-client-id:\t12", "drm-client-id:\t13"))
    links = [0]
    real_readlink = os.readlink

    def counted(path: object) -> str:
        links[0] += 1
        return real_readlink(path)  # type: ignore[arg-type]

    monkeypatch.setattr(fdinfo.os, "readlink", counted)
    meter = DrmBusyMeter(pdev="0000:03:00.0", proc=proc.root, clock=lambda: now[0])
    for _ in range(6):
        links[0] = 0
        meter.sample()
        assert links[0] <= FDS_PER_SAMPLE
        now[0] += 0.05
    assert meter.counts["clients"] == 2


def test_thousands_of_drm_files_cost_a_bounded_read_per_sample_and_are_said_once(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="govd.sources.fdinfo")  # whatever another test set
    # The render node is open to every user: one process opening it thousands of times made
    # every tick read thousands of fdinfo files.
    proc, now = FakeProc(tmp_path / "proc"), [0.0]
    text = fixture("amdgpu")
    game = text.replace("drm-client-id:\t12", "drm-client-id:\t7")
    proc.open(999, 3, game)  # the game, looked at first
    for fd in range(MAX_DRM_FILES + 500):
        proc.open(1000, fd + 3, text.replace("drm-client-id:\t12", f"drm-client-id:\t{fd + 100}"))
    meter = DrmBusyMeter(pdev="0000:03:00.0", proc=proc.root, clock=lambda: now[0])
    for _ in range(8):
        meter.sample()
        now[0] += 0.05
    assert meter.counts["clients"] <= MAX_DRM_FILES
    assert meter.counts["drm_files_over"] > 0
    assert "7" in {key[2] for key in meter._before or {}}  # the game's one file is read
    assert len(meter.problems()) == 1 and "\n" not in meter.problems()[0]
    said = [r for r in caplog.records if "DRM" in r.getMessage()]
    assert len(said) == 1
