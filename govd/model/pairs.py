"""Two clock domains: frame time, power and energy over (core, memory) clock pairs.

Seed 000's differential model (eq. 10) with a second scalability term for the memory clock:

    Δt ≈ a0 · t_prev · (fc_prev/fc − 1) + b0 · t_prev · (fm_prev/fm − 1) + a1 · Δfc + Σ a_i Δx_i
    t(fc', fm') = t + a0 · t · (fc/fc' − 1) + b0 · t · (fm/fm' − 1) + a1 · (fc' − fc) / 1000

a0 is the share of the time that scales with the core clock, b0 the share that scales with the
memory clock: the roofline-like t = c + A/fc + B/fm, linearised at the running pair, which is
seed 002's "terms in f_core/f_mem and 1/f_mem" (t·fc = c·fc + A + B·fc/fm). Measured on the
GTX 980 grid (20 kernels × 36 pairs, ../shared/data/nv-dvfs): t = c + A/fc + B/fm fits each
kernel with median R² 0.989 (mean absolute error 2.1 %); the differential form with constant
(a0, b0), predicting every pair from every other, errs 3.7 % on average against 19.4 % for the
core-only term; a cross term t·(fc·fm/(fc'·fm') − 1) gained nothing (3.66 %), so it is left out.
Predicting ratios to a reference setting (seed 002) is what the differential form does: every
prediction is the running time times a factor.

Power gains a memory clock term: P_avg = c0 + u · (c1 + c2 · g(fc) + c3 · fm/fm_max), so the
busy power at a pair is c0 + c1 + c2·g(fc) + c3·fm/fm_max (memory voltage is fixed on the
parts measured, so its power goes with its clock).

Sensitivity is dt/dfc along the core axis at the running memory clock (three-point Lagrange over
the pairs that share that memory clock), which is what the one-domain kernel computes.

`model_tick_pairs` is the one compiled call per tick, with the layout of `govd.model.tick`
(vecs, pw, cfg, icfg, stats, scal) except that the counters start at `LEAD` = 3 and the level
rows `lv` are [core MHz, g(fc), memory MHz, fm/fm_max]. `model_tick_pairs_ref` is its NumPy
reference.
"""

from __future__ import annotations

import math

import numpy as np

from govd.kernels.loader import njit
from govd.model import tick as k
from govd.model.arrays import FloatArray
from govd.model.dcd import dcd_update, dcd_update_ref
from govd.model.predict import (
    ENVELOPE,
    MAX_DEADLINE_MS,
    MAX_POWER_W,
    interp,
    interp_ref,
    predict_energy_ref,
    sensitivity_ref,
)
from govd.model.rls import ordered_sum, rls_update, rls_update_ref
from govd.model.spread import level_spread, level_spread_ref, note_error, note_error_ref

LEAD = 3
"""Features ahead of the counters: core scalability, memory scalability, Δfc."""
# lv rows (shape [4, L])
CORE, G, MEM, GM = range(4)
N_LV_ROWS = 4


@njit(cache=True)
def predict_time_pairs(
    t_ms: float, fc_mhz: float, fm_mhz: float, a: FloatArray, lv: FloatArray, out: FloatArray
) -> None:
    """Frame time (ms) at every pair from the latest (t_ms, fc_mhz, fm_mhz), a = [a0, b0, a1]."""
    for j in range(lv.shape[1]):
        rc = fc_mhz / lv[CORE, j]
        rm = fm_mhz / lv[MEM, j]
        t = t_ms + a[0] * t_ms * (rc - 1.0) + a[1] * t_ms * (rm - 1.0)
        t += a[2] * (lv[CORE, j] - fc_mhz) * 1e-3
        ratio = rc * rm
        lo = t_ms * min(1.0, ratio) / ENVELOPE
        hi = t_ms * max(1.0, ratio) * ENVELOPE
        if not np.isfinite(t):
            t = t_ms * ratio
        out[j] = min(max(t, lo), hi)


