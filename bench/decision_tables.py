"""The fine-grid and training tables `bench_decisions.py` judges decisions on beside the nv-dvfs
and hkbu ones (issue #24): measured work on its real clock grid, coarse measurements carried onto
an NVML-like grid, training iterations, and the game suite on a fitted table at 6 and 100 levels.

How each table is made (every one from files in ``../shared/data``, skipped with a message where
they are absent; nothing read here is written into govd):
- `synergy-187`: the SYnergy V100 micro-benchmarks (``synergy-train/``), each kernel measured at
  all 187 core clocks; units as `unit_sweep` makes them (a kernel run per unit, the kernel drawn
  anew after a geometric number of units); `synergy-16`: the same on every 12th clock from the
  top; `synergy-187-s1`: another seed with longer phases (mean 200 units).
- `v100-fine`, `gtx1080ti-core-fine`, `rtx2070s-core-fine`: nv-dvfs and hkbu kernels (core clock
  alone, memory at its highest) carried onto a grid of `FINE_STEP_MHZ` steps between their
  lowest and highest measured clock, time and power interpolated linearly in log-log (what a
  GPU whose driver offers ~15 MHz steps would show between the measured points).
- `dl-*`: Caffe training iterations at (core, memory) pairs (``dlbench/``), one network per
  table, one iteration per unit; only the files whose clocks are absolute MHz (the others give
  offsets from defaults the files do not state).
- `h200-phased`, `h200-phased-fine`: govd's own sweeps of a real H200 (``bench/results/sweep-
  nvidia-h200-{train,stream}-rounds.csv``, `bench/nvml_loop.py --every 4 --rounds 2
  --level-s 1.5 --sweeps-only`, 27 Nov): a transformer's training step and a memory-bound step,
  each measured 50 times at 29 graphics clocks (every 4th of the 110 and the highest: 25 steps
  per clock climbing, 25 descending, so that the steps' drift falls on every clock alike),
  alternating every 100 units as the live job alternates them every 5 s. A unit is ~50 ms of
  one work: the sum of as many of its measured steps as fill 50 ms at the top clock, each drawn
  from that level's 50 (real unit noise, no noise added), power and counters their mean. The
  training step's own noise is large (the two rounds' medians differ by up to 9 % at one
  clock), so its curve is not monotone near the top: a real GPU's fact the tables from
  ``shared/`` do not hold. `-fine` carries each unit onto the GPU's own 15 MHz grid (110 clocks)
  as `fine_grid` does. These files are committed with govd's results (not in ``shared/``): they
  are skipped where absent. (Until 27 Nov's second session the rows came from one upward sweep
  of the first loop run, ``*-27nov.csv``, 25 steps per clock.)
- `stage-a40`, `stage-a100`, `stage-h100`, `stage-a100-mixed`: made up, from physics alone (no
  file): one pipeline stage of a model's training, the kind of held-out table issue #24 quotes
  (A40 and A100 stages, where one fixed clock well below the top saves 12-14 %). A work's time
  is t_top · (α · f_top / f + 1 − α) (a share α of it scales with the clock), its power an idle
  part plus a dynamic part ∝ f · V², the voltage flat at a floor below a knee and linear to the
  top above it (`StageGpu`). Forward and backward micro-batches (`STAGE_WORKS`: compute-bound,
  α 0.92 and 0.88) alternate every 1-3 units of ~50 ms; `-mixed` adds the optimiser step and
  gradient exchange (memory- and wait-bound, α 0.5 and 0.2) in runs of 5-40 units after every
  16 rounds of micro-batches (about a quarter of the units). Clock grids
  NVML-like: an A40's 60 clocks and an A100's 38 15 MHz apart, an H100's 190 5 MHz apart. Time
  and power carry 1 % lognormal noise per (unit, level), counters 0.5 %, as `unit_sweep`'s.
  The constants are round figures of the public specifications (top clocks) and of the shape
  such curves take, not fitted to any table here.
- the game suite: `govd.sim` scenarios at 60 FPS on the calibrated mobile levels (6) and on the
  same fitted model sampled at 100 evenly spaced clocks (`fine_level_table`).
- `power_law_table` (`bench_fine_tables.py` and the memory policy's tests, not
  `bench_decisions.py`): made up, works whose time goes as f^-slope on `POWER_LAW_GRID` (101
  clocks 5 MHz apart), taking turns in runs of a fixed length, power 30 + 70 (f / f_top)^2.5 W,
  1 % lognormal noise per (unit, clock) on both.
"""

