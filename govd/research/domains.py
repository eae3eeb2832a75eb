"""What a second clock domain buys: a two-domain sweep table scored over (core, memory) pairs.

`two_domain_summary` replays the `energy` policy twice over the same table: once over every
(core, memory) pair, once as a core-only governor with the memory clock fixed at its highest
(the driver's default), and scores both against the oracle over all pairs, under a slowdown
target and a frame-rate target. It also reports how well the two-domain model predicts frame
time at every pair, not only at the pair that ran.
"""

from __future__ import annotations

import math
import os
from dataclasses import replace
from typing import Any

import numpy as np

from govd.eval.evaluate import resolve_idle_power
from govd.eval.replay import Replay, replay
from govd.eval.score import Score, score, unit_energy_mj
from govd.formats.sweep import SweepTable, read_sweep
from govd.model.settings import ModelSettings
from govd.policy.energy import EnergyPolicy
from govd.policy.oracle import oracle_levels
from govd.target import Target

DEFAULT_MAX_SLOWDOWN = 0.10
FPS_DEADLINE_FACTOR = 1.25
"""The frame-rate target's deadline is 1.25 × the mean time at the fastest pair: tight enough
that the slowest pairs miss it, loose enough that most units have a choice."""


def at_max_memory_clock(sweep: SweepTable) -> SweepTable:
    """The one-domain table of the pairs at the highest memory clock (core levels only)."""
    if sweep.mem_levels_mhz is None:
        raise ValueError(f"{sweep.path or 'sweep'}: one clock domain (no mem_freq_mhz column)")
    keep = np.flatnonzero(sweep.mem_levels_mhz == sweep.mem_levels_mhz.max())
    return SweepTable(
        levels_mhz=sweep.levels_mhz[keep].copy(),
        time_ms=np.ascontiguousarray(sweep.time_ms[:, keep]),
        power_w=np.ascontiguousarray(sweep.power_w[:, keep]),
        busy=None if sweep.busy is None else np.ascontiguousarray(sweep.busy[:, keep]),
        counters={name: np.ascontiguousarray(v[:, keep]) for name, v in sweep.counters.items()},
        meta=dict(sweep.meta),
        path=sweep.path,
    )


def all_pairs_time_ape(sweep: SweepTable, run: Replay) -> np.ndarray:
    """Absolute relative error of the frame time predicted at every level for the next unit,
    over the units the replay kept predictions for (flattened, NaN-free)."""
    units = run.energy_units + 1
    rows = np.all(np.isfinite(run.predicted_times_ms), axis=1) & (units < sweep.units)
    truth = sweep.time_ms[units[rows]]
    ape: np.ndarray = (np.abs(run.predicted_times_ms[rows] - truth) / truth).ravel()
    return ape


def _energy_record(sweep: SweepTable, levels: np.ndarray, oracle_j: float, target: Target,
                   idle_w: float) -> dict[str, float]:
    """Energy (J) of a run and its ratio to the two-domain oracle's."""
    units = np.arange(sweep.units)
    energy_j = float(unit_energy_mj(sweep, target, idle_w)[units, levels].sum()) * 1e-3
    return {"energy_j": energy_j, "energy_vs_oracle": energy_j / oracle_j}


def _target_summary(sweep: SweepTable, core_only: SweepTable, target: Target, idle_w: float,
                    settings: ModelSettings) -> dict[str, Any]:
    best = oracle_levels(sweep, target, idle_w)
    both_run = replay(sweep, EnergyPolicy(), target, settings, idle_w)
    both = score(sweep, both_run, best, target, idle_w, model_metrics=True)
    core_run = replay(core_only, EnergyPolicy(), target, settings, idle_w)
    # the core-only run's levels, as indices into the pair table, to score against all pairs
    mems = sweep.mem_levels_mhz
    assert mems is not None  # at_max_memory_clock checked it
    keep = np.flatnonzero(mems == mems.max())
    core_levels = keep[core_run.levels]
    core = score(sweep, replace(core_run, levels=core_levels), best, target, idle_w,
                 model_metrics=False)
    core_oracle = keep[oracle_levels(core_only, target, idle_w)]
    oracle_j = both.oracle_energy_j
    ape = all_pairs_time_ape(sweep, both_run)
    return {
        "target": target.describe(),
        "oracle_energy_j": oracle_j,
        "two_domain": _score_record(both),
        "core_only_mem_max": _score_record(core),
        "core_only_oracle": _energy_record(sweep, core_oracle, oracle_j, target, idle_w),
        "all_pairs_time_mape": float(ape.mean()) if ape.size else math.nan,
        "all_pairs_time_median_ape": float(np.median(ape)) if ape.size else math.nan,
    }


def _score_record(s: Score) -> dict[str, Any]:
    record: dict[str, Any] = {
        "energy_j": s.energy_j,
        "energy_vs_oracle": s.energy_ratio,
        "violation_rate": s.violation_rate,
        "switches": s.switches,
    }
    for name in ("time_mape", "time_median_ape", "next_time_mape", "kendall_tau"):
        value = getattr(s, name)
        if value is not None:
            record[name] = value
    return record


def two_domain_summary(
    sweep_path: str | os.PathLike[str],
    settings: ModelSettings | None = None,
    max_slowdown: float = DEFAULT_MAX_SLOWDOWN,
    target_fps: float | None = None,
) -> dict[str, Any]:
    """Two-domain governor against a core-only one (memory at its highest clock) on a sweep
    table with ``mem_freq_mhz``, both scored against the oracle over all pairs.

    Targets: slowdown <= ``max_slowdown``, and ``target_fps`` (default: a deadline of
    `FPS_DEADLINE_FACTOR` × the mean time at the fastest pair). Model: ``settings`` (the
    defaults, without counters, when None). Returns a JSON-ready dict: ``pairs``, ``units``,
    ``idle_power_w`` (W), and per target (``slowdown``, ``fps``) the oracle's energy (J), for
    ``two_domain`` and ``core_only_mem_max`` the energy (J), ratio to the oracle, violation
    rate and switches (and the model's time MAPE / next-unit MAPE / Kendall τ for the
    two-domain run), ``core_only_oracle`` (the best a core-only governor could do), and the
    mean and median error of the time predicted at every pair (``all_pairs_time_mape``).
    Raises `SweepFormatError` for an unreadable table, `ValueError` for one clock domain.
    """
    sweep = read_sweep(sweep_path)
    core_only = at_max_memory_clock(sweep)
    settings = settings or ModelSettings()
    idle_w = resolve_idle_power(sweep, None)
    if target_fps is None:
        fastest_ms = float(sweep.time_ms.min(axis=1).mean())
        target_fps = 1000.0 / (FPS_DEADLINE_FACTOR * fastest_ms)
    return {
        "sweep": str(sweep_path),
        "pairs": int(sweep.levels_mhz.size),
        "units": sweep.units,
        "idle_power_w": idle_w,
        "slowdown": _target_summary(sweep, core_only, Target(max_slowdown=max_slowdown), idle_w,
                                    settings),
        "fps": _target_summary(sweep, core_only, Target(fps=target_fps), idle_w, settings),
    }
