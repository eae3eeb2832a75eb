"""Seed 000's offline feature selection (§IV-C, §V-B): which counters the online model gets.

Step 1 drops every counter whose |Pearson r| with the GPU frequency reaches 0.1: eq. 10 assumes
∂x/∂f = 0, and a counter that follows the frequency is collinear with the frequency terms.
Step 2 is the Lasso of eq. 14 with 10-fold cross-validation over the remaining Δcounters. The
two frequency terms are always kept (the seed's four features are "the two change in the
frequency terms" and two counters), so they are left out of the ℓ1 penalty: both sides are
regressed on them first and the Lasso fits the residuals (Frisch–Waugh–Lovell: the same counter
coefficients as leaving them unpenalised in one fit). Counter columns are standardised, so η is
scikit-learn's ``alpha`` for the objective ‖r − Zw‖²/(2K) + η‖w‖₁ on standardised Z.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from govd.model.arrays import FloatArray
from govd.research.regression_data import RegressionData

FREQUENCY_CORRELATION_LIMIT = 0.1
"""Seed 000 §V-B: counters whose |Pearson r| with frequency reaches 0.1 are dropped."""
FREQUENCY_TERMS = ("t_prev*(f_prev/f-1)", "delta_f_ghz")
"""Names of the two always-kept frequency features of eq. 10."""
CV_FOLDS = 10
N_ETAS = 100


def frequency_correlation(values: FloatArray, freq_mhz: FloatArray) -> float:
    """Pearson r of a counter with the frequency over the rows where both are finite; NaN when
    either does not vary there."""
    ok = np.isfinite(values) & np.isfinite(freq_mhz)
    x, f = values[ok], freq_mhz[ok]
    if x.size < 2 or x.std() <= 0.0 or f.std() <= 0.0:
        return float("nan")
    return float(np.corrcoef(x, f)[0, 1])


@dataclass(frozen=True)
class Prefilter:
    """Step 1's verdict on every counter."""

    kept: dict[str, float]
    """Frequency-independent counters and their |r| < 0.1 Pearson r, by name (sorted)."""
    dropped: dict[str, float]
    """Frequency-dependent counters and their r."""
    constant: list[str]
    """Counters that never change (nothing to learn from, r undefined)."""


def frequency_prefilter(freq_mhz: FloatArray, counters: Mapping[str, FloatArray],
                        limit: float = FREQUENCY_CORRELATION_LIMIT) -> Prefilter:
    """Step 1: split `counters` (each shaped like `freq_mhz`, any shape) by |Pearson r| with the
    frequency against `limit`."""
    kept: dict[str, float] = {}
    dropped: dict[str, float] = {}
    constant: list[str] = []
    freq = np.asarray(freq_mhz, dtype=np.float64).ravel()
    for name in sorted(counters):
        values = np.asarray(counters[name], dtype=np.float64).ravel()
        r = frequency_correlation(values, freq)
        if np.isnan(r):
            constant.append(name)
        elif abs(r) < limit:
            kept[name] = r
        else:
            dropped[name] = r
    return Prefilter(kept, dropped, constant)


def counter_scale(values: FloatArray) -> float:
    """The divisor that makes a counter's changes of order 1: its standard deviation over the
    finite values (1 when it does not vary)."""
    flat = np.asarray(values, dtype=np.float64).ravel()
    flat = flat[np.isfinite(flat)]
    std = float(flat.std()) if flat.size else 0.0
    return std if std > 0.0 and np.isfinite(std) else 1.0


@dataclass(frozen=True)
class Choice:
    """One point of the η path picked as the model's feature set."""

    eta: float
    counters: list[str]
    """Selected counters, in the order of the candidates."""
    coefficients: list[float]
    """Their Lasso coefficients on standardised, frequency-residualised Δcounters (ms)."""
    cv_mse: float
    """Mean cross-validated MSE at `eta`. Units: ms²."""

    @property
    def n_features(self) -> int:
        """Features of the model: the two frequency terms plus the counters."""
        return len(FREQUENCY_TERMS) + len(self.counters)


@dataclass(frozen=True)
class Selection:
    """Step 2's result: the CV curve over η (descending, as fitted) and the two usual choices."""

    etas: FloatArray
    """η grid, descending, shape [E]."""
    cv_mse_mean: FloatArray
    """Mean CV MSE per η, shape [E]. Units: ms²."""
    cv_mse_se: FloatArray
    """Standard error of the CV MSE over the folds per η, shape [E]. Units: ms²."""
    n_features: FloatArray
    """Features selected at each η on all samples (frequency terms included), shape [E]."""
    minimum: Choice
    """η_min: the least CV MSE."""
    one_se: Choice
    """η_1se: the largest η whose CV MSE is within one standard error of the minimum."""
    samples: int
    folds: int


def _residualise(y: FloatArray, basis: FloatArray) -> FloatArray:
    """`y` (vector or columns) minus its least-squares fit on `basis` plus an intercept."""
    design = np.column_stack([np.ones(basis.shape[0]), basis])
    coef, *_ = np.linalg.lstsq(design, y, rcond=None)
    return np.asarray(y - design @ coef)


def select_features(data: RegressionData, folds: int = CV_FOLDS,
                    n_etas: int = N_ETAS) -> Selection:
    """Step 2: Lasso with `folds`-fold cross-validation (contiguous folds: consecutive samples
    share a unit, so shuffling would leak) over the counters of `data`, frequency terms kept.

    Raises ValueError when there are no counters or fewer than 2·`folds` samples."""
    from sklearn.linear_model import LassoCV, lasso_path

    names = list(data.counter_names)
    if not names:
        raise ValueError("no candidate counters to select from")
    if data.samples < 2 * folds:
        raise ValueError(f"{data.samples} samples: {folds}-fold cross-validation needs at least "
                         f"{2 * folds}")
    target = _residualise(data.delta_time_ms, data.frequency_terms)
    z = _residualise(data.counter_deltas, data.frequency_terms)
    std = z.std(axis=0)
    z = (z - z.mean(axis=0)) / np.where(std > 0, std, 1.0)
    cv = LassoCV(cv=folds, alphas=n_etas, max_iter=20_000).fit(z, target)
    etas = np.asarray(cv.alphas_, dtype=np.float64)
    mse = np.asarray(cv.mse_path_, dtype=np.float64)  # [E, folds]
    mean = mse.mean(axis=1)
    se = mse.std(axis=1, ddof=1) / np.sqrt(mse.shape[1])
    _, coefs, _ = lasso_path(z, target - target.mean(), alphas=etas, max_iter=20_000)
    nonzero = np.abs(coefs) > 0.0  # [N, E]
    i_min = int(np.argmin(mean))
    # etas descend, so the first index within one SE is the largest such η.
    i_1se = int(np.flatnonzero(mean <= mean[i_min] + se[i_min])[0])

    def choice(i: int) -> Choice:
        keep = np.flatnonzero(nonzero[:, i])
        return Choice(float(etas[i]), [names[j] for j in keep],
                      [float(coefs[j, i]) for j in keep], float(mean[i]))

    return Selection(etas, mean, se, nonzero.sum(axis=0) + float(len(FREQUENCY_TERMS)),
                     choice(i_min), choice(i_1se), data.samples, folds)