@njit(cache=True)
def sensitivity_pairs(
    t_ms: float, fc_mhz: float, fm_mhz: float, lv: FloatArray, t_pred: FloatArray
) -> float:
    """dt/dfc (ms/MHz) at fc_mhz along the pairs whose memory clock is fm_mhz."""
    tol = 1e-9 * fc_mhz
    mtol = 1e-9 * fm_mhz
    lo = -1
    hi = -1
    for j in range(lv.shape[1]):
        if abs(lv[MEM, j] - fm_mhz) > mtol:
            continue
        f = lv[CORE, j]
        if f < fc_mhz - tol:
            lo = j
        elif f > fc_mhz + tol and hi < 0:
            hi = j
    if lo >= 0 and hi >= 0:
        du = lv[CORE, hi] - fc_mhz
        dd = fc_mhz - lv[CORE, lo]
        num = dd * dd * t_pred[hi] + (du * du - dd * dd) * t_ms - du * du * t_pred[lo]
        return float(num / (du * dd * (du + dd)))
    if hi >= 0:
        return float((t_pred[hi] - t_ms) / (lv[CORE, hi] - fc_mhz))
    if lo >= 0:
        return float((t_ms - t_pred[lo]) / (fc_mhz - lv[CORE, lo]))
    return 0.0


@njit(cache=True)
def predict_energy_pairs(
    c: FloatArray,
    lv: FloatArray,
    t_pred: FloatArray,
    deadline_ms: float,
    idle_power_w: float,
    p_out: FloatArray,
    e_out: FloatArray,
) -> float:
    """Busy power (W) and energy per frame (mJ) at every pair; returns the idle power used."""
    p_idle = idle_power_w if np.isfinite(idle_power_w) else c[0]
    p_idle = min(max(p_idle, 0.0), MAX_POWER_W)
    has_deadline = np.isfinite(deadline_ms) and 0.0 < deadline_ms <= MAX_DEADLINE_MS
    for j in range(lv.shape[1]):
        p = c[0] + c[1] + c[2] * lv[G, j] + c[3] * lv[GM, j]
        p = min(max(p, 0.0), MAX_POWER_W)
        p_out[j] = p
        t = t_pred[j]
        e = p * t
        if has_deadline and deadline_ms > t:
            e += p_idle * (deadline_ms - t)
        e_out[j] = e
    return float(p_idle)


@njit(cache=True)
def _valid_pair_sample(
    t_ms: float, fc_mhz: float, fm_mhz: float, x: FloatArray, scale: FloatArray
) -> bool:
    if not (np.isfinite(t_ms) and k.MIN_FRAME_MS <= t_ms <= k.MAX_FRAME_MS):
        return False
    for f in (fc_mhz, fm_mhz):
        if not (np.isfinite(f) and 0.0 < f <= k.MAX_FREQ_MHZ):
            return False
    for i in range(x.shape[0]):
        v = x[i] / scale[LEAD + i]
        if not (np.isfinite(v) and abs(v) <= k.MAX_COUNTER):
            return False
    return True


@njit(cache=True)
def model_tick_pairs(
    state: FloatArray,
    x: FloatArray,
    t_ms: float,
    fc_mhz: float,
    fm_mhz: float,
    power_w: float,
    busy: float,
    deadline_ms: float,
) -> int:
    """Update the model in ``state`` (`govd.model.tick.new_state`) with one tick's sample at
    pair (fc_mhz, fm_mhz) and predict at every pair; returns `govd.model.tick` flags, never
    raises."""
    vecs, P, pw, Pc, lv, cfg, icfg, stats, out, scal = k.unpack(state)
    return pairs_tick_arrays(vecs, P, pw, Pc, lv, cfg, icfg, stats, x, out, scal, t_ms, fc_mhz,
                             fm_mhz, power_w, busy, deadline_ms)


