"""Predictions at every level: frame time (eq. 11), sensitivity dt/df, power and energy.

Frame time at a candidate level f_new with counters held (ΔC = 0), from the latest frame time
t observed at the running frequency f (seed eq. 11, with the latest t as meant):

    t(f_new) = t + a0 · t · (f / f_new − 1) + a1 · (f_new − f) / 1000      (a1 in ms/GHz)

clamped to a sanity envelope [t·min(1, f/f_new)/4, 4·t·max(1, f/f_new)]: a model fed nonsense
may say anything, the policy must never see a negative or absurd time.

Sensitivity at f from the nearest levels below (Δd = f − f_lo) and above (Δu = f_hi − f), the
three-point Lagrange derivative on a non-uniform grid (seed eq. 13 swaps the step labels):

    dt/df = [Δd² t(f_hi) + (Δu² − Δd²) t(f) − Δu² t(f_lo)] / [Δu Δd (Δu + Δd)]

one-sided at the ends of the table.

Power is linear in its coefficients c so that RLS learns it online (DESIGN §3), with a static
term (seed 004: fitting power without one gave R² = −5.4). Over a tick with utilisation u:

    P_avg = c0 + u · (c1 + c2 · g(f) + c3 · m),   g(f) = (f / f_max) · (V(f) / V_max)²

so that the idle power is c0 and the power while busy is P_active(f) = c0 + c1 + c2·g(f) + c3·m
(m: memory activity 0..1). Energy per frame under a deadline T (ms):
E(f) = P_active(f)·t(f) + P_idle·max(0, T − t(f)); without one (throughput), E = P_active·t.
W·ms = mJ.
"""

from __future__ import annotations

import numpy as np

from govd.kernels.loader import njit
from govd.model.arrays import FloatArray

ENVELOPE = 4.0
N_POWER = 4
MAX_POWER_W = 1e6
MAX_DEADLINE_MS = 1e6
"""A deadline beyond this (or not positive) is no deadline: the energy would overflow."""


@njit(cache=True)
def predict_time(
    t_ms: float, f_mhz: float, a0: float, a1: float, levels: FloatArray, out: FloatArray
) -> None:
    """Frame time at every level from the latest (t_ms, f_mhz) and coefficients a0, a1."""
    for k in range(levels.shape[0]):
        fn = levels[k]
        ratio = f_mhz / fn
        t = t_ms + a0 * t_ms * (ratio - 1.0) + a1 * (fn - f_mhz) * 1e-3
        lo = t_ms * min(1.0, ratio) / ENVELOPE
        hi = t_ms * max(1.0, ratio) * ENVELOPE
        if not np.isfinite(t):
            t = t_ms * ratio
        out[k] = min(max(t, lo), hi)


@njit(cache=True)
def sensitivity(t_ms: float, f_mhz: float, levels: FloatArray, t_pred: FloatArray) -> float:
    """dt/df at f_mhz (ms/MHz) from the predictions at the neighbouring levels."""
    n = levels.shape[0]
    tol = 1e-9 * f_mhz
    lo = -1
    hi = -1
    for k in range(n):
        if levels[k] < f_mhz - tol:
            lo = k
        elif levels[k] > f_mhz + tol and hi < 0:
            hi = k
    if lo >= 0 and hi >= 0:
        du = levels[hi] - f_mhz
        dd = f_mhz - levels[lo]
        num = dd * dd * t_pred[hi] + (du * du - dd * dd) * t_ms - du * du * t_pred[lo]
        return float(num / (du * dd * (du + dd)))
    if hi >= 0:
        return float((t_pred[hi] - t_ms) / (levels[hi] - f_mhz))
    if lo >= 0:
        return float((t_ms - t_pred[lo]) / (f_mhz - levels[lo]))
    return 0.0


@njit(cache=True)
def interp(x: float, xs: FloatArray, ys: FloatArray) -> float:
    """Piecewise-linear ys(x) over ascending xs, constant beyond the ends."""
    n = xs.shape[0]
    if x <= xs[0]:
        return float(ys[0])
    if x >= xs[n - 1]:
        return float(ys[n - 1])
    k = 1
    while xs[k] < x:
        k += 1
    w = (x - xs[k - 1]) / (xs[k] - xs[k - 1])
    return float(ys[k - 1] + w * (ys[k] - ys[k - 1]))


