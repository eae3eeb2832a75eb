"""The one compiled call per tick: validate the sample, update the frame-time model (RLS or
DCD-RLS) and the power model, then predict time, power and energy at every level and the
sensitivity at the running level.

The state lives in one preallocated float64 buffer (`new_state`, owned by `govd.model.online`)
that `unpack` cuts into views: rows of coefficient vectors, the covariance, the power model, the
level table, the settings, the counters, the outputs. Each Python→numba call costs ~0.2 µs
plus ~45 ns per array argument (measured: 0.69 µs to dispatch 11 arrays and 6 floats), so
everything happens in one call that takes the buffer, the counters and six numbers. Integer
settings and counts sit in the buffer as floats (exact below 2^53). `model_tick_ref` is the
NumPy reference the kernel (`tick_arrays`, the same tick on the views) is tested against.

Frame-time features (seed eq. 10), with frequencies in GHz so that a_init = 1 means 1 ms/GHz:
    h = [t_prev·(f_prev/f − 1), (f − f_prev)/1000, x_1/s_1 − x_1,prev/s_1, ...],  d = t − t_prev
"""

from __future__ import annotations

import math

import numpy as np

from govd.kernels.loader import njit
from govd.model.arrays import FloatArray
from govd.model.dcd import dcd_update, dcd_update_ref
from govd.model.predict import (
    interp,
    interp_ref,
    power_features,
    predict_energy,
    predict_energy_ref,
    predict_time,
    predict_time_ref,
    sensitivity,
    sensitivity_ref,
)
from govd.model.rls import ordered_sum, rls_update, rls_update_ref
from govd.model.spread import (
    blend,
    blended,
    level_spread,
    level_spread_ref,
    note_error,
    note_error_ref,
)

# vecs rows (shape [7, M])
A, A_INIT, RES, PREV, WORK, SCALE, H = range(7)
N_VEC_ROWS = 7
# pw rows (shape [4, 4]): power coefficients, their prior, regressor, scratch
C, C_INIT, PHI, PWORK = range(4)
# lv rows (shape [2, L]): levels (MHz), g(f) = (f/f_max)(V/V_max)²
LEVELS, G = range(2)
# out rows (shape [N_OUT, L]): time, power, energy, and the spread (`govd.model.spread`)
OUT_T, OUT_P, OUT_E, OUT_SD_NOW, OUT_SD_TOP = range(5)
N_OUT = 5
# cfg (float64)
LAM, MU, MAX_TRACE, PLAM, PP0, PMAX_TRACE, IDLE_W, DCD_H, SIGMA0 = range(9)
N_CFG = 9
# icfg (int64)
ALGO, MB, NU, WARMUP = range(4)
N_ICFG = 4
ALGO_RLS, ALGO_DCD = 0, 1
# stats (int64)
TICKS, UPDATES, SKIPPED, RESETS, HAS_PREV, P_UPDATES, P_SKIPPED, P_RESETS = range(8)
N_STATS = 8
# scal (float64); ERR2, D2, N_ERR: the a-priori errors' running means (`spread.note_error`)
SENS, P_IDLE, T_NOW, F_NOW, T_FIT, READY, ERR2, D2, N_ERR = range(9)
N_SCAL = 9

# state buffer: a header, then the views in this order
HDR_M, HDR_LEVELS, HDR_LV_ROWS = range(3)
N_HEADER = 3
N_PW = 4


def state_size(m: int, n_levels: int, lv_rows: int) -> int:
    """Length of the state buffer for ``m`` coefficients over ``n_levels`` levels."""
    return (N_HEADER + N_VEC_ROWS * m + m * m + 2 * N_PW * N_PW + lv_rows * n_levels + N_CFG
            + N_ICFG + N_STATS + N_OUT * n_levels + N_SCAL)


def new_state(m: int, n_levels: int, lv_rows: int) -> FloatArray:
    """A zeroed state buffer with its header written."""
    state = np.zeros(state_size(m, n_levels, lv_rows))
    state[HDR_M], state[HDR_LEVELS], state[HDR_LV_ROWS] = m, n_levels, lv_rows
    return state


@njit(cache=True, inline="always")
def _matrix(state: FloatArray, offset: int, rows: int, cols: int) -> FloatArray:
    """A rows × cols C-ordered view of ``state`` from ``offset``. Not `reshape`: compiled, a
    reshaped slice costs ~16 ns. Inlined, like `unpack` and `tick_arrays`: a call that
    returns ten views and passes them on costs ~0.1-0.3 µs in reference counting and copies,
    inlined the compiler drops it (measured in a compiled loop: +0.2 µs, then +0.01)."""
    item = state.itemsize
    return np.lib.stride_tricks.as_strided(state[offset:], (rows, cols), (cols * item, item))


