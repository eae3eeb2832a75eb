"""The compiled kernels equal their NumPy references, and RLS equals the textbook and padasip."""

from __future__ import annotations

import math

import numpy as np
import pytest

from govd.model import tick as k
from govd.model.dcd import dcd_update, dcd_update_ref
from govd.model.online import OnlineModel
from govd.model.rls import rls_update, rls_update_ref
from govd.model.settings import ModelSettings

RTOL = 1e-12


def assert_close(got: np.ndarray, want: np.ndarray) -> None:
    """Equal to RTOL relative to the array's scale (an element that cancels to near zero
    carries the rounding of its operands, not of itself)."""
    scale = float(np.nanmax(np.abs(want))) if np.any(np.isfinite(want)) else 0.0
    np.testing.assert_allclose(got, want, rtol=RTOL, atol=RTOL * scale, equal_nan=True)


def random_spd(rng: np.random.Generator, m: int) -> np.ndarray:
    a = rng.normal(size=(m, m))
    p = a @ a.T + np.eye(m) * rng.uniform(0.01, 10.0)
    return p * 10.0 ** rng.uniform(-3, 3)


CASES = 6_000
"""Random single steps per kernel: each draws its size (1-20), scales and forgetting afresh."""


def test_rls_kernel_equals_numpy_reference_per_step() -> None:
    rng = np.random.default_rng(0)
    for _ in range(CASES):
        m = int(rng.integers(1, 21))
        a = rng.normal(size=m)
        P = random_spd(rng, m)
        h = rng.normal(size=m) * 10.0 ** rng.uniform(-2, 2)
        d = float(rng.normal() * 10)
        lam = float(rng.uniform(0.9, 1.0))
        a_init = np.ones(m)
        max_trace = float(np.trace(P)) * rng.uniform(0.5, 2.0)
        a2, P2 = a.copy(), P.copy()
        rc1 = rls_update(a, P, h, d, lam, max_trace, a_init, 1e3, np.empty(m))
        rc2 = rls_update_ref(a2, P2, h, d, lam, max_trace, a_init, 1e3)
        assert rc1 == rc2
        assert_close(a, a2)
        assert_close(P, P2)


def test_dcd_kernel_equals_numpy_reference_per_step() -> None:
    rng = np.random.default_rng(1)
    for _ in range(CASES):
        m = int(rng.integers(1, 21))
        w = rng.normal(size=m)
        R = random_spd(rng, m)
        r = rng.normal(size=m)
        h = rng.normal(size=m)
        d = float(rng.normal())
        lam = float(rng.uniform(0.9, 1.0))
        nu = int(rng.integers(1, 5))
        w2, R2, r2 = w.copy(), R.copy(), r.copy()
        rc1 = dcd_update(w, R, r, h, d, lam, 1e-3, 16.0, 16, nu, np.ones(m))
        rc2 = dcd_update_ref(w2, R2, r2, h, d, lam, 1e-3, 16.0, 16, nu, np.ones(m))
        assert rc1 == rc2
        assert_close(w, w2)
        assert_close(R, R2)
        assert_close(r, r2)


def _state(model: OnlineModel) -> list[np.ndarray]:
    return [model.vecs, model.P, model.pw, model.Pc, model.lv, model.cfg, model.icfg,
            model.stats]


def _compared(model: OnlineModel) -> list[np.ndarray]:
    """Everything but the kernel's scratch rows (the reference needs no scratch)."""
    vec_rows = [r for r in range(k.N_VEC_ROWS) if r != k.WORK]
    return [model.vecs[vec_rows], model.P, model.pw[[k.C, k.C_INIT, k.PHI]], model.Pc,
            model.stats, model.out, model.scal]


TRAJECTORY = 5_000
"""Samples of the one trajectory: 50 memory lengths of the forgetting factor 0.99 (a
difference between kernel and reference would have settled into a steady drift long before),
with 250 invalid samples among them; every kind of tick it makes (valid, each invalid sample,
with and without a deadline) comes within its first 8 samples."""


