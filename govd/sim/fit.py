"""Fit a level table (`govd.sim.levels`) to a measured sweep table: `govd sim fit`.

Input: a sweep table (DESIGN §5) whose units are measured kernels (or frames), each at every level.
Model, per unit k and level l, with c(l) the level's core clock and h(l) its memory clock (or, with
one clock domain, again its core clock):

    time  t[k, l] = a_k · g[c(l)] + b_k · h[h(l)] + e_k
    power P[k, l] = P_static + α_k · D[c(l)] + β_k · M[m(l)]

a_k, b_k, e_k: the unit's core-scalable, memory-bound and clock-independent time at the top level
(g and h are 1 there); α_k, β_k its core and memory activity (the most active unit has 1); D the
dynamic core power per core clock, C_dyn·f·V²; M the memory power per memory clock (one value with
one clock domain). With one clock domain h is free per core level: the V100's memory-bound time
grows at low core clocks (its L2 and crossbar share the core clock), which a constant cannot follow.

The fit minimises the squared *relative* error (what MAPE measures). Time: bounded non-linear least
squares (scipy) over the curves and every unit's a, b, e together, from the physical shapes. Power:
alternating least squares, unit parameters for fixed curves (a small linear problem per unit), then
the curves for fixed unit parameters (one linear problem), non-negative throughout. A weak prior
keeps the time curves near 1/f where the data leave their shape open (`PRIOR_WEIGHT`).

Held-out error: k-fold over units, the curves fitted on the other folds and each held-out unit's
own five parameters fitted to it with the curves frozen, so it measures whether the hardware
curves carry over to work they never saw.
"""

from __future__ import annotations

import contextlib
import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from scipy.optimize import least_squares

from govd.formats.sweep import SweepTable
from govd.sim.levels import FloatArray, LevelTable

MAX_ITERATIONS = 400
TOLERANCE = 1e-10
"""Stop when the relative squared error improves by less than this between iterations."""
SOLVER_TOLERANCE = 1e-8
"""The time curves' least-squares stopping tolerances (scipy's ftol, xtol and gtol; its
default) for the fitted curves."""
CV_SOLVER_TOLERANCE = 1e-12
"""The time curves' least-squares tolerances in the held-out folds. Among fits of nearly equal
error the solver's default (1e-8) stops wherever rounding leaves it, and the held-out time
error of the RTX 2070 Super table moved from 1.996 % to 2.041 % between two BLAS builds of
one NumPy; at 1e-12 they agree within 0.002 points, so a shipped table's figure is what a
refit reproduces on any machine. The fitted curves keep `SOLVER_TOLERANCE`: they were already
the same to 1e-4."""
FLOOR = 1e-12
PRIOR_WEIGHT = 0.01
"""Weight of the pull of log g and log h towards the physical shapes, against relative errors:
a 1 % error anywhere outweighs a 100 % departure of one level from 1/f."""


class FitError(ValueError):
    """A sweep that cannot be fitted; the message says why."""


@dataclass
class Curves:
    """The hardware's curves: shared by every unit."""

    core_index: np.ndarray
    """Per level, index into `g` and `D` (its core clock)."""
    memtime_index: np.ndarray
    """Per level, index into `h`."""
    mem_index: np.ndarray
    """Per level, index into `M`."""
    g: FloatArray
    h: FloatArray
    g_prior: FloatArray
    """f_top / f: the scalable time of work counted in cycles."""
    h_prior: FloatArray
    """m_top / m with a memory clock, else 1: memory-bound time of work counted in transfers."""
    static_w: float
    d: FloatArray
    m: FloatArray


@dataclass
class UnitParams:
    """Per-unit parameters, arrays of shape [U]."""

    a: FloatArray
    b: FloatArray
    e: FloatArray
    alpha: FloatArray
    beta: FloatArray


def _indices(sweep: SweepTable) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    core = np.unique(sweep.levels_mhz, return_inverse=True)[1]
    if sweep.mem_levels_mhz is None:
        return core, core, np.zeros_like(core)
    mem = np.unique(sweep.mem_levels_mhz, return_inverse=True)[1]
    return core, mem, mem


def _initial_curves(sweep: SweepTable) -> Curves:
    core, memtime, mem = _indices(sweep)
    fc = np.unique(sweep.levels_mhz)
    if sweep.mem_levels_mhz is None:
        h = np.ones(fc.size)
    else:
        fm = np.unique(sweep.mem_levels_mhz)
        h = fm.max() / fm
    p = sweep.power_w
    return Curves(core_index=core, memtime_index=memtime, mem_index=mem, g=fc.max() / fc, h=h,
                  g_prior=fc.max() / fc, h_prior=h.copy(),
                  static_w=float(p.min()) / 2, d=np.linspace(0.5, 1.0, fc.size) * p.max() / 2,
                  m=np.full(mem.max() + 1, p.max() / 4))