@njit(cache=True, inline="always")
def unpack(state: FloatArray) -> tuple[FloatArray, FloatArray, FloatArray, FloatArray,
                                       FloatArray, FloatArray, FloatArray, FloatArray,
                                       FloatArray, FloatArray]:
    """Views (vecs, P, pw, Pc, lv, cfg, icfg, stats, out, scal) into a `new_state` buffer.
    Compiled for the kernels; ``unpack.py_func`` gives NumPy views for Python."""
    m = int(state[HDR_M])
    n = int(state[HDR_LEVELS])
    rows = int(state[HDR_LV_ROWS])
    o = N_HEADER
    vecs = _matrix(state, o, N_VEC_ROWS, m)
    o += N_VEC_ROWS * m
    P = _matrix(state, o, m, m)
    o += m * m
    pw = _matrix(state, o, N_PW, N_PW)
    o += N_PW * N_PW
    Pc = _matrix(state, o, N_PW, N_PW)
    o += N_PW * N_PW
    lv = _matrix(state, o, rows, n)
    o += rows * n
    cfg = state[o:o + N_CFG]
    o += N_CFG
    icfg = state[o:o + N_ICFG]
    o += N_ICFG
    stats = state[o:o + N_STATS]
    o += N_STATS
    out = _matrix(state, o, N_OUT, n)
    o += N_OUT * n
    scal = state[o:o + N_SCAL]
    return vecs, P, pw, Pc, lv, cfg, icfg, stats, out, scal


# returned flags
UPDATED, SKIPPED_SAMPLE, WAS_RESET, POWER_UPDATED = 1, 2, 4, 8
STRESS_RESET = 16
"""Set by `govd.governor.Governor` (not the kernel): the model was reset for stress."""
RESCALE_DUE = 32
"""A scaled counter left [COUNTER_BAND_LO, COUNTER_BAND_HI]: the caller changes its scale
(`govd.model.rescale`, done by `OnlineModel.update`, rare and outside the kernel)."""
COUNTER_BAND_LO = 2.0**-4
COUNTER_BAND_HI = 2.0**4

# A sample beyond these is not a measurement, whatever the source says.
MIN_FRAME_MS = 1e-6
MAX_FRAME_MS = 1e6
MAX_FREQ_MHZ = 1e6
MAX_COUNTER = 1e12
MAX_POWER_W = 1e5


@njit(cache=True)
def _valid_sample(t_ms: float, f_mhz: float, x: FloatArray, scale: FloatArray) -> bool:
    if not (np.isfinite(t_ms) and MIN_FRAME_MS <= t_ms <= MAX_FRAME_MS):
        return False
    if not (np.isfinite(f_mhz) and 0.0 < f_mhz <= MAX_FREQ_MHZ):
        return False
    for i in range(x.shape[0]):
        v = x[i] / scale[2 + i]
        if not (np.isfinite(v) and abs(v) <= MAX_COUNTER):
            return False
    return True


@njit(cache=True)
def out_of_band(prev: FloatArray, lead: int) -> bool:
    """True if a scaled counter (``prev[lead:]``) is non-zero and outside the band."""
    for i in range(lead, prev.shape[0]):
        v = abs(prev[i])
        if v > COUNTER_BAND_HI or 0.0 < v < COUNTER_BAND_LO:
            return True
    return False


def out_of_band_ref(prev: FloatArray, lead: int) -> bool:
    """NumPy reference of `out_of_band`."""
    v = np.abs(prev[lead:])
    return bool(np.any((v > COUNTER_BAND_HI) | ((v > 0.0) & (v < COUNTER_BAND_LO))))


@njit(cache=True)
def residual_variance(scal: FloatArray, noise_prior: float, t_now: float) -> float:
    """σ² of eq. 10's Δt residual (ms²): its running mean blended with the prior's, a Δt
    between two units of relative noise ``noise_prior`` at the time ``t_now`` (ms)."""
    prior = 2.0 * (noise_prior * t_now) ** 2
    return blended(scal[D2], scal[N_ERR], prior)


def residual_variance_ref(scal: FloatArray, noise_prior: float, t_now: float) -> float:
    """NumPy reference of `residual_variance`."""
    prior = 2.0 * (noise_prior * t_now) ** 2
    return blend(float(scal[D2]), float(scal[N_ERR]), prior)


