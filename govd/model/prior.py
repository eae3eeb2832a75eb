"""Offline priors for the frame-time model (seed 001, Wu et al.): clusters of scaling curves.

Kernels and frames scale with frequency in a few distinct ways. `govd fit-prior` clusters the
normalised scaling curves of measured work (`govd.eval.prior_fit`) and writes, per cluster, the
centroid curves and the frame-time model's coefficients fitted to them (the file:
`govd.formats.prior`). A governor given a `Prior` watches its first samples, picks the cluster
whose time curve fits the observed (frequency, time) points best, and seeds a0, a1 and the
covariance of the model from it instead of a_init = 1 ("full scalability").

Seeding, with t_top the frame time at the device's top level estimated from the cluster's
curve: a = [a0, a1_rel · t_top · 1000 / f_max]; the (a0, a1) block of the RLS covariance is
D · p0_scale · D with D = diag(1 / t_top, 1000 / f_max) (the covariance of a over the variance
of the time noise, σ·t_top ms); DCD-RLS gets its inverse as R.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from govd.model.arrays import FloatArray

SEED_AFTER_SAMPLES = 4
"""Valid samples (after a start or reset) before the cluster is chosen."""
MAX_WAIT_SAMPLES = 64
"""Give up seeding when the first samples never cover two levels (about 3 s)."""


@dataclass(frozen=True)
class Cluster:
    """One scaling behaviour: centroid curves and the model coefficients fitted to them."""

    time_curve: FloatArray
    """Time over the time at the top level, at each `Prior.levels_rel`."""
    power_curve: FloatArray
    """Power over the power at the top level, at each `Prior.levels_rel`."""
    a0: float
    """Eq. 10 coefficient of t_prev·(f_prev/f − 1) (dimensionless)."""
    a1_rel: float
    """a1 normalised: a1 (ms/GHz) / t_top (ms) · f_max (MHz) / 1000 (dimensionless)."""
    p0_scale: FloatArray
    """Covariance of (a0, a1_rel) over time_noise², shape [2, 2]."""
    members: int
    """Curves of the training set in the cluster."""


@dataclass(frozen=True)
class Prior:
    """Clusters of scaling curves sampled at relative frequencies (see the module docstring)."""

    levels_rel: FloatArray
    top_mhz: float
    time_noise: float
    clusters: list[Cluster]
    sources: list[str] = field(default_factory=list)

    def best_cluster(self, freq_mhz: FloatArray, time_ms: FloatArray, top_mhz: float) -> int:
        """Index of the cluster whose time curve, scaled, fits the observed points best (least
        squares in log time, one mean per distinct frequency so a long stay weighs once)."""
        freqs = np.unique(freq_mhz)
        mean_log = np.array([np.log(time_ms[freq_mhz == f]).mean() for f in freqs])
        rel = freqs / top_mhz
        misfit = []
        for c in self.clusters:
            resid = mean_log - np.log(np.interp(rel, self.levels_rel, c.time_curve))
            misfit.append(float(np.sum((resid - resid.mean()) ** 2)))
        return int(np.argmin(misfit))


def seed_coefficients(prior: Prior, index: int, t_top_ms: float,
                      device_top_mhz: float) -> tuple[FloatArray, FloatArray]:
    """(a0, a1 in ms/GHz) and their RLS covariance block (2×2) from cluster ``index`` for work
    taking ``t_top_ms`` (ms) at the device's top level ``device_top_mhz`` (MHz)."""
    c = prior.clusters[index]
    per_ghz = 1000.0 / device_top_mhz
    a = np.array([c.a0, c.a1_rel * t_top_ms * per_ghz])
    d = np.diag([1.0 / t_top_ms, per_ghz])
    return a, d @ c.p0_scale @ d


class PriorSeeder:
    """Watches a model's first valid samples after a start or reset and seeds it once from the
    best-fitting cluster (`SEED_AFTER_SAMPLES` samples covering at least two levels)."""

    def __init__(self, prior: Prior, levels_mhz: FloatArray) -> None:
        """``levels_mhz``: the device's levels, ascending (MHz)."""
        self.prior = prior
        self.top_mhz = float(levels_mhz[-1])
        self._freq: list[float] = []
        self._time: list[float] = []
        self.cluster: int | None = None
        """The cluster seeded since the last reset, None before."""
        self.done = False

    def reset(self) -> None:
        """Start watching again (the model was reset)."""
        self._freq.clear()
        self._time.clear()
        self.cluster = None
        self.done = False

    def observe(self, freq_mhz: float, time_ms: float) -> tuple[int, FloatArray, FloatArray] | None:
        """Record one sample; when it is time to seed, returns (cluster, a[:2], P block) (see
        `seed_coefficients`), else None."""
        if self.done or not (math.isfinite(time_ms) and time_ms > 0 and freq_mhz > 0):
            return None
        self._freq.append(freq_mhz)
        self._time.append(time_ms)
        n = len(self._freq)
        if n < SEED_AFTER_SAMPLES or len(set(self._freq)) < 2:
            if n >= MAX_WAIT_SAMPLES:
                self.done = True
            return None
        self.done = True
        freq, times = np.asarray(self._freq), np.asarray(self._time)
        best = self.prior.best_cluster(freq, times, self.top_mhz)
        rel = freq[-1] / self.top_mhz
        at_latest = float(np.interp(rel, self.prior.levels_rel,
                                    self.prior.clusters[best].time_curve))
        self.cluster = best
        a, p = seed_coefficients(self.prior, best, times[-1] / at_latest, self.top_mhz)
        return best, a, p