from __future__ import annotations

import csv
import sys
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from govd.formats.sweep import SweepFormatError, SweepTable, read_sweep
from govd.sim.gpu import simulate
from govd.sim.levels import LevelTable, level_table
from govd.sim.nvdvfs import GPUS, GpuData, NvDvfsError, core_slice, load_v100

RESULTS = Path(__file__).resolve().parent / "results"
FINE_STEP_MHZ = 15.0
"""Step of the NVML-like grid coarse tables are carried onto (datacenter GPUs: 5-15 MHz)."""
GAME_SUITE = ("rendering-test", "art3", "game-light", "game-medium", "game-heavy")
GAME_LEVELS = ("mobile", "mobile-100")
SYNERGY_SKIP = {"kernel-name", "size", "num-iters", "core-freq", "memory-freq",
                "kernel-time [s]", "run-time [s]", "mean-energy [J]", "max-energy [J]",
                "mean-edp", "mean-ed2p", "max-edp", "max-ed2p"}
"""SYnergy columns that are no counter (the rest: the kernel's static instruction mix)."""
H200_SWEEPS = ("sweep-nvidia-h200-train-rounds.csv", "sweep-nvidia-h200-stream-rounds.csv")
"""govd's sweeps of the two works of the phased job on a real H200 (bench/results)."""
H200_PHASE_UNITS = 100
"""The live job's 5 s phases at 50 ms units."""
DL_ABSOLUTE = ("titanX-caffe-googlenet.csv", "titanX-caffe-resnet.csv",
               "gtx1080Ti-googlenet.csv", "gtx980-resnet.csv")
"""dlbench files whose clocks are MHz, not offsets."""


def load_synergy(folder: Path, idle_power_w: float) -> GpuData:
    """Every kernel (name and size) measured at every clock the files hold, run time and mean
    power per run; counters: the kernel's instruction mix (the same at every clock)."""
    runs: dict[str, dict[float, tuple[float, float]]] = defaultdict(dict)
    mix: dict[str, list[float]] = {}
    names: list[str] = []
    files = sorted(folder.glob("*.csv"))
    if not files:
        raise NvDvfsError(f"{folder}: no SYnergy files")
    for path in files:
        with open(path, newline="") as f:
            for row in csv.DictReader(f):
                kernel = f"{row['kernel-name']}/{row['size']}"
                run_s = float(row["run-time [s]"])
                runs[kernel][float(row["core-freq"])] = (
                    float(row["kernel-time [s]"]) * 1e3, float(row["mean-energy [J]"]) / run_s)
                names = [c for c in row if c not in SYNERGY_SKIP]
                mix[kernel] = [float(row[c]) for c in names]
    levels = sorted({f for by_level in runs.values() for f in by_level})
    kernels = sorted(k for k, by_level in runs.items() if len(by_level) == len(levels))
    time_ms = np.array([[runs[k][f][0] for f in levels] for k in kernels])
    power_w = np.array([[runs[k][f][1] for f in levels] for k in kernels])
    counters = {c: np.repeat(np.array([mix[k][i] for k in kernels])[:, None], len(levels), 1)
                for i, c in enumerate(names)}
    return GpuData(np.array(levels), None, time_ms, power_w, counters, kernels, idle_power_w,
                   tuple(p.name for p in files))


def load_dlbench(path: Path, idle_power_w: float) -> GpuData:
    """One network's iterations at each (core, memory) pair of the file, pairs ordered by core
    then memory clock; one 'kernel' (the network), no counters."""
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    core = np.array([float(r["coreF"]) for r in rows])
    mem = np.array([float(r["memF"]) for r in rows])
    order = np.lexsort((mem, core))
    time_ms = np.array([float(r["time/s"]) * 1e3 for r in rows])[order][None]
    power_w = np.array([float(r["power/W"]) for r in rows])[order][None]
    return GpuData(core[order], mem[order], time_ms, power_w, {}, [path.stem], idle_power_w,
                   (path.name,))


def thin(data: GpuData, every: int) -> GpuData:
    """Every ``every``-th level counted down from the top one (which stays)."""
    keep = np.arange(data.levels_mhz.size)[::-1][::every][::-1]
    return GpuData(data.levels_mhz[keep],
                   None if data.mem_levels_mhz is None else data.mem_levels_mhz[keep],
                   data.time_ms[:, keep], data.power_w[:, keep],
                   {c: v[:, keep] for c, v in data.counters.items()}, data.kernels,
                   data.idle_power_w, data.files)


