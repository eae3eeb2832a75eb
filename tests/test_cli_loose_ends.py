"""What new users tripped over on the command line (issue #26, "Loose ends")."""

from __future__ import annotations

import json
import logging
import re
import shlex
import subprocess
import sys
import time
from pathlib import Path

import pytest

from govd.cli import main
from govd.conf.schema import Config
from govd.custody.lock import DeviceLocks
from govd.daemon.governed import find_devices, select
from govd.device import cli as device_cli
from tests.sysfs_fixtures import mali_panfrost

REPO = Path(__file__).resolve().parents[1]
GOVD = f"{shlex.quote(sys.executable)} -m govd"


def pipeline(command: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["sh", "-c", command], cwd=REPO, capture_output=True, text=True,
                          timeout=120)


@pytest.mark.parametrize("lines", ["sim list", "status --state-file {tmp}/state.json"])
def test_output_cut_short_by_head_ends_without_a_traceback(tmp_path: Path, lines: str) -> None:
    devices = [{"device": f"card{k}", "policy": "energy", "target": "60 FPS",
                "state": "governed"} for k in range(5000)]  # more than a pipe holds
    (tmp_path / "status.json").write_text(json.dumps(
        {"pid": 1, "written_unix_s": time.time(), "devices": devices}))
    done = pipeline(f"{GOVD} {lines.format(tmp=tmp_path)} | head -2")
    assert len(done.stdout.splitlines()) == 2
    assert done.stderr == ""


def test_a_usage_error_of_measure_names_the_command_not_its_workload(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["measure", "--sysfs-root", str(tmp_path), "-o", str(tmp_path / "x.csv"),
                 "--", "true"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("govd measure: choose a device with --device")  # was: govd ['--', ...


def test_devices_under_another_sysfs_root_lists_only_that_trees_devices(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def machine_gpus(root: Path) -> list:
        raise AssertionError(f"NVML asked for the devices of {root}")

    mali_panfrost(tmp_path)
    monkeypatch.setattr(device_cli, "DISCOVERERS", [*device_cli.DISCOVERERS, machine_gpus])
    # `govd run --sysfs-root` governs only the tree's devices: NVML GPUs were listed anyway
    assert [row["name"] for row in device_cli.list_devices(tmp_path)] == ["fde60000.gpu"]


def test_beside_a_running_govd_its_own_setting_is_not_another_tools(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="govd.daemon")
    mali_panfrost(tmp_path / "sys", governor="userspace")
    config = Config.model_validate({"state_file": str(tmp_path / "state.json")})
    [device] = find_devices(tmp_path / "sys")
    assert "another tool may be in charge" in device.controllable().reason
    locks = DeviceLocks(tmp_path)  # what a running daemon holds
    locks.take(device)
    try:
        [checked] = find_devices(tmp_path / "sys")
        assert select(config, [checked]) == [checked]
        said = [r.getMessage() for r in caplog.records]
        assert said == ["fde60000.gpu: governed by a running govd now"]
        assert device_cli.describe(checked)["reason"] == "governed by a running govd now"
    finally:
        locks.release_all()


def test_without_libudev_devices_are_found_by_reading_sys(
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    from govd.device import discovery

    walked: list[Path] = []
    monkeypatch.setitem(sys.modules, "pyudev", None)  # `import pyudev` fails, as without libudev
    monkeypatch.setattr(discovery, "_walk", lambda root: walked.append(root) or [])
    monkeypatch.setattr(discovery, "_said_no_udev", [])
    caplog.set_level(logging.WARNING, logger="govd.device")
    assert discovery.scan(discovery.SYS) == [] and walked == [discovery.SYS]
    assert discovery.scan(discovery.SYS) == []  # (said once)
    [said] = [r.getMessage() for r in caplog.records]
    assert said.startswith("udev unavailable (") and "libudev1" in said


def test_a_missing_data_folder_says_what_to_give(tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["sim", "from-nvdvfs", "--gpu", "v100", "--data", str(tmp_path / "none"),
                 "--minutes", "1", "-o", str(tmp_path / "x.csv")]) == 2
    err = capsys.readouterr().err
    assert "--data names the folder of v100's measured tables" in err
    assert "DESIGN" not in err  # DESIGN.md is not in the repository


def test_the_readme_makes_the_tables_its_experiments_read() -> None:
    text = (REPO / "README.md").read_text()
    section = text[text.index("### Model experiments"):text.index("### Offline priors")]
    made = set(re.findall(r"-o (\S+\.csv)", section))
    read = set(re.findall(r"--sweep ([^-\n]+?) --", section))
    named = {name for group in read for name in group.split()}
    assert {"rt.csv", "art3.csv"} <= made
    assert all(name in made or name == "g*.csv" for name in named), named - made
    assert any(name.startswith("g") and "$g" in name for name in made)  # what g*.csv matches
