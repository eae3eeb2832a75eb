"""The live simulated GPU: sysfs files as the kernel lays them out, governors, frames, totals."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from govd.sim.devfreq_tree import TransStat, simple_ondemand_hz, snap_hz, trans_stat_text
from govd.sim.live import LiveGpu, run

REPO = Path(__file__).resolve().parents[1]
SEED9_HZ = [f * 1_000_000 for f in (200, 244, 267, 311, 355, 400, 444, 489, 511)]


def _device(root: Path) -> Path:
    return root / "class" / "devfreq" / "govd-sim0"


def test_tree_has_the_kernels_devfreq_files(tmp_path: Path) -> None:
    gpu = LiveGpu(tmp_path, None, "game-light")
    dev = _device(tmp_path)
    assert (dev / "available_frequencies").read_text().split() == [str(f) for f in SEED9_HZ]
    assert (dev / "governor").read_text().strip() == "simple_ondemand"
    assert "userspace" in (dev / "available_governors").read_text().split()
    for rel in ("cur_freq", "min_freq", "max_freq", "target_freq", "userspace/set_freq",
                "device/gpu_busy_percent", "device/hwmon/hwmon0/energy1_input",
                "device/hwmon/hwmon0/power1_average"):
        assert (dev / rel).is_file(), rel
    gpu.close()


def test_userspace_set_freq_is_snapped_up_and_capped_at_max(tmp_path: Path) -> None:
    gpu = LiveGpu(tmp_path, None, "game-medium")
    dev = _device(tmp_path)
    (dev / "governor").write_text("userspace\n")
    (dev / "userspace/set_freq").write_text("300000000\n")
    gpu.tick()
    gpu.tick()
    assert (dev / "cur_freq").read_text().strip() == "311000000"
    (dev / "max_freq").write_text("400000000\n")
    (dev / "userspace/set_freq").write_text("511000000\n")
    gpu.tick()
    gpu.tick()
    assert (dev / "cur_freq").read_text().strip() == "400000000"
    assert "Total transition : 2" in (dev / "trans_stat").read_text()
    gpu.close()


def test_unknown_governor_written_is_put_back(tmp_path: Path) -> None:
    gpu = LiveGpu(tmp_path, None, "art3")
    (_device(tmp_path) / "governor").write_text("bogus\n")
    gpu.tick()
    assert (_device(tmp_path) / "governor").read_text().strip() == "simple_ondemand"
    gpu.close()


def test_energy_counter_grows_and_frames_reach_a_listening_socket(tmp_path: Path) -> None:
    sock_path = str(tmp_path / "frames.sock")
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    listener.bind(sock_path)
    listener.setblocking(False)
    gpu = LiveGpu(tmp_path / "root", sock_path, "game-light", seed=3)
    energy = []
    lines: list[str] = []
    for _ in range(20):  # one second of sim time, no pacing
        gpu.tick()
        energy.append(int((_device(tmp_path / "root") /
                           "device/hwmon/hwmon0/energy1_input").read_text()))
        # read as a frame source would, each tick: the kernel queues only a few datagrams
        while True:
            try:
                lines.append(listener.recv(4096).decode())
            except BlockingIOError:
                break
    listener.close()
    totals = gpu.close()
    assert energy == sorted(energy) and energy[-1] > 0
    assert len(lines) == totals["frames"] == totals["datagrams_sent"] >= 50
    assert all(line.startswith("F ") and line.endswith(" app=game-light\n") for line in lines)
    assert json.loads((tmp_path / "root" / "summary.json").read_text())["frames"] == len(lines)


def test_frames_are_dropped_and_counted_when_nobody_listens(tmp_path: Path) -> None:
    gpu = LiveGpu(tmp_path, str(tmp_path / "nobody.sock"), "gpgpu")
    totals = run(gpu, speed=1e6, duration_s=1.0)
    assert totals["datagrams_sent"] == 0
    assert totals["datagrams_dropped"] == totals["frames"] > 0
    assert totals["sim_s"] == pytest.approx(1.0)


def test_simple_ondemand_follows_the_kernels_integer_rules() -> None:
    assert simple_ondemand_hz(0, 0, 400, 511) == 511  # no data: max
    assert simple_ondemand_hz(95, 100, 400, 511) == 511  # busy over 90 %
    assert simple_ondemand_hz(88, 100, 400, 511) == 400  # within the down-differential
    assert simple_ondemand_hz(50, 100, 400, 511) == (50 * 400 // 100) * 100 // 88
    with pytest.raises(ValueError):
        simple_ondemand_hz(1, 2, 3, 4, up=101)
    assert snap_hz(210_000_000, SEED9_HZ, SEED9_HZ[0], SEED9_HZ[-1]) == 244_000_000
    assert snap_hz(1, SEED9_HZ, 267_000_000, SEED9_HZ[-1]) == 267_000_000


def test_trans_stat_marks_the_current_level_and_counts_transitions() -> None:
    import numpy as np

    moves = np.zeros((2, 2), dtype=int)
    moves[0, 1] = 3
    text = trans_stat_text([100, 200], moves, np.array([1500.0, 20.0]), 200)
    assert text.splitlines()[2] == "        100:         0         3      1500"
    assert text.splitlines()[3].startswith("*       200:")
    assert text.endswith("Total transition : 3\n")


def test_the_trans_stat_kept_between_ticks_is_the_one_printed_afresh() -> None:
    """The live sim keeps trans_stat's rows until a transition is counted: each tick's text is
    still what `trans_stat_text` prints from scratch, through transitions and level changes."""
    import numpy as np

    levels = [100, 200, 300, 450]
    kept = TransStat(levels)
    moves, time_ms = np.zeros((4, 4), dtype=int), np.zeros(4)
    rng = np.random.default_rng(3)
    for _ in range(500):
        src, dst = rng.integers(0, 4, 2)
        if src != dst and rng.random() < 0.2:
            moves[src, dst] += 1
        time_ms[rng.integers(0, 4)] += 50.0
        current = levels[rng.integers(0, 4)]
        assert kept.text(moves, time_ms, current) == trans_stat_text(levels, moves, time_ms,
                                                                     current)


def test_subprocess_stops_on_sigterm_and_prints_its_totals(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "govd.sim.live", "--root", str(tmp_path), "--socket",
         str(tmp_path / "f.sock"), "--scenario", "game-heavy", "--speed", "50"],
        env=env, stdout=subprocess.PIPE, text=True)
    summary = tmp_path / "class" / "devfreq" / "govd-sim0" / "trans_stat"
    try:
        # wait (without sleeping) until the first tick has been published
        for _ in range(200):
            if summary.exists():
                break
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=0.1)
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0
    totals = json.loads(out.strip().splitlines()[-1])
    assert totals["scenario"] == "game-heavy" and totals["sim_s"] > 0
    assert json.loads((tmp_path / "summary.json").read_text()) == totals


def test_subprocess_runs_for_its_duration(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    result = subprocess.run(
        [sys.executable, "-m", "govd.sim.live", "--root", str(tmp_path), "--socket",
         str(tmp_path / "f.sock"), "--scenario", "rendering-test", "--speed", "1000",
         "--duration-s", "2"], env=env, capture_output=True, text=True, timeout=120, check=True)
    totals = json.loads(result.stdout.strip().splitlines()[-1])
    assert totals["sim_s"] == pytest.approx(2.0) and totals["frames"] > 0



def test_an_application_that_stops_rendering_leaves_the_gpu_idle(tmp_path: Path) -> None:
    gpu = LiveGpu(tmp_path, None, "game-medium", render_s=1.0)
    first = run(gpu, speed=1e6, duration_s=1.5)  # the frame running at 1 s has ended by now
    assert first["frames"] > 0
    gpu.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)  # run() closed it
    totals = run(gpu, speed=1e6, duration_s=3.0)
    assert totals["frames"] == first["frames"]  # not one frame more
    assert (_device(tmp_path) / "device" / "gpu_busy_percent").read_text().strip() == "0"
    idle_w = (float(totals["energy_j"]) - float(first["energy_j"])) / 1.5
    assert idle_w == pytest.approx(gpu.table.idle_power_w)
