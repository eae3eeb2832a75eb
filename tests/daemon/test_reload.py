"""SIGHUP applies the whole new configuration or none of it, and says which."""

from __future__ import annotations

import json
import logging
import socket
import tempfile
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from govd.conf.load import load_config
from govd.daemon.daemon import Daemon, Options
from tests.sysfs_fixtures import adreno_msm, mali_panfrost

MALI, ADRENO = "fde60000.gpu", "5000000.gpu"
MAX_TICKS = 2000


@pytest.fixture
def short_dir() -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix="govd-", dir="/tmp") as d:
        yield Path(d)


def settings(tmp: Path, **extra: Any) -> dict[str, Any]:
    return {
        "period_ms": 10, "policy": {"name": "performance"}, "state_file": str(tmp / "state.json"),
        "frames": {"source": "socket", "socket": {"path": str(tmp / "f.sock"), "group": None}},
        "logging": {"summary_interval_s": 0}, **extra,
    }


def write(path: Path, data: dict[str, Any]) -> Path:
    path.write_text(json.dumps(data))  # JSON is YAML
    return path


def daemon_for(tmp: Path, root: Path, data: dict[str, Any]) -> Daemon:
    path = write(tmp / "govd.yaml", data)
    return Daemon(Options(load_config(path, allow_insecure=True), config_path=path,
                          insecure_config=True, sysfs_root=root, rescan_s=0))


def run_reloading(daemon: Daemon, new: dict[str, Any], done: Callable[[Daemon], bool],
                  ) -> list[bool]:
    """Run, reload ``new`` at the third tick, stop when ``done``; returns the reload's answer."""
    answers: list[bool] = []

    def should_stop() -> bool:
        assert daemon.stats.ticks < MAX_TICKS, "condition never met"
        if daemon.stats.ticks == 3 and not answers:
            assert daemon.options.config_path is not None
            write(daemon.options.config_path, new)
            answers.append(daemon.reload())
        return bool(answers) and done(daemon)

    daemon.options.should_stop = should_stop
    assert daemon.run() == 0
    return answers


def governor_of(root: Path, name: str) -> str:
    return (root / f"devices/platform/{name}/devfreq/{name}/governor").read_text().strip()


def test_device_newly_disabled_is_handed_back_restored(short_dir: Path) -> None:
    root = short_dir / "sys"
    mali_panfrost(root)
    adreno_msm(root)
    daemon = daemon_for(short_dir, root, settings(short_dir))
    states: list[list[str]] = []

    def done(d: Daemon) -> bool:
        if not states:
            states.append([s["name"] for s in
                           json.loads((short_dir / "state.json").read_text())["devices"]])
            states.append([governor_of(root, ADRENO)])
        return d.stats.ticks > 10

    new = settings(short_dir, devices=[{"name": ADRENO, "enabled": False}])
    assert run_reloading(daemon, new, done) == [True]
    assert [r.name for r in daemon.runners] == [MALI]
    assert states == [[MALI], ["simple_ondemand"]]  # restored at once, out of the state file


def test_device_newly_enabled_is_taken(short_dir: Path) -> None:
    root = short_dir / "sys"
    mali_panfrost(root)
    adreno_msm(root)
    daemon = daemon_for(short_dir, root, settings(
        short_dir, devices=[{"name": ADRENO, "enabled": False}]))
    assert run_reloading(daemon, settings(short_dir), lambda d: len(d.runners) == 2) == [True]


def test_new_socket_limits_apply_to_the_next_frames(short_dir: Path) -> None:
    root = short_dir / "sys"
    mali_panfrost(root, governor="userspace")  # set_freq is there: the device is governed
    daemon = daemon_for(short_dir, root, settings(short_dir))
    new = settings(short_dir)
    new["frames"]["socket"].update(rate_fps=1, burst=3)
    sent: list[int] = []

    def done(d: Daemon) -> bool:
        if not sent:
            with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as s:
                s.sendto(b"F 1000\n" * 10, str(short_dir / "f.sock"))
            sent.append(1)
        return d.source is not None and d.source.stats().get("rate_limited", 0) > 0

    assert run_reloading(daemon, new, done) == [True]
    assert daemon.source is not None
    assert daemon.source.stats()["accepted"] == 3


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def test_metrics_newly_enabled_are_served(short_dir: Path) -> None:
    root = short_dir / "sys"
    mali_panfrost(root, governor="userspace")  # set_freq is there: the device is governed
    daemon = daemon_for(short_dir, root, settings(short_dir))
    port = _free_port()
    new = settings(short_dir, metrics={"enabled": True, "listen": f"127.0.0.1:{port}"})
    pages: list[str] = []

    def done(d: Daemon) -> bool:
        url = f"http://127.0.0.1:{port}/metrics"
        with urllib.request.urlopen(url, timeout=5) as page:
            pages.append(page.read().decode())
        return d.stats.ticks > 10

    assert run_reloading(daemon, new, done) == [True]
    assert "govd_" in pages[-1] and MALI in pages[-1]


def test_changed_socket_path_is_refused_naming_the_key(
    short_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    root = short_dir / "sys"
    mali_panfrost(root, governor="userspace")  # set_freq is there: the device is governed
    daemon = daemon_for(short_dir, root, settings(short_dir))
    new = settings(short_dir, period_ms=20)
    new["frames"]["socket"]["path"] = str(short_dir / "other.sock")
    with caplog.at_level(logging.ERROR, logger="govd.daemon"):
        assert run_reloading(daemon, new, lambda d: d.stats.ticks > 5) == [False]
    assert "frames.socket.path: changed, which needs a restart" in caplog.text
    assert daemon.config.period_ms == 10  # nothing of it applied


def test_policy_parameter_the_policy_refuses_is_refused_at_reload(short_dir: Path) -> None:
    root = short_dir / "sys"
    mali_panfrost(root, governor="userspace")  # set_freq is there: the device is governed
    daemon = daemon_for(short_dir, root, settings(short_dir))
    new = settings(short_dir, policy={"name": "ondemand", "params": {"upthreshold": 95.5}})
    assert run_reloading(daemon, new, lambda d: d.stats.ticks > 10) == [False]
    assert daemon.config.policy.name == "performance"
