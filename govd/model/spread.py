"""The seed form's spread: how uncertain eq. 10's predicted ratios are, and the per-unit noise.

Eq. 10 (and its two-domain form, `govd.model.pairs`) predicts t(f) = t + Σ_i a_i · g_i(f) with
the lead coefficients a (a0, a1; with pairs a0, b0, a1) and g their features at level f, the
counters held. Its spread is derived from what the model already keeps, no new learning:

- the noise: each update's a-priori error (the tick's time against the prediction made from
  the tick before, with the counters it saw) is folded into exponentially weighted means of
  its square, in ms (``D2``, the residual of Δt) and in log ratio (``ERR2``), blended with
  ``noise_prior`` (a relative error) until ~20 updates were seen, as the scaling form does;
- the coefficients' uncertainty: with λ = 1, RLS's P is the covariance of a over the residual
  variance (DCD-RLS keeps its inverse R: the block of R⁻¹ is solved through a Cholesky
  factor). The lead block C of it is all that matters, the counters being held.

Then sd(log t(f) − log t(now)) = sqrt(σ² gᵀ C g) / t(f) (linearised; zero at the running
level) and sd(log t(f) − log t(top)) = sqrt(σ² vᵀ C v), v = g(f)/t(f) − g(top)/t(top), top the
level of least predicted time. Neither can honestly exceed the physical span of the ratio
(between no scaling and 1/f scaling in each clock: |log(fc/fc')| + |log(fm/fm')|), which an
unexcited direction (P = I/μ = 1e14·I) would otherwise overshoot by orders of magnitude: each is
capped there, so a level the model knows nothing about reads as knowing nothing, not as NaN.

The per-unit noise is the blended RMS a-priori log error over sqrt(2): one a-priori error holds
the noise of two units (the tick measured and the one it was predicted from), and the model's
own error too, so it is an upper bound where the model is still learning.
"""

from __future__ import annotations

import math

import numpy as np

from govd.kernels.loader import njit
from govd.model.arrays import FloatArray

ERR_WEIGHT = 0.05
"""Weight of the newest squared a-priori error in the running means (about 20 updates)."""
ERR_PRIOR_UPDATES = 5.0
"""Updates' worth of weight ``noise_prior`` keeps in the blend."""
MAX_LOG_ERROR = 10.0
"""A log error beyond this (a factor of e^10) is folded in at this size: one absurd sample
must not swamp the mean."""


@njit(cache=True)
def note_error(err: FloatArray, t_ms: float, fit_ms: float) -> None:
    """Fold one a-priori error (measured ``t_ms`` against ``fit_ms``, both ms) into ``err``
    = [log-error², residual² (ms²), updates seen]."""
    r = t_ms - fit_ms
    e = math.log(t_ms / fit_ms) if fit_ms > 0.0 else MAX_LOG_ERROR
    e = min(abs(e), MAX_LOG_ERROR)
    if err[2] == 0.0:
        err[0] = e * e
        err[1] = r * r
    else:
        err[0] += ERR_WEIGHT * (e * e - err[0])
        err[1] += ERR_WEIGHT * (r * r - err[1])
    err[2] += 1.0


def note_error_ref(err: FloatArray, t_ms: float, fit_ms: float) -> None:
    """NumPy reference of `note_error`."""
    r = t_ms - fit_ms
    e = min(abs(math.log(t_ms / fit_ms)) if fit_ms > 0.0 else MAX_LOG_ERROR, MAX_LOG_ERROR)
    if err[2] == 0.0:
        err[0], err[1] = e * e, r * r
    else:
        err[0] += ERR_WEIGHT * (e * e - err[0])
        err[1] += ERR_WEIGHT * (r * r - err[1])
    err[2] += 1.0


def blend(mean_sq: float, updates: float, prior_sq: float) -> float:
    """A running mean of squares blended with its prior until ~1/ERR_WEIGHT updates."""
    n = min(updates, 1.0 / ERR_WEIGHT)
    return (n * mean_sq + ERR_PRIOR_UPDATES * prior_sq) / (n + ERR_PRIOR_UPDATES)


