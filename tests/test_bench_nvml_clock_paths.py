"""bench/nvml_clock_paths.py against the fake NVML: the clocks it picks, its summary against
the driver's own clocks, and a dry run that skips the ways NVML refuses and leaves the GPU
unlocked."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.nvml_fake import build_fake_nvml, one_gpu

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "bench"))

import nvml_clock_paths  # noqa: E402


def test_the_clocks_are_the_top_its_neighbour_and_the_nearest_to_each_ratio() -> None:
    grid = [345 + 15 * i for i in range(110)]  # the H200's: 345..1980 MHz
    assert nvml_clock_paths.pick_clocks(grid) == [1980, 1965, 1905, 1800, 1590, 1365]
    assert nvml_clock_paths.pick_clocks([1000]) == [1000]


def test_the_summary_takes_medians_over_rounds_against_the_drivers_clocks() -> None:
    def cell(way: str, f: int, ms: float, j: float) -> dict[str, object]:
        return {"work": "train", "way": way, "target_mhz": f, "median_ms": ms, "j_per_step": j,
                "power_w": j / ms * 1000, "graphics_mhz": f, "mem_mhz": 3201}
    cells = [cell("default", 1980, 20.0, 10.0), cell("default", 1980, 22.0, 10.0),
             cell("lock", 1905, 21.0, 9.0), cell("lock", 1905, 23.0, 9.5),
             cell("lock", 1905, 21.5, 9.2), {"work": "train", "way": "app", "error": "refused"}]
    rows = {(r["way"], r["target_mhz"]): r for r in nvml_clock_paths.summary(cells)}
    assert set(rows) == {("default", 1980), ("lock", 1905)}
    lock = rows[("lock", 1905)]
    assert lock["rounds"] == 3 and lock["median_ms"] == 21.5
    assert lock["time_vs_default"] == pytest.approx(21.5 / 21.0)
    assert lock["energy_vs_default"] == pytest.approx(9.2 / 10.0)


def test_a_dry_run_skips_the_refused_ways_and_leaves_the_gpu_unlocked(tmp_path: Path) -> None:
    (tmp_path / "lib").mkdir()
    nvml = one_gpu(build_fake_nvml(tmp_path / "lib"), tmp_path, "hopper")
    env = {**os.environ, "LD_LIBRARY_PATH": str(nvml.lib_dir), "PYTHONPATH": str(REPO),
           "FAKE_NVML_STATE": str(nvml.state_path)}
    done = subprocess.run([sys.executable, str(REPO / "bench" / "nvml_clock_paths.py"), "--dry",
                           "--seconds", "0.02", "--repeats", "1", "--out", str(tmp_path)],
                          env=env, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    [path] = tmp_path.glob("nvml-clock-paths-*.json")
    got = json.loads(path.read_text())
    assert set(got["refused"]) == {"app", "app-low-mem", "lock+app"}  # the fake has no such call
    assert {c["way"] for c in got["cells"]} == {"default", "lock"}
    assert len(got["cells"]) == 2 * (1 + len(got["clocks_mhz"]))
    locked = {c["target_mhz"]: c["graphics_mhz"] for c in got["cells"] if c["way"] == "lock"}
    assert locked == {f: float(f) for f in got["clocks_mhz"]}
    state = nvml.state()
    assert state.get("gpu0.lock_max", "0") == "0" and state.get("gpu0.mem_lock_max", "0") == "0"


def test_application_clocks_someone_set_are_put_back(monkeypatch: pytest.MonkeyPatch) -> None:
    pynvml = nvml_clock_paths.pynvml
    calls: list[tuple[str, tuple[object, ...]]] = []
    now = {pynvml.NVML_CLOCK_MEM: 2201, pynvml.NVML_CLOCK_GRAPHICS: 1410}
    default = {pynvml.NVML_CLOCK_MEM: 3201, pynvml.NVML_CLOCK_GRAPHICS: 1980}
    monkeypatch.setattr(pynvml, "nvmlDeviceGetApplicationsClock", lambda h, c: now[c])
    monkeypatch.setattr(pynvml, "nvmlDeviceGetDefaultApplicationsClock", lambda h, c: default[c])
    for name in ("nvmlDeviceResetGpuLockedClocks", "nvmlDeviceResetMemoryLockedClocks",
                 "nvmlDeviceResetApplicationsClocks", "nvmlDeviceSetApplicationsClocks"):
        monkeypatch.setattr(pynvml, name, lambda *a, n=name: calls.append((n, a[1:])))
    found = nvml_clock_paths.found_applications(object())
    assert found == (2201, 1410)
    assert nvml_clock_paths.put_back(object(), found) == []
    assert calls[-1] == ("nvmlDeviceSetApplicationsClocks", (2201, 1410))  # after the resets
    assert [n for n, _ in calls[:3]] == ["nvmlDeviceResetGpuLockedClocks",
                                        "nvmlDeviceResetMemoryLockedClocks",
                                        "nvmlDeviceResetApplicationsClocks"]
    now.update(default)
    assert nvml_clock_paths.found_applications(object()) is None  # at the defaults
