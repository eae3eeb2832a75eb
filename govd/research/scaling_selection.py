"""Which counters the scaling form (`govd.model.scaling`) conditions its curves on, chosen from
sweep tables (every unit measured at every level).

The seed's prefilter (`govd.research.selection`) drops a counter whose Pearson r with the clock
over *all* rows reaches 0.1. Across different work that test mostly measures how the counter
varies from kernel to kernel, and it dropped DRAM activity (r = 0.17-0.39 on the V100 kernels),
the very signal that tells memory-bound from compute-bound work, while it kept 45 nvprof
counters on the GTX 1080 Ti. What matters here is different:

1. *Within a unit* the counter must barely move with the clock compared with how it moves
   between units: the median over units of its spread across levels, over its spread across
   units (at the top level), below ``WITHIN_LIMIT``.
2. It must tell how the work scales, jointly with the counters already chosen: forward
   stepwise least squares of each unit's log-slope of time against the core clock (and, with
   two clock domains, the memory clock) on the counters at the top level; the counter that
   adds the most explained variance is taken while it adds at least ``GAIN_MIN`` of it, up to
   ``MAX_COUNTERS`` (each counter costs nb coefficients).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from govd.model.arrays import FloatArray

WITHIN_LIMIT = 0.5
GAIN_MIN = 0.02
MAX_COUNTERS = 4


def unit_slopes(time_ms: FloatArray, freq_mhz: FloatArray) -> FloatArray:
    """Per unit, the least-squares slope of log time against log(f_top / f): 0 for work that
    does not scale with the clock, 1 for work that scales as 1/f."""
    u = np.log(freq_mhz.max() / freq_mhz)
    uc = u - u.mean()
    with np.errstate(all="ignore"):
        lt = np.log(time_ms)
    slopes: FloatArray = ((lt - lt.mean(axis=1, keepdims=True)) @ uc) / float(uc @ uc)
    return slopes


def scaling_counters(time_ms: FloatArray, freq_mhz: FloatArray,
                     counters: Mapping[str, FloatArray],
                     mem_freq_mhz: FloatArray | None = None,
                     limit: int = MAX_COUNTERS) -> list[str]:
    """Names of the counters (arrays [unit, level]) to condition the scaling on, best first."""
    top = int(np.argmax(freq_mhz if mem_freq_mhz is None else freq_mhz * mem_freq_mhz))
    targets = [unit_slopes(time_ms, freq_mhz)] if np.ptp(freq_mhz) > 0 else []
    if mem_freq_mhz is not None and np.ptp(mem_freq_mhz) > 0:
        targets.append(unit_slopes(time_ms, mem_freq_mhz))
    candidates: dict[str, FloatArray] = {}
    for name, values in counters.items():
        x = np.asarray(values, dtype=np.float64)
        if x.shape != time_ms.shape or not np.all(np.isfinite(x)):
            continue
        across = float(x[:, top].std())
        if across <= 0.0:
            continue
        if float(np.median(x.std(axis=1))) / across < WITHIN_LIMIT:
            candidates[name] = (x[:, top] - x[:, top].mean()) / across
    if not targets or not candidates:
        return []
    y = np.stack([t - t.mean() for t in targets], axis=1)
    total = float((y**2).sum())
    if total <= 0.0:
        return []
    chosen: list[str] = []
    explained = 0.0
    while len(chosen) < limit:
        best, best_r2 = "", explained
        for name in sorted(candidates):
            if name in chosen:
                continue
            design = np.stack([candidates[c] for c in [*chosen, name]], axis=1)
            coef, *_ = np.linalg.lstsq(design, y, rcond=None)
            r2 = 1.0 - float(((y - design @ coef) ** 2).sum()) / total
            if r2 > best_r2:
                best, best_r2 = name, r2
        if not best or best_r2 - explained < GAIN_MIN:
            break
        chosen.append(best)
        explained = best_r2
    return chosen
