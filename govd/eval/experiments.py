"""The seed's model experiments on sweep tables: the μ sweep (Fig. 10) and offline against
online learning (Fig. 15).

Every run measures the model alone: a *driver* policy that does not read the model (Linux's
`ondemand` by default, as the seed's measurements ran under the platform's own governor) picks
the levels, so every model and every parameter value sees the same frames at the same levels,
and the error is seed 000's: the a-priori estimate of each unit's time against the measured
one (`govd.eval.score.apriori_ape`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from govd.eval.evaluate import evaluate, frequency_independent_counters
from govd.eval.score import apriori_ape
from govd.formats.sweep import SweepTable
from govd.model.arrays import FloatArray
from govd.model.settings import ModelSettings
from govd.research.regression_data import concatenate, path_regression, sweep_regression
from govd.research.selection import counter_scale
from govd.target import Target


@dataclass(frozen=True)
class SweptParam:
    """A model setting the sweep can vary, and how its grid is spaced."""

    name: str
    log: bool
    """Log grid with N points per decade (else N points in all, evenly spaced)."""
    default_points: int


SWEEPABLE = {
    "mu": SweptParam("mu", log=True, default_points=1),
    "forgetting": SweptParam("forgetting", log=False, default_points=5),
}


def parse_sweep_param(text: str) -> tuple[str, FloatArray]:
    """``NAME=LO:HI[:N]`` → (name, values). N: points per decade for log-scaled settings (mu),
    points in all for linear ones (forgetting). Raises ValueError with a readable message."""
    name, sep, spec = text.partition("=")
    if not sep or name not in SWEEPABLE:
        raise ValueError(f"--sweep-param wants NAME=LO:HI[:N] with NAME one of "
                         f"{', '.join(SWEEPABLE)}, got {text!r}")
    param = SWEEPABLE[name]
    parts = spec.split(":")
    try:
        if len(parts) not in (2, 3):
            raise ValueError
        lo, hi = float(parts[0]), float(parts[1])
        points = int(parts[2]) if len(parts) == 3 else param.default_points
    except ValueError:
        raise ValueError(f"--sweep-param {name}: want LO:HI[:N] numbers, got {spec!r}") from None
    if not (math.isfinite(lo) and math.isfinite(hi) and lo <= hi and points >= 1):
        raise ValueError(f"--sweep-param {name}: want finite LO <= HI and N >= 1, got {spec!r}")
    if param.log:
        if lo <= 0:
            raise ValueError(f"--sweep-param {name}: a log grid needs LO > 0, got {lo:g}")
        decades = math.log10(hi / lo)
        steps = max(1, round(decades * points))
        return name, (np.logspace(math.log10(lo), math.log10(hi), steps + 1) if hi > lo
                      else np.array([lo]))
    return name, np.linspace(lo, hi, points) if points > 1 else np.array([lo])


def driven_errors(sweeps: Sequence[SweepTable], target: Target, settings: ModelSettings,
                  algo: str, driver: str, idle_power_w: float | None = None,
                  counters: Sequence[str] | None = None) -> list[tuple[FloatArray, Any]]:
    """Per table: (a-priori APE per unit, the run) of the model learning along ``driver``'s
    levels. Raises ValueError for settings or counters that do not fit."""
    results = evaluate(sweeps, [driver], target, settings, idle_power_w, counters, None, None,
                       algo)
    return [(apriori_ape(sweep, run), run) for _, sweep, run, _ in results]


def _summary(ape: FloatArray) -> tuple[float | None, float | None]:
    have = ape[np.isfinite(ape)]
    if not have.size:
        return None, None
    return float(have.mean()), float(have.std())


def param_sweep(sweeps: Sequence[SweepTable], name: str, values: FloatArray, target: Target,
                settings: ModelSettings, algo: str = "rls", driver: str = "ondemand",
                idle_power_w: float | None = None) -> dict[str, Any]:
    """Seed Fig. 10 for any `SWEEPABLE` setting: mean and standard deviation of the a-priori
    APE (fractions) per table and over all units, for each value."""
    per_table: dict[str, dict[str, list[float | None]]] = {
        s.path or f"sweep{i}": {"mape": [], "std": []} for i, s in enumerate(sweeps)}
    overall: dict[str, list[float | None]] = {"mape": [], "std": []}
    for value in values:
        swept = replace(settings, form="seed",  # μ and λ of eq. 10
                        **{name: float(value)})  # type: ignore[arg-type]
        runs = driven_errors(sweeps, target, swept, algo, driver, idle_power_w)
        for (ape, _), key in zip(runs, per_table, strict=True):
            mape, std = _summary(ape)
            per_table[key]["mape"].append(mape)
            per_table[key]["std"].append(std)
        mape, std = _summary(np.concatenate([ape for ape, _ in runs]))
        overall["mape"].append(mape)
        overall["std"].append(std)
    scored = [(m, v) for m, v in zip(overall["mape"], values, strict=True) if m is not None]
    return {"param": name, "algo": algo, "driver": driver, "values": values.tolist(),
            "workloads": per_table, "overall": overall,
            "best": float(min(scored)[1]) if scored else None}


def common_counters(sweeps: Sequence[SweepTable]) -> list[str]:
    """The counters that the frequency prefilter keeps in every table, in the first's order."""
    kept = [frequency_independent_counters(s)[0] for s in sweeps]
    return [n for n in kept[0] if all(n in k for k in kept[1:])]


