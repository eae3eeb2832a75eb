"""The daemon in-process on devfreq fixture trees: suspend/resume, devices appearing after start,
frames routed by their ``device=`` key, and the MangoHud and busy frame sources.

Each test runs the real loop (10 ms period) until a condition holds, through `Options.should_stop`,
which is polled once per tick: the condition is what the test waits for, never a sleep.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from govd.conf.schema import Config
from govd.custody.custody import restore_custody
from govd.custody.signals import held_stops
from govd.daemon.daemon import Daemon, Options, StartError, frames_for
from govd.daemon.device_runner import DeviceRunner
from govd.device.devfreq import DevfreqDevice
from govd.model.settings import MAX_LEVELS
from govd.sources.base import Frame
from tests.sysfs_fixtures import (
    adreno_msm,
    amdgpu_polaris,
    devfreq_soc,
    i915_gen9,
    mali_panfrost,
    rockchip_dmc,
)

MALI, ADRENO = "fde60000.gpu", "5000000.gpu"
MAX_TICKS = 2000  # a bound that only a broken daemon reaches; nothing here asserts on speed


def _restored(path: Path) -> tuple[int, list[str]]:
    """What `govd restore` does with the state file ``path``: (devices in stale files, failures)."""
    done = restore_custody(path)
    return done.devices, done.failures


@pytest.fixture
def short_dir() -> Iterator[Path]:
    # AF_UNIX paths are limited to 108 bytes: pytest's tmp_path can be longer.
    with tempfile.TemporaryDirectory(prefix="govd-", dir="/tmp") as d:
        yield Path(d)


def config(tmp: Path, **extra: Any) -> Config:
    data: dict[str, Any] = {
        "period_ms": 10, "policy": {"name": "performance"}, "state_file": str(tmp / "state.json"),
        "frames": {"source": "socket", "socket": {"path": str(tmp / "f.sock"), "group": None}},
        "logging": {"summary_interval_s": 0},
    }
    return Config.model_validate({**data, **extra})


def run_until(
    daemon: Daemon, done: Callable[[Daemon], bool], each_tick: Callable[[Daemon], None]
) -> None:
    """Run the daemon until ``done(daemon)`` (checked every tick, after ``each_tick``)."""
    def should_stop() -> bool:
        each_tick(daemon)
        assert daemon.stats.ticks < MAX_TICKS, "condition never met"
        return done(daemon)

    daemon.options.should_stop = should_stop
    assert daemon.run() == 0


def runner(daemon: Daemon, name: str) -> DeviceRunner:
    [found] = [r for r in daemon.runners if r.name == name]
    return found


def nothing(_: Daemon) -> None:
    pass


def test_resume_from_suspend_rewrites_each_device_once_though_the_level_did_not_change(
        short_dir):
    root = short_dir / "sys"
    mali_panfrost(root, governor="userspace")
    adreno_msm(root, governor="userspace")
    slept = {"s": 0.0}

    def sleep_once(daemon: Daemon) -> None:
        if daemon.stats.ticks == 5:
            slept["s"] = 30.0  # CLOCK_BOOTTIME ran 30 s ahead of CLOCK_MONOTONIC

    daemon = Daemon(Options(config(short_dir), sysfs_root=root,
                            suspend_offset_s=lambda: slept["s"]))
    run_until(daemon, lambda d: d.stats.ticks >= 15, sleep_once)
    # performance: the same level all along; one write at start, one after the resume
    assert [r.counts["writes"] for r in daemon.runners] == [2, 2]


def test_no_rewrite_without_a_suspend(short_dir):
    root = short_dir / "sys"
    mali_panfrost(root, governor="userspace")
    daemon = Daemon(Options(config(short_dir), sysfs_root=root, suspend_offset_s=lambda: 0.5))
    run_until(daemon, lambda d: d.stats.ticks >= 10, nothing)
    assert daemon.runners[0].counts["writes"] == 1


def test_a_frame_source_that_fails_to_close_does_not_keep_the_clocks_from_going_back(
        short_dir):
    """The sources and the metrics endpoint are closed first on the way out (their
    descriptors); a close that raised used to end the stop before any device was restored."""
    root = short_dir / "sys"
    mali_panfrost(root, governor="userspace")
    set_freq = root / f"devices/platform/{MALI}/devfreq/{MALI}/userspace/set_freq"
    before = set_freq.read_text()

    def fail() -> None:
        raise OSError(5, "Input/output error")

    def break_close(daemon: Daemon) -> None:
        if daemon.stats.ticks == 2:
            daemon.source.close = fail  # type: ignore[method-assign]

    daemon = Daemon(Options(config(short_dir), sysfs_root=root))
    run_until(daemon, lambda d: d.stats.ticks >= 5 and runner(d, MALI).counts["writes"] > 0,
              break_close)
    assert set_freq.read_text().strip() == before.strip()
    assert not (short_dir / "state.json").exists()  # every device back: the file is removed


def test_device_appearing_after_start_is_saved_to_the_state_file_then_governed(short_dir):
    root = short_dir / "sys"
    mali_panfrost(root, governor="userspace")
    seen: dict[str, Any] = {}

    def plug_and_watch(daemon: Daemon) -> None:
        if daemon.stats.ticks == 3:
            adreno_msm(root, governor="userspace")
        if len(daemon.runners) == 2 and "state" not in seen:
            seen["state"] = json.loads((short_dir / "state.json").read_text())

    daemon = Daemon(Options(config(short_dir), sysfs_root=root, rescan_s=0.02))
    run_until(daemon, lambda d: len(d.runners) == 2 and runner(d, ADRENO).counts["writes"] > 0,
              plug_and_watch)
    saved = {d["name"]: d for d in seen["state"]["devices"]}
    assert set(saved) == {MALI, ADRENO}
    # saved before govd's first write: the request another tool left (180 MHz), not govd's
    assert saved[ADRENO]["state"]["set_freq_hz"] == 180_000_000
    assert (root / f"devices/platform/{ADRENO}/devfreq/{ADRENO}/userspace/set_freq"
            ).read_text().strip() == "180000000"  # put back at the stop
    assert not (short_dir / "state.json").exists()  # clean stop: both restored, file removed


def test_device_refused_by_the_configuration_is_not_taken_when_it_appears(short_dir):
    root = short_dir / "sys"
    mali_panfrost(root, governor="userspace")

    def plug(daemon: Daemon) -> None:
        if daemon.stats.ticks == 2:
            adreno_msm(root, governor="userspace")

    cfg = config(short_dir, devices=[{"name": ADRENO, "enabled": False}])
    daemon = Daemon(Options(cfg, sysfs_root=root, rescan_s=0.01))
    run_until(daemon, lambda d: d.stats.ticks >= 20, plug)
    assert [r.name for r in daemon.runners] == [MALI]


def test_frames_without_a_device_key_go_to_every_device_and_keyed_ones_to_theirs():
    frames = [Frame(1.0), Frame(2.0, device=MALI), Frame(3.0, device="card9")]
    assert [f.gpu_time_ms for f in frames_for(frames, MALI)] == [1.0, 2.0]
    assert [f.gpu_time_ms for f in frames_for(frames, ADRENO)] == [1.0]
    unkeyed = [Frame(1.0)]
    assert frames_for(unkeyed, ADRENO) is unkeyed  # the common case copies nothing


def test_socket_frames_keyed_to_one_device_reach_only_that_device(short_dir):
    root = short_dir / "sys"
    mali_panfrost(root, governor="userspace")
    adreno_msm(root, governor="userspace")
    sender = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)

    def send(daemon: Daemon) -> None:
        if daemon.stats.ticks >= 2:
            sender.sendto(f"F 8000 device={MALI}\n".encode(), str(short_dir / "f.sock"))

    daemon = Daemon(Options(config(short_dir), sysfs_root=root))
    try:
        run_until(daemon, lambda d: runner(d, MALI).status()["frame_ms"] is not None, send)
    finally:
        sender.close()
    assert runner(daemon, MALI).status()["frame_ms"] == pytest.approx(8.0)
    assert runner(daemon, ADRENO).status()["frame_ms"] is None


def test_mangohud_rows_appended_to_the_newest_log_drive_the_governor(short_dir):
    root = short_dir / "sys"
    mali_panfrost(root, governor="userspace")
    logs = short_dir / "mangohud"
    logs.mkdir()
    log = logs / "game_2026-01-02_03-04-05.csv"
    log.write_text("os,cpu,gpu,ram,kernel,driver,cpuscheduler\nLinux,cpu,gpu,1,6.1,mesa,\n"
                   "fps,frametime,gpu_load,elapsed\n")

    def grow(daemon: Daemon) -> None:
        if daemon.stats.ticks >= 2:
            with open(log, "a") as f:
                f.write(f"80.0,12.5,90,{daemon.stats.ticks * 10_000_000}\n")

    cfg = config(short_dir, frames={"source": "mangohud", "mangohud": {"dir": str(logs),
                                                                      "rescan_s": 0.01}})
    daemon = Daemon(Options(cfg, sysfs_root=root))
    run_until(daemon, lambda d: (d.runners[0].status()["frame_ms"] or 0) > 0, grow)
    status = daemon.runners[0].status()
    assert status["frame_ms"] == pytest.approx(12.5)


def test_busy_source_decisions_follow_busy_time_without_any_frame(short_dir):
    root = short_dir / "sys"
    path, _ = mali_panfrost(root, governor="userspace", busy_percent=97)
    busy_file = path.parent.parent / "gpu_busy_percent"
    levels: list[float] = []

    def quiet_later(daemon: Daemon) -> None:
        chosen = daemon.runners[0].status()["chosen_mhz"]
        if chosen is not None and (not levels or levels[-1] != chosen):
            levels.append(chosen)
        if daemon.stats.ticks == 10:
            busy_file.write_text("5\n")

    cfg = config(short_dir, policy={"name": "ondemand"}, min_dwell_ms=0,
                 frames={"source": "busy"})
    daemon = Daemon(Options(cfg, sysfs_root=root))
    run_until(daemon, lambda d: d.stats.ticks >= 20, quiet_later)
    assert levels[0] == 800.0  # 97 % busy: ondemand goes to the top
    assert levels[-1] < 800.0  # 5 % busy: it comes down
    assert daemon.runners[0].status()["frame_ms"] > 0  # pseudo-frames from busy time
    assert daemon.source is None  # no frame source at all: only busy time


@pytest.mark.parametrize(("policy", "target", "warned"), [
    ("energy", {"fps": 60}, True),
    ("energy", {"max_slowdown": 0.1}, False),
    ("ondemand", {"fps": 60}, False),  # ignores the target: nothing to say
])
def test_busy_time_under_a_frame_rate_is_said_once_at_start(short_dir, caplog, policy, target,
                                                              warned):
    """Busy time per tick has no frame deadline: a model-driven policy under a frame rate
    would hold it under 1000/fps ms a tick, which a careless config means rarely."""
    root = short_dir / "sys"
    mali_panfrost(root, governor="userspace", busy_percent=40)
    caplog.set_level("INFO", logger="govd.daemon")
    cfg = config(short_dir, policy={"name": policy}, target=target, frames={"source": "busy"})
    daemon = Daemon(Options(cfg, sysfs_root=root))
    run_until(daemon, lambda d: d.stats.ticks >= 5, lambda d: None)
    said = [r for r in caplog.records if "frames.source busy" in r.getMessage()]
    assert len(said) == (1 if warned else 0)
    if warned:
        assert said[0].levelname == "WARNING"
        assert "16.7 ms a tick" in said[0].getMessage()


def test_device_key_is_parsed_and_a_bad_one_rejects_the_line():
    from govd.sources.frame_line import LineRejected, parse_frame_line

    assert parse_frame_line(b"F 1000 app=game device=card1").device == "card1"
    assert parse_frame_line(b"F 1000").device is None
    for bad in (b"F 1000 device=", b"F 1000 device=" + b"x" * 65):
        with pytest.raises(LineRejected, match="bad_device"):
            parse_frame_line(bad)


def test_device_another_tool_keeps_taking_is_left_to_it_at_stop(short_dir, caplog):
    """A contested device (govd stepped back) is not 'restored' at stop: that would undo the
    other tool's setting, and the state govd found is no longer what the device should have.
    The stop's last line says so instead of claiming every device restored."""
    caplog.set_level("INFO", logger="govd.daemon")
    root = short_dir / "sys"
    devfreq, _ = mali_panfrost(root, governor="userspace")

    def other_tool(daemon: Daemon) -> None:
        if daemon.stats.ticks >= 3:
            (devfreq / "governor").write_text("simple_ondemand")

    daemon = Daemon(Options(config(short_dir), sysfs_root=root))
    run_until(daemon, lambda d: runner(d, MALI).paused == "contested", other_tool)
    assert (devfreq / "governor").read_text().strip() == "simple_ondemand"
    assert not (short_dir / "state.json").exists()
    lines = [r.getMessage() for r in caplog.records]
    assert "every device restored" not in lines
    assert f"restored none; left to the tool that took it: {MALI}" in lines


