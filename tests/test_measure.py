"""`govd measure` end to end: the simulated devfreq GPU (govd.sim.live) and the fake NVML, every
level swept, the device put back as found on success, on Ctrl-C and on a failing workload."""

from __future__ import annotations

import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from govd.cli import main
from govd.custody.state_file import SavedState, save_state
from govd.device.base import Reading
from govd.device.devfreq import DevfreqDevice
from govd.formats.sweep import read_sweep
from govd.measure.sweep import FrameWork, MeasureError, Samples, SweepPlan, run_sweep
from govd.sim.levels import level_table
from tests.custody.test_state_file import dead_pid
from tests.live_gpu import DEVICE, govd_env, start_sim, wait_for
from tests.nvml_fake import FakeNvml, build_fake_nvml, one_gpu

CONTROLS = ("governor", "min_freq", "max_freq")


def _controls(root: Path) -> dict[str, str]:
    # stripped: a real sysfs file reads back with a newline whatever was written to it
    return {name: (root / DEVICE / name).read_text().strip() for name in CONTROLS}


@pytest.fixture
def live(tmp_path: Path):  # type: ignore[no-untyped-def]
    root = tmp_path / "sys"
    sim = start_sim(root, tmp_path / "frames.sock")
    yield root, tmp_path / "frames.sock"
    sim.send_signal(signal.SIGTERM)
    sim.wait(timeout=30)


def _config(tmp_path: Path) -> Path:
    """A configuration whose state_file is in ``tmp_path``: measure keeps its locks of devices
    without a sysfs directory beside it (not in the machine's /run/govd)."""
    config = tmp_path / "govd.yaml"
    config.write_text(f"state_file: {tmp_path / 'run' / 'state.json'}\n")
    config.chmod(0o600)
    return config


def _measure_args(root: Path, tmp_path: Path, *extra: str) -> list[str]:
    return ["measure", "--sysfs-root", str(root), "--state-file", str(tmp_path / "state.json"),
            "--config", str(_config(tmp_path)), "--settle-s", "0.05", "--sample-ms", "20",
            *extra]


