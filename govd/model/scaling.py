"""The scaling model (the default `model.form`): how *this* work's time and power scale with
the clocks, learned online in relative form, for one clock domain or (core, memory) pairs.

Why not seed 000's eq. 10 as the default: fitted in absolute milliseconds, long units dominate
it and it learns one scaling for all work; its two frequency terms are nearly collinear when the
frame time is steady, and with μ = 1e-14 the unexcited direction keeps a ~1e14 covariance, so
one noisy sample can send the coefficients anywhere (issue #11 measured a0 = −131). This form
keeps RLS (one compiled call per tick) but learns what a decision needs, the *ratio* of times
between levels:

    log t(f) − log t(f') = Σ_b c_b(x) · (β_b(f) − β_b(f')),   c_b(x) = w_b · [1, x_1 .. x_N]

with the basis β(f) = [u, u², u_m], u = log(fc_top / fc), u_m = log(fm_top / fm) (two clock
domains only). c_0 is the scalable share in log form (0: the time does not move with the core
clock, 1: it scales as 1/f), c_1 lets time grow faster than 1/f at low clocks (measured on
V100 kernels below ~900 MHz), c_m is the memory clock's share; each depends linearly on the
counters, so memory-bound and compute-bound work get their own curves and a kernel switch is a
new operating point, not a surprise.

- Learning: a pair of consecutive ticks at different clocks teaches the regressor
  h = (β(f_k) − β(f_{k−1})) ⊗ [1, x̄] with target log(t_k / t_{k−1}); errors are relative, so
  every unit weighs the same. A pair whose counters moved by more than ``same_work`` (relative)
  or whose time ratio lies outside what any work could do at those clocks (between no scaling
  and a log-slope of 2, ± ``gate``) is a change of work, not a measurement of scaling: it is
  counted (`GATED`) and not learned from. So is a pair far off the prediction (`_expected`),
  unless the curve of the work's own slot expects it (`_slot_expects`: the global curve is
  shared by all work, and work that comes back after other work taught it another curve
  would read as new work at every move) or two surprises came before it.
- Regularisation: RLS from a real prior (P0 = p0·I, p0 = (prior_sd / noise_prior)², so the
  coefficients' prior standard deviation is ``prior_sd`` at the prior noise level): an unexcited
  direction keeps the prior's variance, never 1e14, and cannot explode. Covariance wind-up under
  forgetting is bounded by a trace clamp at the prior's trace.
- Physical sanity: the coefficients in force are kept so that the log-slope of time against
  u stays in [0, 2] over the table (time never falls as the clock falls, nor grows faster than
  1/f²), and c_m in [0, 1.5]: a work's own curve is moved there the least in the metric of
  its covariance (`project_coefficients`, keeping what its pairs measured), the global one
  clamped.
- Uncertainty: with λ = 1 the coefficients' covariance is σ²·P, σ the noise of a pair's log
  ratio, estimated online (`ratio_error`, blended with ``noise_prior`` until ~20 pairs are
  seen). Each level gets the standard deviation of its predicted log ratio to the running level
  (`SD_NOW`) and to the fastest level (`SD_TOP`) that the model's own uncertainty makes:
  σ·sqrt(Δβᵀ Q Δβ), Q the covariance folded with the current counters, and the form's
  extrapolation below the lowest clock this work was seen at. The noise of a measured ratio
  (σ itself: two units' noise) is apart (`ScalingModel.predictions`: ``time_noise`` = σ/√2).
  The `energy` policy turns these into per-level safety margins.

Power: busy power at level l is the current busy power times a per-level shape,
P_busy(l) = P_busy(now) · exp(ρ(l) − ρ(now)). The shape starts from a monotone prior,
ρ0 = log(s + (1 − s − s_m)·g(fc) + s_m·fm/fm_top) with g = (f/f_max)(V/V_max)² (the configured
voltage table, else V affine in f) and static share s; consecutive ticks at two levels (same
work) measure ρ(b) − ρ(a) and a diagonal Kalman filter learns the offset from the prior at each
visited level. Levels not (yet) visited take the offsets of the visited ones by inverse-distance
weighting (in log clock), and the curve is kept non-decreasing in each clock. Idle power and the
busy power at the top level come from a 2-coefficient RLS on P_avg = P_idle·(1 − u) +
P_top·u·exp(ρ(now) − ρ(top)), both clamped at ≥ 0: there is no negative static power to learn.
Energy per unit: E = P_busy·t (+ P_idle·(T − t) under a deadline T), in mJ.

`scaling_tick` is the compiled kernel; `scaling_tick_ref` the NumPy reference the tests hold it
to (vectorised where the kernel loops).
"""

from __future__ import annotations

import math

import numpy as np

from govd.kernels.loader import njit
from govd.model.arrays import FloatArray, IntArray
from govd.model.dcd import dcd_update
from govd.model.pairs import sensitivity_pairs
from govd.model.rls import rls_update, rls_update_ref

# sections of the state buffer, in order; `layout` gives their offsets
(BETA, BETA0, PCOV, WORK, H, Z, XSCALE, XPREV, BPREV, BNOW, LV, BASIS, LRHO0, DELTA, SCOV, LREFF,
 PC, PC0, PP, PPHI, PWORK, OUT, SC, CF, RES, CHOL, YS, QS, SLOT_SIG, SLOT_C, SLOT_P, SLOT_META,
 CG, SWORK) = range(34)
N_SECTIONS = 34
# header stored after the offsets in the layout array
HDR_M, HDR_NB, HDR_NX, HDR_L = range(N_SECTIONS + 1, N_SECTIONS + 5)
# lv rows (the layout of `govd.model.pairs`, so its sensitivity serves both forms)
CORE, G, MEM, GM = range(4)
# out rows
OUT_T, OUT_P, OUT_E, OUT_SD_NOW, OUT_SD_TOP = range(5)
N_OUT = 5
# scalars (sc)
(T_PREV, LVL_PREV, HAS_PREV, ERR2, N_ERR, PB_PREV, T_FIT, SENS, P_IDLE, READY, TICKS, UPDATES,
 SKIPPED, RESETS, P_UPDATES, P_SKIPPED, GATED_N, T_NOW, LVL_NOW, PB_NOW, SHAPE_DIRTY, FC_NOW,
 FM_NOW, SHAPE_UPDATES, CUR_SLOT, SLOTS_MADE, REJECTS) = range(27)
N_SC = 27
# settings (cf)
(LAM, P0, MAX_TRACE, SIGMA0, GATE, SAME_WORK, PLAM, PP0, SHAPE_VAR0, SHAPE_Q, IDLE_W, WARMUP,
 U_MAX, SHAPE_NOISE, ALGO, DCD_H, DCD_MB, DCD_NU, N_SLOTS, SLOT_P0, SLOT_TOL) = range(21)
N_CF = 21
# slot meta columns: last tick used, pairs learned, lowest core clock seen (as u)
AGE, PAIRS, U_SEEN = range(3)
N_META = 3
ALGO_RLS, ALGO_DCD = 0.0, 1.0

# flags (compatible with `govd.model.tick`)
UPDATED, SKIPPED_SAMPLE, WAS_RESET, POWER_UPDATED = 1, 2, 4, 8
GATED = 64
"""A pair of ticks at different clocks was taken as a change of work and not learned from."""
WORK_CHANGED = 128
"""The model judged that this tick ran other work than the tick before: its counters or its
power moved beyond ``same_work`` (`_same_work`, `_same_power`), its pair was gated, or it was
remembered as another piece of work (another slot). `Predictions.work_ticks` counts from it."""