@njit(cache=True)
def model_tick(
    state: FloatArray,
    x: FloatArray,
    t_ms: float,
    f_mhz: float,
    power_w: float,
    busy: float,
    mem: float,
    deadline_ms: float,
) -> int:
    """Update the model in ``state`` (`new_state`) with one tick's sample and predict at every
    level; returns flags, never raises. ``x``: the counters; see `tick_arrays` for the rest."""
    vecs, P, pw, Pc, lv, cfg, icfg, stats, out, scal = unpack(state)
    return tick_arrays(vecs, P, pw, Pc, lv, cfg, icfg, stats, x, out, scal, t_ms, f_mhz,
                       power_w, busy, mem, deadline_ms)


@njit(cache=True, inline="always")
def tick_arrays(
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
    f_mhz: float,
    power_w: float,
    busy: float,
    mem: float,
    deadline_ms: float,
) -> int:
    """`model_tick` on the state's views: frame time (ms) and frequency (MHz) that ran, the
    average power (W), utilisation and memory activity (0..1), the deadline (ms, NaN: none)."""
    flags = 0
    stats[TICKS] += 1
    m = vecs.shape[1]
    if _valid_sample(t_ms, f_mhz, x, vecs[SCALE]):
        if stats[HAS_PREV] == 1:
            t_prev = vecs[PREV, 0]
            f_prev = vecs[PREV, 1]
            h = vecs[H]
            h[0] = t_prev * (f_prev / f_mhz - 1.0)
            h[1] = (f_mhz - f_prev) * 1e-3
            for i in range(2, m):
                h[i] = x[i - 2] / vecs[SCALE, i] - vecs[PREV, i]
            fit = t_prev
            for i in range(m):
                fit += h[i] * vecs[A, i]
            scal[T_FIT] = fit
            note_error(scal[ERR2:N_ERR + 1], t_ms, fit)
            d = t_ms - t_prev
            if icfg[ALGO] == ALGO_RLS:
                rc = rls_update(
                    vecs[A], P, h, d, cfg[LAM], cfg[MAX_TRACE], vecs[A_INIT], 1.0 / cfg[MU],
                    vecs[WORK],
                )
            else:
                rc = dcd_update(
                    vecs[A], P, vecs[RES], h, d, cfg[LAM], cfg[MU], cfg[DCD_H], int(icfg[MB]),
                    int(icfg[NU]), vecs[A_INIT],
                )
            stats[UPDATES] += 1
            flags |= UPDATED
            if rc != 0:
                stats[RESETS] += 1
                flags |= WAS_RESET
        vecs[PREV, 0] = t_ms
        vecs[PREV, 1] = f_mhz
        for i in range(2, m):
            vecs[PREV, i] = x[i - 2] / vecs[SCALE, i]
        stats[HAS_PREV] = 1
        if out_of_band(vecs[PREV], 2):
            flags |= RESCALE_DUE
    else:
        stats[SKIPPED] += 1
        flags |= SKIPPED_SAMPLE

    mem_now = mem if (np.isfinite(mem) and 0.0 <= mem <= 1.0) else 0.0
    u = busy
    if (
        np.isfinite(power_w) and 0.0 <= power_w <= MAX_POWER_W
        and np.isfinite(u) and 0.0 <= u <= 1.0
        and np.isfinite(f_mhz) and 0.0 < f_mhz <= MAX_FREQ_MHZ
    ):
        g = interp(f_mhz, lv[LEVELS], lv[G])
        power_features(u, g, mem_now, pw[PHI])
        rc = rls_update(
            pw[C], Pc, pw[PHI], power_w, cfg[PLAM], cfg[PMAX_TRACE], pw[C_INIT], cfg[PP0],
            pw[PWORK],
        )
        stats[P_UPDATES] += 1
        flags |= POWER_UPDATED
        if rc != 0:
            stats[P_RESETS] += 1
    else:
        stats[P_SKIPPED] += 1

    if stats[HAS_PREV] == 1:
        t_now = vecs[PREV, 0]
        f_now = vecs[PREV, 1]
        predict_time(t_now, f_now, vecs[A, 0], vecs[A, 1], lv[LEVELS], out[OUT_T])
        scal[SENS] = sensitivity(t_now, f_now, lv[LEVELS], out[OUT_T])
        scal[P_IDLE] = predict_energy(
            pw[C], lv[G], mem_now, out[OUT_T], deadline_ms, cfg[IDLE_W], out[OUT_P], out[OUT_E]
        )
        scal[T_NOW] = t_now
        scal[F_NOW] = f_now
        scal[READY] = 1.0 if stats[UPDATES] >= icfg[WARMUP] else 0.0
        level_spread(t_now, f_now, 1.0, lv[LEVELS], lv[LEVELS], False, out[OUT_T], P,
                     icfg[ALGO] == ALGO_DCD, residual_variance(scal, cfg[SIGMA0], t_now),
                     out[OUT_SD_NOW], out[OUT_SD_TOP])
    else:
        for k in range(out.shape[1]):
            for row in range(N_OUT):
                out[row, k] = math.nan
        scal[SENS] = math.nan
        scal[READY] = 0.0
    return flags