@njit(cache=True, inline="always")
def pairs_tick_arrays(
    vecs: FloatArray,
    P: FloatArray,
    pw: FloatArray,
    Pc: FloatArray,
    lv: FloatArray,
    cfg: FloatArray,
    icfg: FloatArray,
    stats: FloatArray,
    x: FloatArray,
    out: FloatArray,
    scal: FloatArray,
    t_ms: float,
    fc_mhz: float,
    fm_mhz: float,
    power_w: float,
    busy: float,
    deadline_ms: float,
) -> int:
    """`model_tick_pairs` on the state's views: frame time (ms), core and memory clocks that
    ran (MHz), average power (W), utilisation (0..1), deadline (ms, NaN: none)."""
    flags = 0
    stats[k.TICKS] += 1
    m = vecs.shape[1]
    if _valid_pair_sample(t_ms, fc_mhz, fm_mhz, x, vecs[k.SCALE]):
        if stats[k.HAS_PREV] == 1:
            t_prev = vecs[k.PREV, 0]
            h = vecs[k.H]
            h[0] = t_prev * (vecs[k.PREV, 1] / fc_mhz - 1.0)
            h[1] = t_prev * (vecs[k.PREV, 2] / fm_mhz - 1.0)
            h[2] = (fc_mhz - vecs[k.PREV, 1]) * 1e-3
            for i in range(LEAD, m):
                h[i] = x[i - LEAD] / vecs[k.SCALE, i] - vecs[k.PREV, i]
            fit = t_prev
            for i in range(m):
                fit += h[i] * vecs[k.A, i]
            scal[k.T_FIT] = fit
            note_error(scal[k.ERR2:k.N_ERR + 1], t_ms, fit)
            d = t_ms - t_prev
            if icfg[k.ALGO] == k.ALGO_RLS:
                rc = rls_update(
                    vecs[k.A], P, h, d, cfg[k.LAM], cfg[k.MAX_TRACE], vecs[k.A_INIT],
                    1.0 / cfg[k.MU], vecs[k.WORK],
                )
            else:
                rc = dcd_update(
                    vecs[k.A], P, vecs[k.RES], h, d, cfg[k.LAM], cfg[k.MU], cfg[k.DCD_H],
                    int(icfg[k.MB]), int(icfg[k.NU]), vecs[k.A_INIT],
                )
            stats[k.UPDATES] += 1
            flags |= k.UPDATED
            if rc != 0:
                stats[k.RESETS] += 1
                flags |= k.WAS_RESET
        vecs[k.PREV, 0] = t_ms
        vecs[k.PREV, 1] = fc_mhz
        vecs[k.PREV, 2] = fm_mhz
        for i in range(LEAD, m):
            vecs[k.PREV, i] = x[i - LEAD] / vecs[k.SCALE, i]
        stats[k.HAS_PREV] = 1
        if k.out_of_band(vecs[k.PREV], LEAD):
            flags |= k.RESCALE_DUE
    else:
        stats[k.SKIPPED] += 1
        flags |= k.SKIPPED_SAMPLE

    if (
        np.isfinite(power_w) and 0.0 <= power_w <= k.MAX_POWER_W
        and np.isfinite(busy) and 0.0 <= busy <= 1.0
        and np.isfinite(fc_mhz) and 0.0 < fc_mhz <= k.MAX_FREQ_MHZ
        and np.isfinite(fm_mhz) and 0.0 < fm_mhz <= k.MAX_FREQ_MHZ
    ):
        phi = pw[k.PHI]
        phi[0] = 1.0
        phi[1] = busy
        phi[2] = busy * interp(fc_mhz, lv[CORE], lv[G])
        phi[3] = busy * fm_mhz / lv[MEM].max()
        rc = rls_update(
            pw[k.C], Pc, phi, power_w, cfg[k.PLAM], cfg[k.PMAX_TRACE], pw[k.C_INIT], cfg[k.PP0],
            pw[k.PWORK],
        )
        stats[k.P_UPDATES] += 1
        flags |= k.POWER_UPDATED
        if rc != 0:
            stats[k.P_RESETS] += 1
    else:
        stats[k.P_SKIPPED] += 1

    if stats[k.HAS_PREV] == 1:
        t_now = vecs[k.PREV, 0]
        fc_now = vecs[k.PREV, 1]
        fm_now = vecs[k.PREV, 2]
        predict_time_pairs(t_now, fc_now, fm_now, vecs[k.A], lv, out[k.OUT_T])
        scal[k.SENS] = sensitivity_pairs(t_now, fc_now, fm_now, lv, out[k.OUT_T])
        scal[k.P_IDLE] = predict_energy_pairs(
            pw[k.C], lv, out[k.OUT_T], deadline_ms, cfg[k.IDLE_W], out[k.OUT_P], out[k.OUT_E]
        )
        scal[k.T_NOW] = t_now
        scal[k.F_NOW] = fc_now
        scal[k.READY] = 1.0 if stats[k.UPDATES] >= icfg[k.WARMUP] else 0.0
        level_spread(t_now, fc_now, fm_now, lv[CORE], lv[MEM], True, out[k.OUT_T], P,
                     icfg[k.ALGO] == k.ALGO_DCD, k.residual_variance(scal, cfg[k.SIGMA0], t_now),
                     out[k.OUT_SD_NOW], out[k.OUT_SD_TOP])
    else:
        for j in range(out.shape[1]):
            for row in range(k.N_OUT):
                out[row, j] = math.nan
        scal[k.SENS] = math.nan
        scal[k.READY] = 0.0
    return flags


