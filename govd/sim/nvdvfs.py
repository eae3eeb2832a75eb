"""Sweep tables from measured NVIDIA DVFS data (`../shared/data/nv-dvfs/`).

The data (Q. Wang and X.-W. Chu, NV-DVFS-Benchmark; see the folder's README) hold, per kernel and
input, the kernel time and average board power at every clock setting. This module turns them into
a stream of work as a throughput job would issue it:

- a run is a sequence of phases; each phase picks one kernel (benchmark + input, uniformly) and
  launches it a random number of times (geometric, mean 200);
- each launch at each level takes the measured time and power times independent run-to-run noise
  (lognormal, σ = 1 %); counters carry 0.5 % noise;
- the run is as long as `minutes` of GPU time at the highest level.

GPUs:
- `v100`: `v100-dvfs-real-profile.csv`, 20 kernels at 10 core levels 405–1380 MHz, memory fixed at
  877 MHz (not written: one clock domain). `time` is taken to be ms (the source states no unit; its
  values are consistent with ms). Counters: the DCGM activities DRAMA, FP16A, FP32A, FP64A, SMACT,
  SMOCC, TENSO (0..1).
- `gtx1080ti`, `rtx2070s`: `../hkbu/*-dvfs-real-performance-power.csv` (same authors, time, nvprof
  counters and power in one file), core × memory grids in the boost range only.
- `gtx980`: `gtx980-dvfs-performance.csv` (time/ms and nvprof counters) joined with
  `gtx980-dvfs-power.csv` (power/W) on appName, coreF, memF, argNo. Levels are the (core, memory)
  pairs where both exist (core and memory 500…1000 MHz, a 6 × 6 grid), written with
  `mem_freq_mhz`; kernels lacking any pair are left out. Counters: the numeric nvprof columns.

Idle power is an assumption (the data hold none): 40 W for the V100 (a Tesla V100 at idle with
clocks up), 15 W for the GTX 980, 10 W for the GeForce 1080 Ti and 2070 Super (desktop idle);
written as `# idle_power_w` with `# idle_power_note`.
"""

from __future__ import annotations

import csv
import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from govd.formats.sweep import SweepTable
from govd.sim.levels import FloatArray

MEAN_LAUNCHES_PER_PHASE = 200
TIME_NOISE_SIGMA = 0.01
COUNTER_NOISE_SIGMA = 0.005
V100_COUNTERS = ("DRAMA", "FP16A", "FP32A", "FP64A", "SMACT", "SMOCC", "TENSO")
GTX980_NOT_COUNTERS = {"appName", "coreF", "memF", "argNo", "kernel", "time/ms", "blocks"}


class NvDvfsError(Exception):
    """The nv-dvfs data are absent or not as expected; the message says which file."""


@dataclass(frozen=True)
class GpuData:
    """Measured kernels of one GPU: arrays indexed [kernel, level]."""

    levels_mhz: FloatArray
    mem_levels_mhz: FloatArray | None
    time_ms: FloatArray
    power_w: FloatArray
    counters: dict[str, FloatArray]
    kernels: list[str]
    idle_power_w: float
    files: tuple[str, ...]


def default_data_dir() -> Path:
    """`../shared/data/nv-dvfs` relative to the repository root."""
    return Path(__file__).resolve().parents[2].parent / "shared" / "data" / "nv-dvfs"


def _rows(path: Path) -> list[dict[str, str]]:
    try:
        with open(path, newline="") as f:
            return list(csv.DictReader(f))
    except OSError as exc:
        raise NvDvfsError(f"{path}: cannot read: {exc.strerror or exc}") from None


def _grid(path: Path, rows: list[dict[str, str]], key: tuple[str, ...], level: tuple[str, ...],
          columns: list[str]) -> tuple[list[str], list[tuple[float, ...]], dict[str, FloatArray]]:
    """`columns` of `rows` as [kernel, level] arrays, for kernels measured at every level."""
    levels = sorted({tuple(float(r[c]) for c in level) for r in rows})
    index = {lv: i for i, lv in enumerate(levels)}
    found: dict[str, dict[str, FloatArray]] = {}
    try:
        for r in rows:
            name = "/".join(r[c] for c in key)
            cells = found.setdefault(name, {c: np.full(len(levels), np.nan) for c in columns})
            at = index[tuple(float(r[c]) for c in level)]
            for c in columns:
                cells[c][at] = float(r[c])
    except (KeyError, ValueError) as exc:
        raise NvDvfsError(f"{path}: unexpected content ({exc})") from None
    complete = sorted(k for k, cells in found.items()
                      if all(np.isfinite(a).all() for a in cells.values()))
    if not complete:
        raise NvDvfsError(f"{path}: no kernel measured at every level")
    return complete, levels, {c: np.stack([found[k][c] for k in complete]) for c in columns}


