"""`govd measure` and the daemon share one custody of devices (issue 28 item 1, issue 27 item 2):
they never hold one GPU at once, whichever starts first; what a killed one left is put back
before the other saves the state it found; measure's state file sits beside the configured one,
so `govd restore` finds it, whatever folder it runs from; and a sweep that cannot be done is
refused before anything is written."""

from __future__ import annotations

import fcntl
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from govd.cli import main
from tests.live_gpu import DEVICE, WAIT_S, govd_env, start_sim, wait_for
from tests.sysfs_fixtures import mali_panfrost, rockchip_dmc

CONTROLS = ("governor", "min_freq", "max_freq")
SLEEPER = "import pathlib, sys, time; pathlib.Path(sys.argv[1]).touch(); time.sleep(60)"


def controls(root: Path) -> dict[str, str]:
    return {name: (root / DEVICE / name).read_text().strip() for name in CONTROLS}


@pytest.fixture
def sim(tmp_path: Path):  # type: ignore[no-untyped-def]
    root = tmp_path / "sys"
    process = start_sim(root, tmp_path / "frames.sock")
    yield root
    process.send_signal(signal.SIGTERM)
    process.wait(timeout=30)


def write_config(tmp_path: Path) -> Path:
    config = tmp_path / "govd.yaml"
    config.write_text(json.dumps({
        "state_file": str(tmp_path / "run" / "state.json"),
        "frames": {"source": "socket", "socket": {"path": str(tmp_path / "frames.sock"),
                                                  "group": None}}}))
    config.chmod(0o600)
    return config


def measure_command(root: Path, config: Path, marker: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "govd", "measure", "--sysfs-root", str(root), "--config",
            str(config), "--settle-s", "0", "--idle-s", "0", "--sample-ms", "20", *extra,
            "-o", str(config.parent / "sweep.csv"), "--", sys.executable, "-c", SLEEPER,
            str(marker)]


def start_measure(root: Path, config: Path, marker: Path, *extra: str,
                  cwd: Path | None = None) -> subprocess.Popen[bytes]:
    process = subprocess.Popen(measure_command(root, config, marker, *extra), env=govd_env(),
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=cwd)
    wait_for(marker.exists, "measure's workload to start", process)
    return process


def start_daemon(root: Path, config: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-m", "govd", "run", "--sysfs-root", str(root),
                             "--config", str(config)], env=govd_env(),
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def govd(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "govd", *args], env=govd_env(), cwd=cwd,
                          capture_output=True, text=True, timeout=WAIT_S)


def test_measure_is_refused_a_gpu_the_daemon_governs_and_writes_nothing(
        tmp_path: Path, sim: Path) -> None:
    config = write_config(tmp_path)
    found = controls(sim)
    daemon = start_daemon(sim, config)
    try:
        wait_for(lambda: controls(sim)["governor"] == "userspace", "the daemon to govern",
                 daemon)
        state = (tmp_path / "run" / "state.json").read_text()
        refused = subprocess.run(measure_command(sim, config, tmp_path / "never"),
                                 env=govd_env(), capture_output=True, text=True, timeout=WAIT_S)
        assert refused.returncode == 1, refused.stderr
        assert "govd-sim0: held by another govd process" in refused.stderr
        assert "Traceback" not in refused.stderr
        assert not (tmp_path / "never").exists()  # no workload ran, no level was set
        assert (tmp_path / "run" / "state.json").read_text() == state
        assert sorted(p.name for p in (tmp_path / "run").iterdir()) == ["state.json",
                                                                         "status.json"]
    finally:
        daemon.send_signal(signal.SIGTERM)
        assert daemon.wait(timeout=WAIT_S) == 0
    assert controls(sim) == found  # the daemon put back what it found, not measure's level


def test_daemon_is_refused_a_gpu_measure_holds_and_measure_still_restores(
        tmp_path: Path, sim: Path) -> None:
    config = write_config(tmp_path)
    found = controls(sim)
    measure = start_measure(sim, config, tmp_path / "running")
    held = controls(sim)
    assert held != found
    daemon = start_daemon(sim, config)
    _, err = daemon.communicate(timeout=WAIT_S)
    assert daemon.returncode == 1
    assert "govd-sim0: held by another govd process" in err.decode()
    assert controls(sim) == held  # the daemon wrote nothing, and saved nothing as found
    assert not (tmp_path / "run" / "state.json").exists()
    measure.send_signal(signal.SIGTERM)
    assert measure.wait(timeout=WAIT_S) == 130
    assert controls(sim) == found


