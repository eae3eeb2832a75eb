"""The seed's baseline (§V-E, its ref. [6]): a tenth-order autoregressive frame-time predictor
learned online by normalised least mean squares (NLMS).

    ŷ_k = wᵀ φ_k,  φ_k = [t_{k-1}, …, t_{k-p}]          (p = 10)
    e_k = t_k − ŷ_k
    w  ← w + η · e_k · φ_k / (ε + φ_kᵀ φ_k)

The weights start at zero and the history fills during the first p samples (the seed: the AR
model "takes the first ten samples to do the initial learning"). The predictor has no frequency
term: it predicts the next frame time from the last p frame times whatever level they ran at,
and it cannot predict at another level. The seed did not predict other levels with it (it
says the AR model "cannot predict the partial derivative ... since it does not have a
frequency term"); `ArNlmsModel` does the same: the one AR prediction is given for every level
(a flat t(f)), and the sensitivity dt/df is NaN (not predicted).

`arnlms_update` is the compiled kernel; `arnlms_update_ref` the NumPy reference it is tested
against.
"""

from __future__ import annotations

import math
from typing import ClassVar

import numpy as np

from govd.kernels.loader import njit
from govd.model import tick as k
from govd.model.arrays import FloatArray
from govd.model.base import Predictions
from govd.model.online import OnlineModel
from govd.model.predict import predict_energy
from govd.model.rls import ordered_sum
from govd.model.settings import ModelSettings
from govd.model.spread import note_error_ref, time_noise

AR_ORDER = 10
"""The seed's (and its ref. [6]'s) model order."""
NLMS_STEP = 0.5
"""Step size η, 0 < η < 2 for NLMS to be stable; 0.5 trades speed for noise rejection."""
NLMS_EPS = 1e-9
"""Regulariser ε of the normalisation (ms²): keeps the step finite on an all-zero history."""


@njit(cache=True)
def arnlms_update(w: FloatArray, history: FloatArray, t_ms: float, step: float,
                  eps: float) -> float:
    """Learn from frame time ``t_ms`` (ms) and shift it into ``history`` (newest first);
    returns the a-priori prediction ŷ = wᵀφ made before learning (ms)."""
    p = w.shape[0]
    y = 0.0
    norm = eps
    for i in range(p):
        y += w[i] * history[i]
        norm += history[i] * history[i]
    gain = step * (t_ms - y) / norm
    for i in range(p):
        w[i] += gain * history[i]
    for i in range(p - 1, 0, -1):
        history[i] = history[i - 1]
    history[0] = t_ms
    return y


@njit(cache=True)
def ar_predict(w: FloatArray, history: FloatArray) -> float:
    """The AR prediction wᵀφ of the next frame time from the current history (ms)."""
    y = 0.0
    for i in range(w.shape[0]):
        y += w[i] * history[i]
    return y


def arnlms_update_ref(w: FloatArray, history: FloatArray, t_ms: float, step: float,
                      eps: float) -> float:
    """NumPy reference of `arnlms_update` (sums in the kernel's order)."""
    y = ordered_sum(w * history)
    norm = ordered_sum(np.concatenate(([eps], history * history)))
    w += (step * (t_ms - y) / norm) * history
    history[1:] = history[:-1].copy()
    history[0] = t_ms
    return y


