"""A live simulated GPU and a real `govd run` process governing it, for the telemetry tests.

The simulated GPU (`python -m govd.sim.live`) keeps a devfreq tree under a folder and sends its
frames to the daemon's socket; the daemon takes it through the ordinary devfreq backend, exactly
as tests/daemon/test_daemon_process.py does. Used by the journal, notify, metrics and status tests.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[1]
DEVICE_NAME = "govd-sim0"
DEVICE = f"class/devfreq/{DEVICE_NAME}"
TREE_READY = f"{DEVICE}/device/hwmon/hwmon0/power1_average"
WAIT_S = 60.0
"""Generous: the machine is shared; nothing here asserts on speed."""


def govd_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment a govd child process needs (this worktree's govd on the path)."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID", "INVOCATION_ID",
                        "JOURNAL_STREAM")}
    return {**env, "PYTHONPATH": str(REPO), "PYTHONUNBUFFERED": "1", **(extra or {})}


def wait_for(condition: Callable[[], Any], what: str,
             process: subprocess.Popen[bytes] | None = None) -> Any:
    """Poll `condition` until it returns something true (returned); fail on timeout or when
    `process` exits first."""
    deadline = time.monotonic() + WAIT_S
    while not (result := condition()):
        if process is not None and process.poll() is not None:
            pytest.fail(f"process exited ({process.returncode}) while waiting for {what}")
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}")
        time.sleep(0.05)
    return result


def start_sim(root: Path, frames_socket: Path, speed: float = 5.0) -> subprocess.Popen[bytes]:
    """Start the simulated GPU and wait until its tree is laid out. It runs freely (no
    lockstep) for as long as its test's daemon does: 5× the wall clock keeps frames coming
    faster than real time without a CPU spent on ticks no test reads."""
    process = subprocess.Popen(
        [sys.executable, "-m", "govd.sim.live", "--root", str(root), "--socket",
         str(frames_socket), "--scenario", "game-medium", "--speed", str(speed)],
        env=govd_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    wait_for(lambda: (root / TREE_READY).exists(), "the simulated tree", process)
    return process


def stop(process: subprocess.Popen[bytes]) -> int:
    """SIGTERM `process` and wait for it; returns its exit status."""
    if process.poll() is None:
        process.terminate()
    return process.wait(timeout=WAIT_S)


def tree_levels_mhz(root: Path) -> list[float]:
    """The simulated device's levels (available_frequencies, Hz) in MHz."""
    text = (root / DEVICE / "available_frequencies").read_text()
    return [int(hz) / 1e6 for hz in text.split()]


def daemon_command(work: Path, root: Path, config: Path) -> list[str]:
    """`govd run` on the tree under `root`, with its socket, state and status files in `work`."""
    return [sys.executable, "-m", "govd", "run", "--sysfs-root", str(root),
            "--socket", str(work / "frames.sock"), "--state-file", str(work / "state.json"),
            "--config", str(config)]


def start_daemon(work: Path, root: Path, config_text: str,
                 env: Mapping[str, str] | None = None) -> subprocess.Popen[bytes]:
    """Start `govd run` with the configuration `config_text`; its stderr goes to
    ``work/daemon.err``."""
    config = work / "govd.yaml"
    config.write_text(config_text)
    config.chmod(0o600)  # govd refuses a configuration others may write
    with open(work / "daemon.err", "ab") as stderr:
        return subprocess.Popen(daemon_command(work, root, config), env=env or govd_env(),
                                stdout=subprocess.DEVNULL, stderr=stderr)


def read_status(work: Path) -> dict[str, Any] | None:
    """The daemon's status file, or None before the first one is written."""
    try:
        status: dict[str, Any] = json.loads((work / "status.json").read_text())
    except FileNotFoundError:
        return None
    return status


def next_status(work: Path, after_unix_s: float,
                process: subprocess.Popen[bytes] | None = None) -> dict[str, Any]:
    """The first status written after `after_unix_s` (time.time(), s)."""
    def fresh() -> dict[str, Any] | None:
        status = read_status(work)
        return status if status and status["written_unix_s"] > after_unix_s else None

    result: dict[str, Any] = wait_for(fresh, "a fresh status file", process)
    return result
