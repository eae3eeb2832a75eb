"""Idle back-off: a quiet GPU is held at its lowest level and ticked slowly; a frame datagram
wakes the loop at once, a busy GPU at the next slow tick.

The daemon runs in-process on a devfreq fixture (10 ms period) until a condition holds
(`Options.should_stop`, polled on every pass of the loop); the idle period is long (2 s) where
a test shows that something did not wait for it.
"""

from __future__ import annotations

import json
import logging
import math
import socket
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from govd.conf.schema import Config
from govd.daemon.daemon import Daemon, Options, datagram_queue_len
from govd.daemon.idle import IdleSettings, IdleWatch, busiest
from tests.daemon.test_daemon_inprocess import MALI, run_until, runner
from tests.sysfs_fixtures import mali_panfrost


@pytest.fixture
def short_dir() -> Iterator[Path]:
    """A folder whose socket path fits AF_UNIX's 108 bytes (pytest's tmp_path may not)."""
    with tempfile.TemporaryDirectory(prefix="govd-idle-", dir="/tmp") as d:
        yield Path(d)


def idle_config(tmp: Path, **idle: Any) -> Config:
    return Config.model_validate({
        "period_ms": 10, "policy": {"name": "performance"}, "min_dwell_ms": 0,
        "state_file": str(tmp / "state.json"),
        "frames": {"source": "socket", "socket": {"path": str(tmp / "f.sock"), "group": None}},
        "logging": {"summary_interval_s": 0},
        "idle": {"after_s": 0.05, "period_ms": 100, **idle},
    })


def test_a_quiet_gpu_idles_after_after_s_at_the_lowest_level_and_the_idle_period(
        short_dir, caplog):
    root = short_dir / "sys"
    mali_panfrost(root, governor="userspace", busy_percent=0)
    daemon = Daemon(Options(idle_config(short_dir), sysfs_root=root,
                            status_file=short_dir / "status.json"))
    chosen: list[float] = []

    def watch(daemon: Daemon) -> None:
        chosen.append(runner(daemon, MALI).status()["chosen_mhz"])

    with caplog.at_level(logging.INFO, logger="govd.daemon"):
        run_until(daemon, lambda d: runner(d, MALI).counts["idle_ticks"] >= 3, watch)
    assert daemon.idle.idle and daemon.idle.episodes == 1
    assert daemon._scheduler is not None and daemon._scheduler.period_s == pytest.approx(0.1)
    # performance put it at the top; idling brought it down
    assert 800.0 in chosen and chosen[-1] == 200.0
    assert any(r.getMessage().startswith("idle: no frames") for r in caplog.records)


def test_status_file_says_when_govd_idles(short_dir, capsys):
    from govd.commands.status import show_status

    root = short_dir / "sys"
    mali_panfrost(root, governor="userspace", busy_percent=0)
    status_file = short_dir / "status.json"
    seen: list[dict[str, Any]] = []
    options = Options(idle_config(short_dir), sysfs_root=root, status_file=status_file,
                      on_status=seen.append, status_every_s=60.0)
    run_until(Daemon(options), lambda d: bool(seen) and seen[-1]["idle"]["idle"], lambda d: None)
    # written at once on idling though the cadence is a minute: the first write and this one
    assert len(seen) == 2
    status_file.write_text(json.dumps(seen[-1]))  # the daemon removed it on stopping

    class Args:
        state_file = str(short_dir / "state.json")
        config = None
        json = False

    assert show_status(Args()) == 0
    assert "idling for" in capsys.readouterr().out


