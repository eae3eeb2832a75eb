"""Exact power-of-two rescaling of the counters' units in a learned frame-time model.

Each counter enters the model divided by a scale s_i, chosen so that the scaled value z_i = x_i/s_i
is of order 1: with the seed's P0 = I/μ = 1e14·I, raw counters of ~1e4 make the covariance
update cancel. A counter that grows (or shrinks) by orders of magnitude during a run leaves that
range again, so whenever a scaled counter leaves [BAND_LO, BAND_HI] the kernel flags it
(`govd.model.tick.RESCALE_DUE`) and `rescale_counters` changes its scale by 2^e, bringing z_i back
into (1/2, 1], and transforms the learned state to the new units with D = diag(2^e):

    a ← D a,  prev ← D⁻¹ prev,  h ← D⁻¹ h                        (a_i z_i unchanged)
    RLS:      P ← D P D           (the covariance of D a)
    DCD-RLS:  R ← D⁻¹ R D⁻¹,  r ← D⁻¹ r                           (R ~ Σ h hᵀ, r ~ Σ e h)

Multiplying by a power of two is exact in floating point (short of overflow or subnormals), so
every prediction is unchanged, and an RLS run at λ = 1 goes on bit for bit as it would have
without the rescale. RLS's wind-up bound on trace(P) is moved by the ratio the rescale changed
the trace by (never below its configured value), so the clamp keeps its headroom in the new
units. The prior a_init is left as it is: it is a prior in scaled units, which is what a reset
should go back to. DCD-RLS's descent picks coordinates by |r_i| and steps in units of a_i, so its
later updates depend on the units; the rescale keeps the least-squares problem it solves, not
its path.
"""

from __future__ import annotations

import numpy as np

from govd.model import tick as k
from govd.model.arrays import FloatArray, IntArray

BAND_LO = k.COUNTER_BAND_LO
BAND_HI = k.COUNTER_BAND_HI


def band_exponents(scaled: FloatArray) -> IntArray:
    """Per scaled counter value, the power of two e that brings |z|/2^e into (1/2, 1] where z is
    finite, non-zero and outside [BAND_LO, BAND_HI]; 0 elsewhere (no change)."""
    magnitude = np.abs(np.asarray(scaled, dtype=np.float64))
    with np.errstate(all="ignore"):
        out = np.isfinite(magnitude) & (
            (magnitude > BAND_HI) | ((magnitude > 0.0) & (magnitude < BAND_LO))
        )
        exponent = np.ceil(np.log2(np.where(out, magnitude, 1.0)))
    return exponent.astype(np.int64)


def rescale_counters(
    vecs: FloatArray, cov: FloatArray, cfg: FloatArray, lead: int, rls: bool, base_trace: float,
    learned: bool = True,
) -> IntArray:
    """Rescale the counters (features ``lead``.. of the `govd.model.tick` rows ``vecs``) whose
    latest scaled value left the band, and the model state with them, in place. ``cov`` is
    RLS's P (``rls``) or DCD-RLS's R; ``base_trace`` the configured bound on trace(P). Before
    any update (``learned`` False) the state is still the prior, which is stated in scaled
    units, so only the scales and the latest sample change. Returns the exponents applied, one
    per feature (0 for the leading features and unchanged counters); none at all where the
    new state would not be finite (a counter near the floating-point range: the kernel's own
    checks deal with it)."""
    exponents = np.zeros(vecs.shape[1], dtype=np.int64)
    exponents[lead:] = band_exponents(vecs[k.PREV, lead:])
    if not exponents.any():
        return exponents
    rows = [k.SCALE, k.PREV, k.H, k.A, k.RES]
    signs = np.array([1, -1, -1, 1, -1])[:, None]
    with np.errstate(all="ignore"):
        new_vecs = np.ldexp(vecs[rows], signs * exponents)
        pair_exponents = exponents[:, None] + exponents[None, :]
        new_cov = np.ldexp(cov, pair_exponents if rls else -pair_exponents)
    if not (np.all(np.isfinite(new_vecs[:3])) and np.all(new_vecs[0] > 0.0)):
        return np.zeros_like(exponents)
    if not learned:
        vecs[rows[:3]] = new_vecs[:3]
        return exponents
    if not (np.all(np.isfinite(new_vecs)) and np.all(np.isfinite(new_cov))):
        return np.zeros_like(exponents)
    if rls:
        trace_before, trace_after = float(np.trace(cov)), float(np.trace(new_cov))
        with np.errstate(all="ignore"):
            bound = cfg[k.MAX_TRACE] * (trace_after / trace_before)
        if trace_before > 0.0 and np.isfinite(bound):
            cfg[k.MAX_TRACE] = max(base_trace, bound)
        new_vecs[-1] = vecs[k.RES]  # RLS keeps no residual vector
    vecs[rows] = new_vecs
    cov[:] = new_cov
    return exponents