blended = njit(cache=True)(blend)
"""`blend` for the kernels."""


def time_noise(err: FloatArray, noise_prior: float) -> float:
    """The per-unit noise: blended RMS a-priori log error over sqrt(2) (module docstring);
    ``err`` as `note_error` keeps it."""
    return math.sqrt(blend(float(err[0]), float(err[2]), noise_prior * noise_prior) / 2.0)


@njit(cache=True)
def dcd_lead_covariance(R: FloatArray, lead: int, out: FloatArray) -> bool:
    """The lead × lead block of R⁻¹ (DCD-RLS keeps the information matrix R = L·Lᵀ;
    (R⁻¹)_ij = y_i·y_j with L·y_i = e_i) into ``out``. False when R does not factorise (the
    model is then reset by its own checks)."""
    m = R.shape[0]
    chol = np.zeros((m, m))
    for j in range(m):
        s = R[j, j]
        for p in range(j):
            s -= chol[j, p] * chol[j, p]
        if not (s > 0.0 and np.isfinite(s)):
            return False
        chol[j, j] = math.sqrt(s)
        for i in range(j + 1, m):
            s = R[i, j]
            for p in range(j):
                s -= chol[i, p] * chol[j, p]
            chol[i, j] = s / chol[j, j]
    y = np.zeros((lead, m))
    for c in range(lead):
        for i in range(c, m):
            s = 1.0 if i == c else 0.0
            for p in range(c, i):
                s -= chol[i, p] * y[c, p]
            y[c, i] = s / chol[i, i]
    for a in range(lead):
        for b in range(lead):
            s = 0.0
            for i in range(max(a, b), m):
                s += y[a, i] * y[b, i]
            out[a, b] = s
    return True


@njit(cache=True, inline="always")
def _quad(g0: float, g1: float, g2: float, c: FloatArray, two: bool) -> float:
    """gᵀ C g for the lead gradient (g0, g1) or, with ``two``, (g0, g1, g2): the terms
    g_i·c_ij·g_j added one by one in (i, j) order. Written as one sum of such terms (not
    factored) so that the kernel compiled ahead of time and numba's JIT round alike
    (tests/test_kernels_aot.py: a factored form differed in the last bit)."""
    s = g0 * c[0, 0] * g0
    s += g0 * c[0, 1] * g1
    if two:
        s += g0 * c[0, 2] * g2
    s += g1 * c[1, 0] * g0
    s += g1 * c[1, 1] * g1
    if two:
        s += g1 * c[1, 2] * g2
        s += g2 * c[2, 0] * g0
        s += g2 * c[2, 1] * g1
        s += g2 * c[2, 2] * g2
    return float(max(s, 0.0))


@njit(cache=True, inline="always")
def _capped(sd: float, x: float, y: float, two: bool) -> float:
    """``sd`` capped at the span |log x| (+ |log y| with ``two``). The logs are taken only
    when ``sd`` may exceed it: |x − 1| / max(x, 1) <= |log x| costs none, and a learned
    model's spread is far below it at every level but the running one (where both are 0)."""
    bound = abs(x - 1.0) / max(x, 1.0)
    if two:
        bound += abs(y - 1.0) / max(y, 1.0)
    if sd <= bound:
        return sd
    span = abs(math.log(x))
    if two:
        span += abs(math.log(y))
    return sd if sd <= span else span  # a NaN spread (nothing known) is the span too