def _solve_units(design: FloatArray, target: FloatArray) -> FloatArray:
    """Non-negative (by clipping) weighted least squares per unit: design [U, L, P], target
    [U, L] already weighted; returns [U, P]."""
    normal = np.einsum("ulp,ulq->upq", design, design)
    rhs = np.einsum("ulp,ul->up", design, target)
    normal += np.eye(design.shape[2]) * 1e-12 * np.trace(normal, axis1=1, axis2=2)[:, None, None]
    solution: FloatArray = np.linalg.solve(normal, rhs[..., None])[..., 0]
    return np.maximum(solution, FLOOR)


def _unit_time(cv: Curves, time: FloatArray) -> tuple[FloatArray, FloatArray, FloatArray]:
    w = 1.0 / time
    g, h = cv.g[cv.core_index], cv.h[cv.memtime_index]
    design = np.stack([np.broadcast_to(g, time.shape), np.broadcast_to(h, time.shape),
                       np.ones_like(time)], axis=2) * w[..., None]
    s = _solve_units(design, time * w)
    return s[:, 0], s[:, 1], s[:, 2]


def _unit_power(cv: Curves, power: FloatArray) -> tuple[FloatArray, FloatArray]:
    w = 1.0 / power
    d, m = cv.d[cv.core_index], cv.m[cv.mem_index]
    design = np.stack([np.broadcast_to(d, power.shape), np.broadcast_to(m, power.shape)],
                      axis=2) * w[..., None]
    s = _solve_units(design, (power - cv.static_w) * w)
    return s[:, 0], s[:, 1]


def _one_hot_rows(index: np.ndarray, n_units: int, width: int, scale: FloatArray) -> FloatArray:
    """[U·L, width] rows: unit k's value `scale[k]` in the column of level l's clock."""
    n_levels = index.size
    rows = np.zeros((n_units * n_levels, width))
    rows[np.arange(n_units * n_levels), np.tile(index, n_units)] = np.repeat(scale, n_levels)
    return rows


def _curves_power(cv: Curves, up: UnitParams, power: FloatArray) -> None:
    n = power.shape[0]
    w = (1.0 / power).ravel()
    design = np.hstack([np.ones((power.size, 1)),
                        _one_hot_rows(cv.core_index, n, cv.d.size, up.alpha),
                        _one_hot_rows(cv.mem_index, n, cv.m.size, up.beta)])
    sol = np.linalg.lstsq(design * w[:, None], power.ravel() * w, rcond=None)[0]
    cv.static_w = max(float(sol[0]), 0.0)
    cv.d = np.maximum(sol[1:1 + cv.d.size], 0.0)
    cv.m = np.maximum(sol[1 + cv.d.size:], 0.0)


def predict(cv: Curves, up: UnitParams) -> tuple[FloatArray, FloatArray]:
    """Model time (ms) and power (W), shape [U, L]."""
    time = (up.a[:, None] * cv.g[cv.core_index] + up.b[:, None] * cv.h[cv.memtime_index]
            + up.e[:, None])
    power = (cv.static_w + up.alpha[:, None] * cv.d[cv.core_index]
             + up.beta[:, None] * cv.m[cv.mem_index])
    return time, power


def unit_params(cv: Curves, time: FloatArray, power: FloatArray) -> UnitParams:
    """Each unit's parameters with the curves `cv` frozen (how a held-out unit is described)."""
    a, b, e = _unit_time(cv, time)
    alpha, beta = _unit_power(cv, power)
    return UnitParams(a=a, b=b, e=e, alpha=alpha, beta=beta)


def fit_curves(sweep: SweepTable, solver_tolerance: float = SOLVER_TOLERANCE
               ) -> tuple[Curves, UnitParams]:
    """Curves and unit parameters of `sweep` (see the module docstring). `FitError` when the
    sweep has fewer than 2 units or levels, or a time or power that is not positive.
    ``solver_tolerance``: the time curves' least-squares stopping tolerances
    (`SOLVER_TOLERANCE` unless given)."""
    time, power = sweep.time_ms, sweep.power_w
    if time.shape[0] < 2 or time.shape[1] < 2:
        raise FitError(f"need at least 2 units and 2 levels, got {time.shape[0]} x {time.shape[1]}")
    if not (np.all(time > 0) and np.all(power > 0)):
        raise FitError("every time and power must be positive")
    cv = _initial_curves(sweep)
    _fit_time_curves(cv, time, solver_tolerance)
    previous = np.inf
    for _ in range(MAX_ITERATIONS):
        up = unit_params(cv, time, power)
        _curves_power(cv, up, power)
        _normalise(cv, up)
        t, p = predict(cv, unit_params(cv, time, power))
        loss = float(np.sum((t / time - 1) ** 2) + np.sum((p / power - 1) ** 2))
        if 0 <= previous - loss < TOLERANCE * max(loss, 1e-30):
            break
        previous = loss
    return cv, unit_params(cv, time, power)