@pytest.mark.parametrize("algorithm", ["rls", "dcd"])
def test_tick_kernel_equals_numpy_reference_over_a_long_trajectory(algorithm: str) -> None:
    """The whole tick (features, update, power, predictions) against `model_tick_ref`, on one
    trajectory including invalid samples. A forgetting factor < 1 keeps rounding from piling up."""
    rng = np.random.default_rng(2)
    levels = np.array([200, 244, 267, 311, 355, 400, 444, 489, 511.0])
    settings = ModelSettings(algorithm=algorithm, counters=("c1", "c2", "c3"), mu=1e-3,
                             forgetting=0.99)
    fast = OnlineModel(levels, settings)
    ref = OnlineModel(levels, settings)
    x = np.zeros(3)
    for i in range(TRAJECTORY):
        f = float(levels[rng.integers(levels.size)])
        c = rng.uniform(1, 64)
        t = c * (0.6 * 400 / f + 0.4) * (1 + 0.01 * rng.normal())
        if i % 20 == 7:
            t = [math.nan, math.inf, -1.0, 0.0, 1e300][i % 5]
        x[:] = (c, c * 0.5 + rng.normal(), rng.normal())
        power = 1.0 + 0.002 * f * rng.uniform(0.3, 1.0)
        busy = float(rng.uniform(0, 1))
        deadline = 16.7 if i % 2 else math.nan
        args = (t, f, power, busy, 0.3, deadline)
        flags1 = k.model_tick(fast.state, x, *args)
        flags2 = k.model_tick_ref(*_state(ref), x, ref.out, ref.scal, *args)
        assert flags1 == flags2
        if i % 10 == 0 or i > TRAJECTORY - 10:
            for got, want in zip(_compared(fast), _compared(ref), strict=True):
                assert_close(np.asarray(got, dtype=float), np.asarray(want, dtype=float))


@pytest.mark.parametrize("m", [4, 20])
def test_rls_equals_padasip_filter_rls(m: int) -> None:
    padasip = pytest.importorskip("padasip")
    rng = np.random.default_rng(3)
    lam, mu = 0.995, 1e-2
    flt = padasip.filters.FilterRLS(n=m, mu=lam, eps=mu, w="zeros")
    a = np.zeros(m)
    P = np.eye(m) / mu
    truth = rng.normal(size=m)
    for _ in range(5000):
        h = rng.normal(size=m)
        d = float(h @ truth + 0.1 * rng.normal())
        flt.adapt(d, h)
        rls_update(a, P, h, d, lam, 1e300, np.zeros(m), 1.0 / mu, np.empty(m))
        np.testing.assert_allclose(a, flt.w, rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("mu", [1e-2, 1e-5, 1e-8])
def test_rls_reaches_batch_regularised_least_squares(mu: float) -> None:
    """With λ = 1, RLS minimises eq. 18: (a − a_init)ᵀ μ I (a − a_init) + Σ (d − hᵀa)²."""
    rng = np.random.default_rng(4)
    m, n = 5, 2000
    H = rng.normal(size=(n, m)) * [5, 0.5, 1, 2, 0.1]
    d = H @ rng.normal(size=m) + rng.normal(size=n)
    a_init = np.ones(m)
    a, P = a_init.copy(), np.eye(m) / mu
    for h, target in zip(H, d, strict=True):
        rls_update(a, P, h, float(target), 1.0, 1e300, a_init, 1.0 / mu, np.empty(m))
    batch = np.linalg.solve(mu * np.eye(m) + H.T @ H, mu * a_init + H.T @ d)
    np.testing.assert_allclose(a, batch, rtol=1e-7, atol=1e-9)


@pytest.mark.parametrize(("m", "n_levels", "lv_rows"), [(2, 2, 2), (5, 9, 2), (23, 30, 4)])
def test_state_views_tile_the_buffer_without_overlap(m: int, n_levels: int, lv_rows: int) -> None:
    """Every part of the state is a view of the one buffer the kernel gets, shaped as the
    kernels index it, and no two parts share an element."""
    state = k.new_state(m, n_levels, lv_rows)
    views = k.unpack.py_func(state)
    shapes = [v.shape for v in views]
    assert shapes == [(k.N_VEC_ROWS, m), (m, m), (4, 4), (4, 4), (lv_rows, n_levels),
                      (k.N_CFG,), (k.N_ICFG,), (k.N_STATS,), (k.N_OUT, n_levels), (k.N_SCAL,)]
    for number, view in enumerate(views, start=1):
        assert np.shares_memory(view, state) and view.flags.c_contiguous
        assert np.all(view == 0.0)
        view[...] = number
    assert np.array_equal(state[: k.N_HEADER], [m, n_levels, lv_rows])
    counts = np.bincount(state[k.N_HEADER:].astype(np.int64), minlength=len(views) + 1)
    assert counts[0] == 0 and list(counts[1:]) == [v.size for v in views]
    compiled = k.unpack(state)
    for got, want in zip(compiled, views, strict=True):
        assert np.array_equal(got, want)