def fine_grid(data: GpuData, step_mhz: float = FINE_STEP_MHZ) -> GpuData:
    """One clock domain carried onto evenly spaced clocks about ``step_mhz`` apart between its
    lowest and highest level: log time and log power linear in log clock between measured
    levels, counters linear."""
    if data.mem_levels_mhz is not None:
        raise ValueError("fine_grid takes one clock domain (core_slice first)")
    lo, hi = float(data.levels_mhz[0]), float(data.levels_mhz[-1])
    grid = np.linspace(lo, hi, round((hi - lo) / step_mhz) + 1)
    at, to = np.log(data.levels_mhz), np.log(grid)

    def carry(rows: np.ndarray, logs: bool) -> np.ndarray:
        if logs:
            return np.exp(np.array([np.interp(to, at, np.log(r)) for r in rows]))
        return np.array([np.interp(to, at, r) for r in rows])

    return GpuData(grid, None, carry(data.time_ms, True), carry(data.power_w, True),
                   {c: carry(v, False) for c, v in data.counters.items()}, data.kernels,
                   data.idle_power_w, data.files)


def fine_level_table(table: LevelTable, levels: int) -> LevelTable:
    """``table``'s fitted model sampled at ``levels`` evenly spaced clocks between its lowest
    and highest: time from the model's own scaling, voltage and memory power interpolated, core
    power as the same switched capacitance (interpolated) times f·V²."""
    f = np.linspace(table.freqs_mhz[0], table.freqs_mhz[-1], levels)
    volts = None if table.volts is None else np.interp(f, table.freqs_mhz, table.volts)
    v2 = 1.0 if table.volts is None else table.volts ** 2
    cdyn = np.interp(f, table.freqs_mhz, table.core_power_w / (table.freqs_mhz * v2))
    core_w = cdyn * f * (1.0 if volts is None else volts ** 2)
    return replace(table, name=f"{table.name}-{levels}", freqs_mhz=f,
                   scalable_time=table.scalable_at(f), memory_time=table.memory_at(f),
                   core_power_w=core_w, mem_power_w=np.interp(f, table.freqs_mhz,
                                                              table.mem_power_w),
                   volts=volts, volts_rel=None)


