"""The `gpgpu` scenario: throughput work, kernel after kernel, no vsync.

A run is a stream of phases; each phase launches one kernel of a small random library many times
(a training loop's step, a solver's iteration). Kernels differ in size (median ~15 ms at the highest
level), in how memory-bound they are (5–85 % of the time does not scale with the core clock) and in
core activity. Launch sizes jitter by 2 %. Counters: `inst_issued` (instructions, follows the
scalable work) and `dram_bytes` (follows the memory work) do not depend on the clock;
`sm_busy_cycles` does.
"""

from __future__ import annotations

import numpy as np

from govd.sim.levels import LevelTable
from govd.sim.scenarios import Units

KERNELS_IN_LIBRARY = 12
MEAN_LAUNCHES_PER_PHASE = 300
LAUNCH_GAP_MS = 0.01
"""Idle gap between back-to-back launches (driver overhead); sets `busy` just under 1."""


def gpgpu(rng: np.random.Generator, table: LevelTable, minutes: float) -> Units:
    """Kernel launches adding up to about `minutes` of GPU time at the highest level."""
    size_ms = rng.lognormal(np.log(15.0), 0.8, KERNELS_IN_LIBRARY)
    memory_share = rng.uniform(0.05, 0.85, KERNELS_IN_LIBRARY)
    activity = rng.uniform(0.5, 1.0, KERNELS_IN_LIBRARY)
    budget_ms = minutes * 60e3
    phases = int(budget_ms / (size_ms.mean() * MEAN_LAUNCHES_PER_PHASE) * 3) + 4
    kernel = rng.integers(0, KERNELS_IN_LIBRARY, phases)
    launches = rng.geometric(1.0 / MEAN_LAUNCHES_PER_PHASE, phases)
    per_launch = np.repeat(kernel, launches)
    time_at_max = size_ms[per_launch] * rng.lognormal(0.0, 0.02, per_launch.size)
    n = max(1, int(np.searchsorted(np.cumsum(time_at_max), budget_ms)) + 1)
    per_launch, time_at_max = per_launch[:n], time_at_max[:n]
    share = memory_share[per_launch]
    scalable_cycles = (1 - share) * time_at_max * table.freqs_mhz[-1] * 1e3
    counters = {
        "inst_issued": scalable_cycles * activity[per_launch] * 2.0 * rng.lognormal(0, 0.01, n),
        "dram_bytes": share * time_at_max * 2.0e6 * rng.lognormal(0, 0.01, n),
    }
    return Units(time_at_max_ms=time_at_max, memory_share=share,
                 core_activity=activity[per_launch], counters=counters,
                 busy_counter="sm_busy_cycles", target_fps=None,
                 meta={"kernels": str(KERNELS_IN_LIBRARY)})