def model_tick_ref(
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
    f_mhz: float,
    power_w: float,
    busy: float,
    mem: float,
    deadline_ms: float,
) -> int:
    """NumPy reference of `model_tick` (same state layout, vectorised arithmetic)."""
    flags = 0
    stats[TICKS] += 1
    scale = vecs[SCALE, 2:]
    with np.errstate(all="ignore"):
        xs = x / scale
    valid = (
        np.isfinite(t_ms) and MIN_FRAME_MS <= t_ms <= MAX_FRAME_MS
        and np.isfinite(f_mhz) and 0.0 < f_mhz <= MAX_FREQ_MHZ
        and bool(np.all(np.isfinite(xs) & (np.abs(xs) <= MAX_COUNTER)))
    )
    if valid:
        if stats[HAS_PREV] == 1:
            t_prev, f_prev = vecs[PREV, 0], vecs[PREV, 1]
            h = np.concatenate(
                ([t_prev * (f_prev / f_mhz - 1.0), (f_mhz - f_prev) * 1e-3], xs - vecs[PREV, 2:])
            )
            vecs[H] = h
            scal[T_FIT] = ordered_sum(np.concatenate(([t_prev], h * vecs[A])))
            note_error_ref(scal[ERR2:N_ERR + 1], t_ms, scal[T_FIT])
            d = t_ms - t_prev
            if icfg[ALGO] == ALGO_RLS:
                rc = rls_update_ref(
                    vecs[A], P, h, d, cfg[LAM], cfg[MAX_TRACE], vecs[A_INIT], 1.0 / cfg[MU]
                )
            else:
                rc = dcd_update_ref(
                    vecs[A], P, vecs[RES], h, d, cfg[LAM], cfg[MU], cfg[DCD_H], int(icfg[MB]),
                    int(icfg[NU]), vecs[A_INIT],
                )
            stats[UPDATES] += 1
            flags |= UPDATED
            if rc:
                stats[RESETS] += 1
                flags |= WAS_RESET
        vecs[PREV, 0], vecs[PREV, 1] = t_ms, f_mhz
        vecs[PREV, 2:] = xs
        stats[HAS_PREV] = 1
        if out_of_band_ref(vecs[PREV], 2):
            flags |= RESCALE_DUE
    else:
        stats[SKIPPED] += 1
        flags |= SKIPPED_SAMPLE

    mem_now = mem if (np.isfinite(mem) and 0.0 <= mem <= 1.0) else 0.0
    if (
        np.isfinite(power_w) and 0.0 <= power_w <= MAX_POWER_W
        and np.isfinite(busy) and 0.0 <= busy <= 1.0
        and np.isfinite(f_mhz) and 0.0 < f_mhz <= MAX_FREQ_MHZ
    ):
        g = interp_ref(f_mhz, lv[LEVELS], lv[G])
        pw[PHI] = [1.0, busy, busy * g, busy * mem_now]
        rc = rls_update_ref(pw[C], Pc, pw[PHI], power_w, cfg[PLAM], cfg[PMAX_TRACE], pw[C_INIT],
                            cfg[PP0])
        stats[P_UPDATES] += 1
        flags |= POWER_UPDATED
        if rc:
            stats[P_RESETS] += 1
    else:
        stats[P_SKIPPED] += 1

    if stats[HAS_PREV] == 1:
        t_now, f_now = vecs[PREV, 0], vecs[PREV, 1]
        out[OUT_T] = predict_time_ref(t_now, f_now, vecs[A, 0], vecs[A, 1], lv[LEVELS])
        scal[SENS] = sensitivity_ref(t_now, f_now, lv[LEVELS], out[OUT_T])
        p, e, p_idle = predict_energy_ref(pw[C], lv[G], mem_now, out[OUT_T], deadline_ms,
                                          cfg[IDLE_W])
        out[OUT_P], out[OUT_E], scal[P_IDLE] = p, e, p_idle
        scal[T_NOW], scal[F_NOW] = t_now, f_now
        scal[READY] = 1.0 if stats[UPDATES] >= icfg[WARMUP] else 0.0
        out[OUT_SD_NOW], out[OUT_SD_TOP] = level_spread_ref(
            t_now, f_now, 1.0, lv[LEVELS], lv[LEVELS], False, out[OUT_T], P,
            icfg[ALGO] == ALGO_DCD, residual_variance_ref(scal, cfg[SIGMA0], t_now))
    else:
        out[:] = math.nan
        scal[SENS] = math.nan
        scal[READY] = 0.0
    return flags