def test_the_daemon_puts_back_what_a_killed_measure_left_before_saving_what_it_found(
        tmp_path: Path, sim: Path) -> None:
    config = write_config(tmp_path)
    found = controls(sim)
    measure = start_measure(sim, config, tmp_path / "running")
    left = tmp_path / "run" / "state.measure-govd-sim0.json"
    assert left.exists()  # beside the configured state file, named after the device
    measure.kill()
    measure.wait()
    assert controls(sim)["governor"] == "userspace"  # nothing ran after SIGKILL
    daemon = start_daemon(sim, config)
    try:
        state = tmp_path / "run" / "state.json"
        wait_for(state.exists, "the daemon's state file", daemon)
        saved = json.loads(state.read_text())["devices"][0]["state"]
        assert saved["governor"] == found["governor"] != "userspace"
        assert not left.exists()
    finally:
        daemon.send_signal(signal.SIGTERM)
        assert daemon.wait(timeout=WAIT_S) == 0
    assert controls(sim) == found


def test_a_killed_measure_with_a_relative_sysfs_root_is_restored_from_any_folder(
        tmp_path: Path, sim: Path) -> None:
    config = write_config(tmp_path)
    found = controls(sim)
    measure = start_measure(Path("sys"), config, tmp_path / "running", cwd=tmp_path)
    measure.kill()
    measure.wait()
    assert controls(sim) != found
    restore = govd("restore", "--config", str(config), cwd=Path("/"))
    assert restore.returncode == 0, restore.stderr
    assert "1 device(s) restored" in restore.stdout
    assert controls(sim) == found
    assert list((tmp_path / "run").iterdir()) == []


@pytest.mark.parametrize("runs", ["1000000000000", "1e12", "100001"])
def test_a_sweep_too_large_is_refused_before_anything_is_written(
        tmp_path: Path, sim: Path, runs: str, capsys: pytest.CaptureFixture[str]) -> None:
    config = write_config(tmp_path)
    found = controls(sim)
    with pytest.raises(SystemExit) as refused:  # argparse: exit status 2, one line
        main(measure_command(sim, config, tmp_path / "never", "--runs", runs)[3:])
    assert refused.value.code == 2
    assert "--runs" in capsys.readouterr().err
    assert controls(sim) == found and not (tmp_path / "run").exists()


def test_without_a_device_name_a_memory_controller_is_never_picked(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = tmp_path / "sys"
    dmc, _ = rockchip_dmc(root)
    status = main(["measure", "--sysfs-root", str(root), "--state-file",
                   str(tmp_path / "state.json"), "-o", str(tmp_path / "x.csv"), "--", "true"])
    assert status == 2
    err = capsys.readouterr().err
    assert "no GPU found" in err and "not GPUs, measured only when named: dmc" in err
    assert (dmc / "governor").read_text().strip() == "simple_ondemand"
    assert not (tmp_path / "state.json").exists()


def test_without_a_device_name_the_gpu_beside_a_memory_controller_is_picked(
        tmp_path: Path) -> None:
    from govd.device.discovery import discover_sysfs
    from govd.measure.cli import _pick

    root = tmp_path / "sys"
    rockchip_dmc(root)
    mali_panfrost(root)
    assert _pick(discover_sysfs(root), None).name == "fde60000.gpu"
    assert _pick(discover_sysfs(root), "dmc").name == "dmc"  # named: taken, as in the config


def test_an_output_folder_that_does_not_exist_is_refused_before_the_sweep(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = tmp_path / "sys"
    mali, _ = mali_panfrost(root)
    status = main(["measure", "--sysfs-root", str(root), "--state-file",
                   str(tmp_path / "state.json"), "-o", str(tmp_path / "missing" / "x.csv"),
                   "--", "true"])
    assert status == 2 and "missing" in capsys.readouterr().err
    assert (mali / "governor").read_text().strip() == "simple_ondemand"
    assert not (tmp_path / "state.json").exists()


def test_measure_listening_on_a_path_that_is_no_socket_says_so_in_one_line(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = tmp_path / "sys"
    mali_panfrost(root)
    plain = tmp_path / "plain"
    plain.write_text("not a socket\n")
    status = main(["measure", "--sysfs-root", str(root), "--state-file",
                   str(tmp_path / "state.json"), "--frames", str(plain), "-o",
                   str(tmp_path / "x.csv")])
    assert status == 2
    [line] = capsys.readouterr().err.strip().splitlines()[-1:]
    assert line.startswith(f"govd measure: {plain}: cannot listen:")
    assert plain.read_text() == "not a socket\n"


def test_a_measure_the_lock_refuses_exits_at_once_in_one_line_writing_nothing(
        tmp_path: Path) -> None:
    root = tmp_path / "sys"
    mali, _ = mali_panfrost(root)
    fd = os.open(mali, os.O_RDONLY | os.O_DIRECTORY)
    fcntl.flock(fd, fcntl.LOCK_EX)  # as a daemon holding the device does
    try:
        refused = govd("measure", "--sysfs-root", str(root), "--state-file",
                       str(tmp_path / "state.json"), "-o", str(tmp_path / "x.csv"), "--", "true")
    finally:
        os.close(fd)
    assert refused.returncode == 1 and "held by another govd process" in refused.stderr
    assert (mali / "governor").read_text().strip() == "simple_ondemand"
    assert not (tmp_path / "state.json").exists()
