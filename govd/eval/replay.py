"""Drive one `Governor` over a sweep table, unit by unit, as the device would have run it.

The governor is the daemon's, built from a configuration by `govd.from_config` (its policy,
fallback, grace, dwell and stress thresholds; a unit is a tick of its period). Each policy sees
only the row of the level it chose for a unit (what it would have measured); the decision made
after unit u applies to unit u + 1. Every run starts at the fastest level.
What a tick's sample holds is what a device would report for that unit: with a frame deadline
T the GPU idles after an early frame, so utilisation is t/T and the average power mixes the
busy power of the row with the idle power; throughput work is busy all the time.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np

from govd.conf.schema import Config
from govd.formats.sweep import SweepTable
from govd.from_config import governor_from_config
from govd.governor import Sample
from govd.model.arrays import FloatArray, IntArray
from govd.model.prior import Prior
from govd.model.settings import ModelSettings
from govd.policy.base import Policy
from govd.target import Target

EVALUATION = Config(min_dwell_ms=0)
"""What the evaluator replays when it is given no configuration: the daemon's defaults, but no
dwell (the measured figures in bench/results/*.json were taken so; ``govd eval --config``
replays a configuration's dwell, `govd.governor.Governor.dwell_ticks`)."""

KENDALL_STRIDE = 16
"""Rank fidelity is measured on every 16th unit: an L×L comparison per unit is the slowest
metric, and a sample of thousands of units pins it well."""


@dataclass
class Replay:
    """What a governor did over a sweep table, step by step."""

    levels: IntArray
    """Level index that ran each unit, shape [U]."""
    predicted_time_ms: FloatArray
    """Frame time predicted (at the step before, counters held: what the decision used) for
    each unit at the level it then ran; NaN for unit 0 and while the model was not ready.
    Shape [U]."""
    fitted_time_ms: FloatArray
    """The model's a-priori estimate of each unit's time at the level it ran, from the unit's
    measured counters and the coefficients before learning from it (seed 000's measure of
    prediction accuracy, §V-C). NaN until the model is ready. Shape [U]."""
    sensitivity_ms_per_mhz: FloatArray
    """Model's dt/df right after observing each unit, at that unit's level. Shape [U]."""
    energy_units: IntArray
    """Units whose predicted energy at every level was kept (every KENDALL_STRIDE-th)."""
    predicted_energy_mj: FloatArray
    """Predicted energy at every level for ``energy_units``, shape [len(energy_units), L]."""
    predicted_times_ms: FloatArray
    """Frame time predicted at every level for the unit after each of ``energy_units``,
    shape [len(energy_units), L] (NaN while the model was not ready). Units: ms."""
    model_stats: dict[str, int]
    """The model's counters at the end (updates, skipped samples, resets...)."""
    wall_s: float = math.nan
    """Time the replay took (for steps/s). Units: s."""


def tick_inputs(
    sweep: SweepTable, target: Target, idle_power_w: float
) -> tuple[FloatArray, FloatArray, FloatArray]:
    """Per (unit, level): utilisation, tick length (s) and average power (W) a device would
    report for that unit at that level."""
    time_ms = sweep.time_ms
    if target.fps is None:
        return np.ones_like(time_ms), time_ms * 1e-3, sweep.power_w
    deadline_ms = target.deadline_ms
    span_ms = np.maximum(time_ms, deadline_ms)
    idle_ms = span_ms - time_ms
    power_w = (sweep.power_w * time_ms + idle_power_w * idle_ms) / span_ms
    busy = sweep.busy if sweep.busy is not None else time_ms / span_ms
    return busy, span_ms * 1e-3, power_w


def replay(
    sweep: SweepTable,
    policy: Policy,
    target: Target,
    settings: ModelSettings | None = None,
    idle_power_w: float = 0.0,
    progress: Callable[[int], None] | None = None,
    algo: str | None = None,
    prior: Prior | None = None,
    config: Config | None = None,
) -> Replay:
    """Run ``policy`` (through a fresh Governor) over every unit of ``sweep``.

    ``algo``: ``arnlms`` puts the AR-NLMS frame-time predictor (`govd.research.arnlms`) in the
    governor's model; None or ``rls``/``dcd`` keeps ``settings.algorithm``. ``prior``: seeds
    the model (`govd.model.prior`). ``config``: what else the governor is built from (default
    `EVALUATION`); ``settings`` takes precedence over its model section, and the model learns
    the idle power (``idle_power_w`` only shapes the samples, as the device's would)."""
    settings = settings or ModelSettings()
    if algo == "arnlms" or prior is not None:
        settings = replace(settings, form="seed")  # both build on eq. 10's model
    gov = governor_from_config(config or EVALUATION, sweep.levels_mhz, sweep.mem_levels_mhz,
                               policy=policy, target=target, settings=settings,
                               idle_power_w=math.nan, prior=prior)
    if algo == "arnlms":
        from govd.research.arnlms import ArNlmsModel

        # the governor only calls the model's update/predictions, so the AR baseline plugs in
        # without a second governor
        gov.model = ArNlmsModel(gov.model)  # type: ignore[arg-type]
    n_units, n_levels = sweep.time_ms.shape
    busy, interval_s, power_w = tick_inputs(sweep, target, idle_power_w)
    names = settings.counters
    if names:
        counters = np.ascontiguousarray(np.stack([sweep.counters[n] for n in names], axis=-1))
    else:
        counters = np.zeros((n_units, n_levels, 0))
    time_ms, levels_mhz = sweep.time_ms, [float(f) for f in sweep.levels_mhz]
    mems_mhz = [math.nan] * n_levels if sweep.mem_levels_mhz is None else [
        float(f) for f in sweep.mem_levels_mhz]
    chosen = np.empty(n_units, dtype=np.intp)
    predicted = np.full(n_units, math.nan)
    fitted = np.full(n_units, math.nan)
    sens = np.full(n_units, math.nan)
    energy_units = np.arange(0, max(n_units - 1, 0), KENDALL_STRIDE)
    energy = np.full((energy_units.size, n_levels), math.nan)
    times = np.full((energy_units.size, n_levels), math.nan)
    level = n_levels - 1
    # one frame per unit: it made the deadline or it did not
    deadline_ms, judged = target.deadline_ms, target.fps is not None
    started = time.perf_counter()
    for u in range(n_units):
        chosen[u] = level
        decision = gov.step(
            Sample(
                freq_mhz=levels_mhz[level],
                frame_time_ms=float(time_ms[u, level]),
                frame_count=1,
                interval_s=float(interval_s[u, level]),
                busy=float(busy[u, level]),
                power_w=float(power_w[u, level]),
                counters=counters[u, level],
                mem_freq_mhz=mems_mhz[level],
                late_share=float(time_ms[u, level] > deadline_ms) if judged else math.nan,
            )
        )
        p = decision.outlook.predictions
        sens[u] = p.sensitivity_ms_per_mhz
        if p.ready:
            fitted[u] = p.fitted_time_ms
        level = decision.level
        if p.ready and u + 1 < n_units:
            predicted[u + 1] = p.time_ms[level]
        if u % KENDALL_STRIDE == 0 and u // KENDALL_STRIDE < energy_units.size:
            energy[u // KENDALL_STRIDE] = p.energy_mj
            if p.ready:
                times[u // KENDALL_STRIDE] = p.time_ms
        if progress is not None and u % 4096 == 0:
            progress(u)
    wall_s = time.perf_counter() - started
    stats = gov.model.stats_dict()
    stats["stress_episodes"] = gov.stress_episodes
    return Replay(chosen, predicted, fitted, sens, energy_units, energy, times, stats, wall_s)