class ArNlmsModel:
    """AR-NLMS frame time beside the online power model of an `OnlineModel`: a drop-in for the
    governor's model in offline evaluation (``govd eval --algo arnlms``), a
    `govd.model.base.Model` that is not registered as a form (the daemon never runs it).

    Frame time is the AR prediction at every level (no frequency model, see the module
    docstring); power and energy per level come from ``power_model`` (whose own frame-time
    coefficients are ignored), energy by the same rule as the online model's. Knowing nothing
    of how time scales, its spread at each level is the whole physical span of the ratio
    (|log(f/f')|: anywhere between no scaling and 1/f), its per-unit noise the RMS a-priori
    log error over sqrt(2) (as the seed form's, `govd.model.spread`)."""

    form: ClassVar[str] = "arnlms"
    mem_levels_mhz = None

    def __init__(self, power_model: OnlineModel, order: int = AR_ORDER,
                 step: float = NLMS_STEP) -> None:
        """``order``: AR order p (>= 1); ``step``: NLMS step η in (0, 2)."""
        if order < 1:
            raise ValueError(f"AR order must be >= 1, got {order}")
        if not 0.0 < step < 2.0:
            raise ValueError(f"NLMS step must be in (0, 2), got {step}")
        self.power_model = power_model
        self.levels_mhz = power_model.levels_mhz
        self.step = step
        self.w = np.zeros(order)
        self.history = np.zeros(order)
        n_levels = self.levels_mhz.size
        self._out = np.full((5, n_levels), math.nan)
        self.time_ms: FloatArray = self._out[0]
        """Predicted frame time for the next tick, the same at every level. Units: ms."""
        self.power_w: FloatArray = self._out[1]
        """Predicted busy power at each level (from the power model). Units: W."""
        self.energy_mj: FloatArray = self._out[2]
        """Predicted energy per frame at each level. Units: mJ."""
        self.time_sd_now: FloatArray = self._out[3]
        self.time_sd_top: FloatArray = self._out[4]
        self._err = np.zeros(3)
        self.fitted_time_ms = math.nan
        """A-priori prediction of the last frame time, before learning from it. Units: ms."""
        self.samples = 0

    def reset(self) -> None:
        """Forget the weights, the history and the power model."""
        self.power_model.reset()
        self.w[:] = 0.0
        self.history[:] = 0.0
        self._out[:] = math.nan
        self._err[:] = 0.0
        self.fitted_time_ms = math.nan
        self.samples = 0

    @property
    def ready(self) -> bool:
        """True once the history is full (p samples)."""
        return self.samples >= self.w.size

    @property
    def sensitivity_ms_per_mhz(self) -> float:
        """Not predicted: the AR model has no frequency term (NaN)."""
        return math.nan

    @property
    def idle_power_w(self) -> float:
        """Idle power used in the energy predictions. Units: W."""
        return self.power_model.idle_power_w

    @property
    def settings(self) -> ModelSettings:
        """The power model's settings."""
        return self.power_model.settings

    @property
    def P(self) -> FloatArray:
        """The power model's frame-time covariance (what the stress detector checks)."""
        return self.power_model.P

    def update(self, frame_time_ms: float, freq_mhz: float, counters: FloatArray,
               power_w: float = math.nan, busy: float = math.nan,
               mem_activity: float = math.nan, deadline_ms: float = math.nan,
               mem_freq_mhz: float = math.nan) -> int:
        """Learn from one tick (arguments as `OnlineModel.update`); returns its flags."""
        flags = self.power_model.update(frame_time_ms, freq_mhz, counters, power_w, busy,
                                        mem_activity, deadline_ms)
        if not (math.isfinite(frame_time_ms) and frame_time_ms > 0):
            return flags
        fit = arnlms_update(self.w, self.history, frame_time_ms, self.step, NLMS_EPS)
        self.fitted_time_ms = fit if self.ready else math.nan
        if self.ready:
            note_error_ref(self._err, frame_time_ms, fit)
        self.samples += 1
        self.time_ms[:] = max(ar_predict(self.w, self.history), 0.0)
        levels = self.levels_mhz
        self.time_sd_now[:] = np.abs(np.log(freq_mhz / levels))
        self.time_sd_top[:] = np.abs(np.log(levels[-1] / levels))
        pm = self.power_model
        mem = mem_activity if math.isfinite(mem_activity) and 0 <= mem_activity <= 1 else 0.0
        predict_energy(pm.pw[k.C], pm.lv[k.G], mem, self.time_ms, deadline_ms,
                       pm.cfg[k.IDLE_W], self.power_w, self.energy_mj)
        return flags

    def predictions(self) -> Predictions:
        """The record of the last `update` (`govd.model.base.Predictions`)."""
        return Predictions(
            time_ms=self.time_ms, power_w=self.power_w, energy_mj=self.energy_mj,
            time_sd_now=self.time_sd_now, time_sd_top=self.time_sd_top,
            time_noise=time_noise(self._err, self.settings.noise_prior),
            ready=self.ready, work_ticks=max(self.power_model.stats_dict()["ticks"] - 1, 0),
            sensitivity_ms_per_mhz=math.nan, fitted_time_ms=self.fitted_time_ms,
        )

    def stats_dict(self) -> dict[str, int]:
        """The power model's counters, with ``updates`` the AR samples learned from."""
        stats = self.power_model.stats_dict()
        stats["updates"] = self.samples
        return stats