def predict_time_pairs_ref(
    t_ms: float, fc_mhz: float, fm_mhz: float, a: FloatArray, lv: FloatArray
) -> FloatArray:
    """NumPy reference of `predict_time_pairs`."""
    rc = fc_mhz / lv[CORE]
    rm = fm_mhz / lv[MEM]
    with np.errstate(all="ignore"):
        t = t_ms + a[0] * t_ms * (rc - 1.0) + a[1] * t_ms * (rm - 1.0)
        t = t + a[2] * (lv[CORE] - fc_mhz) * 1e-3
    ratio = rc * rm
    t = np.where(np.isfinite(t), t, t_ms * ratio)
    lo = t_ms * np.minimum(1.0, ratio) / ENVELOPE
    hi = t_ms * np.maximum(1.0, ratio) * ENVELOPE
    clamped: FloatArray = np.minimum(np.maximum(t, lo), hi)
    return clamped


def sensitivity_pairs_ref(
    t_ms: float, fc_mhz: float, fm_mhz: float, lv: FloatArray, t_pred: FloatArray
) -> float:
    """NumPy reference of `sensitivity_pairs`: the one-domain reference over the pairs at the
    running memory clock."""
    same = np.abs(lv[MEM] - fm_mhz) <= 1e-9 * fm_mhz
    return sensitivity_ref(t_ms, fc_mhz, lv[CORE][same], t_pred[same])


def predict_energy_pairs_ref(
    c: FloatArray, lv: FloatArray, t_pred: FloatArray, deadline_ms: float, idle_power_w: float
) -> tuple[FloatArray, FloatArray, float]:
    """NumPy reference of `predict_energy_pairs`: (power W, energy mJ, idle power W); the
    one-domain reference with the memory term taken per pair."""
    return predict_energy_ref(c, lv[G], lv[GM], t_pred, deadline_ms, idle_power_w)


