"""Scoring a replay exactly as DESIGN §5 says, and the model's accuracy around it.

Energy of a unit at a level: power·time (+ idle_power·max(0, T − time) under a frame deadline
T = 1000/fps ms). A violation is time > T, or with a slowdown target S, time > (1 + S)·(the
unit's fastest time). Accuracy metrics follow seeds 003 and 004: mean and median absolute
percentage error and the share within 10 % / 20 %, and the rank fidelity (Kendall τ-b) of
predicted against true energy across levels.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from govd.eval.convergence import convergence, phase_changes
from govd.eval.replay import Replay, tick_inputs
from govd.formats.sweep import SweepTable
from govd.model.arrays import FloatArray
from govd.target import Target


def energy_mj(power_w: FloatArray, time_ms: FloatArray, target: Target, idle_power_w: float
              ) -> FloatArray:
    """Energy of a unit that runs ``time_ms`` at busy ``power_w`` (W) under ``target``: busy
    power·time, plus ``idle_power_w`` (W) until a frame deadline. Units: mJ."""
    busy_mj = power_w * time_ms
    if target.fps is None:
        return busy_mj
    return busy_mj + idle_power_w * np.maximum(0.0, target.deadline_ms - time_ms)


def unit_energy_mj(sweep: SweepTable, target: Target, idle_power_w: float) -> FloatArray:
    """True energy of every unit at every level, shape [U, L]. Units: mJ."""
    return energy_mj(sweep.power_w, sweep.time_ms, target, idle_power_w)


def violations(sweep: SweepTable, target: Target) -> np.ndarray:
    """Whether each unit at each level misses the target, shape [U, L] (bool)."""
    if target.fps is not None:
        return sweep.time_ms > target.deadline_ms
    assert target.max_slowdown is not None
    fastest = sweep.time_ms.min(axis=1, keepdims=True)
    return sweep.time_ms > (1.0 + target.max_slowdown) * fastest


def denoised_times(sweep: SweepTable, unit: np.ndarray) -> FloatArray:
    """Each unit's times at every level from a least-squares fit t(f) = s/f + m over all its
    levels (+ b/fm with two clock domains), shape [len(unit), L]. A single measured frame
    carries run-to-run noise (the seed's reference averaged 80 repeats of a frame); over steps
    of a few percent in f, that noise alone would dominate a three-point derivative. Units: ms."""
    x = 1.0 / sweep.levels_mhz
    columns = [x, np.ones_like(x)]
    if sweep.mem_levels_mhz is not None:  # t = s/fc + b/fm + m (see govd.model.pairs)
        columns.append(1.0 / sweep.mem_levels_mhz)
    design = np.stack(columns, axis=1)
    coef, *_ = np.linalg.lstsq(design, sweep.time_ms[unit].T, rcond=None)
    fitted: FloatArray = (design @ coef).T
    return fitted


def true_sensitivity(
    sweep: SweepTable, unit: np.ndarray, level: np.ndarray, times_ms: FloatArray | None = None
) -> FloatArray:
    """Three-point Lagrange dt/df at ``level`` of ``unit`` along the core clock (one-sided at
    the ends of the table; at the level's memory clock with two clock domains), from the
    measured times or from ``times_ms`` (shape [len(unit), L], e.g. `denoised_times`). The
    reference the model's sensitivity is scored against. Units: ms/MHz."""
    f = sweep.levels_mhz
    below, above = core_neighbours(sweep)
    lo, hi = below[level], above[level]
    rows = np.arange(len(unit))
    if times_ms is None:
        times_ms = sweep.time_ms[unit]
    t0, tl, th = (times_ms[rows, i] for i in (level, lo, hi))
    dd, du = f[level] - f[lo], f[hi] - f[level]
    with np.errstate(all="ignore"):
        central = (dd**2 * th + (du**2 - dd**2) * t0 - du**2 * tl) / (du * dd * (du + dd))
        up = (th - t0) / du
        down = (t0 - tl) / dd
    return np.where(lo == level, up, np.where(hi == level, down, central))


def core_neighbours(sweep: SweepTable) -> tuple[np.ndarray, np.ndarray]:
    """For every level, the level one core step below and one above (at the same memory clock
    with two clock domains); the level itself at an end of its core axis."""
    n = sweep.levels_mhz.size
    if sweep.mem_levels_mhz is None:
        index = np.arange(n)
        return np.maximum(index - 1, 0), np.minimum(index + 1, n - 1)
    below, above = np.arange(n), np.arange(n)
    for mem in np.unique(sweep.mem_levels_mhz):
        line = np.flatnonzero(sweep.mem_levels_mhz == mem)  # ascending core clock
        below[line[1:]] = line[:-1]
        above[line[:-1]] = line[1:]
    return below, above


def apriori_ape(sweep: SweepTable, run: Replay) -> FloatArray:
    """Absolute percentage error of the model's a-priori estimate of each unit's time at the
    level it ran (seed 000's measure, `Replay.fitted_time_ms`), shape [U], NaN where none."""
    time_ms = sweep.time_ms[np.arange(sweep.units), run.levels]
    ape: FloatArray = np.abs(run.fitted_time_ms - time_ms) / time_ms
    return ape


def kendall_tau_b(a: FloatArray, b: FloatArray) -> FloatArray:
    """Kendall τ-b between the rows of ``a`` and ``b`` (shape [S, L]); NaN where undefined."""
    i, j = np.triu_indices(a.shape[1], k=1)
    sa = np.sign(a[:, j] - a[:, i])
    sb = np.sign(b[:, j] - b[:, i])
    concordance = (sa * sb).sum(axis=1)
    pairs_a = np.count_nonzero(sa, axis=1)
    pairs_b = np.count_nonzero(sb, axis=1)
    with np.errstate(all="ignore"):
        return concordance / np.sqrt(pairs_a * pairs_b)


@dataclass
class Score:
    """One policy on one sweep table (the evaluator's JSON record, see `as_record`)."""

    units: int
    energy_j: float
    oracle_energy_j: float
    violation_rate: float
    oracle_violation_rate: float
    switches: int
    mean_fps: float | None = None
    mean_slowdown: float | None = None
    time_mape: float | None = None
    time_median_ape: float | None = None
    time_within_10: float | None = None
    time_within_20: float | None = None
    next_time_mape: float | None = None
    next_time_median_ape: float | None = None
    sensitivity_mape: float | None = None
    sensitivity_nrmse: float | None = None
    sensitivity_mape_raw: float | None = None
    kendall_tau: float | None = None
    reference_energy_j: float | None = None
    """Energy of the mean-curve reference (`govd.eval.reference`). Units: J."""
    reference_violation_rate: float | None = None
    stress_episodes: int | None = None
    """Times the model was reset for stress during the run."""
    work_hours: float | None = None
    """GPU time the run took, in hours (for stress episodes per hour). Units: h."""
    phase_changes: int | None = None
    convergence_median_s: float | None = None
    convergence_mean_s: float | None = None
    converged_share: float | None = None

    @property
    def energy_ratio(self) -> float:
        """Energy relative to the oracle's (1.0 = optimal)."""
        return self.energy_j / self.oracle_energy_j if self.oracle_energy_j > 0 else math.nan

    @property
    def reference_ratio(self) -> float | None:
        """Energy relative to the mean-curve reference's, None where it was not scored."""
        if not self.reference_energy_j:
            return None
        return self.energy_j / self.reference_energy_j

    @property
    def stress_per_hour(self) -> float | None:
        """Stress episodes per hour of work, None where not counted."""
        if self.stress_episodes is None or not self.work_hours:
            return None
        return self.stress_episodes / self.work_hours


def score(
    sweep: SweepTable,
    run: Replay,
    oracle_levels: np.ndarray,
    target: Target,
    idle_power_w: float,
    model_metrics: bool,
    reference_levels: np.ndarray | None = None,
) -> Score:
    """Score the levels a run chose against the oracle's (and the mean-curve reference's,
    `govd.eval.reference`, where given), and (``model_metrics``) the predictions that drove
    them."""
    units = np.arange(sweep.units)
    energy = unit_energy_mj(sweep, target, idle_power_w)
    missed = violations(sweep, target)
    chosen = run.levels
    time_ms = sweep.time_ms[units, chosen]
    result = Score(
        units=sweep.units,
        energy_j=float(energy[units, chosen].sum()) * 1e-3,
        oracle_energy_j=float(energy[units, oracle_levels].sum()) * 1e-3,
        violation_rate=float(missed[units, chosen].mean()),
        oracle_violation_rate=float(missed[units, oracle_levels].mean()),
        switches=int(np.count_nonzero(np.diff(chosen))),
    )
    if reference_levels is not None:
        result.reference_energy_j = float(energy[units, reference_levels].sum()) * 1e-3
        result.reference_violation_rate = float(missed[units, reference_levels].mean())
    result.work_hours = float(tick_inputs(sweep, target, idle_power_w)[1][units, chosen].sum()
                              / 3600.0)
    if "stress_episodes" in run.model_stats:
        result.stress_episodes = run.model_stats["stress_episodes"]
    if target.fps is not None:
        result.mean_fps = float(sweep.units / (np.maximum(time_ms, target.deadline_ms).sum()
                                               * 1e-3))
    else:
        result.mean_slowdown = float(np.mean(time_ms / sweep.time_ms.min(axis=1)) - 1.0)
    if not model_metrics:
        return result
    all_ape = apriori_ape(sweep, run)
    have = np.isfinite(all_ape)
    if have.any():
        ape = all_ape[have]
        result.time_mape = float(ape.mean())
        result.time_median_ape = float(np.median(ape))
        result.time_within_10 = float(np.mean(ape <= 0.10))
        result.time_within_20 = float(np.mean(ape <= 0.20))
    tick_s = tick_inputs(sweep, target, idle_power_w)[1][units, chosen]
    settled = convergence(all_ape, phase_changes(sweep), tick_s)
    result.phase_changes = settled.changes
    result.convergence_median_s = settled.median_s
    result.convergence_mean_s = settled.mean_s
    result.converged_share = settled.converged_share
    have = np.isfinite(run.predicted_time_ms)
    if have.any():
        ape = np.abs(run.predicted_time_ms[have] - time_ms[have]) / time_ms[have]
        result.next_time_mape = float(ape.mean())
        result.next_time_median_ape = float(np.median(ape))
    sens_ok = np.isfinite(run.sensitivity_ms_per_mhz)
    if sens_ok.any():
        unit, level = units[sens_ok], chosen[sens_ok]
        predicted = run.sensitivity_ms_per_mhz[sens_ok]
        truth = true_sensitivity(sweep, unit, level, denoised_times(sweep, unit))
        err = predicted - truth
        # normalised by the mean |dt/df|: a plain MAPE divides by derivatives near zero
        result.sensitivity_mape = float(np.abs(err).sum() / np.abs(truth).sum())
        result.sensitivity_nrmse = float(np.sqrt(np.mean(err**2)) / np.sqrt(np.mean(truth**2)))
        raw = true_sensitivity(sweep, unit, level)
        result.sensitivity_mape_raw = float(np.abs(predicted - raw).sum() / np.abs(raw).sum())
    rows = np.all(np.isfinite(run.predicted_energy_mj), axis=1)
    if rows.any():
        tau = kendall_tau_b(run.predicted_energy_mj[rows], energy[run.energy_units[rows] + 1])
        result.kendall_tau = float(np.nanmean(tau))
    return result
