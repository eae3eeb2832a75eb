"""What a real NVIDIA GPU runs at when its graphics clock is set one way or another, and what the
training and memory-bound steps of `bench/gpu_work.py` cost there (root, torch with CUDA).

    sudo PYTHONPATH=. python3 bench/nvml_clock_paths.py [--seconds 1.2] [--repeats 2] [--out DIR]

govd's NVML backend sets a clock with ``nvmlDeviceSetGpuLockedClocks(h, f, f)``. On the H200 of
26-27 Nov the driver then ran HBM at 2201 MHz at every locked clock below the top and at 3201 MHz
at the top, and the memory lock (``nvmlDeviceSetMemoryLockedClocks``) was NOT_SUPPORTED: the
training step ran 2.6 % slower at 0.8 % less clock (bench/README.md, "Seventh and eighth runs").
This bench measures, at a few graphics clocks, each way NVML offers to set one:

- ``lock``: the graphics clock locked at f (what govd does);
- ``app``: application clocks (``nvmlDeviceSetApplicationsClocks``) at the highest memory clock
  and f;
- ``app-low-mem``: application clocks at the lowest memory clock and f (where f is supported
  there);
- ``lock+app``: application clocks at the highest pair, and the graphics clock locked at f;
- ``default``: the driver's own clocks, once per work and round.

Per (way, clock, work): the steps run, median step time, energy per step (the NVML energy
counter), and the graphics and memory clocks read after every step. The rounds interleave the
cells so that a drift of the GPU's temperature spreads over all of them. A way NVML refuses is
recorded with its error and skipped. Both locks and the application clocks are reset before
every cell and on every way out (an exception, SIGTERM, SIGINT), and application clocks someone
had set are put back; a lock someone had set is lost (NVML cannot read it back, as for govd's
own backend). It writes to the GPU outside govd's custody: run it on a GPU nothing else
governs, and after a SIGKILL put the clocks back with ``nvidia-smi -rgc -rac``. Writes
``nvml-clock-paths-<gpu>.json`` into ``--out``. Exits 0 with a message when there is no NVIDIA
GPU, no root or no CUDA torch. ``--dry`` runs sleeps instead of GPU work (against
tests/fake_nvml).
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import signal
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import pynvml

WAYS = ("lock", "app", "app-low-mem", "lock+app")
RATIOS = (1.0, 1.04, 1.1, 1.25, 1.45)
"""Clocks measured: the top divided by each (snapped to a supported clock), and one level below
the top: the step a fine-grid governor's first probe takes."""
SETTLE_S = 0.3
"""Steps run after a clock is set and before the cell counts (the clock and HBM settle)."""


def _mhz(values: list[int]) -> list[int]:
    return sorted({int(v) for v in values})


def _graphics(handle: Any, mem: int) -> list[int]:
    return _mhz(pynvml.nvmlDeviceGetSupportedGraphicsClocks(handle, mem))


def pick_clocks(graphics: list[int]) -> list[int]:
    """The top, one level below it, and the supported clock nearest top / r for each ratio."""
    top = graphics[-1]
    picked = {top}
    if len(graphics) > 1:
        picked.add(graphics[-2])
    for r in RATIOS:
        picked.add(min(graphics, key=lambda f: abs(f - top / r)))
    return sorted(picked, reverse=True)