def load_v100(data_dir: Path) -> GpuData:
    """The V100 real-kernel profile: 10 core levels, memory fixed."""
    path = data_dir / "v100-dvfs-real-profile.csv"
    columns = ["time", "average_power", *V100_COUNTERS]
    kernels, levels, arrays = _grid(path, _rows(path), ("benchmark", "kernel", "argNo"),
                                    ("core_frequency",), columns)
    return GpuData(levels_mhz=np.array([lv[0] for lv in levels]), mem_levels_mhz=None,
                   time_ms=arrays["time"], power_w=arrays["average_power"],
                   counters={c: arrays[c] for c in V100_COUNTERS}, kernels=kernels,
                   idle_power_w=40.0, files=(path.name,))


def load_gtx980(data_dir: Path) -> GpuData:
    """The GTX 980 time and power files joined on (appName, coreF, memF, argNo)."""
    perf_path = data_dir / "gtx980-dvfs-performance.csv"
    power_path = data_dir / "gtx980-dvfs-power.csv"
    perf, power = _rows(perf_path), _rows(power_path)
    join = ("appName", "coreF", "memF", "argNo")
    watts = {tuple(r[c] for c in join): r["power/W"] for r in power}
    joined = [{**r, "power/W": watts[k]} for r in perf if (k := tuple(r[c] for c in join)) in watts]
    if not joined:
        raise NvDvfsError(f"{perf_path}: no rows match {power_path.name} on {', '.join(join)}")
    return _nvprof_grid(perf_path, joined, idle_power_w=15.0,
                        files=(perf_path.name, power_path.name))


def _nvprof_grid(path: Path, rows: list[dict[str, str]], idle_power_w: float,
                 files: tuple[str, ...]) -> GpuData:
    """(core, memory) grid of nvprof-style rows with `time/ms`, `power/W` and counter columns."""
    counters = [c for c in rows[0] if c not in GTX980_NOT_COUNTERS and c != "power/W"
                and c and _numeric(rows, c)]
    kernels, levels, arrays = _grid(path, rows, ("appName", "argNo"), ("coreF", "memF"),
                                    ["time/ms", "power/W", *counters])
    return GpuData(levels_mhz=np.array([lv[0] for lv in levels]),
                   mem_levels_mhz=np.array([lv[1] for lv in levels]),
                   time_ms=arrays["time/ms"], power_w=arrays["power/W"],
                   counters={c: arrays[c] for c in counters}, kernels=kernels,
                   idle_power_w=idle_power_w, files=files)


def _hkbu_loader(file_name: str, idle_power_w: float) -> Callable[[Path], GpuData]:
    """Loader of one HKBU file (`../shared/data/hkbu/`): time, counters and power in one CSV."""
    def load(data_dir: Path) -> GpuData:
        path = hkbu_dir(data_dir) / file_name
        rows = _rows(path)
        if not rows:
            raise NvDvfsError(f"{path}: no rows")
        return _nvprof_grid(path, rows, idle_power_w, (file_name,))
    return load


def hkbu_dir(data_dir: Path) -> Path:
    """The HKBU folder beside the nv-dvfs folder `data_dir` (both under ../shared/data)."""
    return Path(data_dir).parent / "hkbu"


def _numeric(rows: list[dict[str, str]], column: str) -> bool:
    try:
        for r in rows:
            float(r[column])
    except ValueError:
        return False
    return True


HKBU_COMMITS = {"gtx1080ti": "HKBU-HPML/GPU-DVFS-Job-Schedule 7ae3c9c",
                "rtx2070s": "HKBU-HPML/GPU-DVFS-Job-Schedule 7ae3c9c"}
"""Upstream commit of the HKBU files (their README)."""
GPUS: dict[str, Callable[[Path], GpuData]] = {
    "v100": load_v100,
    "gtx980": load_gtx980,
    # idle: GeForce cards of this class idle at about 10 W (board power at the desktop)
    "gtx1080ti": _hkbu_loader("gtx1080ti-dvfs-real-performance-power.csv", 10.0),
    "rtx2070s": _hkbu_loader("gtx2070s-dvfs-real-performance-power.csv", 10.0),
}


def nvdvfs_sweep(gpu: str, data_dir: Path, minutes: float, seed: int = 0) -> SweepTable:
    """Sweep table of about `minutes` of GPU time (at the top level) of measured `gpu` kernels.

    Raises `NvDvfsError` where the data folder or a file is missing or malformed, `KeyError` for
    an unknown `gpu`.
    """
    if gpu not in GPUS:
        raise KeyError(f"unknown GPU {gpu!r} (known: {', '.join(GPUS)})")
    if not Path(data_dir).is_dir():
        raise NvDvfsError(f"{data_dir}: no such folder; --data names the folder of {gpu}'s "
                          "measured tables (nv-dvfs for v100 and gtx980, hkbu for the others)")
    return sweep_from_data(GPUS[gpu](Path(data_dir)), gpu, minutes, seed)