MIN_FRAME_MS = 1e-6
MAX_FRAME_MS = 1e6
MAX_FREQ_MHZ = 1e6
MAX_COUNTER = 1e12
MAX_POWER_W = 1e5
MAX_DEADLINE_MS = 1e6
ERR_WEIGHT = 0.05
"""Weight of the newest squared ratio error in `ratio_error` (about 20 pairs)."""
ERR_PRIOR_PAIRS = 5.0
"""Pairs' worth of weight the prior noise level keeps in `ratio_error`."""
POWER_SLACK = 0.05
"""Slack (log units) on the physical bound for the same work's busy power between two clocks:
it rises with the clock, and at most as f³ (f·V², V at most proportional to f)."""
COUNTER_FLOOR = 0.05
"""Least magnitude, in scaled units (a counter's scale is of the order of its values), that a
counter's change is measured against when its own value is below it: a counter near zero for
one piece of work moves by its noise, which is no change of work however large relative to its
value."""
INNOVATION_Z = 5.0
"""A pair whose log time ratio is off the model's prediction by more than this many predictive
standard deviations is another piece of work (the innovation gate of a Kalman filter), unless
the two pairs before it were turned away too (then the model, not the work, is wrong: a gate
that could refuse forever would keep a confidently wrong model wrong); the power shape's
innovation is clipped at the same bound."""
ROOFLINE_SLOPE = 1.0
"""Least log-slope of time against log core clock more than one level below the lowest clock a
piece of work has run at: as the core clock falls every kernel becomes bound by it (the
roofline), so its time grows at least as 1/f there, whatever the slope where it was measured
(a memory-bound V100 kernel flat down to 945 MHz runs 1.2x slower at 802). The first level
below keeps the curve's own extrapolation: it is the one a probe may try."""
FORM_SLOPE = 0.5
"""Standard deviation of log time added per unit of log clock a prediction reaches below the
lowest clock the work has run at: the form (quadratic in log f) may miss a knee there, as
memory-bound V100 kernels show between 945 and 802 MHz."""
MAX_SLOPE = 2.0
"""Largest log-slope of time against log clock any work may show (t ∝ f^-2)."""
BUSY_MIN = 0.05
"""Below this utilisation a tick says too little about busy power to learn its shape from."""


def layout(m: int, nb: int, nx: int, n_levels: int, slots: int = 0) -> IntArray:
    """Offsets of every section for ``m`` = nb·(1 + nx) coefficients over ``n_levels`` levels
    with ``slots`` remembered pieces of work, then the header (m, nb, nx, L)."""
    sizes = [m, m, m * m, m, m, 1 + nx, nx, nx, nb, nb, 4 * n_levels, nb * n_levels, n_levels,
             n_levels, n_levels * n_levels, n_levels, 2, 2, 4, 2, 2, N_OUT * n_levels, N_SC, N_CF,
             m, m * m, m * nb, nb * nb, slots * (1 + nx), slots * nb, slots * nb * nb,
             slots * N_META, nb, n_levels]
    off = np.zeros(N_SECTIONS + 5, dtype=np.int64)
    off[1:N_SECTIONS + 1] = np.cumsum(sizes)
    off[HDR_M], off[HDR_NB], off[HDR_NX], off[HDR_L] = m, nb, nx, n_levels
    return off


@njit(cache=True, inline="always")
def _sec(state: FloatArray, off: IntArray, i: int) -> FloatArray:
    return state[off[i]:off[i + 1]]


