"""Measured GTX 1080 Ti and RTX 2070 Super kernels (`../shared/data/hkbu/`, see its README) as
`govd.sim.nvdvfs.GpuData`, so that `sweep_from_data` turns them into sweep tables.

Both files hold, per kernel and input, the time (ms) and average power (W) at every (core,
memory) clock pair of the boost region; the 1080 Ti file also ~45 nvprof counters. Levels are
the pairs (two clock domains); `core_slice` keeps the pairs at the highest memory clock for a
one-domain table. Idle power is not in the data: an assumption, written as such.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from govd.sim.nvdvfs import GpuData, NvDvfsError, _grid, _numeric, _rows

NOT_COUNTERS = {"", "appName", "coreF", "memF", "argNo", "kernel", "time/ms", "power/W",
                "blocks", "warps"}
FILES = {"gtx1080ti": "gtx1080ti-dvfs-real-performance-power.csv",
         "rtx2070s": "gtx2070s-dvfs-real-performance-power.csv"}
IDLE_POWER_W = {"gtx1080ti": 15.0, "rtx2070s": 12.0}


def default_data_dir() -> Path:
    """`../shared/data/hkbu` relative to the repository root."""
    return Path(__file__).resolve().parents[2].parent / "shared" / "data" / "hkbu"


def load_hkbu(gpu: str, data_dir: Path) -> GpuData:
    """One hkbu GPU's kernels over its (core, memory) pairs. Raises `NvDvfsError` where the
    file is missing or malformed, `KeyError` for an unknown ``gpu``."""
    if gpu not in FILES:
        raise KeyError(f"unknown GPU {gpu!r} (known: {', '.join(FILES)})")
    path = Path(data_dir) / FILES[gpu]
    rows = _rows(path)
    if not rows:
        raise NvDvfsError(f"{path}: no rows")
    counters = [c for c in rows[0] if c not in NOT_COUNTERS and _numeric(rows, c)]
    kernels, levels, arrays = _grid(path, rows, ("appName", "kernel", "argNo"),
                                    ("coreF", "memF"), ["time/ms", "power/W", *counters])
    return GpuData(levels_mhz=np.array([lv[0] for lv in levels]),
                   mem_levels_mhz=np.array([lv[1] for lv in levels]),
                   time_ms=arrays["time/ms"], power_w=arrays["power/W"],
                   counters={c: arrays[c] for c in counters}, kernels=kernels,
                   idle_power_w=IDLE_POWER_W[gpu], files=(path.name,))


def core_slice(data: GpuData) -> GpuData:
    """The pairs at the highest memory clock, as a one-domain table of core levels."""
    if data.mem_levels_mhz is None:
        return data
    at = np.flatnonzero(data.mem_levels_mhz == data.mem_levels_mhz.max())
    return GpuData(levels_mhz=data.levels_mhz[at], mem_levels_mhz=None,
                   time_ms=data.time_ms[:, at], power_w=data.power_w[:, at],
                   counters={c: v[:, at] for c, v in data.counters.items()},
                   kernels=data.kernels, idle_power_w=data.idle_power_w, files=data.files)
