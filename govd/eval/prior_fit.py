"""Fitting a `govd.model.prior.Prior` from sweep tables (seed 001: k-means of scaling curves).

Each table is cut into phases where the time at the fastest level jumps
(`govd.eval.convergence.phase_changes`: a new kernel, a new game phase); a phase's curves are
the medians over its units of time and power at each level over those at the top level. Curves
of tables with other level tables are resampled at the first table's relative frequencies
(f / f_max). k-means (scikit-learn) clusters the concatenated time and power curves; each
cluster's a0 and a1 are fitted to its centroid time curve with the model's own features (eq. 10)
over every pair of levels, and its P0 scale is the spread of its members' fitted coefficients
over the time noise.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import pairwise

import numpy as np

from govd.eval.convergence import phase_changes
from govd.formats.sweep import SweepTable
from govd.model.arrays import FloatArray
from govd.model.prior import Cluster, Prior

MIN_PHASE_UNITS = 5
"""Shorter phases are left out: their median curve is mostly noise."""
MIN_NOISE = 0.005
"""Floor of the relative time noise (σ): no measurement is better than 0.5 %."""
MIN_COEF_VAR = 1e-2
"""Floor of the variance of a cluster's coefficients (a0 ± 0.1): one member has no spread, and
the fit over all pairs of levels is only approximate at any one level."""


def phase_bounds(sweep: SweepTable, min_units: int) -> list[tuple[int, int]]:
    """(start, end) units of the table's phases of at least ``min_units`` units."""
    bounds = np.concatenate(([0], phase_changes(sweep), [sweep.units]))
    return [(int(a), int(b)) for a, b in pairwise(bounds) if b - a >= min_units]


def phase_curves(sweep: SweepTable) -> tuple[FloatArray, FloatArray, FloatArray]:
    """(time curves, power curves, relative noise per phase) of one table's phases, the
    curves shape [phases, L] normalised to 1 at the top level."""
    times, powers, noise = [], [], []
    for start, end in phase_bounds(sweep, MIN_PHASE_UNITS):
        t = sweep.time_ms[start:end]
        p = sweep.power_w[start:end]
        times.append(np.median(t / t[:, -1:], axis=0))
        powers.append(np.median(p / np.maximum(p[:, -1:], 1e-9), axis=0))
        noise.append(float(np.std(np.diff(np.log(t[:, -1]))) / np.sqrt(2.0)))
    n = sweep.levels_mhz.size
    return (np.reshape(times, (-1, n)), np.reshape(powers, (-1, n)), np.asarray(noise))


def fit_coefficients(levels_rel: FloatArray, time_curve: FloatArray,
                     top_mhz: float) -> tuple[float, float]:
    """(a0, a1_rel) of eq. 10 fitted by least squares to a normalised time curve over every
    ordered pair of levels (from level i to level j: h = [c_i(f_i/f_j − 1), (f_j − f_i)/1000],
    target c_j − c_i), with a1 normalised as `govd.model.prior.Cluster.a1_rel`."""
    i, j = np.meshgrid(np.arange(levels_rel.size), np.arange(levels_rel.size), indexing="ij")
    i, j = i[i != j], j[i != j]
    f_mhz = levels_rel * top_mhz
    h = np.stack([time_curve[i] * (f_mhz[i] / f_mhz[j] - 1.0), (f_mhz[j] - f_mhz[i]) * 1e-3],
                 axis=1)
    coef, *_ = np.linalg.lstsq(h, time_curve[j] - time_curve[i], rcond=None)
    return float(coef[0]), float(coef[1] * top_mhz * 1e-3)


def fit_prior(sweeps: Sequence[SweepTable], clusters: int = 6, seed: int = 0) -> Prior:
    """Cluster the phases' scaling curves of ``sweeps`` into ``clusters`` groups (fewer when
    there are fewer distinct curves). Raises ValueError when no table has a usable phase."""
    if not sweeps:
        raise ValueError("no sweep tables")
    levels_rel = sweeps[0].levels_mhz / sweeps[0].levels_mhz[-1]
    top_mhz = float(sweeps[0].levels_mhz[-1])
    times, powers, noise = [], [], []
    for sweep in sweeps:
        t, p, n = phase_curves(sweep)
        rel = sweep.levels_mhz / sweep.levels_mhz[-1]
        times += [np.interp(levels_rel, rel, row) for row in t]
        powers += [np.interp(levels_rel, rel, row) for row in p]
        noise += list(n)
    if not times:
        raise ValueError(f"no phase of at least {MIN_PHASE_UNITS} units in the tables")
    time_curves, power_curves = np.asarray(times), np.asarray(powers)
    curves = np.concatenate([time_curves, power_curves], axis=1)
    k = min(clusters, len(np.unique(np.round(curves, 6), axis=0)))
    from sklearn.cluster import KMeans  # the `fit` extra: only this command needs it

    labels = KMeans(n_clusters=k, n_init=10, random_state=seed).fit_predict(curves)
    coefs = np.array([fit_coefficients(levels_rel, c, top_mhz) for c in time_curves])
    time_noise = max(float(np.median(noise)), MIN_NOISE)
    found = []
    for label in range(k):
        members = labels == label
        centroid_t = time_curves[members].mean(axis=0)
        a0, a1_rel = fit_coefficients(levels_rel, centroid_t, top_mhz)
        spread = coefs[members] - (a0, a1_rel)
        cov = spread.T @ spread / max(int(members.sum()) - 1, 1)
        cov += np.eye(2) * MIN_COEF_VAR
        found.append(Cluster(centroid_t, power_curves[members].mean(axis=0), a0, a1_rel,
                             cov / time_noise**2, int(members.sum())))
    found.sort(key=lambda c: c.a0)
    return Prior(levels_rel, top_mhz, time_noise, found,
                 [s.path for s in sweeps if s.path])