def test_start_up_objects_are_frozen_out_of_the_collectors_scans(short_dir):
    """A full collection over start-up's objects takes most of a tick (lost ticks under load)."""
    import gc

    root = short_dir / "sys"
    mali_panfrost(root, governor="userspace")
    frozen: list[int] = []
    daemon = Daemon(Options(config(short_dir), sysfs_root=root))
    try:
        run_until(daemon, lambda d: d.stats.ticks >= 2,
                  lambda d: frozen.append(gc.get_freeze_count()))
    finally:
        gc.unfreeze()
    assert min(frozen) > 10_000


def with_set_freq(devfreq: Path) -> None:
    """Plain files do not grow ``userspace/set_freq`` with the governor as the kernel does."""
    (devfreq / "userspace").mkdir()
    (devfreq / "userspace/set_freq").write_text("undefined\n")


def files_under(root: Path) -> dict[str, str]:
    """Every file's content under ``root``, by path (what a write would change)."""
    return {str(p): p.read_text() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("same_state_file", [True, False])
def test_second_daemon_on_a_governed_device_touches_nothing_and_says_why(short_dir,
                                                                         same_state_file):
    """Two daemons on one device: the second fails on the device's lock before it restores,
    saves or writes anything, and its exit leaves the first one's state file alone."""
    root = short_dir / "sys"
    devfreq, _ = mali_panfrost(root)
    with_set_freq(devfreq)
    first_state = short_dir / "state.json"
    second_dir = short_dir if same_state_file else short_dir / "second"
    second = Daemon(Options(config(second_dir), sysfs_root=root))
    outcome: dict[str, Any] = {}

    def start_second(daemon: Daemon) -> None:
        if daemon.stats.ticks == 3 and not outcome:
            saved = first_state.read_text()
            found = files_under(root)
            with pytest.raises(StartError, match=f"{MALI}: held by another govd process"):
                second.run()
            outcome["first state kept"] = first_state.read_text() == saved
            outcome["second state written"] = not same_state_file and \
                (second_dir / "state.json").exists()
            outcome["device written"] = files_under(root) != found

    daemon = Daemon(Options(config(short_dir), sysfs_root=root))
    run_until(daemon, lambda d: bool(outcome), start_second)
    assert outcome == {"first state kept": True, "second state written": False,
                       "device written": False}
    assert (devfreq / "governor").read_text().strip() == "simple_ondemand"  # first restored


def test_restore_waits_for_the_lock_and_works_once_the_crashed_daemons_lock_is_gone(short_dir):
    root = short_dir / "sys"
    devfreq, _ = mali_panfrost(root)
    with_set_freq(devfreq)
    crashed = Daemon(Options(config(short_dir), sysfs_root=root))
    crashed._start()  # locks, saves the state, governs ... and then dies without a shutdown
    crashed.runners[0].tick(0.0, 0.01, [])
    assert (devfreq / "governor").read_text().strip() == "userspace"
    count, failures = _restored(short_dir / "state.json")
    assert count == 1 and "held by another govd process" in failures[0]
    assert (devfreq / "governor").read_text().strip() == "userspace"  # not written under it
    crashed.custody.locks.release_all()  # what the kernel does when the process dies
    crashed.source.close()
    assert _restored(short_dir / "state.json") == (1, [])
    assert (devfreq / "governor").read_text().strip() == "simple_ondemand"
    assert not (short_dir / "state.json").exists()


def test_full_disk_under_record_stops_recording_once_and_every_device_is_restored(short_dir,
                                                                                  caplog):
    """ENOSPC on the trace (here /dev/full behind a small buffer) is logged once per trace,
    recording stops, governing goes on, and at stop both devices are put back."""
    caplog.set_level("INFO", logger="govd.daemon")
    caplog.set_level("INFO", logger="govd.daemon")
    root = short_dir / "sys"
    devices = [mali_panfrost(root)[0], adreno_msm(root)[0]]
    for devfreq in devices:
        with_set_freq(devfreq)
    full_at: dict[str, int] = {}

    def fill_the_disk(daemon: Daemon) -> None:
        if daemon.stats.ticks == 2:
            for r in daemon.runners:
                assert r.recorder is not None
                r.recorder._file = open("/dev/full", "w", buffering=64)  # noqa: SIM115
            full_at["ticks"] = runner(daemon, MALI).counts["ticks"]

    daemon = Daemon(Options(config(short_dir), sysfs_root=root, record=short_dir / "t.csv"))
    run_until(daemon, lambda d: d.stats.ticks >= 30, fill_the_disk)
    assert runner(daemon, MALI).counts["ticks"] >= full_at["ticks"] + 25  # governing went on
    stopped = [r.getMessage() for r in caplog.records if "recording stopped" in r.getMessage()]
    assert len(stopped) == 2 and all("No space left on device" in line for line in stopped)
    for devfreq in devices:
        assert (devfreq / "governor").read_text().strip() == "simple_ondemand"
    assert "every device restored" in [r.getMessage() for r in caplog.records]
    assert not (short_dir / "state.json").exists()


def test_memory_controller_beside_the_gpu_is_never_written_by_default(short_dir):
    root = short_dir / "sys"
    mali_panfrost(root, governor="userspace")
    dmc, _ = rockchip_dmc(root)
    found = files_under(dmc)
    daemon = Daemon(Options(config(short_dir), sysfs_root=root))
    run_until(daemon, lambda d: d.stats.ticks >= 5, nothing)
    assert [r.name for r in daemon.runners] == [MALI]
    assert files_under(dmc) == found


def test_at_real_time_loop_time_is_read_from_the_monotonic_clock_without_a_python_call(
        short_dir):
    import time

    real = Daemon(Options(config(short_dir)))
    assert real._now_s() is time.monotonic  # the loop and the frame source call it directly
    fast = Daemon(Options(config(short_dir), speed=4.0))
    assert fast._now_s() == fast.clock.now_s  # accelerated: the clock converts


def test_a_bug_in_one_devices_restore_still_restores_every_other_device(short_dir, caplog):
    """Whatever one device's restore raises (here a ValueError, a bug rather than a
    DeviceError), the next device is still put back and the first is kept in the state file
    for `govd restore`: the stop never leaves a GPU at govd's level because of another."""
    caplog.set_level("INFO", logger="govd.daemon")
    root = short_dir / "sys"
    devices = [mali_panfrost(root)[0], adreno_msm(root)[0]]
    for devfreq in devices:
        with_set_freq(devfreq)
    daemon = Daemon(Options(config(short_dir), sysfs_root=root))

    def broken_restore() -> None:
        raise ValueError("a bug in restore")

    def break_first(d: Daemon) -> None:
        if d.stats.ticks == 3:
            d.runners[0].device.restore = broken_restore  # type: ignore[method-assign]

    daemon.options.should_stop = lambda: (break_first(daemon), daemon.stats.ticks >= 5)[1]
    assert daemon.run() == 1
    broken, fine = daemon.runners[0].name, daemon.runners[1].name
    governors = {d.name: (d / "governor").read_text().strip() for d in devices}
    assert governors[fine] == "simple_ondemand"
    kept = json.loads((short_dir / "state.json").read_text())["devices"]
    assert [entry["name"] for entry in kept] == [broken]
    assert any(broken in r.getMessage() and "a bug in restore" in r.getMessage()
               for r in caplog.records)


def test_device_unplugged_between_discovery_and_its_lock_is_skipped_and_the_others_governed(
        short_dir, monkeypatch, caplog):
    """A GPU that goes away during start-up (found, then gone before govd locks it) is left to
    hot-plug; it must not stop govd governing the others, nor have a lock file made in its
    place."""
    import govd.daemon.daemon as daemon_module

    caplog.set_level("INFO", logger="govd.daemon")
    root = short_dir / "sys"
    mali, _ = mali_panfrost(root)
    adreno_msm(root)
    with_set_freq(mali)
    chosen = daemon_module.select

    def chosen_then_unplugged(*args: Any) -> list[Any]:
        devices = chosen(*args)
        (root / f"devices/platform/{ADRENO}").rename(short_dir / "unplugged")
        return devices

    monkeypatch.setattr(daemon_module, "select", chosen_then_unplugged)
    daemon = Daemon(Options(config(short_dir), sysfs_root=root))
    run_until(daemon, lambda d: d.stats.ticks >= 3, nothing)
    assert [r.name for r in daemon.runners] == [MALI]
    assert not (root / f"devices/platform/{ADRENO}").exists()
    assert any(ADRENO in r.getMessage() and "gone" in r.getMessage() for r in caplog.records)


@pytest.mark.parametrize("levels", [1, MAX_LEVELS + 1], ids=["one-level", "too-many-levels"])
def test_device_whose_levels_the_model_cannot_take_is_left_alone_and_the_others_governed(
        short_dir, levels):
    """A GPU with one operating point has nothing to choose, one with more than the model
    takes (`MAX_LEVELS`) cannot be modelled: each is not controllable (`govd devices` says
    why) rather than a governor that fails to build and stops govd governing any GPU."""
    root = short_dir / "sys"
    mali, _ = mali_panfrost(root)
    with_set_freq(mali)
    freqs = [100_000_000 + 1_000_000 * i for i in range(levels)]
    odd, _ = devfreq_soc(root, "13000000.gpu", "panfrost", freqs)
    found = files_under(odd)
    verdict = DevfreqDevice(odd, root).controllable()
    assert not verdict.ok and "level" in verdict.reason
    daemon = Daemon(Options(config(short_dir), sysfs_root=root))
    run_until(daemon, lambda d: d.stats.ticks >= 3, nothing)
    assert [r.name for r in daemon.runners] == [MALI]
    assert files_under(odd) == found


@pytest.mark.parametrize(("pci_id", "governed"), [
    ("1002:67DF", ["card0"]),  # the Radeon left alone, by its id as lspci -n shows it
    ("8086:1912", ["card1"]),  # the Intel one left alone
])
def test_device_entry_matching_by_pci_id_leaves_that_gpu_alone(short_dir, pci_id, governed):
    """`devices: [{pci_id: ..., enabled: false}]` is how a user keeps govd off one GPU of
    several: the entry must match that GPU (and that one only), whose files stay untouched."""
    root = short_dir / "sys"
    i915_gen9(root, card="card0")
    amdgpu_polaris(root, card="card1")
    left = "card1" if governed == ["card0"] else "card0"
    found = files_under(root / "class/drm" / left / "device")
    daemon = Daemon(Options(config(short_dir, devices=[{"pci_id": pci_id, "enabled": False}]),
                            sysfs_root=root))
    run_until(daemon, lambda d: d.stats.ticks >= 3, nothing)
    assert [r.name for r in daemon.runners] == governed
    assert files_under(root / "class/drm" / left / "device") == found


def test_state_file_written_under_a_relative_sysfs_root_can_be_restored_after_a_crash(
        short_dir, monkeypatch):
    """`govd run --sysfs-root sys` from a shell: the state file must name the root absolutely,
    or after a crash `govd restore` (and the next start) refuses the file and nothing puts the
    device back."""
    monkeypatch.chdir(short_dir)
    mali, _ = mali_panfrost(short_dir / "sys")
    with_set_freq(mali)
    daemon = Daemon(Options(config(short_dir), sysfs_root=Path("sys")))
    left: dict[str, str] = {}

    def crash_copy(d: Daemon) -> None:
        if d.stats.ticks == 3:  # what a SIGKILL now would leave behind
            left["state"] = (short_dir / "state.json").read_text()
            left["governor"] = (mali / "governor").read_text()

    run_until(daemon, lambda d: d.stats.ticks >= 4, crash_copy)
    (short_dir / "state.json").write_text(left["state"])
    (mali / "governor").write_text(left["governor"])
    monkeypatch.chdir("/")  # `govd restore` runs from anywhere
    assert _restored(short_dir / "state.json") == (1, [])
    assert (mali / "governor").read_text().strip() == "simple_ondemand"


def test_a_stop_held_while_the_daemon_started_takes_no_device(short_dir):
    """SIGTERM before the daemon's flags were installed (while its modules imported) is held
    for them: the daemon stops before taking the GPU, which it leaves as it was."""
    root = short_dir / "sys"
    mali_panfrost(root, governor="simple_ondemand")
    governor = root / f"devices/platform/{MALI}/devfreq/{MALI}/governor"
    daemon = Daemon(Options(config(short_dir), sysfs_root=root))
    with held_stops():
        os.kill(os.getpid(), signal.SIGTERM)
        assert daemon.run() == 0
    assert governor.read_text().strip() == "simple_ondemand"
    assert daemon.runners == []
    assert not (short_dir / "state.json").exists()
