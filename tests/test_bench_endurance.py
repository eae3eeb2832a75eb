"""The endurance benchmarks (load, soak, crash) in quick mode: their invariants, not their speed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
BENCH = REPO / "bench"


def run_bench(script: str, out: Path, *args: str) -> dict:
    subprocess.run([sys.executable, str(BENCH / script), "--out", str(out), *args],
                   env={**os.environ, "PYTHONPATH": str(REPO)}, check=True,
                   stdout=subprocess.DEVNULL, timeout=300)
    return json.loads(out.read_text())


@pytest.fixture
def bench_path(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(BENCH))


@pytest.mark.usefixtures("bench_path")
def test_soak_keeps_the_model_finite_the_state_file_intact_and_restores_the_tree() -> None:
    import bench_soak

    figures = bench_soak.soak(ticks=400, sample_every=50)
    assert figures["ticks"] == 400
    assert figures["finite_checks"] >= 8
    assert figures["non_finite"] == []
    assert figures["state_file_differs"] == []
    assert figures["found"]["governor"] == "simple_ondemand"
    for name in ("governor", "min_freq", "max_freq"):
        assert figures["after_stop"][name] == figures["found"][name]
    assert figures["not_restored"] == []
    assert figures["exit_status"] == 0
    assert figures["frames"]["accepted"] > 0  # the simulated GPU's frames reached the daemon
    assert figures["runner_counts"]["writes"] > 0  # the daemon did govern in between


def test_load_accepts_every_frame_the_kernel_took_and_stops_cleanly(tmp_path: Path) -> None:
    result = run_bench("bench_load.py", tmp_path / "load.json", "--quick")
    measured = result["measured"]
    assert measured["daemon_exit_status"] == 0
    assert measured["frames_sent"] > 0
    assert measured["frames_accepted"] == measured["frames_sent"]
    assert measured["frames_dropped"] == {}
    # Not asserted: how many the kernel refused depends on how often the daemon gets a CPU;
    # tests/sources pins the reading between ticks that keeps it low.
    assert measured["frames_per_tick_max"] <= 4096  # the source's queue bound
    assert set(result["met"]) == {"jitter_p99_us", "gap_max_us", "rss_growth_mb",
                                  "daemon_stopped_cleanly"}


def test_crash_runs_each_recovery_and_find_the_tree_as_found(tmp_path: Path) -> None:
    result = run_bench("bench_crash.py", tmp_path / "crash.json", "--runs", "2",
                       "--window-s", "0.5")
    measured = result["measured"]
    assert measured["runs"] == 2
    assert measured["failures"] == []
    assert measured["restored_as_found"] == 2
    recoveries = {key.rsplit("/", 1)[1] for key in measured["by_kill_phase_recovery"]}
    assert recoveries == {"restore", "restart"}


@pytest.mark.usefixtures("bench_path")
def test_comparison_names_each_governed_file_that_differs() -> None:
    from daemon_setup import restored_as_found, saved_as_found

    found = {"governor": "userspace", "min_freq": "200", "max_freq": "500",
             "userspace/set_freq": "300"}
    now = {**found, "governor": "performance", "userspace/set_freq": "500"}
    assert [d.split(":")[0] for d in restored_as_found(found, now)] == [
        "governor", "userspace/set_freq"]
    saved = {"state": {"governor": "userspace", "min_freq_hz": 200, "max_freq_hz": 400,
                       "set_freq_hz": 300}}
    assert [d.split(":")[0] for d in saved_as_found(found, saved)] == ["max_freq"]
    # set_freq is not the device's state while another governor is in charge
    other = {**found, "governor": "performance"}
    assert restored_as_found(other, {**other, "userspace/set_freq": "1"}) == []