def _error(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


def reset(handle: Any) -> list[str]:
    """Both locks and the application clocks back to the driver's default; what failed."""
    failed = []
    for name in ("nvmlDeviceResetGpuLockedClocks", "nvmlDeviceResetMemoryLockedClocks",
                 "nvmlDeviceResetApplicationsClocks"):
        try:
            getattr(pynvml, name)(handle)
        except pynvml.NVMLError as exc:
            if not isinstance(exc, (pynvml.NVMLError_NotSupported,
                                    pynvml.NVMLError_FunctionNotFound)):  # nothing was set
                failed.append(f"{name}: {_error(exc)}")
        except AttributeError as exc:  # an nvidia-ml-py without the call
            failed.append(f"{name}: {_error(exc)}")
    return failed


def found_applications(handle: Any) -> tuple[int, int] | None:
    """The application clocks (memory, graphics) in force before the bench, where someone set
    them away from the defaults (None: at the defaults, or NVML cannot say)."""
    try:
        now = tuple(int(pynvml.nvmlDeviceGetApplicationsClock(handle, c))
                    for c in (pynvml.NVML_CLOCK_MEM, pynvml.NVML_CLOCK_GRAPHICS))
        default = tuple(int(pynvml.nvmlDeviceGetDefaultApplicationsClock(handle, c))
                        for c in (pynvml.NVML_CLOCK_MEM, pynvml.NVML_CLOCK_GRAPHICS))
    except (pynvml.NVMLError, AttributeError):
        return None
    return None if now == default else (now[0], now[1])


def put_back(handle: Any, found: tuple[int, int] | None) -> list[str]:
    """`reset`, then the application clocks found (`found_applications`) set again: NVML cannot
    read a graphics lock back, so a lock found is lost, as with govd's own backend."""
    failed = reset(handle)
    if found is not None:
        try:
            pynvml.nvmlDeviceSetApplicationsClocks(handle, *found)
        except pynvml.NVMLError as exc:
            failed.append(f"application clocks {found[0]}/{found[1]} MHz: {_error(exc)}")
    return failed


def apply(handle: Any, way: str, f: int, mems: list[int], top_graphics: int) -> None:
    """Set graphics clock ``f`` the way ``way`` says (after a reset)."""
    reset(handle)
    if way == "default":
        return
    if way == "lock":
        pynvml.nvmlDeviceSetGpuLockedClocks(handle, f, f)
    elif way == "app":
        pynvml.nvmlDeviceSetApplicationsClocks(handle, mems[-1], f)
    elif way == "app-low-mem":
        pynvml.nvmlDeviceSetApplicationsClocks(handle, mems[0], f)
    elif way == "lock+app":
        pynvml.nvmlDeviceSetApplicationsClocks(handle, mems[-1], top_graphics)
        pynvml.nvmlDeviceSetGpuLockedClocks(handle, f, f)
    else:
        raise ValueError(way)


def measure(handle: Any, step: Callable[[], None], sync: Callable[[], None],
            seconds: float) -> dict[str, float]:
    """Run ``step`` for SETTLE_S, then ``seconds``: steps, step times, energy, clocks."""
    end = time.perf_counter() + SETTLE_S
    while time.perf_counter() < end:
        step()
        sync()
    times, graphics, mem = [], [], []
    energy0 = pynvml.nvmlDeviceGetTotalEnergyConsumption(handle)
    start = time.perf_counter()
    while time.perf_counter() - start < seconds:
        t0 = time.perf_counter()
        step()
        sync()
        times.append(time.perf_counter() - t0)
        graphics.append(pynvml.nvmlDeviceGetClockInfo(handle, pynvml.NVML_CLOCK_GRAPHICS))
        mem.append(pynvml.nvmlDeviceGetClockInfo(handle, pynvml.NVML_CLOCK_MEM))
    wall = time.perf_counter() - start
    energy_j = (pynvml.nvmlDeviceGetTotalEnergyConsumption(handle) - energy0) / 1000.0
    return {"steps": len(times), "median_ms": statistics.median(times) * 1000.0,
            "j_per_step": energy_j / len(times), "power_w": energy_j / wall,
            "graphics_mhz": statistics.median(graphics), "mem_mhz": statistics.median(mem),
            "mem_mhz_min": min(mem), "mem_mhz_max": max(mem)}


def _idle(handle: Any, seconds: float) -> dict[str, float]:
    """No work for ``seconds``; the memory clock read every 50 ms."""
    mem = []
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        time.sleep(0.05)
        mem.append(pynvml.nvmlDeviceGetClockInfo(handle, pynvml.NVML_CLOCK_MEM))
    return {"idle_s": seconds, "mem_mhz": statistics.median(mem), "mem_mhz_min": min(mem),
            "mem_mhz_max": max(mem)}


def hbm_sequence(handle: Any, steps: dict[str, Callable[[], None]], sync: Callable[[], None],
                 seconds: float, graphics: list[int]) -> list[dict[str, Any]]:
    """Whether the memory clock under a graphics lock depends on the way there. Per work, in
    order: a lock at f (top / 1.04) from the driver's default; the lowest clock locked with no
    work for 2 s (what `govd measure` does for its idle power before it sweeps upwards), then
    f, one level below the top, the top, and f again, each locked under work; f locked with no
    work for 2 s, then under work; the driver's default; f from there."""
    top, low = graphics[-1], graphics[0]
    f = min(graphics, key=lambda g: abs(g - top / 1.04))
    below = graphics[-2] if len(graphics) > 1 else top
    plan: list[tuple[str, int | None, float]] = [
        ("reset", None, 0.0), ("lock", f, 0.0),
        ("lock", low, 2.0), ("lock", f, 0.0), ("lock", below, 0.0), ("lock", top, 0.0),
        ("lock", f, 0.0), ("lock", f, 2.0), ("reset", None, 0.0), ("lock", f, 0.0)]
    out: list[dict[str, Any]] = []
    for work, step in steps.items():
        reset(handle)
        for i, (what, clock, idle_s) in enumerate(plan):
            if what == "reset":
                reset(handle)
            else:
                assert clock is not None
                pynvml.nvmlDeviceSetGpuLockedClocks(handle, clock, clock)
            row: dict[str, Any] = {"work": work, "step": i, "set": what, "target_mhz": clock}
            if idle_s:
                row["idle"] = _idle(handle, idle_s)
            row.update(measure(handle, step, sync, seconds))
            out.append(row)
            idle = row.get("idle", {})
            after = (f" after {idle_s:g} s idle (mem {idle['mem_mhz_min']}-"
                     f"{idle['mem_mhz_max']})" if idle else "")
            print(f"  hbm {work:6} {i} {what:5} {clock or 0:5d} MHz{after}"
                  f": {row['median_ms']:8.3f} ms {row['j_per_step']:8.3f} J at "
                  f"{row['graphics_mhz']:.0f}/{row['mem_mhz']:.0f} MHz "
                  f"(mem {row['mem_mhz_min']}-{row['mem_mhz_max']})", flush=True)
    reset(handle)
    return out


def summary(cells: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per (work, way, clock): medians over the rounds, and the step time and energy against
    the driver's own clocks (``default``) for the same work."""
    groups: dict[tuple[str, str, int], list[dict[str, Any]]] = {}
    for c in cells:
        if "error" not in c:
            groups.setdefault((c["work"], c["way"], c["target_mhz"]), []).append(c)
    base = {work: {k: statistics.median(c[k] for c in g)
                   for k in ("median_ms", "j_per_step")}
            for (work, way, _), g in groups.items() if way == "default"}
    out = []
    for (work, way, f), g in sorted(groups.items(), key=lambda kv: (kv[0][0], kv[0][1],
                                                                     -kv[0][2])):
        row: dict[str, Any] = {"work": work, "way": way, "target_mhz": f, "rounds": len(g)}
        for k in ("median_ms", "j_per_step", "power_w", "graphics_mhz", "mem_mhz"):
            row[k] = statistics.median(c[k] for c in g)
        if work in base:
            row["time_vs_default"] = row["median_ms"] / base[work]["median_ms"]
            row["energy_vs_default"] = row["j_per_step"] / base[work]["j_per_step"]
        out.append(row)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=1.2, help="counted seconds per cell")
    parser.add_argument("--repeats", type=int, default=2, help="rounds over every cell")
    parser.add_argument("--out", type=Path, default=Path("bench/results"))
    parser.add_argument("--hbm", action="store_true",
                        help="only the memory-clock sequence (`hbm_sequence`), not every way")
    parser.add_argument("--dry", action="store_true",
                        help="sleep instead of GPU work (against tests/fake_nvml)")
    args = parser.parse_args()
    if args.dry:
        steps = {"train": lambda: time.sleep(0.02), "stream": lambda: time.sleep(0.006)}
        sync: Callable[[], None] = lambda: None  # noqa: E731
    else:
        try:
            import torch
        except ImportError:
            torch = None
        if torch is None or not torch.cuda.is_available() or os.geteuid() != 0:
            print("nvml_clock_paths: needs an NVIDIA GPU, root and torch with CUDA; nothing run")
            return 0
        import gpu_work
        gpu_work.torch = torch
        steps = {"train": gpu_work.train_step_fn(), "stream": gpu_work.stream_step_fn()}
        sync = torch.cuda.synchronize
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError as exc:
        print(f"nvml_clock_paths: no NVML ({_error(exc)}); nothing run")
        return 0
    handle = pynvml.nvmlDeviceGetHandleByIndex(0)
    name = pynvml.nvmlDeviceGetName(handle)
    name = name.decode() if isinstance(name, bytes) else name

    def stop(signum: int, _frame: object) -> None:
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    found = found_applications(handle)
    cells: list[dict[str, Any]] = []
    hbm: list[dict[str, Any]] = []
    refused: dict[str, str] = {}
    left: list[str] = []
    try:
        mems = _mhz(pynvml.nvmlDeviceGetSupportedMemoryClocks(handle))
        graphics = _graphics(handle, mems[-1])
        low_graphics = set(_graphics(handle, mems[0])) if len(mems) > 1 else set()
        clocks = pick_clocks(graphics)
        print(f"{name}: memory clocks {mems}, {len(graphics)} graphics clocks at "
              f"{mems[-1]} MHz; measuring {clocks}", flush=True)
        if args.hbm:
            hbm = hbm_sequence(handle, steps, sync, args.seconds, graphics)
        for r in range(0 if args.hbm else args.repeats):
            for work, step in steps.items():
                plan = [("default", graphics[-1])] + [(w, f) for f in clocks for w in WAYS]
                for way, f in plan:
                    if way in refused or (way == "app-low-mem" and (
                            len(mems) < 2 or f not in low_graphics)):
                        continue
                    cell: dict[str, Any] = {"round": r, "work": work, "way": way,
                                            "target_mhz": f}
                    try:
                        apply(handle, way, f, mems, graphics[-1])
                    except pynvml.NVMLError as exc:
                        refused[way] = _error(exc)
                        print(f"  {way}: refused ({refused[way]}); skipped", flush=True)
                        continue
                    cell.update(measure(handle, step, sync, args.seconds))
                    cells.append(cell)
                    print(f"  r{r} {work:6} {way:11} {f:5d} MHz: {cell['median_ms']:8.3f} ms "
                          f"{cell['j_per_step']:8.3f} J  at {cell['graphics_mhz']:.0f}/"
                          f"{cell['mem_mhz']:.0f} MHz", flush=True)
    finally:
        left = put_back(handle, found)
        pynvml.nvmlShutdown()
    rows = summary(cells)
    for row in rows:
        if "time_vs_default" in row:
            print(f"{row['work']:6} {row['way']:11} {row['target_mhz']:5d}: time "
                  f"{row['time_vs_default']:.3f} energy {row['energy_vs_default']:.3f} of the "
                  f"driver's, at {row['graphics_mhz']:.0f}/{row['mem_mhz']:.0f} MHz")
    slug = name.lower().replace(" ", "-")
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / f"nvml-{'hbm' if args.hbm else 'clock-paths'}-{slug}.json"
    path.write_text(json.dumps({
        "gpu": name, "measured_at": datetime.datetime.now(datetime.UTC).isoformat(
            timespec="seconds"),
        "command": " ".join(["python3", *sys.argv]), "seconds": args.seconds,
        "repeats": args.repeats, "mem_clocks_mhz": mems, "clocks_mhz": clocks,
        "refused": refused, "reset_failed": left, "summary": rows, "cells": cells,
        "hbm_sequence": hbm,
    }, indent=1, default=lambda v: None if isinstance(v, float) and math.isnan(v) else v)
        + "\n")
    print(f"wrote {path}")
    return 1 if left else 0


if __name__ == "__main__":
    sys.exit(main())
