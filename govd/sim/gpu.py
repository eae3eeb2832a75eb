"""The simulated GPU: the same stream of work measured at every level, as a sweep table.

`simulate()` draws a scenario's units (`govd.sim.scenarios`, `govd.sim.compute`) and measures each
at every level of a level table (`govd.sim.levels`):

- time: t(l) = t_max·((1 − m)·scalable_time[l] + m·memory_time[l]) (the table's curves), times a
  per-unit variation common to every level (lognormal, σ = 3 %: a frame's cost beyond what its
  complexity says) and a per-(unit, level) measurement noise (σ = 0.5 %). The noise is small and
  independent of the level so that an oracle that knows the future cannot gain by reading noise
  (a slower level is never faster by chance by more than the noise);
- power: the table's model with the unit's core activity, and its memory activity rising with its
  memory-bound share (both the same at every level, as fitted on measured kernels), times 1 % noise;
- busy: for graphics, the share of the vsync period the GPU is awake, min(1, t/T); for compute,
  t/(t + launch gap);
- counters: the scenario's frequency-independent ones with 0.5 % measurement noise per level, and a
  busy-cycle counter t·f (frequency-dependent, as seed 000's "render engine busy").

Everything is drawn from one numpy Generator seeded with `seed`: the same arguments give the same
table, bit for bit.
"""

from __future__ import annotations

import numpy as np

from govd.formats.sweep import SweepTable
from govd.sim.compute import LAUNCH_GAP_MS, gpgpu
from govd.sim.levels import LevelTable, level_table
from govd.sim.scenarios import GRAPHICS, ScenarioFn, Units

UNIT_VARIATION_SIGMA = 0.03
"""Per-unit variation of the time common to every level (σ of a lognormal)."""
TIME_NOISE_SIGMA = 0.005
"""Per-(unit, level) measurement noise of the time (σ of a lognormal): 0.5 %."""
POWER_NOISE_SIGMA = 0.01
"""Per-(unit, level) measurement noise of the power: 1 %."""
COUNTER_NOISE_SIGMA = 0.005

SCENARIOS: dict[str, tuple[str, ScenarioFn]] = {
    **GRAPHICS,
    "gpgpu": ("throughput kernels in phases, no vsync", gpgpu),
}


def simulate(scenario: str, levels: str | LevelTable = "seed9", minutes: float = 1.0,
             seed: int = 0) -> SweepTable:
    """Sweep table of `minutes` of `scenario` on level table `levels`: every unit at every level.

    Metadata: `scenario`, `seed`, `levels`, `minutes`, `idle_power_w` (W), `voltage_v` (V per level,
    space-separated), and `target_fps` for graphics. Raises `KeyError` for an unknown scenario or
    level table, `ValueError` for a duration that is not positive.
    """
    if scenario not in SCENARIOS:
        raise KeyError(f"unknown scenario {scenario!r} (known: {', '.join(SCENARIOS)})")
    if not minutes > 0:
        raise ValueError(f"minutes must be positive, got {minutes}")
    table = (level_table(levels) if isinstance(levels, str) else levels).core_levels()
    rng = np.random.default_rng(seed)
    units = SCENARIOS[scenario][1](rng, table, minutes)
    return sweep_of_units(rng, table, units, {"scenario": scenario, "seed": str(seed),
                                              "minutes": f"{minutes:g}"})


def sweep_of_units(rng: np.random.Generator, table: LevelTable, units: Units,
                   meta: dict[str, str]) -> SweepTable:
    """Every unit of `units` measured at every level of the one-domain `table` (module docstring),
    noise drawn from `rng`; `meta` is added to the table's metadata."""
    f = table.freqs_mhz[None, :]
    n, n_levels = units.time_at_max_ms.size, f.size
    t_max = units.time_at_max_ms[:, None]
    share = units.memory_share[:, None]
    scalable_ms = t_max * (1 - share) * table.scalable_time
    memory_ms = t_max * share * table.memory_time
    # one draw per unit, shared by every level: the unit's own cost (what the scenario's counters
    # do not explain), then a small measurement noise per (unit, level)
    common = rng.lognormal(0.0, UNIT_VARIATION_SIGMA, (n, 1))
    noise = rng.lognormal(0.0, TIME_NOISE_SIGMA, (n, n_levels))
    time_ms = (scalable_ms + memory_ms) * common * noise
    # activities are the unit's own, the same at every level: the form `govd sim fit` validated on
    # the measured kernels (a per-level activity following the time split fits them worse)
    core_activity = units.core_activity[:, None]
    mem_activity = 0.15 + 0.85 * share
    power_w = table.power_w(core_activity, mem_activity)
    power_w *= rng.lognormal(0.0, POWER_NOISE_SIGMA, (n, n_levels))
    if units.target_fps is not None:
        busy = np.minimum(1.0, time_ms * units.target_fps / 1000.0)
    else:
        busy = time_ms / (time_ms + LAUNCH_GAP_MS)
    counters = {
        name: values[:, None] * rng.lognormal(0.0, COUNTER_NOISE_SIGMA, (n, n_levels))
        for name, values in units.counters.items()
    }
    counters[units.busy_counter] = time_ms * f * 1e3
    meta = {
        "source": "govd sim",
        **meta,
        "levels": table.name,
        "idle_power_w": f"{table.idle_power_w:g}",
        **units.meta,
    }
    if table.volts is not None:
        meta["voltage_v"] = " ".join(f"{v:.4f}" for v in table.volts)
    if units.target_fps is not None:
        meta["target_fps"] = f"{units.target_fps:g}"
    return SweepTable(levels_mhz=table.freqs_mhz.copy(), time_ms=time_ms, power_w=power_w,
                      busy=busy, counters=counters, meta=meta)