def test_a_frame_datagram_wakes_the_idle_loop_at_once_not_at_the_next_slow_tick(short_dir):
    root = short_dir / "sys"
    mali_panfrost(root, governor="userspace", busy_percent=0)
    sender = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sent: list[float] = []
    first_decisions: list[int] = []

    def send_once_idle(daemon: Daemon) -> None:
        if daemon.idle.idle and not sent and runner(daemon, MALI).counts["idle_ticks"] >= 1:
            first_decisions.append(runner(daemon, MALI).counts["ticks"])
            sent.append(time.monotonic())
            sender.sendto(b"F 8000\n", str(short_dir / "f.sock"))

    daemon = Daemon(Options(idle_config(short_dir, period_ms=2000), sysfs_root=root))
    try:
        run_until(daemon, lambda d: d.idle.woke_s is not None, send_once_idle)
    finally:
        sender.close()
    woke_after_s = daemon.idle.woke_s - sent[0]
    assert woke_after_s < 0.5  # the idle period is 2 s: it did not wait for the slow tick
    assert not daemon.idle.idle
    assert daemon._scheduler is not None and daemon._scheduler.period_s == pytest.approx(0.01)
    # the frame reached a decision at the normal period
    assert runner(daemon, MALI).counts["ticks"] == first_decisions[0] + 1
    assert runner(daemon, MALI).status()["actual_frame_ms"] == pytest.approx(8.0)


def test_a_busy_gpu_without_frames_wakes_the_loop_at_the_next_slow_tick(short_dir):
    root = short_dir / "sys"
    devfreq, _ = mali_panfrost(root, governor="userspace", busy_percent=0)
    busy_file = devfreq.parent.parent / "gpu_busy_percent"

    def busy_once_idle(daemon: Daemon) -> None:
        if daemon.idle.idle and runner(daemon, MALI).counts["idle_ticks"] >= 2:
            busy_file.write_text("60\n")

    daemon = Daemon(Options(idle_config(short_dir), sysfs_root=root))
    run_until(daemon, lambda d: d.idle.woke_s is not None, busy_once_idle)
    assert not daemon.idle.idle and runner(daemon, MALI).counts["idle_ticks"] == 2 + 1


def test_idle_disabled_keeps_the_normal_period(short_dir):
    root = short_dir / "sys"
    mali_panfrost(root, governor="userspace", busy_percent=0)
    daemon = Daemon(Options(idle_config(short_dir, enabled=False), sysfs_root=root))
    run_until(daemon, lambda d: d.stats.ticks >= 30, lambda d: None)  # 0.3 s: 6x after_s
    assert not daemon.idle.idle and runner(daemon, MALI).counts["idle_ticks"] == 0


def test_quiet_needs_no_frames_and_busy_below_the_threshold_unknown_busy_counting_as_quiet():
    watch = IdleWatch(IdleSettings(True, 1.0, 1.0, 0.05))
    assert watch.quiet(0, 0.01) and watch.quiet(0, math.nan)
    assert not watch.quiet(1, 0.0) and not watch.quiet(0, 0.05)


def test_quiet_time_counts_afresh_after_a_frame():
    watch = IdleWatch(IdleSettings(True, 1.0, 1.0, 0.05))
    assert not watch.due(10.0, 0, 0.0)
    assert not watch.due(10.9, 3, 0.0)  # a frame: the quiet time starts again
    assert not watch.due(11.5, 0, 0.0)
    assert watch.due(12.5, 0, 0.0)


def test_busiest_ignores_devices_that_report_no_busy_time():
    assert busiest([math.nan, 0.3, 0.1]) == 0.3
    assert math.isnan(busiest([math.nan]))


def test_an_idle_period_no_longer_than_the_tick_is_refused_with_one_line():
    with pytest.raises(ValueError, match=r"idle.period_ms \(50\) must be longer than period_ms"):
        Config.model_validate({"period_ms": 50, "idle": {"period_ms": 50}})


def test_unreadable_datagram_queue_length_falls_back_to_the_kernel_default(tmp_path):
    (tmp_path / "qlen").write_text("512\n")
    assert datagram_queue_len(str(tmp_path / "qlen")) == 512
    assert datagram_queue_len(str(tmp_path / "missing")) == 10