@njit(cache=True, inline="always")
def _mat(state: FloatArray, off: IntArray, i: int, cols: int) -> FloatArray:
    v = state[off[i]:off[i + 1]]
    item = state.itemsize
    return np.lib.stride_tricks.as_strided(v, (v.shape[0] // cols, cols), (cols * item, item))


@njit(cache=True)
def basis_at(fc: float, fm: float, lv: FloatArray, u_max: float, nb: int, out: FloatArray
             ) -> None:
    """β(fc, fm) = [u, u², u_m] (the first ``nb``), u = log(fc_top/fc) clamped to [0, u_max]."""
    n = lv.shape[1]
    u = math.log(lv[CORE, n - 1] / fc)
    u = min(max(u, 0.0), u_max)
    out[0] = u
    out[1] = u * u
    if nb > 2:
        fm_top = lv[MEM, 0]
        for k in range(n):
            fm_top = max(fm_top, lv[MEM, k])
        out[2] = max(math.log(fm_top / fm), 0.0)


@njit(cache=True)
def nearest_level(fc: float, fm: float, lv: FloatArray, two: bool) -> int:
    """Index of the level nearest to (fc, fm) in log clock (fc alone with one domain)."""
    best = 0
    best_d = math.inf
    for k in range(lv.shape[1]):
        d = math.log(fc / lv[CORE, k]) ** 2
        if two:
            d += math.log(fm / lv[MEM, k]) ** 2
        if d < best_d:
            best_d = d
            best = k
    return best


@njit(cache=True)
def coefficients_now(beta: FloatArray, z: FloatArray, nb: int, u_max: float,
                     out: FloatArray) -> None:
    """The coefficients in force for counters ``z`` = [1, x...], clamped to physical sense."""
    nz = z.shape[0]
    for b in range(nb):
        s = 0.0
        for j in range(nz):
            s += beta[b * nz + j] * z[j]
        out[b] = s
    clamp_coefficients(out, nb, u_max)


@njit(cache=True)
def clamp_coefficients(out: FloatArray, nb: int, u_max: float) -> None:
    """Clamp [c0, c1(, cm)] in place: the log-slope c0 + 2·c1·u in [0, MAX_SLOPE] over the
    table, cm in [0, 1.5]."""
    c0 = min(max(out[0], 0.0), MAX_SLOPE)
    # slope c0 + 2·c1·u must stay in [0, MAX_SLOPE] for u in [0, u_max]
    out[1] = min(max(out[1], -c0 / (2.0 * u_max)), (MAX_SLOPE - c0) / (2.0 * u_max))
    out[0] = c0
    if nb > 2:
        out[2] = min(max(out[2], 0.0), 1.5)


@njit(cache=True)
def _physical(c0: float, c1: float, k: float) -> bool:
    """Whether the log-slope c0 + c1·2u lies in [0, MAX_SLOPE] at u = 0 and at 2u = ``k``
    (it is linear in u: then everywhere between)."""
    tol = 1e-12
    return (-tol <= c0 <= MAX_SLOPE + tol) and (-tol <= c0 + k * c1 <= MAX_SLOPE + tol)


@njit(cache=True)
def project_coefficients(c: FloatArray, q: FloatArray, nb: int, u_max: float) -> None:
    """Make the fitted [c0, c1(, cm)] physical (`clamp_coefficients`' bounds) by moving them
    the least in the metric of their covariance ``q`` (nb × nb, flattened): along what the
    pairs left unknown, not across what they measured. Clamping c1 alone undid the fit: a
    flat work measured only at the top and one clock far below learned a slope and a
    curvature that cancel there, and the clamped curve called that clock 10 % slower than
    the top it had measured it equal to. The nearest point of the feasible parallelogram
    lies on one of its four edges or at one of its corners."""
    if nb > 2:
        c[2] = min(max(c[2], 0.0), 1.5)
    a0 = c[0]
    a1 = c[1]
    k = 2.0 * u_max
    if _physical(a0, a1, k):
        return
    q00 = q[0]
    q01 = q[1]
    q11 = q[nb + 1]
    ridge = 1e-9 * (abs(q00) + abs(q11)) + 1e-300
    q00 += ridge
    q11 += ridge
    best = math.inf
    b0 = 0.0
    b1 = 0.0
    for i in range(4):  # edges: c0 = 0, c0 = S, c0 + k·c1 = 0, c0 + k·c1 = S
        n1 = 0.0 if i < 2 else k
        rhs = 0.0 if i % 2 == 0 else MAX_SLOPE
        r = a0 + n1 * a1 - rhs
        g0 = q00 + q01 * n1
        g1 = q01 + q11 * n1
        ss = g0 + n1 * g1
        if not ss > 0.0:
            continue
        p0 = a0 - g0 * r / ss
        p1 = a1 - g1 * r / ss
        if _physical(p0, p1, k) and r * r / ss < best:
            best = r * r / ss
            b0 = p0
            b1 = p1
    det = q00 * q11 - q01 * q01
    if det > 0.0:  # or a corner
        for i in range(4):
            p0 = 0.0 if i < 2 else MAX_SLOPE
            p1 = (0.0 if i % 2 == 0 else MAX_SLOPE) / k - p0 / k
            d0 = p0 - a0
            d1 = p1 - a1
            d = (q11 * d0 * d0 - 2.0 * q01 * d0 * d1 + q00 * d1 * d1) / det
            if d < best:
                best = d
                b0 = p0
                b1 = p1
    c[0] = b0
    c[1] = b1
    clamp_coefficients(c, nb, u_max)  # rounding


@njit(cache=True)
def log_ratio_at(u: float, c0: float, c1: float, u_edge: float) -> float:
    """Log time at u = log(f_top / f) relative to the top level: the curve c0·u + c1·u² up to
    ``u_edge``, continued beyond with its slope there or ROOFLINE_SLOPE, whichever is
    steeper."""
    if u <= u_edge:
        return c0 * u + c1 * u * u
    edge = c0 * u_edge + c1 * u_edge * u_edge
    slope = max(c0 + 2.0 * c1 * u_edge, ROOFLINE_SLOPE)
    return edge + slope * (u - u_edge)


@njit(cache=True)
def next_below(basis: FloatArray, u_seen: float) -> float:
    """The u of the first core level below ``u_seen`` (larger u), or ``u_seen`` if none."""
    best = math.inf
    for k in range(basis.shape[0]):
        if basis[k, 0] > u_seen + 1e-12 and basis[k, 0] < best:
            best = basis[k, 0]
    return best if np.isfinite(best) else u_seen


@njit(cache=True)
def fold_covariance(cov: FloatArray, z: FloatArray, nb: int, q: FloatArray) -> None:
    """q[b·nb + b'] = zᵀ cov[b-block, b'-block] z: the covariance of the coefficients in force
    (c_b = w_b · z) from that of w (RLS's P)."""
    nz = z.shape[0]
    for b in range(nb):
        for b2 in range(nb):
            acc = 0.0
            for j in range(nz):
                for j2 in range(nz):
                    acc += z[j] * cov[b * nz + j, b2 * nz + j2] * z[j2]
            q[b * nb + b2] = acc


@njit(cache=True)
def fold_information(R: FloatArray, z: FloatArray, nb: int, chol: FloatArray, ys: FloatArray,
                     q: FloatArray) -> None:
    """As `fold_covariance` from DCD-RLS's information matrix R (covariance R⁻¹): Zᵀ R⁻¹ Z
    through a Cholesky factor, written out (numba's np.linalg would load LAPACK through scipy).
    A factorisation that fails (R not positive definite) leaves q = 0: no confidence is
    claimed beyond the noise."""
    m = R.shape[0]
    nz = z.shape[0]
    for i in range(m):
        for j in range(i + 1):
            acc = R[i, j]
            for k in range(j):
                acc -= chol[i, k] * chol[j, k]
            if i == j:
                if not acc > 0.0:
                    for b in range(nb * nb):
                        q[b] = 0.0
                    return
                chol[i, i] = math.sqrt(acc)
            else:
                chol[i, j] = acc / chol[j, j]
    for b in range(nb):  # forward substitution: chol · Y[:, b] = Z[:, b]
        for i in range(m):
            zi = z[i - b * nz] if b * nz <= i < (b + 1) * nz else 0.0
            acc = zi
            for k in range(i):
                acc -= chol[i, k] * ys[k, b]
            ys[i, b] = acc / chol[i, i]
    for b in range(nb):
        for b2 in range(nb):
            acc = 0.0
            for i in range(m):
                acc += ys[i, b] * ys[i, b2]
            q[b * nb + b2] = acc


@njit(cache=True)
def find_slot(sig: FloatArray, meta: FloatArray, s0: float, z: FloatArray, tol_t: float,
              tol_x: float) -> int:
    """The remembered piece of work whose signature (log time at the top level, counters)
    matches (``s0``, ``z[1:]``) most closely within the tolerances, -1 when none does."""
    best = -1
    best_d = math.inf
    nx = z.shape[0] - 1
    for j in range(sig.shape[0]):
        if meta[j, AGE] <= 0.0:
            continue
        dt = (s0 - sig[j, 0]) / tol_t
        d = dt * dt
        if d > 1.0:
            continue
        ok = True
        for i in range(nx):
            ref = max(abs(z[1 + i]), abs(sig[j, 1 + i]), COUNTER_FLOOR)
            dx = (z[1 + i] - sig[j, 1 + i]) / (tol_x * ref)
            if dx * dx > 1.0:
                ok = False
                break
            d += dx * dx
        if ok and d < best_d:
            best_d = d
            best = j
    return best


@njit(cache=True)
def oldest_slot(meta: FloatArray) -> int:
    """The slot to reuse: an empty one, else the one unused the longest."""
    best = 0
    for j in range(meta.shape[0]):
        if meta[j, AGE] < meta[best, AGE]:
            best = j
    return best


@njit(cache=True)
def _same_work(x: FloatArray, xprev: FloatArray, tol: float) -> bool:
    for i in range(x.shape[0]):
        a = abs(x[i])
        b = abs(xprev[i])
        ref = max(a, b, COUNTER_FLOOR)
        if abs(x[i] - xprev[i]) > tol * ref:
            return False
    return True


@njit(cache=True)
def _same_power(power_w: float, busy: float, pb_prev: float, idle_fit: float, idle_w: float,
                bprev: FloatArray, bnow: FloatArray, nb: int) -> bool:
    """Whether the busy power of this tick and the last one could be the same work's at their
    clocks (true where either is unknown): a free signature of the work when there are no
    counters, since a kernel switch moves power far more than a clock step can."""
    if not (pb_prev > 0.0 and np.isfinite(power_w) and np.isfinite(busy)
            and BUSY_MIN <= busy <= 1.0):
        return True
    idle = idle_w if np.isfinite(idle_w) else max(idle_fit, 0.0)
    pb = (power_w - idle * (1.0 - busy)) / busy
    if not pb > 0.0:
        return True
    rise = bprev[0] - bnow[0]  # Δ log f (u = log(f_top / f))
    if nb > 2:
        rise += bprev[2] - bnow[2]
    yp = math.log(pb / pb_prev)
    return min(0.0, 3.0 * rise) - POWER_SLACK <= yp <= max(0.0, 3.0 * rise) + POWER_SLACK


@njit(cache=True)
def _expected(e: float, P: FloatArray, h: FloatArray, sc: FloatArray, cf: FloatArray) -> bool:
    """Whether the a-priori error ``e`` of a pair is within INNOVATION_Z predictive standard
    deviations, σ·sqrt(1 + hᵀPh) (RLS; DCD-RLS keeps no covariance: always true)."""
    if cf[ALGO] != ALGO_RLS:
        return True
    m = h.shape[0]
    hph = 0.0
    for i in range(m):
        acc = 0.0
        for j in range(m):
            acc += P[i, j] * h[j]
        hph += h[i] * acc
    n_err = min(sc[N_ERR], 1.0 / ERR_WEIGHT)
    var = (n_err * sc[ERR2] + ERR_PRIOR_PAIRS * cf[SIGMA0] ** 2) / (n_err + ERR_PRIOR_PAIRS)
    return e * e <= INNOVATION_Z * INNOVATION_Z * var * (1.0 + max(hph, 0.0))


@njit(cache=True)
def _plausible(y: float, db: FloatArray, gate: float, nb: int) -> bool:
    """Whether a log time ratio ``y`` over a clock move with basis change ``db`` is something
    the same work could do: between no scaling and a log-slope of MAX_SLOPE, ± gate."""
    du = db[0]
    if nb > 2:
        du += db[2]
    lo = min(0.0, MAX_SLOPE * du) - gate
    hi = max(0.0, MAX_SLOPE * du) + gate
    return lo <= y <= hi


@njit(cache=True)
def _slot_expects(state: FloatArray, off: IntArray, y: float, db: FloatArray) -> bool:
    """Whether the current slot's own curve expects the log time ratio ``y`` of a move with
    basis change ``db`` (the `_expected` gate with the slot's coefficients and covariance: a
    slot that has learned few pairs expects almost anything plausible). The global curve is a
    prior shared by all work: work that comes back after other work taught it another curve
    would fail its gate at every move, each move would read as other work, and the work would
    split over one slot per clock."""
    cf = _sec(state, off, CF)
    sc = _sec(state, off, SC)
    j = int(sc[CUR_SLOT])
    if cf[N_SLOTS] == 0.0 or j < 0 or cf[ALGO] != ALGO_RLS:
        return False
    nb = off[HDR_NB]
    c = _sec(state, off, CG)  # scratch: `_remember` recomputes it
    sl_c = _mat(state, off, SLOT_C, nb)
    for b in range(nb):
        c[b] = sl_c[j, b]
    project_coefficients(c, _mat(state, off, SLOT_P, nb * nb)[j], nb, cf[U_MAX])
    p_slot = _mat(state, off, SLOT_P, nb)[j * nb:(j + 1) * nb]
    e = y
    for b in range(nb):
        e -= db[b] * c[b]
    return _expected(e, p_slot, db[:nb], sc, cf)


@njit(cache=True)
def _slot_learned(state: FloatArray, off: IntArray) -> bool:
    """Whether the current slot has learned at least two pairs of its own."""
    j = int(_sec(state, off, SC)[CUR_SLOT])
    return j >= 0 and _mat(state, off, SLOT_META, N_META)[j, PAIRS] >= 2.0


@njit(cache=True)
def refresh_shape(lv: FloatArray, lrho0: FloatArray, delta: FloatArray, lreff: FloatArray
                  ) -> None:
    """The power shape in force: the prior plus the learned offsets, made non-decreasing in
    each clock (the offsets of levels never visited were learned through their correlation
    with visited ones)."""
    n = lv.shape[1]
    for k in range(n):
        lreff[k] = lrho0[k] + delta[k]
    # levels are sorted by core then memory clock
    for k in range(n):
        for j in range(k):
            if lv[CORE, j] <= lv[CORE, k] and lv[MEM, j] <= lv[MEM, k] and lreff[j] > lreff[k]:
                lreff[k] = lreff[j]


@njit(cache=True)
def learn_shape(delta: FloatArray, cov: FloatArray, a: int, b: int, y: float, noise: float,
                drift: float, work: FloatArray) -> None:
    """Kalman update of the per-level log power offsets from one measured log ratio ``y`` of
    busy power at level ``b`` over level ``a`` (observation δ_b − δ_a plus the prior's
    difference, already taken out of ``y``), with full covariance ``cov``; ``drift`` is added
    to every variance afterwards (the shape may drift with temperature)."""
    n = delta.shape[0]
    for k in range(n):
        work[k] = cov[k, b] - cov[k, a]
    s = work[b] - work[a] + noise
    if not s > 0.0:
        return
    bound = INNOVATION_Z * math.sqrt(s)
    e = min(max(y - (delta[b] - delta[a]), -bound), bound)
    for k in range(n):
        delta[k] += work[k] / s * e
    for k in range(n):
        gk = work[k] / s
        for j in range(n):
            cov[k, j] -= gk * work[j]
        cov[k, k] += drift


@njit(cache=True)
def _fold(state: FloatArray, off: IntArray, q: FloatArray) -> None:
    """Q[b, b'] = z_bᵀ P_bb' z: the covariance of the global coefficients in force."""
    m = off[HDR_M]
    nb = off[HDR_NB]
    P = _mat(state, off, PCOV, m)
    z = _sec(state, off, Z)
    if _sec(state, off, CF)[ALGO] == ALGO_RLS:
        fold_covariance(P, z, nb, q)
    else:
        fold_information(P, z, nb, _mat(state, off, CHOL, m), _mat(state, off, YS, nb), q)


@njit(cache=True)
def _remember(state: FloatArray, off: IntArray, t_ms: float, learned: bool, y: float,
              keep: bool, tentative: bool) -> float:
    """Find (or make) the slot of the work this tick ran, and teach it the pair just learned
    from if the tick before ran in the same slot. With ``keep`` (the tick before ran the same
    work: the same counters and power, and either a time within ``SLOT_TOL`` at the same
    clock or, across a move, counters, a curve the slot learned or a surprise come three
    times) the current slot stays; with ``tentative`` (across a move, a slot that has learned
    too little to judge expects it) it stays unless another slot's signature matches: a
    surprise that made a new slot is not that slot's curve when the next tick is the old
    work's again. Matched by the signature alone, a move between two
    clocks where the global curve is wrong for this work read as other work: the work split
    over two slots, one per clock, a change of work at every move, a curve never corrected,
    and the policy probing the "new" work again and again.
    A new slot starts from the global model's curve for these counters and its
    covariance, widened by ``SLOT_P0``: how far one piece of work may stray from what its
    counters suggest. Its signature follows the work slowly (the global model it is measured
    with keeps learning). Returns the slot's a-priori error on the pair, NaN when none was
    learned or the slot had learned fewer than two pairs: `ratio_error` is the noise of an
    informed prediction (a new slot's uncertainty is in its covariance, not in the noise)."""
    nb = off[HDR_NB]
    cf = _sec(state, off, CF)
    sc = _sec(state, off, SC)
    z = _sec(state, off, Z)
    bnow = _sec(state, off, BNOW)
    cg = _sec(state, off, CG)
    q = _sec(state, off, QS)
    sig = _mat(state, off, SLOT_SIG, z.shape[0])
    sl_c = _mat(state, off, SLOT_C, nb)
    sl_p = _mat(state, off, SLOT_P, nb * nb)
    meta = _mat(state, off, SLOT_META, N_META)
    coefficients_now(_sec(state, off, BETA), z, nb, cf[U_MAX], cg)
    s0 = math.log(t_ms)
    for b in range(nb):
        s0 -= cg[b] * bnow[b]
    before = int(sc[CUR_SLOT])
    j = before if keep else -1
    if j < 0:
        j = find_slot(sig, meta, s0, z, cf[SLOT_TOL], cf[SAME_WORK])
    if j < 0 and tentative:
        j = before
    if j < 0:
        j = oldest_slot(meta)
        _fold(state, off, q)
        for b in range(nb):
            sl_c[j, b] = cg[b]
            for b2 in range(nb):
                sl_p[j, b * nb + b2] = q[b * nb + b2] + (cf[SLOT_P0] if b == b2 else 0.0)
        sig[j, 0] = s0
        for i in range(1, z.shape[0]):
            sig[j, i] = z[i]
        meta[j, PAIRS] = 0.0
        meta[j, U_SEEN] = bnow[0]
        sc[SLOTS_MADE] += 1
    else:
        for i in range(z.shape[0]):
            sig[j, i] += 0.1 * ((s0 if i == 0 else z[i]) - sig[j, i])
    meta[j, AGE] = sc[TICKS]
    meta[j, U_SEEN] = max(meta[j, U_SEEN], bnow[0])
    sc[CUR_SLOT] = j
    e = math.nan
    if learned and j == before:  # a pair across two works' slots is neither's curve
        db = _sec(state, off, BPREV)  # holds Δβ of the pair just learned
        if meta[j, PAIRS] >= 2.0:
            e = y
            for b in range(nb):
                e -= db[b] * sl_c[j, b]
        p_slot = _mat(state, off, SLOT_P, nb)[j * nb:(j + 1) * nb]
        rc = rls_update(sl_c[j], p_slot, db, y, 1.0, 1e12, cg, cf[SLOT_P0],
                        _sec(state, off, YS)[:nb])
        if rc == 0:
            meta[j, PAIRS] += 1.0
    return e


@njit(cache=True)
def note_error(sc: FloatArray, e: float) -> None:
    """Fold one a-priori error of a learned pair into the RMS behind `ratio_error`."""
    e2 = min(e * e, 1.0)
    if sc[N_ERR] == 0.0:
        sc[ERR2] = e2
    else:
        sc[ERR2] += ERR_WEIGHT * (e2 - sc[ERR2])
    sc[N_ERR] += 1.0


@njit(cache=True)
def scaling_tick(state: FloatArray, off: IntArray, x: FloatArray, t_ms: float, fc: float,
                 fm: float, power_w: float, busy: float, deadline_ms: float) -> int:
    """Learn from one tick at clocks (fc, fm) MHz (fm ignored with one domain) with frame time
    ``t_ms``, counters ``x``, average power ``power_w`` (W) and utilisation ``busy``; predict
    time, power, energy and their uncertainty at every level. Returns flags, never raises."""
    m = off[HDR_M]
    nb = off[HDR_NB]
    nx = off[HDR_NX]
    n = off[HDR_L]
    two = nb > 2
    beta = _sec(state, off, BETA)
    P = _mat(state, off, PCOV, m)
    h = _sec(state, off, H)
    z = _sec(state, off, Z)
    xscale = _sec(state, off, XSCALE)
    xprev = _sec(state, off, XPREV)
    bprev = _sec(state, off, BPREV)
    bnow = _sec(state, off, BNOW)
    lv = _mat(state, off, LV, n)
    basis = _mat(state, off, BASIS, nb)
    lrho0 = _sec(state, off, LRHO0)
    delta = _sec(state, off, DELTA)
    scov = _mat(state, off, SCOV, n)
    lreff = _sec(state, off, LREFF)
    pc = _sec(state, off, PC)
    pP = _mat(state, off, PP, 2)
    pphi = _sec(state, off, PPHI)
    out = _mat(state, off, OUT, n)
    sc = _sec(state, off, SC)
    cf = _sec(state, off, CF)
    flags = 0
    sc[TICKS] += 1

    valid = np.isfinite(t_ms) and MIN_FRAME_MS <= t_ms <= MAX_FRAME_MS
    valid = valid and np.isfinite(fc) and 0.0 < fc <= MAX_FREQ_MHZ
    if two:
        valid = valid and np.isfinite(fm) and 0.0 < fm <= MAX_FREQ_MHZ
    else:
        fm = lv[MEM, 0]
    z[0] = 1.0
    for i in range(nx):
        v = x[i] / xscale[i]
        if not (np.isfinite(v) and abs(v) <= MAX_COUNTER):
            valid = False
    if valid:  # the counters in force belong to the latest valid sample, as its time does
        for i in range(nx):
            z[1 + i] = x[i] / xscale[i]
    level = -1
    same = False
    learned = False
    keep = False
    tentative = False
    y = 0.0
    if valid:
        level = nearest_level(fc, fm, lv, two)
        basis_at(fc, fm, lv, cf[U_MAX], nb, bnow)
        moved = False
        for b in range(nb):
            if abs(bnow[b] - bprev[b]) > 1e-12:
                moved = True
        if sc[HAS_PREV] == 1.0:
            same = _same_work(z[1:], xprev, cf[SAME_WORK]) and _same_power(
                power_w, busy, sc[PB_PREV], pc[0], cf[IDLE_W], bprev, bnow, nb)
            y = math.log(t_ms / sc[T_PREV])
            fit = 0.0
            if moved:
                db = bprev  # reuse as scratch after reading: Δβ
                for b in range(nb):
                    db[b] = bnow[b] - bprev[b]
                nz = nx + 1
                for b in range(nb):
                    for j in range(nz):
                        zj = z[j] if j == 0 else 0.5 * (z[j] + xprev[j - 1])
                        h[b * nz + j] = db[b] * zj
                for i in range(m):
                    fit += h[i] * beta[i]
                plausible = same and _plausible(y, db, cf[GATE], nb)
                own = plausible and _slot_expects(state, off, y, db)
                forced = sc[REJECTS] >= 2.0
                fits = forced or _expected(y - fit, P, h, sc, cf)
                expected = own or fits
                if plausible and not expected:
                    sc[REJECTS] += 1.0
                else:
                    sc[REJECTS] = 0.0
                # across a move only counters, a curve this work has taught its slot, or a
                # surprise come three times (the curve is wrong, not the work) tell the work
                # apart: by time alone, other work and a wrong curve look the same
                learned_slot = _slot_learned(state, off)
                keep = plausible and (nx > 0 or (own and learned_slot) or forced)
                tentative = own and not learned_slot
                if plausible and own and not fits:
                    learned = True  # the slot's curve, not the global one
                elif plausible and expected:
                    e = y - fit
                    if cf[ALGO] == ALGO_RLS:
                        rc = rls_update(beta, P, h, y, cf[LAM], cf[MAX_TRACE],
                                        _sec(state, off, BETA0), cf[P0], _sec(state, off, WORK))
                    else:
                        rc = dcd_update(beta, P, _sec(state, off, RES), h, y, cf[LAM],
                                        1.0 / cf[P0], cf[DCD_H], int(cf[DCD_MB]),
                                        int(cf[DCD_NU]), _sec(state, off, BETA0))
                    sc[UPDATES] += 1
                    flags |= UPDATED
                    learned = True
                    if rc != 0:
                        sc[RESETS] += 1
                        flags |= WAS_RESET
                    if cf[N_SLOTS] == 0:
                        note_error(sc, e)
                else:
                    sc[GATED_N] += 1
                    flags |= GATED
            else:
                keep = same and abs(y) <= cf[SLOT_TOL]
            sc[T_FIT] = sc[T_PREV] * math.exp(fit)
            if not same or flags & GATED:
                flags |= WORK_CHANGED
        if cf[N_SLOTS] > 0:
            slot_before = sc[CUR_SLOT]
            e_slot = _remember(state, off, t_ms, learned, y if learned else 0.0, keep,
                               tentative)
            if np.isfinite(e_slot):
                note_error(sc, e_slot)
            if slot_before >= 0.0 and sc[CUR_SLOT] != slot_before:
                flags |= WORK_CHANGED
        for b in range(nb):
            bprev[b] = bnow[b]
        for i in range(nx):
            xprev[i] = z[1 + i]
        sc[T_PREV] = t_ms
        sc[HAS_PREV] = 1.0
        sc[FC_NOW] = fc
        sc[FM_NOW] = fm
    else:
        sc[SKIPPED] += 1
        flags |= SKIPPED_SAMPLE

    # --- power: idle and top busy power by RLS, the per-level shape by a Kalman filter ---
    if sc[SHAPE_DIRTY] != 0.0:
        refresh_shape(lv, lrho0, delta, lreff)
        sc[SHAPE_DIRTY] = 0.0
    top_rho = lreff[n - 1]
    for k in range(n):
        top_rho = max(top_rho, lreff[k])
    pb_now = math.nan
    p_ok = (np.isfinite(power_w) and 0.0 <= power_w <= MAX_POWER_W and np.isfinite(busy)
            and 0.0 <= busy <= 1.0 and np.isfinite(fc) and 0.0 < fc <= MAX_FREQ_MHZ)
    if two:
        p_ok = p_ok and np.isfinite(fm) and 0.0 < fm <= MAX_FREQ_MHZ
    if p_ok:
        plevel = level if level >= 0 else nearest_level(fc, fm, lv, two)
        rel = math.exp(lreff[plevel] - top_rho)
        pphi[0] = 1.0 - busy
        pphi[1] = busy * rel
        rc = rls_update(pc, pP, pphi, power_w, cf[PLAM], 4.0 * cf[PP0], _sec(state, off, PC0),
                        cf[PP0], _sec(state, off, PWORK))
        sc[P_UPDATES] += 1
        flags |= POWER_UPDATED
        idle = cf[IDLE_W] if np.isfinite(cf[IDLE_W]) else max(pc[0], 0.0)
        if busy >= BUSY_MIN:
            pb_now = (power_w - idle * (1.0 - busy)) / busy
            if not pb_now > 0.0:
                pb_now = math.nan
        if (np.isfinite(pb_now) and sc[PB_PREV] > 0.0 and learned and level >= 0
                and level != int(sc[LVL_PREV]) and sc[LVL_PREV] >= 0.0):
            a = int(sc[LVL_PREV])
            y = math.log(pb_now / sc[PB_PREV]) - (lrho0[level] - lrho0[a])
            learn_shape(delta, scov, a, level, y, cf[SHAPE_NOISE], cf[SHAPE_Q],
                        _sec(state, off, SWORK))
            sc[SHAPE_DIRTY] = 1.0
            sc[SHAPE_UPDATES] += 1
        sc[PB_PREV] = pb_now if np.isfinite(pb_now) else -1.0
        sc[LVL_PREV] = level
    else:
        sc[P_SKIPPED] += 1
        sc[PB_PREV] = -1.0
        sc[LVL_PREV] = -1.0

    # --- predictions at every level ---
    if sc[HAS_PREV] != 1.0:
        for r in range(N_OUT):
            for k in range(n):
                out[r, k] = math.nan
        sc[SENS] = math.nan
        sc[READY] = 0.0
        return flags
    coef = _sec(state, off, WORK)  # scratch: coefficients in force
    q = _sec(state, off, QS)
    slot = int(sc[CUR_SLOT])
    u_seen = math.inf  # without slots, no extrapolation is counted
    if slot >= 0:  # this work's own curve, remembered
        u_seen = _mat(state, off, SLOT_META, N_META)[slot, U_SEEN]
        sl_c = _mat(state, off, SLOT_C, nb)
        sl_p = _mat(state, off, SLOT_P, nb * nb)
        for b in range(nb):
            coef[b] = sl_c[slot, b]
        for i in range(nb * nb):
            q[i] = sl_p[slot, i]
        project_coefficients(coef, q, nb, cf[U_MAX])
    else:
        coefficients_now(beta, z, nb, cf[U_MAX], coef)
        _fold(state, off, q)
    c0 = coef[0]
    c1 = coef[1]
    cm = coef[2] if two else 0.0
    n_err = min(sc[N_ERR], 1.0 / ERR_WEIGHT)
    sigma2 = (n_err * sc[ERR2] + ERR_PRIOR_PAIRS * cf[SIGMA0] ** 2) / (n_err + ERR_PRIOR_PAIRS)
    t_now = sc[T_PREV]
    lnow = c0 * bnow[0] + c1 * bnow[1] + cm * (bnow[2] if two else 0.0)
    idle = cf[IDLE_W] if np.isfinite(cf[IDLE_W]) else pc[0]
    idle = min(max(idle, 0.0), MAX_POWER_W)
    lvl = level if level >= 0 else int(sc[LVL_NOW])
    if lvl < 0:
        lvl = n - 1
    if np.isfinite(pb_now):
        p_ref = pb_now * math.exp(-lreff[lvl])
    else:
        p_ref = max(pc[1], 0.0) * math.exp(-top_rho)
    has_deadline = np.isfinite(deadline_ms) and 0.0 < deadline_ms <= MAX_DEADLINE_MS
    u_edge = next_below(basis, u_seen) if np.isfinite(u_seen) else math.inf
    for k in range(n):
        lk = log_ratio_at(basis[k, 0], c0, c1, u_edge)
        if two:
            lk += cm * basis[k, 2]
        t = t_now * math.exp(lk - lnow)
        out[OUT_T, k] = t
        vn = 0.0
        vt = 0.0
        for b in range(nb):
            for b2 in range(nb):
                qq = q[b * nb + b2]
                vn += (basis[k, b] - bnow[b]) * qq * (basis[k, b2] - bnow[b2])
                vt += basis[k, b] * qq * basis[k, b2]
        ext = FORM_SLOPE * max(basis[k, 0] - u_seen, 0.0)
        out[OUT_SD_NOW, k] = math.sqrt(sigma2 * max(vn, 0.0) + ext * ext)
        out[OUT_SD_TOP, k] = math.sqrt(sigma2 * max(vt, 0.0) + ext * ext)
        p = min(max(p_ref * math.exp(lreff[k]), idle), MAX_POWER_W)
        out[OUT_P, k] = p
        e = p * t
        if has_deadline and deadline_ms > t:
            e += idle * (deadline_ms - t)
        out[OUT_E, k] = e
    sc[P_IDLE] = idle
    sc[T_NOW] = t_now
    sc[LVL_NOW] = lvl
    sc[PB_NOW] = pb_now
    sc[SENS] = sensitivity_pairs(t_now, sc[FC_NOW], sc[FM_NOW], lv, out[OUT_T])
    sc[READY] = 1.0 if sc[UPDATES] >= cf[WARMUP] else 0.0
    return flags


def _views_ref(state: FloatArray, off: IntArray) -> dict[str, FloatArray]:
    """NumPy views of every section (for the reference)."""
    m, nb, n = int(off[HDR_M]), int(off[HDR_NB]), int(off[HDR_L])
    names = ("beta", "beta0", "P", "work", "h", "z", "xscale", "xprev", "bprev", "bnow", "lv",
             "basis", "lrho0", "delta", "scov", "lreff", "pc", "pc0", "pP", "pphi", "pwork",
             "out", "sc", "cf", "res", "chol", "ys", "qs", "slot_sig", "slot_c", "slot_p",
             "slot_meta", "cg", "swork")
    nz, slots = int(off[HDR_NX]) + 1, (int(off[SLOT_META + 1]) - int(off[SLOT_META])) // N_META
    shapes = {"P": (m, m), "lv": (4, n), "basis": (n, nb), "pP": (2, 2), "out": (N_OUT, n),
              "chol": (m, m), "ys": (m, nb), "scov": (n, n), "slot_sig": (slots, nz),
              "slot_c": (slots, nb), "slot_p": (slots, nb * nb), "slot_meta": (slots, N_META)}
    return {name: state[off[i]:off[i + 1]].reshape(shapes.get(name, (-1,)))
            for i, name in enumerate(names)}


def _basis_ref(fc: float, fm: float, lv: FloatArray, u_max: float, nb: int) -> FloatArray:
    u = min(max(math.log(lv[CORE, -1] / fc), 0.0), u_max)
    b = [u, u * u]
    if nb > 2:
        b.append(max(math.log(lv[MEM].max() / fm), 0.0))
    return np.array(b)


def _remember_ref(v: dict[str, FloatArray], t_ms: float, learned: bool, y: float,
                  keep: bool, tentative: bool) -> float:
    """NumPy reference of `_remember`."""
    sc, cf, z, bnow = v["sc"], v["cf"], v["z"], v["bnow"]
    nb = bnow.size
    sig, sl_c, sl_p, meta = v["slot_sig"], v["slot_c"], v["slot_p"], v["slot_meta"]
    nz = z.size
    w = v["beta"].reshape(nb, nz) @ z
    cg = np.array(w)
    clamp_coefficients.py_func(cg, nb, cf[U_MAX])
    v["cg"][:] = cg
    s0 = math.log(t_ms) - float(cg @ bnow)
    used = meta[:, AGE] > 0.0
    dt2 = ((s0 - sig[:, 0]) / cf[SLOT_TOL]) ** 2
    ref = np.maximum(np.maximum(np.abs(z[1:]), np.abs(sig[:, 1:])), COUNTER_FLOOR)
    dx2 = ((z[1:] - sig[:, 1:]) / (cf[SAME_WORK] * ref)) ** 2
    fits = used & (dt2 <= 1.0) & np.all(dx2 <= 1.0, axis=1)
    before = int(sc[CUR_SLOT])
    j = before if keep else -1
    if j < 0 and fits.any():
        j = int(np.argmin(np.where(fits, dt2 + dx2.sum(axis=1), np.inf)))
    if j < 0 and tentative:
        j = before
    if j >= 0:
        sig[j] += 0.1 * (np.concatenate(([s0], z[1:])) - sig[j])
    else:
        j = int(np.argmin(meta[:, AGE]))
        zb = np.kron(np.eye(nb), z.reshape(-1, 1))
        q = zb.T @ v["P"] @ zb
        sl_c[j] = cg
        sl_p[j] = (q + np.eye(nb) * cf[SLOT_P0]).ravel()
        sig[j] = np.concatenate(([s0], z[1:]))
        meta[j, PAIRS] = 0.0
        meta[j, U_SEEN] = bnow[0]
        sc[SLOTS_MADE] += 1
    meta[j, AGE] = sc[TICKS]
    meta[j, U_SEEN] = max(meta[j, U_SEEN], bnow[0])
    sc[CUR_SLOT] = j
    e = math.nan
    if learned and j == before:
        db = v["bprev"]
        if meta[j, PAIRS] >= 2.0:
            e = y - float(db @ sl_c[j])
        p_slot = sl_p[j].reshape(nb, nb)
        rc = rls_update_ref(sl_c[j], p_slot, db, y, 1.0, 1e12, cg, cf[SLOT_P0])
        sl_p[j] = p_slot.ravel()
        if rc == 0:
            meta[j, PAIRS] += 1.0
    return e


def scaling_tick_ref(state: FloatArray, off: IntArray, x: FloatArray, t_ms: float, fc: float,
                     fm: float, power_w: float, busy: float, deadline_ms: float) -> int:
    """NumPy reference of `scaling_tick` (RLS only; same state layout, vectorised)."""
    v = _views_ref(state, off)
    nb, nx = int(off[HDR_NB]), int(off[HDR_NX])
    two = nb > 2
    sc, cf, lv = v["sc"], v["cf"], v["lv"]
    flags = 0
    sc[TICKS] += 1
    if not two:
        fm = float(lv[MEM, 0])
    with np.errstate(all="ignore"):
        zx = np.asarray(x, dtype=np.float64) / v["xscale"]
    valid = (bool(np.isfinite(t_ms)) and MIN_FRAME_MS <= t_ms <= MAX_FRAME_MS
             and bool(np.isfinite(fc)) and 0.0 < fc <= MAX_FREQ_MHZ
             and (not two or (bool(np.isfinite(fm)) and 0.0 < fm <= MAX_FREQ_MHZ))
             and bool(np.all(np.isfinite(zx) & (np.abs(zx) <= MAX_COUNTER))))
    if valid:
        v["z"][:] = np.concatenate(([1.0], zx))
    else:
        v["z"][0] = 1.0
    z = v["z"]
    level, same, learned, keep, tentative = -1, False, False, False, False
    distance = np.log(fc / lv[CORE]) ** 2 + (np.log(fm / lv[MEM]) ** 2 if two else 0.0)
    if valid:
        level = int(np.argmin(distance))
        bnow = _basis_ref(fc, fm, lv, cf[U_MAX], nb)
        v["bnow"][:] = bnow
        db = bnow - v["bprev"]
        if sc[HAS_PREV] == 1.0:
            ref = np.maximum(np.maximum(np.abs(z[1:]), np.abs(v["xprev"])), COUNTER_FLOOR)
            same = bool(np.all(np.abs(z[1:] - v["xprev"]) <= cf[SAME_WORK] * ref))
            same = same and _same_power.py_func(power_w, busy, sc[PB_PREV], v["pc"][0],
                                                cf[IDLE_W], v["bprev"], bnow, nb)
            y = math.log(t_ms / sc[T_PREV])
            fit = 0.0
            if np.any(np.abs(db) > 1e-12):
                zbar = np.concatenate(([1.0], 0.5 * (z[1:] + v["xprev"])))
                h = np.outer(db, zbar).ravel()
                v["h"][:] = h
                fit = float(np.cumsum(np.concatenate(([0.0], h * v["beta"])))[-1])
                du = db[0] + (db[2] if two else 0.0)
                lo = min(0.0, MAX_SLOPE * du) - cf[GATE]
                hi = max(0.0, MAX_SLOPE * du) + cf[GATE]
                n_e = min(sc[N_ERR], 1.0 / ERR_WEIGHT)
                var = ((n_e * sc[ERR2] + ERR_PRIOR_PAIRS * cf[SIGMA0] ** 2)
                       / (n_e + ERR_PRIOR_PAIRS))
                hph = float(h @ (v["P"] @ h))
                plausible = same and lo <= y <= hi
                own = False
                j = int(sc[CUR_SLOT])
                if plausible and cf[N_SLOTS] > 0 and j >= 0:
                    c = np.array(v["slot_c"][j])
                    project_coefficients.py_func(c, v["slot_p"][j], nb, cf[U_MAX])
                    pj = v["slot_p"][j].reshape(nb, nb)
                    own = bool((y - float(db @ c)) ** 2
                               <= INNOVATION_Z**2 * var * (1.0 + max(float(db @ pj @ db), 0.0)))
                forced = sc[REJECTS] >= 2.0
                fits = forced or (y - fit) ** 2 <= INNOVATION_Z**2 * var * (1.0 + max(hph, 0.0))
                expected = own or fits
                sc[REJECTS] = sc[REJECTS] + 1.0 if (plausible and not expected) else 0.0
                learned_slot = j >= 0 and v["slot_meta"][j, PAIRS] >= 2.0
                keep = plausible and (nx > 0 or (own and learned_slot) or forced)
                tentative = own and not learned_slot
                if plausible and own and not fits:
                    learned = True  # the slot's curve, not the global one
                elif plausible and expected:
                    e = y - fit
                    rc = rls_update_ref(v["beta"], v["P"], h, y, cf[LAM], cf[MAX_TRACE],
                                        v["beta0"], cf[P0])
                    sc[UPDATES] += 1
                    flags |= UPDATED
                    learned = True
                    if rc:
                        sc[RESETS] += 1
                        flags |= WAS_RESET
                    if cf[N_SLOTS] == 0:
                        note_error.py_func(sc, e)
                else:
                    sc[GATED_N] += 1
                    flags |= GATED
            else:
                keep = same and abs(y) <= cf[SLOT_TOL]
            sc[T_FIT] = sc[T_PREV] * math.exp(fit)
            if not same or flags & GATED:
                flags |= WORK_CHANGED
        if cf[N_SLOTS] > 0:
            v["bprev"][:] = db
            slot_before = sc[CUR_SLOT]
            e_slot = _remember_ref(v, t_ms, learned, y if learned else 0.0, keep, tentative)
            if np.isfinite(e_slot):
                note_error.py_func(sc, e_slot)
            if slot_before >= 0.0 and sc[CUR_SLOT] != slot_before:
                flags |= WORK_CHANGED
        v["bprev"][:] = bnow
        v["xprev"][:] = z[1:]
        sc[T_PREV], sc[HAS_PREV], sc[FC_NOW], sc[FM_NOW] = t_ms, 1.0, fc, fm
    else:
        sc[SKIPPED] += 1
        flags |= SKIPPED_SAMPLE

    lreff, delta, scov = v["lreff"], v["delta"], v["scov"]
    if sc[SHAPE_DIRTY] != 0.0:
        lreff[:] = v["lrho0"] + delta
        for k in range(lreff.size):  # non-decreasing in each clock
            below = (lv[CORE, :k] <= lv[CORE, k]) & (lv[MEM, :k] <= lv[MEM, k])
            if below.any():
                lreff[k] = max(lreff[k], float(lreff[:k][below].max()))
        sc[SHAPE_DIRTY] = 0.0
    top_rho = float(lreff.max())
    pb_now = math.nan
    p_ok = (bool(np.isfinite(power_w)) and 0.0 <= power_w <= MAX_POWER_W
            and bool(np.isfinite(busy)) and 0.0 <= busy <= 1.0
            and bool(np.isfinite(fc)) and 0.0 < fc <= MAX_FREQ_MHZ
            and (not two or (bool(np.isfinite(fm)) and 0.0 < fm <= MAX_FREQ_MHZ)))
    if p_ok:
        plevel = level if level >= 0 else int(np.argmin(distance))
        v["pphi"][:] = (1.0 - busy, busy * math.exp(lreff[plevel] - top_rho))
        rls_update_ref(v["pc"], v["pP"], v["pphi"], power_w, cf[PLAM], 4.0 * cf[PP0], v["pc0"],
                       cf[PP0])
        sc[P_UPDATES] += 1
        flags |= POWER_UPDATED
        idle = cf[IDLE_W] if np.isfinite(cf[IDLE_W]) else max(v["pc"][0], 0.0)
        if busy >= BUSY_MIN:
            pb_now = (power_w - idle * (1.0 - busy)) / busy
            pb_now = pb_now if pb_now > 0.0 else math.nan
        a = int(sc[LVL_PREV])
        if np.isfinite(pb_now) and sc[PB_PREV] > 0.0 and learned and level >= 0 and a >= 0 \
                and level != a:
            y = math.log(pb_now / sc[PB_PREV]) - (v["lrho0"][level] - v["lrho0"][a])
            hvec = np.zeros(delta.size)
            hvec[level], hvec[a] = 1.0, -1.0
            ch = scov @ hvec
            s = float(hvec @ ch) + cf[SHAPE_NOISE]
            if s > 0.0:
                gain = ch / s
                bound = INNOVATION_Z * math.sqrt(s)
                delta += gain * float(np.clip(y - float(hvec @ delta), -bound, bound))
                scov -= np.outer(gain, ch)
                scov += np.eye(delta.size) * cf[SHAPE_Q]
            sc[SHAPE_DIRTY] = 1.0
            sc[SHAPE_UPDATES] += 1
        sc[PB_PREV] = pb_now if np.isfinite(pb_now) else -1.0
        sc[LVL_PREV] = level
    else:
        sc[P_SKIPPED] += 1
        sc[PB_PREV] = -1.0
        sc[LVL_PREV] = -1.0

    out = v["out"]
    if sc[HAS_PREV] != 1.0:
        out[:] = math.nan
        sc[SENS] = math.nan
        sc[READY] = 0.0
        return flags
    nz = nx + 1
    slot = int(sc[CUR_SLOT])
    if slot >= 0:
        c = np.array(v["slot_c"][slot])
        q = v["slot_p"][slot].reshape(nb, nb)
        project_coefficients.py_func(c, v["slot_p"][slot], nb, cf[U_MAX])
    else:
        c = v["beta"].reshape(nb, nz) @ z
        zb = np.kron(np.eye(nb), z.reshape(-1, 1))  # [m, nb]: column b holds z in block b
        q = zb.T @ v["P"] @ zb
    c0 = min(max(c[0], 0.0), MAX_SLOPE)
    c1 = min(max(c[1], -c0 / (2.0 * cf[U_MAX])), (MAX_SLOPE - c0) / (2.0 * cf[U_MAX]))
    coef = np.array([c0, c1] + ([min(max(c[2], 0.0), 1.5)] if two else []))
    n_err = min(sc[N_ERR], 1.0 / ERR_WEIGHT)
    sigma = math.sqrt((n_err * sc[ERR2] + ERR_PRIOR_PAIRS * cf[SIGMA0] ** 2)
                      / (n_err + ERR_PRIOR_PAIRS))
    basis, bnow = v["basis"], v["bnow"]
    t_now = sc[T_PREV]
    u_seen = v["slot_meta"][slot, U_SEEN] if slot >= 0 else math.inf
    u_edge = next_below.py_func(basis, u_seen) if np.isfinite(u_seen) else math.inf
    lk = np.array([log_ratio_at.py_func(float(u), coef[0], coef[1], u_edge)
                   for u in basis[:, 0]])
    if two:
        lk = lk + coef[2] * basis[:, 2]
    t = t_now * np.exp(lk - float(bnow @ coef))
    dn = basis - bnow
    out[OUT_T] = t
    ext = FORM_SLOPE * np.maximum(basis[:, 0] - u_seen, 0.0)
    out[OUT_SD_NOW] = np.sqrt(sigma**2 * np.maximum(
        np.einsum("kb,bc,kc->k", dn, q, dn), 0.0) + ext**2)
    out[OUT_SD_TOP] = np.sqrt(sigma**2 * np.maximum(
        np.einsum("kb,bc,kc->k", basis, q, basis), 0.0) + ext**2)
    idle = cf[IDLE_W] if np.isfinite(cf[IDLE_W]) else v["pc"][0]
    idle = min(max(idle, 0.0), MAX_POWER_W)
    lvl = level if level >= 0 else int(sc[LVL_NOW])
    lvl = lvl if lvl >= 0 else lv.shape[1] - 1
    p_ref = (pb_now * math.exp(-lreff[lvl]) if np.isfinite(pb_now)
             else max(v["pc"][1], 0.0) * math.exp(-top_rho))
    p = np.clip(p_ref * np.exp(lreff), idle, MAX_POWER_W)
    out[OUT_P] = p
    e = p * t
    if np.isfinite(deadline_ms) and 0.0 < deadline_ms <= MAX_DEADLINE_MS:
        e = e + np.where(deadline_ms > t, idle * (deadline_ms - t), 0.0)
    out[OUT_E] = e
    sc[P_IDLE], sc[T_NOW], sc[LVL_NOW], sc[PB_NOW] = idle, t_now, lvl, pb_now
    sc[SENS] = sensitivity_pairs.py_func(t_now, sc[FC_NOW], sc[FM_NOW], lv, out[OUT_T])
    sc[READY] = 1.0 if sc[UPDATES] >= cf[WARMUP] else 0.0
    return flags
