"""Measure govd's NVML backend on a real NVIDIA GPU (root needed): how long a clock lock takes,
whether the clock read back is the one locked, and how often the energy and power readings
really change when polled every millisecond.

For each GPU govd can control it locks every supported graphics clock in turn at the default
memory clock, timing each `set_level` call; where govd governs the memory clock too (Ampere+), it
then sets (core, memory) pairs with `set_pair`: each memory clock with the lowest, middle and
highest graphics clock supported at it, visited from the highest memory clock down and back up
(so both write orders run), timing each call and reading both clocks back. It then polls the
energy counter and the power reading, restores the driver-default clocks, and writes
``bench/results/nvml-<gpu-name-slug>.json``. It exits 0 with a message, writing nothing, when
there is no NVIDIA GPU or it is not run as root.

    sudo .venv/bin/python bench/nvml_real.py [--hold-ms 20] [--poll-s 3]

For representative energy/power update intervals, run a GPU load (any CUDA program) meanwhile.
"""

from __future__ import annotations

import argparse
import datetime
import importlib.metadata
import itertools
import json
import os
import platform
import re
import signal
import statistics
import sys
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import pynvml

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np

from govd.device.nvml import NvmlDevice, discover_nvml


def _spread_ms(values_ms: list[float]) -> dict[str, float | int]:
    """Median, 10th and 90th percentile, extremes and count of durations. Units: ms."""
    if not values_ms:
        return {"n": 0}
    ordered = sorted(values_ms)
    return {"n": len(ordered), "median": statistics.median(ordered),
            "p10": ordered[len(ordered) // 10], "p90": ordered[(len(ordered) * 9) // 10],
            "min": ordered[0], "max": ordered[-1]}


def _time_sets(levels_mhz: Iterable[float], set_level: Callable[[float], None],
               read_back_mhz: Callable[[], float], hold_ms: float) -> list[dict[str, float]]:
    """Set each level in turn, timing the set call, and read the clock back after hold_ms."""
    steps = []
    for level_mhz in levels_mhz:
        start = time.perf_counter()
        set_level(float(level_mhz))
        set_ms = (time.perf_counter() - start) * 1000
        time.sleep(hold_ms / 1000)
        steps.append({"level_mhz": float(level_mhz), "set_ms": set_ms,
                      "read_back_mhz": read_back_mhz()})
    return steps


def time_locks(device: NvmlDevice, hold_ms: float) -> dict[str, Any]:
    """Lock each graphics level at the default memory clock, timing the set call and reading
    back the clock running."""
    levels_mhz, mems_mhz = device.levels_mhz, device.mem_levels_mhz
    if mems_mhz is not None:
        levels_mhz = levels_mhz[mems_mhz == mems_mhz.max()]
    steps = _time_sets(levels_mhz, device.set_level, lambda: device.read().freq_mhz, hold_ms)
    return {"set_ms": _spread_ms([s["set_ms"] for s in steps]),
            "read_back_differs": sum(s["read_back_mhz"] != s["level_mhz"] for s in steps),
            "steps": steps}


def pair_route(levels_mhz: np.ndarray, mems_mhz: np.ndarray) -> list[tuple[float, float]]:
    """(core, memory) pairs to visit: each memory clock, highest first, with the lowest, middle
    and highest core clock supported at it, then the same memory clocks back up, so that
    lowering and raising the memory clock (the two write orders) both run. Units: MHz."""
    down = []
    for mem_mhz in sorted(set(mems_mhz.tolist()), reverse=True):
        cores = levels_mhz[mems_mhz == mem_mhz]
        down += [(float(cores[i]), mem_mhz) for i in sorted({0, len(cores) // 2, len(cores) - 1})]
    return down + down[::-1][1:]


def time_pair_locks(device: NvmlDevice, hold_ms: float) -> dict[str, Any]:
    """Set (core, memory) pairs (`pair_route`), timing each `set_pair` call and reading both
    clocks back; 'not supported' where govd governs the graphics clock only, and why."""
    mems_mhz = device.mem_levels_mhz
    if mems_mhz is None:
        return {"supported": False, "reason": device.controllable().reason or
                "one memory clock"}
    steps = []
    for core_mhz, mem_mhz in pair_route(device.levels_mhz, mems_mhz):
        start = time.perf_counter()
        device.set_pair(core_mhz, mem_mhz)
        set_ms = (time.perf_counter() - start) * 1000
        time.sleep(hold_ms / 1000)
        reading = device.read()
        steps.append({"level_mhz": core_mhz, "mem_mhz": mem_mhz, "set_ms": set_ms,
                      "read_back_mhz": reading.freq_mhz, "read_back_mem_mhz": reading.mem_freq_mhz})
    if device.mem_levels_mhz is None:  # NVML refused the memory lock as NOT_SUPPORTED meanwhile
        return {"supported": False, "reason": device.controllable().reason, "steps": steps}
    return {"supported": True, "set_ms": _spread_ms([s["set_ms"] for s in steps]),
            "read_back_differs": sum((s["read_back_mhz"], s["read_back_mem_mhz"])
                                     != (s["level_mhz"], s["mem_mhz"]) for s in steps),
            "steps": steps}


def update_interval(read: Callable[[], int], poll_s: float) -> dict[str, Any]:
    """Poll ``read`` every millisecond for poll_s seconds; the spread of the times between
    changes of its value is how often the driver really refreshes it. Units: ms."""
    changes_s = []
    last = read()
    end = time.perf_counter() + poll_s
    while (now := time.perf_counter()) < end:
        value = read()
        if value != last:
            changes_s.append(now)
            last = value
        time.sleep(0.001)
    gaps_ms = [(b - a) * 1000 for a, b in itertools.pairwise(changes_s)]
    return {"poll_s": poll_s, "changes": len(changes_s), "interval_ms": _spread_ms(gaps_ms)}


def measure(device: NvmlDevice, hold_ms: float, poll_s: float) -> dict[str, Any]:
    """Every measurement for one GPU; the caller restores the GPU afterwards."""
    handle = pynvml.nvmlDeviceGetHandleByUUID(device.name)
    mems_mhz = device.mem_levels_mhz
    result: dict[str, Any] = {
        "gpu": device.product, "uuid": device.name, "pci_bus_id": device.pci_bus_id,
        "driver_version": pynvml.nvmlSystemGetDriverVersion(),
        "nvidia_ml_py": importlib.metadata.version("nvidia-ml-py"),
        "host": platform.node(),
        "measured_at": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "levels_mhz": device.levels_mhz.tolist(),
        "mem_levels_mhz": None if mems_mhz is None else mems_mhz.tolist(),
        "found": device.save(),
    }
    result["graphics_lock"] = time_locks(device, hold_ms)
    device.restore()  # the pairs start from the driver-default clocks
    result["pair_lock"] = time_pair_locks(device, hold_ms)
    device.restore()
    try:
        result["energy_counter"] = update_interval(
            lambda: pynvml.nvmlDeviceGetTotalEnergyConsumption(handle), poll_s)
    except pynvml.NVMLError_NotSupported:
        result["energy_counter"] = {"supported": False}
    result["power_reading"] = update_interval(lambda: pynvml.nvmlDeviceGetPowerUsage(handle),
                                              poll_s)
    return result


def _slug(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")


def main() -> int:
    """Measure every controllable GPU; 0 also when there is nothing to measure."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hold-ms", type=float, default=20.0,
                        help="time at each level before reading the clock back (ms)")
    parser.add_argument("--poll-s", type=float, default=3.0,
                        help="how long to poll the energy counter and power reading (s)")
    parser.add_argument("--results-dir", type=Path,
                        default=Path(__file__).resolve().parent / "results")
    args = parser.parse_args()

    devices = discover_nvml()
    if not devices:
        print("nvml_real: no NVIDIA GPU (or no NVIDIA driver) here; nothing measured.")
        return 0
    if os.geteuid() != 0:
        print("nvml_real: locking clocks needs root; run it with sudo. Nothing measured.")
        return 0
    # SIGTERM must unwind through the `finally` that restores the clocks.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    for device in devices:
        control = device.controllable()
        if not control.ok:
            print(f"nvml_real: skipping {device.product} ({device.name}): {control.reason}")
            continue
        try:
            result = measure(device, args.hold_ms, args.poll_s)
        finally:
            device.restore()
        args.results_dir.mkdir(parents=True, exist_ok=True)
        out = args.results_dir / f"nvml-{_slug(device.product)}.json"
        out.write_text(json.dumps(result, indent=2) + "\n")
        lock = result["graphics_lock"]["set_ms"]
        pair = result["pair_lock"].get("set_ms", {}).get("median")
        pairs = "pairs not governed" if pair is None else f"pair set median {pair:.2f} ms"
        print(f"nvml_real: {device.product}: lock median {lock['median']:.2f} ms over "
              f"{lock['n']} levels; {pairs}; energy changes every "
              f"{result['energy_counter'].get('interval_ms', {}).get('median', 'n/a')} ms; "
              f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
