"""`govd check-config` accepts exactly what the daemon accepts at start (and at reload, which
runs the same `check_applicable`: tests/daemon/test_reload.py)."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from govd.conf.commands import check_config
from govd.conf.load import load_config
from govd.custody.state_file import StateFileError
from govd.daemon.daemon import Daemon, Options
from govd.daemon.governed import SetupError
from tests.sysfs_fixtures import mali_panfrost

ROOT = Path(__file__).resolve().parents[2]
MALI = "fde60000.gpu"  # 200-800 MHz


@pytest.fixture
def short_dir() -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix="govd-", dir="/tmp") as d:
        yield Path(d)


def base(tmp: Path, **extra: Any) -> dict[str, Any]:
    return {"period_ms": 10, "state_file": str(tmp / "state.json"),
            "frames": {"source": "socket", "socket": {"path": str(tmp / "f.sock"),
                                                      "group": None}},
            "logging": {"summary_interval_s": 0}, **extra}


REFUSED = {
    "ondemand_fractional_threshold": {"policy": {"name": "ondemand",
                                                 "params": {"upthreshold": 95.5}}},
    "bounds_above_the_device": {"devices": [{"name": MALI, "bounds": {"min_mhz": 900}}]},
    "missing_prior": {"model": {"prior": "/nonexistent/prior.json"}},
    "metrics_on_the_network": {"metrics": {"enabled": True, "listen": "192.0.2.1:9586"}},
    "device_policy_parameter": {"devices": [{"name": MALI, "policy": {
        "name": "energy", "params": {"margin": 2.0}}}]},
    # a margin changes nothing under the scaling form, in force for slowdown targets
    "margin_that_changes_nothing": {"target": {"max_slowdown": 0.1}, "policy": {
        "name": "energy", "params": {"margin": 0.3}}},
}
ACCEPTED = {
    "defaults": {},
    "margin_under_a_frame_rate": {"policy": {"name": "energy", "params": {"margin": 0.3}}},
    "ondemand_whole_threshold": {"policy": {"name": "ondemand", "params": {"upthreshold": 95}}},
    "bounds_inside_the_device": {"devices": [{"name": MALI, "bounds": {"max_mhz": 600}}]},
}


def verdicts(tmp: Path, data: dict[str, Any]) -> tuple[int, bool]:
    """(check-config's exit status, whether the daemon started) for one configuration."""
    root = tmp / "sys"
    mali_panfrost(root)
    path = tmp / "govd.yaml"
    path.write_text(json.dumps(base(tmp, **data)))
    args = argparse.Namespace(file=str(path), insecure_config=True, sysfs_root=root)
    checked = check_config(args)
    daemon = Daemon(Options(load_config(path, allow_insecure=True), sysfs_root=root,
                            should_stop=lambda: True))
    try:
        started = daemon.run() == 0
    except SetupError:
        started = False
    return checked, started


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_what_check_config_refuses_the_daemon_refuses_before_any_write(
    short_dir: Path, name: str
) -> None:
    assert verdicts(short_dir, REFUSED[name]) == (1, False)
    governor = short_dir / f"sys/devices/platform/{MALI}/devfreq/{MALI}/governor"
    assert governor.read_text().strip() == "simple_ondemand"


@pytest.mark.parametrize("name", sorted(ACCEPTED))
def test_what_check_config_accepts_the_daemon_starts_with(short_dir: Path, name: str) -> None:
    assert verdicts(short_dir, ACCEPTED[name]) == (0, True)


def test_check_config_names_the_refused_policy_parameter(short_dir: Path) -> None:
    path = short_dir / "govd.yaml"
    path.write_text("policy: {name: ondemand, params: {upthreshold: 95.5}}\n")
    out = subprocess.run([sys.executable, "-m", "govd", "check-config", "--insecure-config",
                          "--sysfs-root", str(short_dir), str(path)],
                         env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True,
                         text=True)
    assert out.returncode == 1 and "Traceback" not in out.stderr
    assert out.stderr.splitlines() == [
        f"{path}: policy: policy 'ondemand' refuses its parameters: simple_ondemand "
        "upthreshold must be a whole number, got 95.5"]


@pytest.mark.parametrize("what", ["folder", "fifo", "another_programs_file"])
def test_state_file_the_daemon_refuses_is_refused_by_check_config_too(
        short_dir: Path, what: str, capsys: pytest.CaptureFixture[str]) -> None:
    """The daemon refuses to start when its state_file is a folder, a FIFO or a file that is
    no govd state (it will not overwrite what it did not write): check-config says so too."""
    taken = short_dir / "taken"
    if what == "folder":
        taken.mkdir()
    elif what == "fifo":
        os.mkfifo(taken)
    else:
        taken.write_text("somebody's notes\n")
    root = short_dir / "sys"
    mali_panfrost(root)
    path = short_dir / "govd.yaml"
    path.write_text(json.dumps(base(short_dir, state_file=str(taken))))
    args = argparse.Namespace(file=str(path), insecure_config=True, sysfs_root=root)
    assert check_config(args) == 1
    [line] = capsys.readouterr().err.splitlines()
    assert line.startswith(f"{path}: state_file: {taken}: ")
    daemon = Daemon(Options(load_config(path, allow_insecure=True), sysfs_root=root,
                            should_stop=lambda: True))
    with pytest.raises(StateFileError):
        daemon.run()
    if what == "another_programs_file":
        assert taken.read_text() == "somebody's notes\n"