def kernel_sweep(gpu: str, data_dir: Path) -> SweepTable:
    """Sweep table with one unit per measured kernel of `gpu`, as measured (no noise, no stream):
    the input of `govd sim fit`. Raises like `nvdvfs_sweep`."""
    if gpu not in GPUS:
        raise KeyError(f"unknown GPU {gpu!r} (known: {', '.join(GPUS)})")
    if not Path(data_dir).is_dir():
        raise NvDvfsError(f"{data_dir}: no such folder; --data names the folder of {gpu}'s "
                          "measured tables (nv-dvfs for v100 and gtx980, hkbu for the others)")
    data = GPUS[gpu](Path(data_dir))
    folder = hkbu_dir(data_dir) if gpu in HKBU_COMMITS else Path(data_dir)
    meta = {
        "source": f"{', '.join(data.files)} (one unit per kernel, as measured)",
        "source_sha256": " ".join(_sha256(folder / name) for name in data.files),
        "source_commit": HKBU_COMMITS.get(gpu, "NV-DVFS-Benchmark (commit not recorded)"),
        "gpu": gpu,
        "kernels": " ".join(k.replace(" ", "_") for k in data.kernels),
        "idle_power_w": f"{data.idle_power_w:g}",
        "idle_power_note": "assumed, not measured",
    }
    return SweepTable(levels_mhz=data.levels_mhz.copy(), time_ms=data.time_ms.copy(),
                      power_w=data.power_w.copy(),
                      mem_levels_mhz=None if data.mem_levels_mhz is None
                      else data.mem_levels_mhz.copy(),
                      counters={k: v.copy() for k, v in data.counters.items()}, meta=meta)


def _sha256(path: Path) -> str:
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def sweep_from_data(data: GpuData, gpu: str, minutes: float, seed: int = 0) -> SweepTable:
    """`nvdvfs_sweep` over already loaded (or a subset of) kernels ``data``."""
    rng = np.random.default_rng(seed)
    top = data.levels_mhz.size - 1  # levels sorted by core then memory clock
    budget_ms = minutes * 60e3
    mean_phase_ms = float(data.time_ms[:, top].mean()) * MEAN_LAUNCHES_PER_PHASE
    phases = int(budget_ms / mean_phase_ms * 3) + 4
    kernel_of_phase = rng.integers(0, len(data.kernels), phases)
    launches = rng.geometric(1.0 / MEAN_LAUNCHES_PER_PHASE, phases)
    kernel = np.repeat(kernel_of_phase, launches)
    n = max(1, int(np.searchsorted(np.cumsum(data.time_ms[kernel, top]), budget_ms)) + 1)
    kernel = kernel[:n]
    shape = (n, data.levels_mhz.size)
    time_ms = data.time_ms[kernel] * rng.lognormal(0.0, TIME_NOISE_SIGMA, shape)
    power_w = data.power_w[kernel] * rng.lognormal(0.0, TIME_NOISE_SIGMA, shape)
    counters = {name: values[kernel] * rng.lognormal(0.0, COUNTER_NOISE_SIGMA, shape)
                for name, values in data.counters.items()}
    meta = {
        "source": f"nv-dvfs ({', '.join(data.files)}), Wang & Chu, NV-DVFS-Benchmark",
        "gpu": gpu,
        "seed": str(seed),
        "minutes": f"{minutes:g}",
        "idle_power_w": f"{data.idle_power_w:g}",
        "idle_power_note": "assumed, not measured",
        "kernels": str(len(data.kernels)),
    }
    return SweepTable(levels_mhz=data.levels_mhz.copy(), time_ms=time_ms, power_w=power_w,
                      mem_levels_mhz=None if data.mem_levels_mhz is None
                      else data.mem_levels_mhz.copy(),
                      counters=counters, meta=meta)


def core_slice(data: GpuData) -> GpuData:
    """The (core, memory) pairs at the highest memory clock, as a one-domain table of core
    levels (what a GPU whose memory clock is not governed runs)."""
    if data.mem_levels_mhz is None:
        return data
    at = np.flatnonzero(data.mem_levels_mhz == data.mem_levels_mhz.max())
    return GpuData(levels_mhz=data.levels_mhz[at], mem_levels_mhz=None,
                   time_ms=data.time_ms[:, at], power_w=data.power_w[:, at],
                   counters={c: v[:, at] for c, v in data.counters.items()},
                   kernels=data.kernels, idle_power_w=data.idle_power_w, files=data.files)
