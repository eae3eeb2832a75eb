"""What an offline prior buys at the start of a phase: convergence and early energy.

Each phase of a test table (cut by `govd.eval.convergence.phase_changes`) is run as a new
workload by a fresh governor driving the energy policy, once starting from a_init = 1 and once
seeded from the prior fitted on other tables (never the test tables). Per phase:

- ticks until the a-priori error stays within 10 % (`govd.eval.convergence.convergence_times`,
  `WITHIN` and `HOLD_UNITS`); a phase whose error never settles counts as not converged;
- the energy of the units run in its first `window_s` seconds over the oracle's energy on the
  same units, and the share of them that missed the target.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from govd.eval.convergence import HOLD_UNITS, convergence_times
from govd.eval.evaluate import frequency_independent_counters, resolve_idle_power
from govd.eval.prior_fit import fit_prior, phase_bounds
from govd.eval.replay import replay, tick_inputs
from govd.eval.score import apriori_ape, unit_energy_mj, violations
from govd.formats.sweep import SweepTable
from govd.model.prior import Prior
from govd.model.settings import ModelSettings
from govd.policy.oracle import oracle_levels
from govd.policy.registry import make_policy
from govd.sim.nvdvfs import load_v100, sweep_from_data
from govd.target import Target

MIN_PHASE_UNITS = 3 * HOLD_UNITS
"""Shorter phases are not measured: convergence needs `HOLD_UNITS` settled units after it."""
MAX_PHASES = 40
"""Phases measured per table (the first ones), to keep the measurement to seconds."""


def phase_tables(sweep: SweepTable, max_phases: int = MAX_PHASES) -> list[SweepTable]:
    """The table's phases of at least `MIN_PHASE_UNITS` units, each as its own table."""
    out = []
    for start, end in phase_bounds(sweep, MIN_PHASE_UNITS)[:max_phases]:
        cut = slice(start, end)
        out.append(replace(
            sweep, time_ms=sweep.time_ms[cut], power_w=sweep.power_w[cut],
            busy=None if sweep.busy is None else sweep.busy[cut],
            counters={n: v[cut] for n, v in sweep.counters.items()},
            path=f"{sweep.path}[{start}:{end}]"))
    return out


def _run_phase(phase: SweepTable, target: Target, settings: ModelSettings, idle_w: float,
               window_s: float, prior: Prior | None) -> dict[str, float]:
    run = replay(phase, make_policy("energy"), target, settings, idle_w, prior=prior)
    units = np.arange(phase.units)
    ape = apriori_ape(phase, run)
    first = np.array([0])
    _, ticks = convergence_times(ape, first, np.ones(phase.units))
    _, tick_s, _ = tick_inputs(phase, target, idle_w)
    elapsed_s = np.cumsum(tick_s[units, run.levels])
    early = units[elapsed_s - tick_s[units, run.levels] < window_s]
    energy = unit_energy_mj(phase, target, idle_w)
    best = oracle_levels(phase, target, idle_w)
    return {
        "ticks": float(ticks[0]) if ticks.size else math.nan,
        "energy_mj": float(energy[early, run.levels[early]].sum()),
        "oracle_mj": float(energy[early, best[early]].sum()),
        "violations": float(violations(phase, target)[early, run.levels[early]].mean()),
    }


def _summary(rows: list[dict[str, float]]) -> dict[str, Any]:
    ticks = np.array([r["ticks"] for r in rows])
    settled = ticks[np.isfinite(ticks)]
    return {
        "phases": len(rows),
        "converged_share": float(settled.size / ticks.size) if ticks.size else None,
        "ticks_median": float(np.median(settled)) if settled.size else None,
        "ticks_mean": float(settled.mean()) if settled.size else None,
        "early_energy_ratio": float(sum(r["energy_mj"] for r in rows)
                                    / sum(r["oracle_mj"] for r in rows)) if rows else None,
        "early_violation_rate": float(np.mean([r["violations"] for r in rows])) if rows else None,
    }


def prior_gain(train: Sequence[SweepTable], test: Sequence[SweepTable], target: Target,
               settings: ModelSettings | None = None, clusters: int = 6,
               window_s: float = 2.0, prior: Prior | None = None) -> dict[str, Any]:
    """Convergence (ticks to a-priori error < 10 %) and early energy (first ``window_s`` s of
    each phase, over the oracle's) with and without a prior fitted on ``train`` (or the given
    ``prior``), measured on the phases of ``test``."""
    settings = replace(settings or ModelSettings(), form="seed")  # priors seed eq. 10
    prior = prior or fit_prior(train, clusters)
    without: list[dict[str, float]] = []
    with_prior: list[dict[str, float]] = []
    for sweep in test:
        names, scales = frequency_independent_counters(sweep)
        table_settings = replace(settings, counters=tuple(names), counter_scales=tuple(scales))
        idle_w = resolve_idle_power(sweep, None)
        for phase in phase_tables(sweep):
            without.append(_run_phase(phase, target, table_settings, idle_w, window_s, None))
            with_prior.append(_run_phase(phase, target, table_settings, idle_w, window_s, prior))
    return {
        "train": [s.path for s in train], "test": [s.path for s in test],
        "clusters": len(prior.clusters), "window_s": window_s,
        "without_prior": _summary(without), "with_prior": _summary(with_prior),
    }


def v100_kernel_split(data_dir: Path, minutes: float) -> tuple[SweepTable, SweepTable]:
    """(train, test) V100 sweeps over disjoint kernels (even / odd in the data's order), so that
    no test kernel was seen in training. Raises `NvDvfsError` where the data are absent."""
    data = load_v100(data_dir)
    halves = []
    for name, pick in (("v100-even", slice(0, None, 2)), ("v100-odd", slice(1, None, 2))):
        part = replace(data, time_ms=data.time_ms[pick], power_w=data.power_w[pick],
                       counters={n: v[pick] for n, v in data.counters.items()},
                       kernels=data.kernels[pick])
        sweep = sweep_from_data(part, "v100", minutes)
        sweep.path = name
        halves.append(sweep)
    return halves[0], halves[1]
