"""Where the frame sources plug into the daemon: sampled rows counted as the frames they stand
for, busy time from DRM fdinfo where the device has none, the device left to its own governor
while no frames come (MangoHud has no live log), and `govd status` saying what MangoHud needs."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from govd.daemon.daemon import Daemon, Options
from govd.daemon.device_runner import DeviceRunner, RunnerSettings
from govd.daemon.status import frame_source_lines
from govd.device.devfreq import DevfreqDevice
from govd.governor import Governor
from govd.model.settings import ModelSettings
from govd.sources.base import Frame
from govd.sources.busy import BusySource
from govd.target import Target
from govd.telemetry.log import EpisodeLimiter
from tests.daemon.test_daemon_inprocess import config, run_until, short_dir  # noqa: F401
from tests.daemon.test_device_runner import PERIOD_S, Scripted
from tests.sysfs_fixtures import mali_panfrost


def runner_on(tmp_path: Path, busy_percent: int | None, **hooks: object) -> DeviceRunner:
    fixture = {} if busy_percent is None else {"busy_percent": busy_percent}
    path, kernel = mali_panfrost(tmp_path, energy_uj=1_000_000, **fixture)
    device = DevfreqDevice(path, tmp_path, kernel)
    device.save()
    governor = Governor(device.levels_mhz, Scripted([2]), Target(fps=60), ModelSettings())
    settings = RunnerSettings("scripted", Target(fps=60), {})
    return DeviceRunner(device, governor, settings, EpisodeLimiter(logging.getLogger("t")),
                        **hooks)  # type: ignore[arg-type]


def test_sampled_rows_count_as_the_frames_they_stand_for_in_the_status(tmp_path: Path) -> None:
    runner = runner_on(tmp_path, 50)
    # a 240 FPS game logged every 100 ms: every other 50 ms tick has one row standing for 24
    for k in range(21):
        rows = [Frame(gpu_time_ms=1000 / 240, app="game", count=24.0)] if k % 2 == 0 else []
        runner.tick(k * PERIOD_S, PERIOD_S, rows)
    status = runner.status()
    assert status["fps"] == pytest.approx(240, rel=0.05)
    assert status["frame_ms"] == pytest.approx(1000 / 240)


def test_busy_from_the_meter_where_the_device_reports_none(tmp_path: Path) -> None:
    runner = runner_on(tmp_path, None, busy_source=BusySource(), busy_meter=lambda: 0.3)
    runner.tick(0.0, PERIOD_S, [])
    assert runner.status()["frame_ms"] == pytest.approx(0.3 * PERIOD_S * 1000)
    assert runner.status()["busy"] == pytest.approx(0.3)


def test_device_busy_is_kept_where_the_device_reports_it(tmp_path: Path) -> None:
    runner = runner_on(tmp_path, 50, busy_meter=lambda: 0.9)
    runner.tick(0.0, PERIOD_S, [])
    assert runner.status()["busy"] == pytest.approx(0.5)


def test_without_frames_the_device_is_left_to_its_own_governor_until_frames_come(
        tmp_path: Path) -> None:
    runner = runner_on(tmp_path, 40, silent_after_s=0.5)
    governor_file = runner.device.path / "governor"  # type: ignore[attr-defined]
    for k in range(20):  # 1 s without a frame: nothing written, nothing decided
        assert runner.tick(k * PERIOD_S, PERIOD_S, []) is None
    assert governor_file.read_text().strip() == "simple_ondemand"
    assert runner.status()["state"] == "waiting" and runner.status()["busy"] == 0.4
    game = [Frame(gpu_time_ms=12.5, app="game")]
    assert runner.tick(1.0, PERIOD_S, game) is not None  # the first frame: taken at once
    assert governor_file.read_text().strip() == "userspace"
    assert runner.status()["state"] == "governed"
    for k in range(21, 40):  # frames stop: governed for silent_after_s, then handed back
        runner.tick(k * PERIOD_S, PERIOD_S, [])
    assert governor_file.read_text().strip() == "simple_ondemand"
    assert runner.status()["state"] == "waiting" and runner.counts["handed_back"] == 1


def test_a_long_training_step_is_waited_for_not_handed_back(tmp_path: Path) -> None:
    runner = runner_on(tmp_path, 100, silent_after_s=0.5)
    governor_file = runner.device.path / "governor"  # type: ignore[attr-defined]
    runner.tick(0.0, PERIOD_S, [Frame(gpu_time_ms=600_000.0, app="train")])  # a 10 min step
    for k in range(1, 200):  # 10 s later the next step is still running
        runner.tick(k * PERIOD_S, PERIOD_S, [])
    assert governor_file.read_text().strip() == "userspace"
    assert runner.status()["state"] == "governed"


def test_daemon_leaves_the_device_alone_until_a_mangohud_log_is_live(
        short_dir: Path) -> None:  # noqa: F811
    root = short_dir / "sys"
    path, _ = mali_panfrost(root, governor="userspace", busy_percent=60)
    logs = short_dir / "mangohud"
    logs.mkdir()
    log = logs / "game_2026-01-02_03-04-05.csv"
    seen: dict[str, object] = {}

    def grow(daemon: Daemon) -> None:
        ticks = daemon.stats.ticks
        if ticks == 20:
            seen["status"] = daemon.runners[0].status()
            seen["set_freq"] = (path / "userspace/set_freq").read_text().strip()
            seen["report"] = daemon.source.report() if daemon.source else {}
            log.write_text("fps,frametime,elapsed\n")
        elif ticks > 20:
            with open(log, "a") as f:
                f.write(f"80.0,12.5,{ticks * 12_500_000}\n")

    cfg = config(short_dir, policy={"name": "energy"}, frames={
        "source": "mangohud", "mangohud": {"dir": str(logs), "rescan_s": 0.01}})
    daemon = Daemon(Options(cfg, sysfs_root=root))
    run_until(daemon, lambda d: d.stats.ticks > 150, grow)
    assert seen["set_freq"] == "undefined"  # as found: nothing written without frames
    assert seen["status"]["state"] == "waiting"  # type: ignore[index]
    assert seen["report"]["live"] is False  # type: ignore[index]
    assert daemon.runners[0].status()["state"] == "governed"
    assert daemon.runners[0].status()["frame_ms"] == pytest.approx(12.5)
    report = daemon.source.report() if daemon.source else {}
    assert report["live"] and report["frames_by_app"]["game"] > 100
    assert frame_source_lines(report)[0].startswith("frames from MangoHud (live): game ")


def test_status_tells_what_to_fix_when_the_folder_is_missing(short_dir: Path) -> None:  # noqa: F811
    root = short_dir / "sys"
    mali_panfrost(root, governor="userspace", busy_percent=60)
    cfg = config(short_dir, frames={"source": "mangohud",
                                    "mangohud": {"dir": str(short_dir / "nowhere")}})
    statuses: list[dict[str, object]] = []
    daemon = Daemon(Options(cfg, sysfs_root=root, on_status=statuses.append))
    run_until(daemon, lambda d: bool(statuses), lambda d: None)
    lines = frame_source_lines(statuses[-1]["frame_source"])  # type: ignore[arg-type]
    assert lines[0] == ("frames from MangoHud (none live: the device is left to its own "
                        "governor): none yet")
    assert "does not exist" in lines[1] and lines[1].startswith("problem: ")


def test_journal_and_metrics_count_every_frame_a_sampled_row_stands_for(
        tmp_path: Path) -> None:
    runner = runner_on(tmp_path, 50)
    rows = [Frame(gpu_time_ms=4.0, app="game", count=2.4), Frame(gpu_time_ms=5.0, app="game",
                                                                  count=2.4)]
    record = runner.tick(0.0, PERIOD_S, rows)
    assert record is not None
    assert record.frame_times_ms == [4.0, 5.0]  # one entry per row ...
    assert record.frame_counts == [2, 3]  # ... counting 2.4 + 2.4 frames: 2, then 3
    assert record.frames == 5 and record.frame_time_sum_ms() == 23.0


def test_target_follows_the_program_with_most_frames_not_most_rows(tmp_path: Path) -> None:
    path, kernel = mali_panfrost(tmp_path, energy_uj=1_000_000, busy_percent=50)
    device = DevfreqDevice(path, tmp_path, kernel)
    device.save()
    governor = Governor(device.levels_mhz, Scripted([2]), Target(fps=60), ModelSettings())
    apps = {"game": Target(fps=144), "launcher": Target(fps=30)}
    runner = DeviceRunner(device, governor, RunnerSettings("scripted", Target(fps=60), apps),
                          EpisodeLimiter(logging.getLogger("t")))
    launcher = [Frame(gpu_time_ms=2.0, app="launcher")] * 3  # per-frame: 3 frames
    game = [Frame(gpu_time_ms=7.0, app="game", count=12.0)]  # one row, 12 frames
    runner.tick(0.0, PERIOD_S, launcher + game)
    assert runner.governor.target == apps["game"]