def model_tick_pairs_ref(
    vecs: FloatArray,
    P: FloatArray,
    pw: FloatArray,
    Pc: FloatArray,
    lv: FloatArray,
    cfg: FloatArray,
    icfg: FloatArray,
    stats: FloatArray,
    x: FloatArray,
    out: FloatArray,
    scal: FloatArray,
    t_ms: float,
    fc_mhz: float,
    fm_mhz: float,
    power_w: float,
    busy: float,
    deadline_ms: float,
) -> int:
    """NumPy reference of `model_tick_pairs` (same state layout, vectorised arithmetic)."""
    flags = 0
    stats[k.TICKS] += 1
    with np.errstate(all="ignore"):
        xs = x / vecs[k.SCALE, LEAD:]
    clocks_ok = all(np.isfinite(f) and 0.0 < f <= k.MAX_FREQ_MHZ for f in (fc_mhz, fm_mhz))
    valid = (
        np.isfinite(t_ms) and k.MIN_FRAME_MS <= t_ms <= k.MAX_FRAME_MS and clocks_ok
        and bool(np.all(np.isfinite(xs) & (np.abs(xs) <= k.MAX_COUNTER)))
    )
    if valid:
        if stats[k.HAS_PREV] == 1:
            t_prev, fc_prev, fm_prev = vecs[k.PREV, :LEAD]
            lead = [t_prev * (fc_prev / fc_mhz - 1.0), t_prev * (fm_prev / fm_mhz - 1.0),
                    (fc_mhz - fc_prev) * 1e-3]
            h = np.concatenate((lead, xs - vecs[k.PREV, LEAD:]))
            vecs[k.H] = h
            scal[k.T_FIT] = ordered_sum(np.concatenate(([t_prev], h * vecs[k.A])))
            note_error_ref(scal[k.ERR2:k.N_ERR + 1], t_ms, scal[k.T_FIT])
            d = t_ms - t_prev
            if icfg[k.ALGO] == k.ALGO_RLS:
                rc = rls_update_ref(vecs[k.A], P, h, d, cfg[k.LAM], cfg[k.MAX_TRACE],
                                    vecs[k.A_INIT], 1.0 / cfg[k.MU])
            else:
                rc = dcd_update_ref(vecs[k.A], P, vecs[k.RES], h, d, cfg[k.LAM], cfg[k.MU],
                                    cfg[k.DCD_H], int(icfg[k.MB]), int(icfg[k.NU]),
                                    vecs[k.A_INIT])
            stats[k.UPDATES] += 1
            flags |= k.UPDATED
            if rc:
                stats[k.RESETS] += 1
                flags |= k.WAS_RESET
        vecs[k.PREV, :LEAD] = t_ms, fc_mhz, fm_mhz
        vecs[k.PREV, LEAD:] = xs
        stats[k.HAS_PREV] = 1
        if k.out_of_band_ref(vecs[k.PREV], LEAD):
            flags |= k.RESCALE_DUE
    else:
        stats[k.SKIPPED] += 1
        flags |= k.SKIPPED_SAMPLE

    if np.isfinite(power_w) and 0.0 <= power_w <= k.MAX_POWER_W and np.isfinite(busy) \
            and 0.0 <= busy <= 1.0 and clocks_ok:
        g = interp_ref(fc_mhz, lv[CORE], lv[G])
        pw[k.PHI] = [1.0, busy, busy * g, busy * fm_mhz / lv[MEM].max()]
        rc = rls_update_ref(pw[k.C], Pc, pw[k.PHI], power_w, cfg[k.PLAM], cfg[k.PMAX_TRACE],
                            pw[k.C_INIT], cfg[k.PP0])
        stats[k.P_UPDATES] += 1
        flags |= k.POWER_UPDATED
        if rc:
            stats[k.P_RESETS] += 1
    else:
        stats[k.P_SKIPPED] += 1

    if stats[k.HAS_PREV] == 1:
        t_now, fc_now, fm_now = vecs[k.PREV, :LEAD]
        out[k.OUT_T] = predict_time_pairs_ref(t_now, fc_now, fm_now, vecs[k.A], lv)
        scal[k.SENS] = sensitivity_pairs_ref(t_now, fc_now, fm_now, lv, out[k.OUT_T])
        p, e, p_idle = predict_energy_pairs_ref(pw[k.C], lv, out[k.OUT_T], deadline_ms,
                                                cfg[k.IDLE_W])
        out[k.OUT_P], out[k.OUT_E], scal[k.P_IDLE] = p, e, p_idle
        scal[k.T_NOW], scal[k.F_NOW] = t_now, fc_now
        scal[k.READY] = 1.0 if stats[k.UPDATES] >= icfg[k.WARMUP] else 0.0
        out[k.OUT_SD_NOW], out[k.OUT_SD_TOP] = level_spread_ref(
            t_now, fc_now, fm_now, lv[CORE], lv[MEM], True, out[k.OUT_T], P,
            icfg[k.ALGO] == k.ALGO_DCD, k.residual_variance_ref(scal, cfg[k.SIGMA0], t_now))
    else:
        out[:] = math.nan
        scal[k.SENS] = math.nan
        scal[k.READY] = 0.0
    return flags