def _one_datagram_wait(short_dir: Path, frames_last_tick: int, idle: bool,
                       clock_fd: int | None = None, datagrams: int = 1) -> tuple[float, int]:
    """Wait 0.2 s in the daemon's wait with one datagram queued (or ``datagrams``), watching
    ``clock_fd`` too; (s waited, frames received)."""
    from govd.custody.signals import SignalFlags
    from govd.sources.socket import SocketSource

    daemon = Daemon(Options(idle_config(short_dir)))
    source = SocketSource(short_dir / "f.sock", group=None)
    sender = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    signals = SignalFlags()
    try:
        daemon.source = source
        daemon._frames_last_tick = frames_last_tick
        daemon.idle.idle = idle
        for _ in range(datagrams):
            sender.sendto(b"F 8000\n", str(short_dir / "f.sock"))
        start = time.monotonic()
        daemon._wait(signals, 0.2, clock_fd)
        waited_s = time.monotonic() - start
        return waited_s, len(source._queue)
    finally:
        signals.close()
        sender.close()
        source.close()


def test_frames_flowing_below_half_the_kernel_queue_a_tick_leave_datagrams_for_the_tick(
        short_dir):
    """No wake-up per datagram while a tick's frames fit the kernel's queue twice over."""
    waited_s, received = _one_datagram_wait(short_dir, 3, idle=False)
    assert received == 0 and waited_s >= 0.19  # slept to the deadline; the tick drains it


def test_no_frames_last_tick_or_many_keep_the_socket_in_the_wait_set(short_dir):
    for frames in (0, datagram_queue_len()):
        waited_s, received = _one_datagram_wait(short_dir, frames, idle=False)
        assert received == 1 and waited_s >= 0.19  # read at once, still waits the deadline


def test_a_datagram_ends_the_idle_wait_at_once(short_dir):
    waited_s, received = _one_datagram_wait(short_dir, 0, idle=True)
    assert received == 1 and waited_s < 0.1


def test_the_simulated_clock_moving_ends_the_wait_at_once_with_the_socket_watched(short_dir):
    """The simulated GPU's FIFO (`govd.sim.clock`) ends the wait: loop time moved, the
    scheduler looks at it, while the socket alone would keep the wait to its deadline."""
    import os

    read_fd, write_fd = os.pipe()
    try:
        os.write(write_fd, b"\0")
        waited_s, received = _one_datagram_wait(short_dir, 0, idle=False, clock_fd=read_fd,
                                                datagrams=0)
    finally:
        os.close(read_fd)
        os.close(write_fd)
    assert received == 0 and waited_s < 0.1


def test_a_reload_while_idling_wakes_the_loop_under_the_new_configuration(short_dir):
    root = short_dir / "sys"
    mali_panfrost(root, governor="userspace", busy_percent=0)
    path = short_dir / "govd.yaml"
    path.write_text(  # idle_config's settings with a longer idle period
        f"period_ms: 10\npolicy: {{name: performance}}\nmin_dwell_ms: 0\n"
        f"state_file: {short_dir / 'state.json'}\n"
        f"frames: {{source: socket, socket: {{path: {short_dir / 'f.sock'}, group: null}}}}\n"
        "logging: {summary_interval_s: 0}\nidle: {after_s: 0.05, period_ms: 3000}\n")
    reloaded: list[bool] = []

    def reload_once_idle(daemon: Daemon) -> None:
        if daemon.idle.idle and not reloaded:
            reloaded.append(daemon.reload())

    daemon = Daemon(Options(idle_config(short_dir, period_ms=2000), sysfs_root=root,
                            config_path=path, insecure_config=True))
    run_until(daemon, lambda d: bool(reloaded), reload_once_idle)
    assert reloaded == [True] and not daemon.idle.idle
    assert daemon.idle.settings.period_s == pytest.approx(3.0)
    assert daemon._scheduler is not None and daemon._scheduler.period_s == pytest.approx(0.01)
