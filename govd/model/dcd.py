"""DCD-RLS: exponentially weighted RLS solved by leading-element dichotomous coordinate descent.

Zakharov, White & Liu (2008), as DESIGN §2 writes it, for a general (non-shift-structured)
regressor:

    R ← λR + h hᵀ + (1 − λ) δ I      (regularised forgetting: R stays >= δ I, no wind-up)
    e ← d − wᵀh
    β ← λ r + e h
    (Δw, r) ← DCD(R, β);  w ← w + Δw

The added (1 − λ) δ I is our choice: with λ < 1 and no excitation, plain R decays to 0 and the
next sample would take an unbounded step; with it R decays to δ I, the prior's information.
At λ = 1 it vanishes and the recursion is exactly the paper's. Cost: the rank-1 update of R is
O(M²) multiply-adds (vectorised), the descent O(Nu·M) additions and no division, against
RLS's ~3·M² multiply-adds and a division.

`dcd_update` is the compiled kernel; `dcd_update_ref` the NumPy reference it is tested
against. Both return 1 after a reset to the prior (w = a_init, R = δI, r = 0), else 0.
"""

from __future__ import annotations

import numpy as np

from govd.kernels.loader import njit
from govd.model.arrays import FloatArray
from govd.model.rls import ordered_sum

RESET = 1


@njit(cache=True)
def dcd_reset(
    w: FloatArray, R: FloatArray, r: FloatArray, a_init: FloatArray, delta: float
) -> None:
    """Put the prior back: w = a_init, R = δ I, r = 0."""
    m = w.shape[0]
    for i in range(m):
        w[i] = a_init[i]
        r[i] = 0.0
        for j in range(m):
            R[i, j] = 0.0
        R[i, i] = delta


@njit(cache=True)
def dcd_update(
    w: FloatArray,
    R: FloatArray,
    r: FloatArray,
    h: FloatArray,
    d: float,
    lam: float,
    delta: float,
    step_h: float,
    mb: int,
    nu: int,
    a_init: FloatArray,
) -> int:
    """One DCD-RLS step with regressor ``h`` and target ``d``; 1 if the state was reset."""
    m = w.shape[0]
    reg = (1.0 - lam) * delta
    e = d
    for i in range(m):
        e -= w[i] * h[i]
    # The whole matrix, row by row and branch-free, so the loop vectorises; R stays exactly
    # symmetric because λ·R[i,j] + h_i·h_j and λ·R[j,i] + h_j·h_i round alike.
    for i in range(m):
        hi = h[i]
        for j in range(m):
            R[i, j] = lam * R[i, j] + hi * h[j]
        R[i, i] += reg
    if not np.isfinite(e):
        dcd_reset(w, R, r, a_init, delta)
        return RESET
    for i in range(m):
        r[i] = lam * r[i] + e * h[i]
    s = 0.5 * step_h
    bits = 1
    for _ in range(nu):
        p = 0
        best = abs(r[0])
        for i in range(1, m):
            if abs(r[i]) > best:
                best = abs(r[i])
                p = i
        stop = False
        while best <= 0.5 * s * R[p, p]:
            bits += 1
            s *= 0.5
            if bits > mb:
                stop = True
                break
        if stop:
            break
        step = s if r[p] > 0.0 else -s
        w[p] += step
        for i in range(m):
            r[i] -= step * R[i, p]
    for i in range(m):
        if not (np.isfinite(w[i]) and np.isfinite(r[i]) and R[i, i] > 0.0):
            dcd_reset(w, R, r, a_init, delta)
            return RESET
    return 0


def dcd_update_ref(
    w: FloatArray,
    R: FloatArray,
    r: FloatArray,
    h: FloatArray,
    d: float,
    lam: float,
    delta: float,
    step_h: float,
    mb: int,
    nu: int,
    a_init: FloatArray,
) -> int:
    """NumPy reference of `dcd_update`."""
    m = w.size

    def reset() -> int:
        w[:] = a_init
        r[:] = 0.0
        R[:] = np.eye(m) * delta
        return RESET

    upper = np.triu(lam * R + np.outer(h, h)) + np.eye(m) * ((1.0 - lam) * delta)
    R[:] = upper + np.triu(upper, 1).T
    e = ordered_sum(np.concatenate(([d], -(w * h))))
    if not np.isfinite(e):
        return reset()
    r[:] = lam * r + e * h
    s = 0.5 * step_h
    bits = 1
    for _ in range(nu):
        p = int(np.argmax(np.abs(r)))
        while abs(r[p]) <= 0.5 * s * R[p, p]:
            bits += 1
            s *= 0.5
            if bits > mb:
                break
        if bits > mb:
            break
        step = s if r[p] > 0.0 else -s
        w[p] += step
        r -= step * R[:, p]
    if not (np.all(np.isfinite(w)) and np.all(np.isfinite(r)) and np.all(np.diag(R) > 0.0)):
        return reset()
    return 0
