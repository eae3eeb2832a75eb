"""`evaluate`: every policy over every sweep table, scored against the oracle."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from govd.conf.schema import Config
from govd.eval.reference import mean_curve_levels
from govd.eval.replay import Replay, replay
from govd.eval.score import Score, score
from govd.formats.sweep import SweepTable
from govd.model.forms import resolve
from govd.model.settings import ModelSettings
from govd.policy.base import Policy
from govd.policy.oracle import oracle_levels
from govd.policy.registry import make_policy, policy_class
from govd.research.scaling_selection import scaling_counters
from govd.research.selection import counter_scale, frequency_prefilter
from govd.target import Target


def frequency_independent_counters(sweep: SweepTable) -> tuple[list[str], list[float]]:
    """Counters of the table usable by the model (seed §IV-C prefilter, see
    `govd.research.selection`) and their scales.

    A counter qualifies when |Pearson r| with the level's frequency over all rows is below 0.1
    and it varies at all; its scale is its standard deviation, so that its changes are of
    order 1 in the regression."""
    freq = np.broadcast_to(sweep.levels_mhz, sweep.time_ms.shape)
    names = list(frequency_prefilter(freq, sweep.counters).kept)
    return names, [counter_scale(sweep.counters[name]) for name in names]


def resolve_idle_power(sweep: SweepTable, idle_power_w: float | None) -> float:
    """The idle power to score with: the caller's, else the table's, else 0 W."""
    if idle_power_w is not None:
        return idle_power_w
    return 0.0 if math.isnan(sweep.idle_power_w) else sweep.idle_power_w


def evaluate(
    sweeps: Sequence[SweepTable],
    policies: Sequence[str],
    target: Target,
    settings: ModelSettings | None = None,
    idle_power_w: float | None = None,
    counters: Sequence[str] | None = None,
    policy_params: dict[str, dict[str, Any]] | None = None,
    progress: Callable[[str, int, int], None] | None = None,
    algo: str | None = None,
    wrap: Callable[[Policy, SweepTable, float], Policy] | None = None,
    config: Config | None = None,
    table_volts: bool = False,
) -> list[tuple[str, SweepTable, Replay, Score]]:
    """Replay each policy over each table and score it.

    ``counters``: the model's counters; None selects the table's frequency-independent ones.
    ``policy_params``: constructor parameters per policy name. Returns (policy, sweep, replay,
    score) in order. ``algo``: see `replay` (``arnlms`` swaps in the AR-NLMS baseline).
    ``wrap``: turns each model-driven policy (with the table and its idle power, W) into the
    one replayed (`govd.research.truth.TrueCurves`: the same policy on true curves). ``config``:
    what else each governor is built from (`govd.eval.replay.replay`). ``table_volts``: the
    model gets the voltage table a sweep records (``voltage_v``, one per level), as the daemon
    takes the one a driver publishes; where ``settings`` has none and the sweep has one."""
    settings = settings or ModelSettings()
    results = []
    for sweep in sweeps:
        idle_w = resolve_idle_power(sweep, idle_power_w)
        form = resolve(settings.form, target.fps is not None)
        if counters is None and form == "scaling":
            names = scaling_counters(sweep.time_ms, sweep.levels_mhz, sweep.counters,
                                     sweep.mem_levels_mhz)
            scales = [counter_scale(sweep.counters[n]) for n in names]
        elif counters is None:
            names, scales = frequency_independent_counters(sweep)
        else:
            missing = [c for c in counters if c not in sweep.counters]
            if missing:
                raise ValueError(f"{sweep.path or 'sweep'}: no counter {', '.join(missing)}")
            # counters of very different magnitudes need scales (their standard deviation):
            # with P0 = I/μ = 1e14·I, changes of ~1e4 make the covariance update cancel
            names = list(counters)
            scales = [counter_scale(sweep.counters[n]) for n in names]
        table_settings = replace(settings, counters=tuple(names), counter_scales=tuple(scales))
        if table_volts and not settings.volts:
            table_settings = replace(table_settings, volts=recorded_volts(sweep))
        best = oracle_levels(sweep, target, idle_w)
        reference = mean_curve_levels(sweep, target, idle_w)
        for name in policies:
            params = dict((policy_params or {}).get(name, {}))
            if name == "oracle":
                params.setdefault("sweep", sweep)
                params.setdefault("idle_power_w", idle_w)
            policy = make_policy(name, **params)
            if wrap is not None and policy_class(name).uses_model:
                policy = wrap(policy, sweep, idle_w)
            report = None
            if progress is not None:
                def report(u: int, name: str = name, n: int = sweep.units) -> None:
                    progress(name, u, n)
            run = replay(sweep, policy, target, table_settings, idle_w, report, algo,
                         config=config)
            uses_model = bool(policy_class(name).uses_model)
            results.append((name, sweep, run, score(sweep, run, best, target, idle_w,
                                                    uses_model, reference)))
    return results


def recorded_volts(sweep: SweepTable) -> tuple[float, ...]:
    """The voltage per distinct core clock that ``sweep`` records (its ``voltage_v``), empty
    where it records none, or not one positive number per clock. Units: V."""
    text = sweep.meta.get("voltage_v", "")
    try:
        volts = tuple(float(v) for v in str(text).split())
    except ValueError:
        return ()
    clocks = len(set(float(f) for f in sweep.levels_mhz))
    if len(volts) != clocks or not all(math.isfinite(v) and v > 0.0 for v in volts):
        return ()
    return volts