def test_command_sweep_covers_every_level_and_restores_the_devfreq_gpu(
        live, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    root, _ = live
    before = _controls(root)
    out = tmp_path / "sweep.csv"
    status = main(_measure_args(root, tmp_path, "--runs", "2", "--idle-s", "0.2", "-o", str(out),
                                "--", sys.executable, "-c", "import time; time.sleep(0.15)"))
    assert status == 0
    sweep = read_sweep(out)
    np.testing.assert_array_equal(sweep.levels_mhz, level_table("seed9").freqs_mhz)
    assert sweep.units == 2
    assert np.all(sweep.time_ms >= 150) and np.all(np.isfinite(sweep.power_w))
    assert float(sweep.meta["idle_power_w"]) >= 0
    assert _controls(root) == before
    assert not (tmp_path / "state.json").exists()


def test_frame_socket_sweep_records_the_frames_gpu_time(live, tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    root, frames = live
    out = tmp_path / "frames.csv"
    # the simulated GPU sends its frames to `frames`, which measure now listens on
    status = main(_measure_args(root, tmp_path, "--frames", str(frames), "--frames-per-level",
                                "20", "--every", "4", "--idle-s", "0.2", "-o", str(out)))
    assert status == 0
    sweep = read_sweep(out)
    assert sweep.units == 20 and sweep.levels_mhz.size == 3  # lowest, 5th, highest
    # the same game renders faster at a higher clock
    assert np.median(sweep.time_ms[:, 0]) > np.median(sweep.time_ms[:, -1])
    # the game went on rendering through the idle window: what was read there is not idle
    assert "idle_power_w" not in sweep.meta
    assert sweep.meta["idle_power_note"].startswith("not measured: ")
    assert "no idle power: " in capsys.readouterr().err


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_ctrl_c_or_sigterm_mid_sweep_stops_the_workload_and_restores_the_device(
        live, tmp_path: Path, signum: int) -> None:  # type: ignore[no-untyped-def]
    root, _ = live
    before = _controls(root)
    marker = tmp_path / "running"
    child = (f"import pathlib, os, time; pathlib.Path({str(marker)!r})"
             ".write_text(str(os.getpid())); time.sleep(60)")
    process = subprocess.Popen(
        [sys.executable, "-m", "govd", *_measure_args(root, tmp_path, "--idle-s", "0", "-o",
                                                      str(tmp_path / "x.csv")),
         "--", sys.executable, "-c", child],
        env=govd_env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    wait_for(marker.exists, "the workload to start", process)
    assert _controls(root) != before  # measure holds a level
    process.send_signal(signum)
    _, err = process.communicate(timeout=30)
    assert process.returncode == 130
    assert b"interrupted" in err and b"Traceback" not in err
    assert _controls(root) == before
    assert not (tmp_path / "state.json").exists()
    assert not (tmp_path / "x.csv").exists()
    pid = int(marker.read_text())
    time.sleep(0.1)
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


def test_failing_workload_is_one_line_and_the_device_is_restored(
        live, tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    root, _ = live
    before = _controls(root)
    status = main(_measure_args(root, tmp_path, "--idle-s", "0", "-o", str(tmp_path / "x.csv"),
                                "--", sys.executable, "-c", "raise SystemExit(3)"))
    assert status == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert "exited with status 3" in err[-1] and "restored" in err[-1]
    assert _controls(root) == before


def test_a_state_file_left_by_a_killed_measure_is_restored_before_the_next_sweep(
        live, tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    root, _ = live
    before = _controls(root)
    device = DevfreqDevice(root / DEVICE, root)
    left = SavedState([{**device.save(), "identity": device.identity()}], str(root),
                      pid=dead_pid())
    save_state(tmp_path / "state.json", left)
    device.set_level(300)  # then it was killed
    status = main(_measure_args(root, tmp_path, "--runs", "1", "--every", "8", "--idle-s", "0",
                                "-o", str(tmp_path / "x.csv"), "--", "true"))
    assert status == 0, capsys.readouterr().err
    assert _controls(root) == before
    assert not (tmp_path / "state.json").exists()


def test_work_must_be_a_command_or_the_frame_socket(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    status = main(["measure", "--sysfs-root", str(tmp_path), "-o", str(tmp_path / "x.csv")])
    assert status == 2
    assert "-- CMD" in capsys.readouterr().err


@pytest.fixture(scope="module")
def fake_lib_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_fake_nvml(tmp_path_factory.mktemp("fake-nvml"))


def test_nvml_sweep_covers_core_and_memory_pairs_and_unlocks_the_clocks(
        fake_lib_dir: Path, tmp_path: Path) -> None:
    nvml: FakeNvml = one_gpu(fake_lib_dir, tmp_path, "ampere")
    out, state = tmp_path / "nvml.csv", tmp_path / "state.json"
    got = nvml.report(f"""
        from govd.cli import main
        (gpu,) = discover_nvml()
        count = len(gpu.levels_mhz)
        status = main(["measure", "--state-file", {str(state)!r}, "--settle-s", "0",
                       "--config", {str(_config(tmp_path))!r},
                       "--idle-s", "0.05", "--sample-ms", "10", "--runs", "1",
                       "--every", str(max(1, count // 4)), "-o", {str(out)!r},
                       "--", sys.executable, "-c", "import time; time.sleep(0.05)"])
        report(status=status, locks=fake_locks(), count=count)
    """)
    assert got["status"] == 0
    assert got["locks"] == [0, 0]  # unlocked, as found
    sweep = read_sweep(out)
    assert sweep.mem_levels_mhz is not None
    assert sweep.levels_mhz[0] == sweep.levels_mhz.min()
    assert sweep.levels_mhz[-1] == sweep.levels_mhz.max()
    assert np.all(np.isfinite(sweep.power_w)) and "idle_power_w" in sweep.meta
    assert not state.exists()


def test_a_refused_memory_lock_is_found_before_the_sweep_and_each_clock_swept_once(
        fake_lib_dir: Path, tmp_path: Path) -> None:
    """The H200 of 27 Nov lists two memory clocks and refuses the memory lock: its sweeps were
    planned over (core, memory) pairs, and recorded each pair's planned memory clock (2201 MHz)
    where the GPU ran 3201 MHz. Settled first, the sweep covers the graphics clocks, once each."""
    nvml: FakeNvml = one_gpu(fake_lib_dir, tmp_path, "ampere")
    nvml.configure({"gpus": 1, "arch": "ampere", "root": 1, "fail.SetMemoryLockedClocks": 3})
    out, state = tmp_path / "nvml.csv", tmp_path / "state.json"
    got = nvml.report(f"""
        import contextlib, io
        from govd.cli import main
        said = io.StringIO()
        with contextlib.redirect_stderr(said):
            status = main(["measure", "--state-file", {str(state)!r}, "--settle-s", "0",
                           "--config", {str(_config(tmp_path))!r},
                           "--idle-s", "0.05", "--sample-ms", "10", "--runs", "1",
                           "--every", "8", "-o", {str(out)!r},
                           "--", sys.executable, "-c", "import time; time.sleep(0.02)"])
        report(status=status, locks=fake_locks(), said=said.getvalue())
    """)
    assert got["status"] == 0, got["said"]
    assert got["locks"] == [0, 0]
    assert "NOT_SUPPORTED" in got["said"] and "graphics clock only" in got["said"]
    sweep = read_sweep(out)
    assert sweep.mem_levels_mhz is None
    # every 8th of the 81 graphics clocks at the highest memory clock (the 81st is the top)
    assert sweep.levels_mhz.tolist() == [210.0 + 15 * i for i in range(0, 81, 8)]


GROWING = ("import pathlib, time; p = pathlib.Path({count!r}); n = int(p.read_text() or 0) "
           "if p.exists() else 0; p.write_text(str(n + 1)); time.sleep(0.05 + 0.15 * n)")
"""A workload that takes longer each time it runs: measured level after level, ascending, the
higher clocks see the longer runs, as a game moving to a heavier scene during the sweep. Each
run is 150 ms longer than the one before: a run's time includes the interpreter's start, which
on a loaded 2-core host varied by tens of ms (50 ms steps measured 198 then 198 ms)."""


def test_a_sweep_of_work_that_changed_says_so_and_eval_says_it_again(
        live, tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    root, _ = live
    out = tmp_path / "sweep.csv"
    workload = GROWING.format(count=str(tmp_path / "count"))
    status = main(_measure_args(root, tmp_path, "--every", "4", "--idle-s", "0", "-o", str(out),
                                "--", sys.executable, "-c", workload))
    assert status == 0  # the table is written: it is what was measured
    said = capsys.readouterr().err
    assert f"govd measure: warning: {out}: the work took " in said
    assert "a lower clock (median time per unit): the work changed during the sweep" in said
    evaluated = subprocess.run([sys.executable, "-m", "govd", "eval", "--sweep", str(out),
                                "--policy", "performance", "--target-fps", "60"],
                               env=govd_env(), capture_output=True, text=True, timeout=300)
    assert evaluated.returncode == 0
    assert "the work changed during the sweep" in evaluated.stderr


def test_rounds_sweep_upwards_then_downwards_so_a_drift_spreads_over_every_level(
        live, tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    root, _ = live
    out = tmp_path / "sweep.csv"
    workload = GROWING.format(count=str(tmp_path / "count"))
    status = main(_measure_args(root, tmp_path, "--every", "4", "--idle-s", "0", "--runs", "1",
                                "--rounds", "2", "-o", str(out),
                                "--", sys.executable, "-c", workload))
    assert status == 0
    sweep = read_sweep(out)
    assert sweep.units == 2 and sweep.levels_mhz.size == 3
    up, down = sweep.time_ms  # the runs grew 150 ms each: 1st, 2nd, 3rd; then 6th, 5th, 4th
    assert np.all(np.diff(up) > 0) and np.all(np.diff(down) < 0)
    assert np.all(down > up.max())
    assert sweep.meta["rounds"].startswith("2: levels swept upwards then downwards")
    said = capsys.readouterr().err
    assert "round 2/2, level 3/3" in said
    assert "the work changed during the sweep" not in said  # the drift is every level's


def test_idle_power_above_the_loaded_power_is_said(tmp_path: Path,
                                                   caplog: pytest.LogCaptureFixture) -> None:
    table = tmp_path / "t.csv"
    table.write_text("# idle_power_w: 9.0\nunit,freq_mhz,time_ms,power_w\n"
                     "0,200,10,2.0\n0,400,6,3.0\n1,200,10,2.1\n1,400,6,3.1\n")
    caplog.set_level("WARNING", logger="govd.formats")
    read_sweep(table)
    [said] = [r.getMessage() for r in caplog.records]
    assert said.startswith(f"{table}: idle power 9 W is above the power of work at the lowest")


def _stepped_readings(power_w: float, window_s: float, phase_s: float,
                      step_s: float = 0.1, sample_s: float = 0.05) -> Samples:
    """Readings every ``sample_s`` of an energy counter that advances every ``step_s`` (as
    NVML's does) by what ``power_w`` used since its last step; the first step ``phase_s`` after
    the window opens."""
    samples = Samples()
    for t in np.arange(0.0, window_s + 1e-9, sample_s):
        steps = math.floor((t - phase_s) / step_s) + 1 if t >= phase_s else 0
        counted_until = phase_s + (steps - 1) * step_s if steps else -step_s
        samples.readings.append((float(t), Reading(freq_mhz=1000.0,
                                                   energy_mj=power_w * counted_until * 1000)))
    return samples


@pytest.mark.parametrize("window_s", [0.16, 0.5, 2.0])
def test_a_level_s_power_counts_whole_steps_of_a_stepped_energy_counter(
        window_s: float) -> None:
    """Power from a counter that advances every 100 ms: over any window and any phase of the
    counter's steps, within the change times' uncertainty (half a reading each end), where the
    rise over the whole window was off by up to a step (±40 % at 160 ms on the H200)."""
    for phase_s in np.linspace(0.0, 0.099, 12):
        got = _stepped_readings(500.0, window_s, float(phase_s)).power_w()
        span = max(window_s - 0.2, 0.1)
        assert abs(got / 500.0 - 1) <= 0.05 / span + 1e-9, (window_s, phase_s, got)


def test_frames_from_a_fast_application_are_read_for_the_whole_level_time() -> None:
    """25 frames come in at once; the level is still read for `level_s` so its power spans
    many steps of the energy counter."""
    class Source:
        path = "sock"
        drains = 0

        def drain(self) -> list[object]:  # the first drain clears what came before the level
            self.drains += 1
            return [type("F", (), {"gpu_time_ms": 6.4})() for _ in range(25 * (self.drains == 2))]

    class Device:
        reads = 0

        def read(self) -> Reading:
            Device.reads += 1
            return Reading(freq_mhz=1000.0, energy_mj=float(Device.reads))

    source = Source()
    work = FrameWork(source, frames=25, timeout_s=5.0, level_s=0.3)  # type: ignore[arg-type]
    started = time.monotonic()
    units = work.measure(Device(), 0.01, lambda: False)  # type: ignore[arg-type]
    assert len(units) == 25 and time.monotonic() - started >= 0.3
    assert len(units[0][1].readings) >= 20


def test_a_memory_lock_refused_mid_sweep_stops_it_rather_than_mislabel_the_pairs() -> None:
    """Pairs swept after the memory lock was lost would be recorded at a memory clock nothing
    set: the sweep stops with one line, and its caller restores the device."""
    class Device:
        name = "gpu0"
        levels_mhz = np.array([300.0, 300.0, 600.0, 600.0])

        def __init__(self) -> None:
            self.mem_levels_mhz: np.ndarray | None = np.array([400.0, 800.0, 400.0, 800.0])
            self.pairs: list[tuple[float, float]] = []

        def set_pair(self, freq_mhz: float, mem_freq_mhz: float) -> None:
            self.pairs.append((freq_mhz, mem_freq_mhz))
            if len(self.pairs) == 2:  # NOT_SUPPORTED: the graphics clock alone from now on
                self.mem_levels_mhz = None

        def read(self) -> Reading:
            return Reading(freq_mhz=self.pairs[-1][0])

    class Work:
        units = 1

        def measure(self, device: object, sample_s: float,
                    stop: object) -> list[tuple[float, Samples]]:
            return [(10.0, _stepped_readings(50.0, 0.5, 0.0))]

    device = Device()
    with pytest.raises(MeasureError, match="memory clock's lock was refused"):
        run_sweep(device, Work(), SweepPlan(settle_s=0.0, idle_s=0.0),  # type: ignore[arg-type]
                  lambda: False)
    assert device.pairs == [(300.0, 400.0), (300.0, 800.0)]