def offline_fit(sweeps: Sequence[SweepTable], names: Sequence[str], scales: Sequence[float],
                mu: float, a_init: float, seed: int) -> FloatArray:
    """Eq. 18 solved in one batch on the tables' characterisation samples (each table along a
    `walk_levels` path, every level visited): a = argmin μ‖a − a_init‖² + Σ (Δt − hᵀa)²."""
    data = concatenate([sweep_regression(s, names, scales, seed + i)
                        for i, s in enumerate(sweeps)])
    h = np.hstack([data.frequency_terms, data.counter_deltas])
    m = h.shape[1]
    root_mu = math.sqrt(mu)
    design = np.vstack([h, root_mu * np.eye(m)])
    rhs = np.concatenate([data.delta_time_ms, np.full(m, root_mu * a_init)])
    coef, *_ = np.linalg.lstsq(design, rhs, rcond=None)
    return np.asarray(coef, dtype=np.float64)


def frozen_ape(sweep: SweepTable, level: np.ndarray, names: Sequence[str],
               scales: Sequence[float], coef: FloatArray) -> FloatArray:
    """A-priori APE per unit of frozen coefficients along ``level`` (NaN for unit 0)."""
    data = path_regression(sweep, level, names, scales)
    time_ms = sweep.time_ms[np.arange(sweep.units), level]
    if data.samples != sweep.units - 1:
        raise ValueError(f"{sweep.path or 'sweep'}: times must be positive and finite")
    h = np.hstack([data.frequency_terms, data.counter_deltas])
    ape = np.full(sweep.units, math.nan)
    ape[1:] = np.abs(h @ coef - data.delta_time_ms) / time_ms[1:]
    return ape


def offline_vs_online(sweeps: Sequence[SweepTable], ratios: Sequence[float], target: Target,
                      settings: ModelSettings, driver: str = "ondemand", splits: int = 5,
                      seed: int = 0, idle_power_w: float | None = None) -> dict[str, Any]:
    """Seed Fig. 15: coefficients learned offline (eq. 18, batch) on a share of the tables and
    frozen, against online RLS, both scored on the held-out tables along the driver's levels.

    For each ratio r, ``splits`` random training sets of round(r·n) tables (at least one, at
    most n − 1, so something is always held out); MAPE pooled over the held-out units where
    both models predict, then averaged over the splits."""
    n = len(sweeps)
    if n < 2:
        raise ValueError("offline vs online needs at least two sweep tables (train and test)")
    names = common_counters(sweeps)
    online_settings = replace(settings, algorithm="rls", form="seed")
    online = driven_errors(sweeps, target, online_settings, "rls", driver, idle_power_w, names)
    rng = np.random.default_rng(seed)
    rows = []
    for ratio in ratios:
        n_train = min(max(round(ratio * n), 1), n - 1)
        offline_mape, online_mape = [], []
        for _ in range(splits):
            train = np.sort(rng.choice(n, n_train, replace=False))
            train_tables = [sweeps[i] for i in train]
            scales = [counter_scale(np.concatenate([s.counters[c].ravel() for s in train_tables]))
                      for c in names]
            coef = offline_fit(train_tables, names, scales, settings.mu, settings.a_init, seed)
            off, on = [], []
            for i in sorted(set(range(n)) - set(train.tolist())):
                ape_on, run = online[i]
                ape_off = frozen_ape(sweeps[i], run.levels, names, scales, coef)
                both = np.isfinite(ape_on) & np.isfinite(ape_off)
                off.append(ape_off[both])
                on.append(ape_on[both])
            offline_mape.append(float(np.concatenate(off).mean()))
            online_mape.append(float(np.concatenate(on).mean()))
        rows.append({"ratio": float(ratio), "train_tables": n_train,
                     "offline_mape": float(np.mean(offline_mape)),
                     "online_mape": float(np.mean(online_mape)), "splits": splits})
    return {"counters": names, "driver": driver, "tables": n,
            "workloads": [s.path for s in sweeps], "ratios": rows}
