"""What a sweep table cannot be if it measured one stream of work at every level: a check that
`govd measure` and every reader of a table run, so that a table recorded while the work changed
(`govd measure --frames` on a game that moved to another scene between levels) is said to be
one, instead of being scored as if a lower clock were faster.

- A level whose clocks are all at least another's should not take longer: per level the median
  time over the units, compared with every level below it (per memory clock, then per core
  clock, with two clock domains), more than `SLOWER_BY` slower is the work changing.
- The idle power (``# idle_power_w``) should not exceed the power of work at the lowest level:
  more than `IDLE_ABOVE` above it, the idle measurement saw other work, or the power counter
  lagged behind the level changes.
"""

from __future__ import annotations

import math

import numpy as np

from govd.formats.sweep import SweepTable

SLOWER_BY = 0.10
"""A level this much slower (median time) than a level below it is implausible: far beyond the
noise a median over the units leaves."""
IDLE_ABOVE = 0.05
"""Idle power this much above the loaded power at the lowest level is implausible."""


def _runs(table: SweepTable) -> list[np.ndarray]:
    """Indices of levels that should get faster in order: all of them with one clock domain;
    with two, the core clocks at each memory clock and the memory clocks at each core clock."""
    count = table.levels_mhz.size
    if table.mem_levels_mhz is None:
        return [np.arange(count)]
    core, mem = table.levels_mhz, table.mem_levels_mhz
    runs = [np.flatnonzero(mem == m)[np.argsort(core[mem == m], kind="stable")]
            for m in np.unique(mem)]
    runs += [np.flatnonzero(core == c)[np.argsort(mem[core == c], kind="stable")]
             for c in np.unique(core)]
    return [r for r in runs if r.size > 1]


def _name(table: SweepTable, level: int) -> str:
    if table.mem_levels_mhz is None:
        return f"{table.levels_mhz[level]:g} MHz"
    return f"{table.levels_mhz[level]:g}/{table.mem_levels_mhz[level]:g} MHz"


def implausible(table: SweepTable) -> list[str]:
    """One line per thing the table cannot be (empty when none), naming the file."""
    if table.units == 0 or table.levels_mhz.size == 0:
        return []
    where = table.path or "sweep table"
    problems = []
    median_ms = np.median(table.time_ms, axis=0)
    for run in _runs(table):
        times = median_ms[run]
        fastest_below = np.minimum.accumulate(times)
        worst = int(np.argmax(times / fastest_below))
        if times[worst] > (1.0 + SLOWER_BY) * fastest_below[worst]:
            lower = int(run[int(np.argmin(times[: worst + 1]))])
            problems.append(
                f"{where}: the work took {100 * (times[worst] / fastest_below[worst] - 1):.0f} % "
                f"longer at {_name(table, int(run[worst]))} than at {_name(table, lower)}, a "
                "lower clock (median time per unit): the work changed during the sweep; measure "
                "a steady workload, or the same one once per level (-- CMD with --runs)")
            break
    idle_w = table.idle_power_w
    lowest = int(np.lexsort((table.mem_levels_mhz if table.mem_levels_mhz is not None
                             else table.levels_mhz, table.levels_mhz))[0])
    loaded_w = float(np.median(table.power_w[:, lowest]))
    if math.isfinite(idle_w) and loaded_w > 0 and idle_w > (1.0 + IDLE_ABOVE) * loaded_w:
        problems.append(
            f"{where}: idle power {idle_w:.3g} W is above the power of work at the lowest level "
            f"({loaded_w:.3g} W, median): the idle measurement saw other work, or the power "
            "counter lagged behind the level changes")
    return problems