def _fit_time_curves(cv: Curves, time: FloatArray, tolerance: float) -> None:
    """g and h (1 at their top clock) by bounded non-linear least squares on the relative error,
    jointly with every unit's a, b, e >= 0, starting from the physical shapes. A weak prior
    (`PRIOR_WEIGHT` per level on log g and log h) picks, among fits of equal error (a·g + b·h + e
    can trade shape between its terms), the one closest to those shapes."""
    n = time.shape[0]
    ng, nh = cv.g.size - 1, cv.h.size - 1
    log_g_prior, log_h_prior = np.log(cv.g_prior[:-1]), np.log(cv.h_prior[:-1])
    a0, b0, e0 = _unit_time(cv, time)

    def unpack(x: FloatArray) -> tuple[FloatArray, FloatArray, FloatArray, FloatArray,
                                       FloatArray]:
        g = np.exp(np.append(x[:ng], 0.0))
        h = np.exp(np.append(x[ng:ng + nh], 0.0))
        a, b, e = x[ng + nh:].reshape(3, n)
        return g, h, a, b, e

    def residuals(x: FloatArray) -> FloatArray:
        g, h, a, b, e = unpack(x)
        model = a[:, None] * g[cv.core_index] + b[:, None] * h[cv.memtime_index] + e[:, None]
        prior = PRIOR_WEIGHT * np.concatenate([x[:ng] - log_g_prior,
                                               x[ng:ng + nh] - log_h_prior])
        return np.concatenate([(model / time - 1).ravel(), prior])

    x0 = np.concatenate([log_g_prior, log_h_prior, a0, b0, e0])
    lower = np.concatenate([np.full(ng + nh, -np.inf), np.zeros(3 * n)])
    result = least_squares(residuals, x0, bounds=(lower, np.inf), x_scale="jac",
                           ftol=tolerance, xtol=tolerance, gtol=tolerance)
    cv.g, cv.h, *_ = unpack(result.x)


def _normalise(cv: Curves, up: UnitParams) -> None:
    """The most active unit's α and β 1 (the scale moves to D and M)."""
    cv.d = cv.d * max(float(up.alpha.max()), FLOOR)
    cv.m = cv.m * max(float(up.beta.max()), FLOOR)


def pool_sweeps(sweeps: list[SweepTable]) -> SweepTable:
    """One sweep of every unit of `sweeps`, which must have the same levels (`FitError`). The
    metadata and path are the first sweep's, with every path named in `source` when several."""
    first = sweeps[0]
    for other in sweeps[1:]:
        mine, theirs = first.mem_levels_mhz, other.mem_levels_mhz
        same = (np.array_equal(other.levels_mhz, first.levels_mhz)
                and (mine is None) == (theirs is None)
                and (mine is None or theirs is None or np.array_equal(mine, theirs)))
        if not same:
            raise FitError(f"{other.path}: levels differ from {first.path}'s")
    if len(sweeps) == 1:
        return first
    meta = dict(first.meta)
    meta["source"] = "; ".join(s.meta.get("source", s.path) for s in sweeps)
    return SweepTable(levels_mhz=first.levels_mhz,
                      time_ms=np.vstack([s.time_ms for s in sweeps]),
                      power_w=np.vstack([s.power_w for s in sweeps]),
                      mem_levels_mhz=first.mem_levels_mhz, meta=meta,
                      path=" ".join(s.path for s in sweeps))


def mape_pct(model: FloatArray, measured: FloatArray) -> float:
    """Mean absolute percentage error. Units: %."""
    return float(np.mean(np.abs(model / measured - 1)) * 100)


def cross_validate(sweep: SweepTable, folds: int = 5, seed: int = 0) -> dict[str, float]:
    """Held-out time and power MAPE (%), k-fold over units (`folds` capped at the unit count)."""
    n = sweep.units
    folds = max(2, min(folds, n))
    order = np.random.default_rng(seed).permutation(n)
    t_model, p_model = np.empty_like(sweep.time_ms), np.empty_like(sweep.power_w)
    for fold in range(folds):
        test = order[fold::folds]
        train = np.setdiff1d(order, test)
        cv, _ = fit_curves(_subset(sweep, train), CV_SOLVER_TOLERANCE)
        t, p = predict(cv, unit_params(cv, sweep.time_ms[test], sweep.power_w[test]))
        t_model[test], p_model[test] = t, p
    return {"heldout_time_mape_pct": mape_pct(t_model, sweep.time_ms),
            "heldout_power_mape_pct": mape_pct(p_model, sweep.power_w),
            "folds": float(folds)}


