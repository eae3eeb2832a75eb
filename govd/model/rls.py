"""Recursive least squares, covariance form (seed 000, eqs. 15-17), in place on arrays.

    G = P h / (λ + hᵀ P h)
    P ← (P − G hᵀ P) / λ
    a ← a + G (d − hᵀ a)

`rls_update` is the compiled kernel (explicit loops, no allocation: ``work`` is scratch);
`rls_update_ref` is the plain NumPy reference it is tested against. Both keep P symmetric by
construction (only the upper triangle is computed, then mirrored), bound covariance wind-up
by clamping trace(P) to ``max_trace`` (with λ < 1 and a workload that stops exciting the model,
P would otherwise grow as λ^-k), and reset to the prior (a = a_init, P = p0 · I) when the
state stops being finite or positive definite on its diagonal. They return 1 after a reset,
0 otherwise, and never raise.
"""

from __future__ import annotations

import numpy as np

from govd.kernels.loader import njit
from govd.model.arrays import FloatArray

RESET = 1


def ordered_sum(values: FloatArray) -> float:
    """Left-to-right sum (numpy's own sum is pairwise): the kernels' summation order."""
    return float(np.cumsum(values)[-1]) if values.size else 0.0


def ordered_matvec(P: FloatArray, h: FloatArray) -> FloatArray:
    """P @ h accumulated column by column, the kernels' order (BLAS may reorder)."""
    out = np.zeros(h.size)
    for j in range(h.size):
        out += P[:, j] * h[j]
    return out


@njit(cache=True)
def rls_reset(a: FloatArray, P: FloatArray, a_init: FloatArray, p0: float) -> None:
    """Put the prior back: a = a_init, P = p0 · I."""
    m = a.shape[0]
    for i in range(m):
        a[i] = a_init[i]
        for j in range(m):
            P[i, j] = 0.0
        P[i, i] = p0


@njit(cache=True)
def rls_update(
    a: FloatArray,
    P: FloatArray,
    h: FloatArray,
    d: float,
    lam: float,
    max_trace: float,
    a_init: FloatArray,
    p0: float,
    work: FloatArray,
) -> int:
    """One RLS step with regressor ``h`` and target ``d``; 1 if the state had to be reset."""
    m = a.shape[0]
    hph = 0.0
    e = d
    for i in range(m):
        s = 0.0
        for j in range(m):
            s += P[i, j] * h[j]
        work[i] = s
        hph += h[i] * s
        e -= h[i] * a[i]
    denom = lam + hph
    if not (denom > 0.0 and np.isfinite(denom) and np.isfinite(e)):
        rls_reset(a, P, a_init, p0)
        return RESET
    inv = 1.0 / denom
    inv_lam = 1.0 / lam
    trace = 0.0
    for i in range(m):
        gi = work[i] * inv
        a[i] += gi * e
        for j in range(i, m):
            v = (P[i, j] - gi * work[j]) * inv_lam
            P[i, j] = v
            P[j, i] = v
        trace += P[i, i]
    ok = np.isfinite(trace)
    for i in range(m):
        if not (P[i, i] > 0.0 and np.isfinite(a[i])):
            ok = False
    if not ok:
        rls_reset(a, P, a_init, p0)
        return RESET
    if trace > max_trace:
        scale = max_trace / trace
        for i in range(m):
            for j in range(m):
                P[i, j] *= scale
    return 0


def rls_update_ref(
    a: FloatArray,
    P: FloatArray,
    h: FloatArray,
    d: float,
    lam: float,
    max_trace: float,
    a_init: FloatArray,
    p0: float,
) -> int:
    """NumPy reference of `rls_update` (same arithmetic, vectorised; sums run in the kernel's
    order so that the two agree to rounding even where the update cancels)."""
    ph = ordered_matvec(P, h)
    denom = lam + ordered_sum(h * ph)
    e = ordered_sum(np.concatenate(([d], -(h * a))))
    if not (denom > 0.0 and np.isfinite(denom) and np.isfinite(e)):
        a[:] = a_init
        P[:] = np.eye(a.size) * p0
        return RESET
    g = ph * (1.0 / denom)
    a += g * e
    upper = np.triu((P - np.outer(g, ph)) * (1.0 / lam))
    P[:] = upper + np.triu(upper, 1).T
    trace = float(np.trace(P))
    diag = np.diag(P)
    if not (np.isfinite(trace) and np.all(diag > 0.0) and np.all(np.isfinite(a))):
        a[:] = a_init
        P[:] = np.eye(a.size) * p0
        return RESET
    if trace > max_trace:
        P *= max_trace / trace
    return 0
