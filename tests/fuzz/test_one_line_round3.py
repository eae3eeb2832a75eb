"""What the third hostile round (issue 28, medium and low) found ending in a traceback, a silent
no-op or a stale answer, pinned one by one: each ends in one clear line now."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from bench.bench_start_stop import start_importing
from govd.custody.state_file import SavedState, save_state
from govd.device.devfreq import DevfreqDevice
from tests.custody.test_state_file import dead_pid
from tests.fuzz.test_one_line_errors import ROOT, govd, one_line_refusal
from tests.sysfs_fixtures import mali_panfrost


def config(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "govd.yaml"
    path.write_text(text)
    path.chmod(0o600)
    return path


def test_a_state_file_that_is_the_root_folder_is_refused_in_one_line(tmp_path: Path) -> None:
    err = one_line_refusal(govd("run", "--config", str(config(tmp_path, "state_file: /\n")),
                                "--sysfs-root", str(tmp_path)))
    assert "state_file must name a file, got '/'" in err
    err = one_line_refusal(govd("run", "--state-file", "/", "--sysfs-root", str(tmp_path)))
    assert err.strip() == "govd run: --state-file: must name a file, got '/'"


def test_recording_into_a_missing_folder_is_refused_before_the_device_is_taken(
        tmp_path: Path) -> None:
    mali, _ = mali_panfrost(tmp_path / "sys")
    err = one_line_refusal(govd("run", "--sysfs-root", str(tmp_path / "sys"), "--state-file",
                                str(tmp_path / "state.json"), "--record",
                                str(tmp_path / "missing" / "trace.csv")))
    assert "--record" in err and "its folder does not exist" in err
    assert (mali / "governor").read_text().strip() == "simple_ondemand"


@pytest.mark.parametrize("flag", [["--duration-s", "5"], ["--scenario", "gpgpu"]])
def test_demo_options_without_sim_are_refused_not_ignored(tmp_path: Path, flag: list[str]) -> None:
    err = one_line_refusal(govd("run", "--sysfs-root", str(tmp_path), *flag))
    assert err.strip() == f"govd run: {flag[0]} only applies to --sim"


def test_a_state_file_pid_beyond_any_process_is_refused_in_one_line(tmp_path: Path) -> None:
    state = tmp_path / "state.json"
    state.write_text(json.dumps({"version": 1, "pid": 2**63, "devices": []}))
    err = one_line_refusal(govd("restore", "--state-file", str(state)))
    assert f"pid {2**63} is not a process id" in err and len(err.splitlines()) == 1


def test_an_unknown_kernel_mode_is_one_line(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "govd", "run", "--sim", "--duration-s", "1"],
                          capture_output=True, text=True, timeout=60, cwd=tmp_path,
                          env={**os.environ, "PYTHONPATH": str(ROOT), "GOVD_KERNELS": "fast"})
    err = one_line_refusal(done)
    assert err.strip() == "govd run: GOVD_KERNELS='fast': must be one of auto, aot, jit"


def test_aot_without_compiled_kernels_is_one_line(tmp_path: Path) -> None:
    from tests.test_kernels_aot import _package_copy

    root = _package_copy(tmp_path, None)
    done = subprocess.run([sys.executable, "-m", "govd", "run", "--sim", "--duration-s", "1"],
                          capture_output=True, text=True, timeout=60, cwd=tmp_path,
                          env={**os.environ, "PYTHONPATH": str(root), "GOVD_KERNELS": "aot"})
    err = one_line_refusal(done)
    assert err.startswith("govd run: GOVD_KERNELS=aot: ") and len(err.splitlines()) == 1


def test_status_read_by_a_pipe_that_closes_early_ends_quietly(tmp_path: Path) -> None:
    status = {"pid": os.getpid(), "written_unix_s": time.time(), "loop": {},
              "devices": [{"device": f"card{i}", "state": "paused", "paused_reason": "gone"}
                          for i in range(20000)]}
    (tmp_path / "status.json").write_text(json.dumps(status))
    done = subprocess.run(
        f"{sys.executable} -m govd status --state-file {tmp_path / 'state.json'} | head -1",
        shell=True, capture_output=True, text=True, timeout=60,
        env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.stdout.count("\n") == 1
    assert done.stderr == ""  # no BrokenPipeError traceback, no "Exception ignored"


def test_ctrl_c_while_the_command_module_imports_ends_quietly(
        monkeypatch: pytest.MonkeyPatch) -> None:
    import govd.cli

    def interrupted(command: str | None = None) -> None:
        raise KeyboardInterrupt  # as Ctrl-C while numba or pydantic import

    monkeypatch.setattr(govd.cli, "build_parser", interrupted)
    assert govd.cli.main(["eval", "--help"]) == 130


def test_status_after_a_crash_and_a_restore_does_not_show_the_dead_daemon(
        tmp_path: Path) -> None:
    root = tmp_path / "sys"
    mali_panfrost(root)
    device = DevfreqDevice(root / "class/devfreq/fde60000.gpu", root)
    pid = dead_pid()
    save_state(tmp_path / "state.json", SavedState([{**device.save(), "identity":
                                                     device.identity()}], str(root), pid))
    (tmp_path / "status.json").write_text(json.dumps(
        {"pid": pid, "written_unix_s": time.time(), "loop": {"ticks": 9}, "devices": []}))
    restored = govd("restore", "--state-file", str(tmp_path / "state.json"))
    assert restored.returncode == 0, restored.stderr
    assert not (tmp_path / "status.json").exists()  # the dead daemon's status went with it
    err = one_line_refusal(govd("status", "--state-file", str(tmp_path / "state.json")))
    assert "no status file; is govd running?" in err


def test_status_of_a_daemon_that_died_says_so(tmp_path: Path) -> None:
    (tmp_path / "status.json").write_text(json.dumps(
        {"pid": dead_pid(), "written_unix_s": time.time(), "loop": {}, "devices": []}))
    done = govd("status", "--state-file", str(tmp_path / "state.json"))
    assert done.stdout.startswith("govd is not running: pid ")


def test_sigint_before_the_daemon_is_ready_restores_and_says_one_line(tmp_path: Path) -> None:
    mali, _ = mali_panfrost(tmp_path / "sys")
    # the signal is sent as the command's own modules import (the window the round found),
    # past the interpreter's start, as a terminal delivers it (see start_importing)
    daemon = start_importing(tmp_path)
    try:
        daemon.send_signal(signal.SIGINT)
        _, err = daemon.communicate(timeout=60)
    finally:  # a daemon that missed the signal must not outlive the test (and the suite)
        if daemon.poll() is None:
            daemon.kill()
            daemon.wait()
    assert "Traceback" not in err, err
    assert daemon.returncode in (0, 130)
    assert (mali / "governor").read_text().strip() == "simple_ondemand"


@pytest.mark.parametrize(("flag", "said"), [
    (["--idle-w", "nan"], "--idle-w: must be a power of 0 W or more, got nan"),
    (["--folds", "0"], "--folds: a held-out k-fold needs k of 2 or more, got 0"),
])
def test_sim_fit_refuses_nonsense_options_by_name(tmp_path: Path, flag: list[str],
                                                  said: str) -> None:
    err = one_line_refusal(govd("sim", "fit", str(tmp_path / "s.csv"), "--name", "t", *flag,
                                "-o", str(tmp_path / "t.json")))
    assert said in err


def test_sim_fit_refuses_an_output_folder_that_does_not_exist_before_fitting(
        tmp_path: Path) -> None:
    pytest.importorskip("scipy")
    err = one_line_refusal(govd("sim", "fit", str(tmp_path / "never-read.csv"), "--name", "t",
                                "-o", str(tmp_path / "missing" / "t.json")))
    assert err.strip().endswith("t.json: its folder does not exist")