@njit(cache=True)
def level_spread(t_ms: float, fc: float, fm: float, cores: FloatArray, mems: FloatArray,
                 two: bool, t_pred: FloatArray, P: FloatArray, dcd: bool, sigma2_ms2: float,
                 sd_now: FloatArray, sd_top: FloatArray) -> None:
    """Fill ``sd_now`` and ``sd_top`` (see the module docstring) for the model predicting
    ``t_pred`` (ms) from ``t_ms`` at (``fc``, ``fm``) MHz; ``cores``, ``mems``: each level's
    clocks (with one domain, ``two`` False, ``fm`` and ``mems`` are not read);
    ``sigma2_ms2``: the residual variance. Scalar arithmetic, no allocation under RLS: this
    runs in every tick of the seed form."""
    n = cores.shape[0]
    cov = P
    known = True
    if dcd:
        cov = np.empty((3, 3))
        known = dcd_lead_covariance(P, 3 if two else 2, cov)
    top = 0
    for k in range(1, n):
        if t_pred[k] < t_pred[top]:
            top = k
    t_top = t_pred[top]
    # the gradient at the top, over its time: g_b(top) / t(top)
    u0 = t_ms * (fc / cores[top] - 1.0) / t_top
    if two:
        u1 = t_ms * (fm / mems[top] - 1.0) / t_top
        u2 = (cores[top] - fc) * 1e-3 / t_top
    else:
        u1 = (cores[top] - fc) * 1e-3 / t_top
        u2 = 0.0
    for k in range(n):
        ym = fm / mems[k] if two else 1.0
        yt = mems[top] / mems[k] if two else 1.0
        if not known:
            sd_now[k] = _capped(math.inf, fc / cores[k], ym, two)
            sd_top[k] = _capped(math.inf, cores[top] / cores[k], yt, two)
            continue
        g0 = t_ms * (fc / cores[k] - 1.0)
        if two:
            g1 = t_ms * (fm / mems[k] - 1.0)
            g2 = (cores[k] - fc) * 1e-3
        else:
            g1 = (cores[k] - fc) * 1e-3
            g2 = 0.0
        s = math.sqrt(sigma2_ms2 * _quad(g0, g1, g2, cov, two)) / t_pred[k]
        sd_now[k] = _capped(s, fc / cores[k], ym, two)
        tk = t_pred[k]
        s = math.sqrt(sigma2_ms2 * _quad(g0 / tk - u0, g1 / tk - u1, g2 / tk - u2, cov, two))
        sd_top[k] = _capped(s, cores[top] / cores[k], yt, two)


def level_spread_ref(t_ms: float, fc: float, fm: float, cores: FloatArray, mems: FloatArray,
                     two: bool, t_pred: FloatArray, P: FloatArray, dcd: bool,
                     sigma2_ms2: float) -> tuple[FloatArray, FloatArray]:
    """NumPy reference of `level_spread`: returns (sd_now, sd_top)."""
    lead = 3 if two else 2
    top = int(np.argmin(t_pred))
    span_now = np.abs(np.log(fc / cores))
    span_top = np.abs(np.log(cores[top] / cores))
    if two:
        span_now = span_now + np.abs(np.log(fm / mems))
        span_top = span_top + np.abs(np.log(mems[top] / mems))
    if dcd:
        try:
            np.linalg.cholesky(P)
        except np.linalg.LinAlgError:
            return span_now, span_top
        cov = np.linalg.inv(P)[:lead, :lead]
    else:
        cov = P[:lead, :lead]
    if not np.all(np.isfinite(cov)):
        return span_now, span_top
    rows = [t_ms * (fc / cores - 1.0)]
    if two:
        rows.append(t_ms * (fm / mems - 1.0))
    rows.append((cores - fc) * 1e-3)
    g = np.stack(rows, axis=1)
    with np.errstate(all="ignore"):
        quad_now = np.maximum(np.einsum("ki,ij,kj->k", g, cov, g), 0.0)
        now = np.sqrt(sigma2_ms2 * quad_now) / t_pred
        v = g / t_pred[:, None] - g[top] / t_pred[top]
        quad_top = np.maximum(np.einsum("ki,ij,kj->k", v, cov, v), 0.0)
        top_sd = np.sqrt(sigma2_ms2 * quad_top)
    return (np.where(now <= span_now, now, span_now),
            np.where(top_sd <= span_top, top_sd, span_top))
