"""The model benchmark's report: its records against the issue's targets, as Markdown, and the
machine they were measured on."""

from __future__ import annotations

import datetime
import importlib.metadata
import itertools
import os
import platform
from pathlib import Path
from typing import Any

Record = dict[str, Any]

TICK_TARGET_US = 2.0
UPDATE_TARGET_NS = 100.0
PADASIP_SPEEDUP = 10.0


def find(records: list[Record], impl: str, features: int, levels: int) -> Record:
    """The record of ``impl`` at (features, levels)."""
    return next(r for r in records
                if (r["impl"], r["features"], r["levels"]) == (impl, features, levels))


def target_checks(records: list[Record]) -> list[tuple[str, str, bool]]:
    """The issue's targets against the measured records: (target, measured, met)."""
    levels_all = sorted({r["levels"] for r in records if r["impl"] == "rls"})
    features_all = sorted({r["features"] for r in records if r["impl"] == "rls"})
    small, large, few = features_all[0], features_all[-1], levels_all[0]
    checks = []
    for impl in ("rls", "dcd", "scaling"):
        if not any(r["impl"] == impl for r in records):
            continue
        t = find(records, impl, small, few)["tick_us"]
        checks.append((f"{impl} tick_us <= {TICK_TARGET_US:g} at M={small}, L={few}",
                       f"{t:.2f} µs", t <= TICK_TARGET_US))
    for levels in levels_all:
        u = find(records, "rls", small, levels)["update_ns"]
        checks.append((f"rls update_ns <= {UPDATE_TARGET_NS:g} at M={small} (L={levels})",
                       f"{u:.0f} ns", u <= UPDATE_TARGET_NS))
    for m in features_all:
        ratio = (find(records, "padasip", m, few)["update_ns"] / 1e3
                 / find(records, "rls", m, few)["tick_us"])
        checks.append((f"padasip adapt / rls tick >= {PADASIP_SPEEDUP:g} at M={m}, L={few}",
                       f"{ratio:.1f}x", ratio >= PADASIP_SPEEDUP))
    for key, levels in itertools.product(("update_ns", "tick_us"), levels_all):
        ratio = find(records, "dcd", large, levels)[key] / find(records, "rls", large, levels)[key]
        checks.append((f"dcd cheaper than rls ({key}) at M={large}, L={levels}",
                       f"dcd/rls = {ratio:.2f}", ratio < 1.0))
    return checks


def markdown(records: list[Record], breakdown_us: dict[str, float] | None = None) -> str:
    """The records, the tick breakdown and the target checks as Markdown tables."""
    lines = ["| impl | M | L | update_ns (IQR) | tick_us (IQR) |", "|---|---:|---:|---:|---:|"]
    for r in records:
        if "update_ns" in r:
            update = ("-" if r["update_ns"] is None
                      else f"{r['update_ns']:.0f} ({r['update_iqr_ns']:.0f})")
            lines.append(f"| {r['impl']} | {r['features']} | {r['levels']} | {update} "
                         f"| {r['tick_us']:.2f} ({r['tick_iqr_us']:.2f}) |")
    startup = [r for r in records if "startup_s" in r]
    if startup:
        lines += ["", f"| start-up (M={startup[0]['features']}, L={startup[0]['levels']}) "
                  "| median s |", "|---|---:|"]
        lines += [f"| {r['impl']} | {r['startup_s']:.2f} |" for r in startup]
    if breakdown_us:
        lines += ["", "| rls tick, M=4, L=9 | µs |", "|---|---:|"]
        lines += [f"| {name} | {us:.2f} |" for name, us in breakdown_us.items()]
    lines += ["", "| target | measured | met |", "|---|---|---|"]
    lines += [f"| {t} | {v} | {'yes' if ok else '**NO**'} |"
              for t, v, ok in target_checks(records)]
    return "\n".join(lines)


def cpu_name() -> str:
    """The CPU's model name as /proc/cpuinfo gives it (or what platform knows)."""
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.exists():
        for line in cpuinfo.read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor()


def environment(parameters: dict[str, Any]) -> dict[str, Any]:
    """Machine and versions, with the run's parameters, to write beside the results."""
    return {
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "cpu": cpu_name(), "cpus": os.cpu_count(), "machine": platform.machine(),
        "python": platform.python_version(),
        "versions": {name: importlib.metadata.version(name)
                     for name in ("numpy", "numba", "padasip")},
        **parameters,
    }
