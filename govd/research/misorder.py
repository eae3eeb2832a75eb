"""Why the model misorders levels: its Kendall tau with one input replaced by the truth.

Issue #11's method applied to rank fidelity. `govd.eval.score` scores the tau of the energy the
model predicted after unit u against unit u + 1's true energies. Here the prediction is split
into its time and power curves (E = P·t under a slowdown target) and each is replaced in turn by
the mean curve of the phase of unit u (`govd.eval.reference.phase_means`: what a model that knew
every phase's curve, learned one unit late, would predict). A tau that rises when the time is
replaced is lost in the time model; when the power is replaced, in the power shape. Replacing
both gives `mean_curve_kendall_tau`. The same is done for the levels below (or from) a cut
level only, which tells levels the policy never runs (extrapolated) from the ones it runs, and
over consecutive windows of the run, which tells a model that drifts from one that never knew.
Every figure is a mean of per-unit taus over the units `Replay.energy_units` kept.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import pairwise

import numpy as np

from govd.eval.reference import phase_means
from govd.eval.replay import Replay
from govd.eval.score import energy_mj, kendall_tau_b, unit_energy_mj
from govd.formats.sweep import SweepTable
from govd.model.arrays import FloatArray
from govd.target import Target


@dataclass
class Misorder:
    """The decomposition of one replay's rank fidelity (every tau a mean over units)."""

    units: int
    """Units whose predictions were scored."""
    model: float
    """The model's tau, as `govd.eval.score` scores it."""
    true_time: float
    """Tau with the predicted times replaced by the phase's mean times (power predicted)."""
    true_power: float
    """Tau with the predicted busy power replaced by the phase's mean power (time predicted)."""
    mean_curves: float
    """Tau of the phase's mean curves (both replaced): the causal bound."""
    true_time_below: dict[int, float] = field(default_factory=dict)
    """Per cut level c: tau with the times of levels below c replaced (power true)."""
    truth_below: dict[int, float] = field(default_factory=dict)
    """Per cut level c: tau with time and power of levels below c replaced."""
    time_error: list[float] = field(default_factory=list)
    """Per level: median of log(predicted t / t_top) − log(true t / t_top)."""
    power_error: list[float] = field(default_factory=list)
    """Per level: median of log(predicted P / P_top) − log(true P / P_top)."""
    run_share: list[float] = field(default_factory=list)
    """Per level: the share of units the policy ran there."""
    windows: list[dict[str, float]] = field(default_factory=list)
    """Per consecutive window of the run: model, true_time, true_power, mean_curves taus."""


def _mean(tau: FloatArray) -> float:
    return float(np.nanmean(tau)) if np.isfinite(tau).any() else float("nan")


def misorder(sweep: SweepTable, run: Replay, target: Target, idle_power_w: float,
             windows: int = 8) -> Misorder:
    """Decompose ``run``'s Kendall tau on ``sweep`` (see the module). ``idle_power_w`` (W):
    as scored. Raises ValueError where the model predicted nothing to score."""
    rows = np.all(np.isfinite(run.predicted_energy_mj), axis=1) & np.all(
        np.isfinite(run.predicted_times_ms), axis=1)
    if not rows.any():
        raise ValueError(f"{sweep.path or 'sweep'}: the model predicted no energies to score")
    nxt = run.energy_units[rows] + 1
    truth = unit_energy_mj(sweep, target, idle_power_w)[nxt]
    pt = run.predicted_times_ms[rows]
    pe = run.predicted_energy_mj[rows]
    deadline = target.deadline_ms if target.fps is not None else np.inf
    idle_mj = idle_power_w * np.maximum(0.0, deadline - pt) if np.isfinite(deadline) else 0.0
    pp = (pe - idle_mj) / pt  # busy power (W): E = P·t (+ idle·(T − t) under a deadline)
    phase_of, means = phase_means(sweep)
    mt = means.time_ms[phase_of[nxt - 1]]
    mp = means.power_w[phase_of[nxt - 1]]

    def taus(t: FloatArray, p: FloatArray) -> FloatArray:
        return kendall_tau_b(energy_mj(p, t, target, idle_power_w), truth)

    n_levels = sweep.levels_mhz.size
    top = n_levels - 1
    # a level's prediction rescaled to the truth's at the top, so that only shapes are swapped
    pt_top = pt / pt[:, [top]] * mt[:, [top]]
    pp_top = pp / pp[:, [top]] * mp[:, [top]]
    per_unit = {"model": kendall_tau_b(pe, truth), "true_time": taus(mt, pp_top),
                "true_power": taus(pt_top, mp), "mean_curves": taus(mt, mp)}
    out = Misorder(units=int(rows.sum()), model=_mean(per_unit["model"]),
                   true_time=_mean(per_unit["true_time"]),
                   true_power=_mean(per_unit["true_power"]),
                   mean_curves=_mean(per_unit["mean_curves"]))
    for cut in range(1, n_levels):
        t_cut = pt_top.copy()
        t_cut[:, :cut] = mt[:, :cut]
        out.true_time_below[cut] = _mean(taus(t_cut, mp))
        p_cut = pp_top.copy()
        p_cut[:, :cut] = mp[:, :cut]
        out.truth_below[cut] = _mean(taus(t_cut, p_cut))
    with np.errstate(all="ignore"):
        lt = np.log(pt / pt[:, [top]]) - np.log(mt / mt[:, [top]])
        lp = np.log(pp / pp[:, [top]]) - np.log(mp / mp[:, [top]])
    out.time_error = [float(v) for v in np.nanmedian(lt, axis=0)]
    out.power_error = [float(v) for v in np.nanmedian(lp, axis=0)]
    ran = np.bincount(run.levels, minlength=n_levels)
    out.run_share = [float(v) for v in ran / max(ran.sum(), 1)]
    edges = np.linspace(0, out.units, max(windows, 1) + 1).astype(int)
    for lo, hi in pairwise(edges):
        if hi > lo:
            out.windows.append({k: _mean(v[lo:hi]) for k, v in per_unit.items()})
    return out