@njit(cache=True)
def power_features(busy: float, g: float, mem: float, out: FloatArray) -> None:
    """Regressor of the power model for one tick: [1, u, u·g(f), u·m]."""
    out[0] = 1.0
    out[1] = busy
    out[2] = busy * g
    out[3] = busy * mem


@njit(cache=True)
def predict_energy(
    c: FloatArray,
    g_levels: FloatArray,
    mem: float,
    t_pred: FloatArray,
    deadline_ms: float,
    idle_power_w: float,
    p_out: FloatArray,
    e_out: FloatArray,
) -> float:
    """Busy power (W) and energy per frame (mJ) at every level; returns the idle power used."""
    p_idle = idle_power_w if np.isfinite(idle_power_w) else c[0]
    p_idle = min(max(p_idle, 0.0), MAX_POWER_W)
    has_deadline = np.isfinite(deadline_ms) and 0.0 < deadline_ms <= MAX_DEADLINE_MS
    for k in range(g_levels.shape[0]):
        p = c[0] + c[1] + c[2] * g_levels[k] + c[3] * mem
        p = min(max(p, 0.0), MAX_POWER_W)
        p_out[k] = p
        t = t_pred[k]
        e = p * t
        if has_deadline and deadline_ms > t:
            e += p_idle * (deadline_ms - t)
        e_out[k] = e
    return float(p_idle)


def predict_time_ref(
    t_ms: float, f_mhz: float, a0: float, a1: float, levels: FloatArray
) -> FloatArray:
    """NumPy reference of `predict_time`."""
    ratio = f_mhz / levels
    with np.errstate(all="ignore"):
        t = t_ms + a0 * t_ms * (ratio - 1.0) + a1 * (levels - f_mhz) * 1e-3
    t = np.where(np.isfinite(t), t, t_ms * ratio)
    lo = t_ms * np.minimum(1.0, ratio) / ENVELOPE
    hi = t_ms * np.maximum(1.0, ratio) * ENVELOPE
    return np.minimum(np.maximum(t, lo), hi)


def interp_ref(x: float, xs: FloatArray, ys: FloatArray) -> float:
    """NumPy reference of `interp` (np.interp rounds its slope differently)."""
    if x <= xs[0]:
        return float(ys[0])
    if x >= xs[-1]:
        return float(ys[-1])
    k = int(np.searchsorted(xs, x, side="left"))
    w = (x - xs[k - 1]) / (xs[k] - xs[k - 1])
    return float(ys[k - 1] + w * (ys[k] - ys[k - 1]))


def sensitivity_ref(t_ms: float, f_mhz: float, levels: FloatArray, t_pred: FloatArray) -> float:
    """NumPy reference of `sensitivity`."""
    tol = 1e-9 * f_mhz
    below = np.nonzero(levels < f_mhz - tol)[0]
    above = np.nonzero(levels > f_mhz + tol)[0]
    if below.size and above.size:
        lo, hi = below[-1], above[0]
        du, dd = levels[hi] - f_mhz, f_mhz - levels[lo]
        num = dd * dd * t_pred[hi] + (du * du - dd * dd) * t_ms - du * du * t_pred[lo]
        return float(num / (du * dd * (du + dd)))
    if above.size:
        return float((t_pred[above[0]] - t_ms) / (levels[above[0]] - f_mhz))
    if below.size:
        return float((t_ms - t_pred[below[-1]]) / (f_mhz - levels[below[-1]]))
    return 0.0


def predict_energy_ref(
    c: FloatArray,
    g_levels: FloatArray,
    mem: float | FloatArray,
    t_pred: FloatArray,
    deadline_ms: float,
    idle_power_w: float,
) -> tuple[FloatArray, FloatArray, float]:
    """NumPy reference of `predict_energy`: (power W, energy mJ, idle power W). ``mem`` may
    also be one memory term per level (`govd.model.pairs`)."""
    p_idle = idle_power_w if np.isfinite(idle_power_w) else c[0]
    p_idle = min(max(p_idle, 0.0), MAX_POWER_W)
    p = np.clip(c[0] + c[1] + c[2] * g_levels + c[3] * mem, 0.0, MAX_POWER_W)
    e = p * t_pred
    if np.isfinite(deadline_ms) and 0.0 < deadline_ms <= MAX_DEADLINE_MS:
        e = e + np.where(deadline_ms > t_pred, p_idle * (deadline_ms - t_pred), 0.0)
    return p, e, float(p_idle)
