"""Odd but possible input to every command ends in one clear line, never a traceback, a hang or
a memory blow-up (what bench/fuzz_cli.py found, pinned one by one)."""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.sysfs_fixtures import mali_panfrost

ROOT = Path(__file__).resolve().parents[2]
GPU = "fde60000.gpu"


def _limit_memory() -> None:
    # Old code read /dev/zero until memory ran out: here it stops at 3 GiB with a MemoryError.
    resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30))


def govd(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "govd", *args], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=60,
                          stdin=subprocess.DEVNULL, preexec_fn=_limit_memory)


def one_line_refusal(out: subprocess.CompletedProcess[str]) -> str:
    assert out.returncode in (1, 2), out.stdout + out.stderr
    assert "Traceback" not in out.stderr, out.stderr
    return out.stderr


@pytest.fixture
def fifo(tmp_path: Path) -> Iterator[Path]:
    path = tmp_path / "fifo"
    os.mkfifo(path)
    yield path


@pytest.mark.parametrize("command", [
    ["check-config", "--insecure-config", "{}"],
    ["restore", "--state-file", "{}"],
    ["replay", "{}"],
    ["eval", "--sweep", "{}", "--target-fps", "60"],
    ["select-features", "{}"],
])
@pytest.mark.parametrize("special", ["fifo", "/dev/zero"])
def test_special_file_as_input_is_refused_without_hanging_or_eating_memory(
    command: list[str], special: str, fifo: Path
) -> None:
    path = str(fifo) if special == "fifo" else special
    err = one_line_refusal(govd(*[a.replace("{}", path) for a in command]))
    # /dev/zero as a state file is refused before it is read: anyone may write it (0666)
    unsafe = command[0] == "restore" and special == "/dev/zero"
    assert ("refusing an unsafe state file" if unsafe else "not a regular file") in err


def test_status_file_that_is_a_fifo_is_refused(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "status.json")
    err = one_line_refusal(govd("status", "--state-file", str(tmp_path / "state.json")))
    assert "not a regular file" in err


@pytest.mark.parametrize("text", ["[]", "{\"devices\": [1]}", "{\"loop\": 3}", "7"])
def test_malformed_status_file_is_one_line(tmp_path: Path, text: str) -> None:
    (tmp_path / "status.json").write_text(text)
    err = one_line_refusal(govd("status", "--state-file", str(tmp_path / "state.json")))
    assert "not a govd status file" in err and len(err.strip().splitlines()) == 1


def test_malformed_state_entry_is_a_failure_line_and_the_file_kept(tmp_path: Path) -> None:
    root = tmp_path / "sys"
    mali_panfrost(root)
    state = tmp_path / "state.json"
    state.write_text(json.dumps({"version": 1, "pid": 2**22 - 1, "sysfs_root": str(root),
                                 "devices": [{"backend": "devfreq", "name": GPU, "path": {},
                                              "state": {}}]}))
    err = one_line_refusal(govd("restore", "--state-file", str(state)))
    # the state file's schema check names the entry and the fault in one line
    assert "not a govd state file" in err and f"{GPU}: path must be a string" in err
    assert len(err.strip().splitlines()) == 1
    assert state.exists()


@pytest.mark.parametrize("levels", ["", "0", "-5"])
def test_device_without_levels_is_listed_as_not_controllable(tmp_path: Path, levels: str) -> None:
    devfreq, _ = mali_panfrost(tmp_path / "sys")
    (devfreq / "available_frequencies").write_text(levels)
    out = govd("devices", "--json", "--sysfs-root", str(tmp_path / "sys"))
    assert out.returncode == 0 and "Traceback" not in out.stderr, out.stderr
    [row] = json.loads(out.stdout)
    assert row["controllable"] is False and "no positive frequency" in row["reason"]


def test_frame_rate_whose_deadline_overflows_is_refused(tmp_path: Path) -> None:
    sweep = tmp_path / "s.csv"
    sweep.write_text("unit,freq_mhz,time_ms,power_w\n0,300,2,5\n0,600,1,9\n")
    err = one_line_refusal(govd("eval", "--sweep", str(sweep), "--target-fps", "1e-320"))
    assert "target fps must be a positive number" in err


@pytest.mark.parametrize("speed", ["inf", "1e309", "nan", "1e-320", "0"])
def test_sim_speed_out_of_range_is_a_usage_error(speed: str) -> None:
    err = one_line_refusal(govd("run", "--sim", "--speed", speed, "--duration-s", "5"))
    assert "--speed: must be in" in err


def test_endless_demo_stops_on_sigterm_without_waiting_for_its_duration(tmp_path: Path) -> None:
    import signal
    import time

    # the user's TMPDIR, honoured, and left empty (not under tmp_path: the demo's socket
    # paths must stay under the 108 bytes of a unix socket's address)
    with tempfile.TemporaryDirectory(prefix="govd-tmpdir-") as folder:
        scratch = Path(folder)
        # --speed 10: the three wall seconds waited for are spent governing, not racing (at
        # 100 the daemon and its three simulators kept both CPUs busy for them)
        demo = subprocess.Popen([sys.executable, "-m", "govd", "run", "--sim", "--speed", "10",
                                 "--duration-s", "inf"], cwd=tmp_path, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True,
                                env={**os.environ, "PYTHONPATH": str(ROOT), "TMPDIR": folder})
        assert demo.stdout is not None
        assert f"simulated GPU under {scratch}/govd-sim-" in demo.stdout.readline()
        lines = 0
        for line in demo.stdout:  # three status lines (wall seconds): the daemon governs
            lines += line.startswith("[") and "govd-sim0" in line
            if lines == 3:
                break
        demo.send_signal(signal.SIGTERM)
        stopped = time.monotonic()
        out, _ = demo.communicate(timeout=60)
        assert demo.returncode == 0, out
        assert time.monotonic() - stopped < 40 and "device restored: yes" in out
        assert list(scratch.iterdir()) == []