def slowdown_tables(data_dir: Path, quick: bool,
                    unit_sweep: Callable[..., SweepTable]) -> list[SweepTable]:
    """The fine-grid, training and H200 tables for slowdown targets (see the module's docstring);
    ``unit_sweep`` is bench_decisions' unit maker. ``quick``: a few hundred units each."""
    units = 300 if quick else 3000
    out: list[SweepTable] = []
    nv = data_dir / "nv-dvfs"
    try:
        v100 = load_v100(nv)
        synergy = load_synergy(data_dir / "synergy-train", v100.idle_power_w)
        out += [unit_sweep(synergy, "synergy-187", units, mean_phase_units=50.0),
                unit_sweep(thin(synergy, 12), "synergy-16", units, mean_phase_units=50.0),
                unit_sweep(synergy, "synergy-187-s1", units, mean_phase_units=200.0, seed=1),
                unit_sweep(fine_grid(v100), "v100-fine", units, mean_phase_units=100.0)]
    except (NvDvfsError, OSError, KeyError, ValueError) as exc:
        print(f"skipping SYnergy and V100 fine tables: {exc}", file=sys.stderr)
    for gpu in ("gtx1080ti", "rtx2070s"):
        try:
            data = fine_grid(core_slice(GPUS[gpu](nv)))
        except (NvDvfsError, OSError) as exc:
            print(f"skipping {gpu} fine: {exc}", file=sys.stderr)
            continue
        out.append(unit_sweep(data, f"{gpu}-core-fine", units, mean_phase_units=5.0, seed=1))
    for name in DL_ABSOLUTE:
        path = data_dir / "dlbench" / name
        try:
            # Idle power enters only under a frame rate: these rows are judged under slowdown
            # limits. The figures are the nv-dvfs/hkbu loaders' for the same GPU families.
            idle_w = 15.0 if name.startswith("gtx980") else 10.0
            data = load_dlbench(path, idle_w)
        except (OSError, KeyError, ValueError) as exc:
            print(f"skipping {name}: {exc}", file=sys.stderr)
            continue
        out.append(unit_sweep(data, f"dl-{path.stem}", units // 2, mean_phase_units=1e9))
    return out + h200_tables(RESULTS, quick)


def phased_sweeps(sweeps: list[SweepTable], name: str, units: int, phase_units: int,
                  unit_ms: float = 50.0, seed: int = 0) -> SweepTable:
    """Units of ~``unit_ms`` of each sweep's work in turn, ``phase_units`` at a time: each the
    sum of as many of the work's measured frames as fill ``unit_ms`` at its top level, drawn
    per level from that level's measured frames; power and counters their mean."""
    levels = sweeps[0].levels_mhz
    if any(not np.array_equal(s.levels_mhz, levels) for s in sweeps):
        raise ValueError("the sweeps cover different levels")
    rng = np.random.default_rng(seed)
    counters = [c for c in sweeps[0].counters if all(c in s.counters for s in sweeps)]
    time_ms, power_w = np.empty((units, levels.size)), np.empty((units, levels.size))
    measured = {c: np.empty((units, levels.size)) for c in counters}
    cols = np.arange(levels.size)
    for u in range(units):
        work = sweeps[(u // phase_units) % len(sweeps)]
        frames = max(1, round(unit_ms / float(np.median(work.time_ms[:, -1]))))
        rows = rng.integers(0, work.time_ms.shape[0], size=(frames, levels.size))
        time_ms[u] = work.time_ms[rows, cols].sum(axis=0)
        power_w[u] = work.power_w[rows, cols].mean(axis=0)
        for c in counters:
            measured[c][u] = work.counters[c][rows, cols].mean(axis=0)
    return SweepTable(levels_mhz=levels.copy(), time_ms=time_ms, power_w=power_w,
                      counters=measured, mem_levels_mhz=None,
                      meta={"idle_power_w": sweeps[0].meta.get("idle_power_w", "0"),
                            "source": name}, path=name)


def h200_tables(results: Path, quick: bool) -> list[SweepTable]:
    """`h200-phased` on the swept clocks and `h200-phased-fine` on the GPU's 15 MHz grid."""
    units = 300 if quick else 2000
    try:
        sweeps = [read_sweep(results / name) for name in H200_SWEEPS]
        coarse = phased_sweeps(sweeps, "h200-phased", units, H200_PHASE_UNITS)
    except (OSError, SweepFormatError, ValueError) as exc:
        print(f"skipping the H200 tables: {exc}", file=sys.stderr)
        return []
    data = GpuData(coarse.levels_mhz, None, coarse.time_ms, coarse.power_w, coarse.counters,
                   [], float(coarse.meta["idle_power_w"]), ())
    fine = fine_grid(data)
    return [coarse, replace(coarse, levels_mhz=fine.levels_mhz, time_ms=fine.time_ms,
                            power_w=fine.power_w, counters=fine.counters,
                            meta={**coarse.meta, "source": "h200-phased-fine"},
                            path="h200-phased-fine")]


def game_tables(minutes: float, seed: int = 0) -> list[SweepTable]:
    """The game suite on the mobile levels and on the same model at 100 clocks."""
    out = []
    for levels in GAME_LEVELS:
        table = (level_table("mobile") if levels == "mobile"
                 else fine_level_table(level_table("mobile"), 100))
        for scenario in GAME_SUITE:
            sweep = simulate(scenario, table, minutes, seed)
            sweep.path = f"{scenario}@{levels}"
            out.append(sweep)
    return out


@dataclass(frozen=True)
class StageGpu:
    """A made-up GPU for the stage tables: its clock grid and its power against clock."""

    name: str
    top_mhz: float
    clocks: int
    step_mhz: float
    idle_w: float
    dynamic_w: float
    """Dynamic power of a work of activity 1 at the top clock."""
    knee: float = 0.55
    """Share of the top clock below which the voltage stays at its floor."""
    floor_v: float = 0.72
    """The voltage floor, as a share of the top's voltage."""

    def levels_mhz(self) -> np.ndarray:
        return self.top_mhz - self.step_mhz * np.arange(self.clocks)[::-1]

    def volts(self, x: np.ndarray) -> np.ndarray:
        """Voltage over the top's at clocks ``x`` (shares of the top clock)."""
        rising = self.floor_v + (1.0 - self.floor_v) * (x - self.knee) / (1.0 - self.knee)
        out: np.ndarray = np.where(x <= self.knee, self.floor_v, rising)
        return out


@dataclass(frozen=True)
class StageWork:
    """One work of a training stage: the share of its time that scales with the clock, its
    time at the top clock and its switching activity."""

    name: str
    alpha: float
    top_ms: float
    activity: float


STAGE_GPUS = (StageGpu("a40", 1740.0, 60, 15.0, 60.0, 240.0),
              StageGpu("a100", 1410.0, 38, 15.0, 50.0, 300.0),
              StageGpu("h100", 1980.0, 190, 5.0, 80.0, 500.0))
STAGE_WORKS = (StageWork("forward", 0.92, 48.0, 1.0), StageWork("backward", 0.88, 50.0, 0.95))
STAGE_EXTRA = (StageWork("optimiser", 0.5, 40.0, 0.6), StageWork("exchange", 0.2, 30.0, 0.4))
"""The `-mixed` table's other works: the optimiser step and the gradient exchange."""


def stage_sweep(gpu: StageGpu, works: tuple[StageWork, ...], name: str, units: int,
                runs: tuple[int, int], seed: int, extra: tuple[StageWork, ...] = (),
                extra_runs: tuple[int, int] = (5, 40), extra_every: int = 16) -> SweepTable:
    """``units`` units of a training stage on ``gpu`` (see the module's notes): ``works`` in
    turn, each for a run of ``runs`` units (inclusive), and with ``extra``, after every
    ``extra_every`` rounds of them, one of those for a run of ``extra_runs``."""
    rng = np.random.default_rng(seed)
    f = gpu.levels_mhz()
    x = f / gpu.top_mhz
    v = gpu.volts(x)
    shape = (units, f.size)
    work = np.empty(units, dtype=np.intp)
    every = works + extra
    u, turn = 0, 0
    while u < units:
        if extra and turn and turn % (len(works) * extra_every) == 0:
            k, span = len(works) + int(rng.integers(len(extra))), extra_runs
        else:
            k, span = turn % len(works), runs
        run = int(rng.integers(span[0], span[1] + 1))
        work[u:u + run] = k
        u += run
        turn += 1
    alpha = np.array([w.alpha for w in every])[work, None]
    top_ms = np.array([w.top_ms for w in every])[work, None]
    activity = np.array([w.activity for w in every])[work, None]
    time_ms = top_ms * (alpha / x + 1.0 - alpha) * rng.lognormal(0.0, 0.01, shape)
    power_w = (gpu.idle_w + gpu.dynamic_w * activity * x * v * v) * rng.lognormal(0.0, 0.01,
                                                                                    shape)
    counters = {"sm_active": alpha * rng.lognormal(0.0, 0.005, shape),
                "dram_active": (1.0 - alpha) * rng.lognormal(0.0, 0.005, shape)}
    return SweepTable(levels_mhz=f, time_ms=time_ms, power_w=power_w, mem_levels_mhz=None,
                      counters=counters, meta={"idle_power_w": f"{gpu.idle_w:g}",
                                               "source": name}, path=name)


def stage_tables(quick: bool, seed: int = 0) -> list[SweepTable]:
    """The made-up training-stage tables (see the module's notes); ``seed`` is added to each
    table's own (``--unit-seed``). ``quick``: a few hundred units each."""
    units = 300 if quick else 2000
    out = [stage_sweep(gpu, STAGE_WORKS, f"stage-{gpu.name}", units, (1, 3), seed + i)
           for i, gpu in enumerate(STAGE_GPUS)]
    a100 = STAGE_GPUS[1]
    out.append(stage_sweep(a100, STAGE_WORKS, "stage-a100-mixed", units, (1, 3),
                           seed + len(STAGE_GPUS), extra=STAGE_EXTRA))
    return out


POWER_LAW_GRID = np.arange(1000.0, 1501.0, 5.0)
"""101 clocks 5 MHz apart: a fine grid."""


def power_law_table(slopes: list[float], units: int = 1500, run: int = 300, noise: float = 0.01,
                    slow: int | None = None, seed: int = 0) -> SweepTable:
    """Works taking turns every ``run`` units, time ∝ f^-slope (20 ms at the top, 40 for the
    second work, 60 for a third...), ``noise`` lognormal per unit and clock on time and power;
    ``slow``: a clock where every unit runs 20 % slower (a clock that breaks physics)."""
    rng = np.random.default_rng(seed)
    f = POWER_LAW_GRID
    work = (np.arange(units) // run) % len(slopes)
    slope = np.array(slopes)[work][:, None]
    top_ms = 20.0 * (1 + work)[:, None]
    time_ms = top_ms * (f[-1] / f) ** slope * rng.lognormal(0, noise, (units, f.size))
    if slow is not None:
        time_ms[:, slow] *= 1.2
    power_w = (30 + 70 * (f / f[-1]) ** 2.5) * rng.lognormal(0, noise, (units, f.size))
    return SweepTable(f, time_ms, power_w)