def _subset(sweep: SweepTable, rows: np.ndarray) -> SweepTable:
    return SweepTable(levels_mhz=sweep.levels_mhz, time_ms=sweep.time_ms[rows],
                      power_w=sweep.power_w[rows], mem_levels_mhz=sweep.mem_levels_mhz)


def _one_blas_thread() -> contextlib.AbstractContextManager[object]:
    """The linear algebra on one thread: a multithreaded BLAS sums in an order that depends on
    its thread count, which moved a shipped table's held-out error by 0.02 points between one
    and two threads; one thread makes the fit the same on every machine (and spares the spin of
    idle BLAS threads on a busy one). Without threadpoolctl (the `fit` extra has it), as is."""
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:
        return contextlib.nullcontext()
    return threadpool_limits(limits=1)


def fit_table(sweep: SweepTable, name: str, description: str = "", folds: int = 5,
              idle_power_w: float | None = None) -> LevelTable:
    """The level table fitted to `sweep`, with its provenance and its fitted and held-out error.

    `idle_power_w` (W) defaults to the sweep's `# idle_power_w`; `FitError` when neither is given
    (a sweep of busy kernels says nothing about gated idle power)."""
    with _one_blas_thread():
        return _fit_table(sweep, name, description, folds, idle_power_w)


def _fit_table(sweep: SweepTable, name: str, description: str, folds: int,
               idle_power_w: float | None) -> LevelTable:
    idle = idle_power_w if idle_power_w is not None else sweep.idle_power_w
    if not (idle is not None and np.isfinite(idle) and idle >= 0):
        raise FitError("the sweep has no '# idle_power_w'; give the gated idle power (--idle-w)")
    cv, up = fit_curves(sweep)
    t, p = predict(cv, up)
    levels = sweep.levels_mhz
    d = cv.d[cv.core_index]
    per_mhz = d / levels
    fit: dict[str, Any] = {
        "units": sweep.units, "levels": int(levels.size),
        "time_mape_pct": round(mape_pct(t, sweep.time_ms), 3),
        "power_mape_pct": round(mape_pct(p, sweep.power_w), 3),
        "time_max_error_pct": round(float(np.max(np.abs(t / sweep.time_ms - 1))) * 100, 2),
        "power_max_error_pct": round(float(np.max(np.abs(p / sweep.power_w - 1))) * 100, 2),
    }
    fit.update({k: round(v, 3) for k, v in cross_validate(sweep, folds).items()})
    fit["folds"] = int(fit["folds"])
    top_time = up.a + up.b + up.e
    provenance: dict[str, Any] = {
        "made_by": "govd sim fit",
        "source": sweep.meta.get("source", sweep.path or "sweep table"),
        "sweep_file": " ".join(Path(p).name for p in sweep.path.split()),
        "sweep_sha256": _sha256(sweep.path),
        **{k: sweep.meta[k] for k in ("source_sha256", "source_commit", "idle_power_note")
           if k in sweep.meta},
        "idle_power_w": "given (--idle-w)" if idle_power_w is not None
        else "from the sweep's metadata",
        "fit": fit,
        "units": {
            "memory_share": _rounded(up.b / top_time),
            "constant_share": _rounded(up.e / top_time),
            "core_activity": _rounded(up.alpha),
            "mem_activity": _rounded(up.beta),
        },
    }
    return LevelTable(
        name=name, description=description or f"fitted to {sweep.path or 'a sweep'}",
        freqs_mhz=levels.copy(), mem_freqs_mhz=None if sweep.mem_levels_mhz is None
        else sweep.mem_levels_mhz.copy(),
        scalable_time=cv.g[cv.core_index], memory_time=cv.h[cv.memtime_index],
        core_power_w=d, mem_power_w=cv.m[cv.mem_index], static_power_w=round(cv.static_w, 4),
        idle_power_w=float(idle), volts_rel=np.sqrt(per_mhz / per_mhz[-1]),
        provenance=provenance)


def _rounded(values: FloatArray) -> list[float]:
    return [round(float(v), 4) for v in values]


def _sha256(path: str) -> str:
    if not path:
        return ""
    try:
        with open(path, "rb") as f:
            return hashlib.sha256(f.read()).hexdigest()
    except OSError:
        return ""
