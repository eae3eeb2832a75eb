"""`OnlineModel`: the seed form (seed 000's eq. 10) of one device, as preallocated arrays.

It owns the state buffer that `govd.model.tick.model_tick` updates in place (with views of its
parts: `vecs`, `P`, `pw`, `Pc`, `lv`, `cfg`, `icfg`, `stats`, `out`, `scal`), and exposes the
predictions as read-only views into them (valid until the next `update`). Its spread is derived
from the a-priori errors and the RLS covariance (`govd.model.spread`); it has no notion of a
change of work. The form ``seed`` (`govd.model.seed_form`) builds it, or
`govd.model.two_domain.TwoDomainModel` for (core, memory) pairs.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import ClassVar

import numpy as np

from govd.model import tick as k
from govd.model.arrays import FloatArray
from govd.model.base import Predictions
from govd.model.rescale import rescale_counters
from govd.model.settings import MAX_LEVELS, ModelSettings
from govd.model.spread import blend
from govd.model.tick import RESCALE_DUE, model_tick

_NO_COUNTERS = np.zeros(0)


def default_volts(levels_mhz: FloatArray) -> FloatArray:
    """V affine in f from 0.7 to 1.0 (relative units) when the device exposes no table."""
    lo, hi = float(levels_mhz[0]), float(levels_mhz[-1])
    span = hi - lo if hi > lo else 1.0
    return 0.7 + 0.3 * (levels_mhz - lo) / span


class OnlineModel:
    """Online frame-time (eq. 10) and power models of one device over its level table."""

    form: ClassVar[str] = "seed"
    lead_features: ClassVar[int] = 2
    """Features ahead of the counters (a0: scalable time, a1: Δf); a subclass may add more."""
    mem_levels_mhz: FloatArray | None = None
    """One clock domain (`TwoDomainModel` sets its pairs' memory clocks)."""

    def __init__(
        self,
        levels_mhz: Sequence[float] | FloatArray,
        settings: ModelSettings | None = None,
        idle_power_w: float = math.nan,
    ) -> None:
        """``levels_mhz``: every level, ascending (2..`MAX_LEVELS`). ``idle_power_w``: known
        idle power (W), or NaN to use the learned static term."""
        self.settings = settings = settings or ModelSettings()
        lv = self._level_table(levels_mhz, settings)
        self.state = k.new_state(self.n_coefficients, lv.shape[1], lv.shape[0])
        """Everything the kernel reads and writes, in one buffer; the arrays below view it."""
        (self.vecs, self.P, self.pw, self.Pc, self.lv, self.cfg, self.icfg, self.stats,
         self.out, self.scal) = k.unpack.py_func(self.state)
        self.lv[:] = lv
        self.levels_mhz = self.lv[k.LEVELS].copy()
        self._rescale = True
        self._configure(idle_power_w)
        self.reset()
        self.time_ms: FloatArray = self.out[k.OUT_T]
        """Predicted frame time at each level for the next tick (view). Units: ms."""
        self.power_w: FloatArray = self.out[k.OUT_P]
        """Predicted power while busy at each level (view). Units: W."""
        self.energy_mj: FloatArray = self.out[k.OUT_E]
        """Predicted energy per frame at each level under the deadline (view). Units: mJ."""
        self.time_sd_now: FloatArray = self.out[k.OUT_SD_NOW]
        """Standard deviation of log(t(level) / t(running level)) (view, `govd.model.spread`)."""
        self.time_sd_top: FloatArray = self.out[k.OUT_SD_TOP]
        """Standard deviation of log(t(level) / t(fastest level)) (view)."""
        for view in (self.time_ms, self.power_w, self.energy_mj, self.time_sd_now,
                     self.time_sd_top):
            view.flags.writeable = False
        self._noise_sq = settings.noise_prior ** 2
        self._record = Predictions(
            time_ms=self.time_ms, power_w=self.power_w, energy_mj=self.energy_mj,
            time_sd_now=self.time_sd_now, time_sd_top=self.time_sd_top, time_noise=math.nan,
            ready=False, work_ticks=0, sensitivity_ms_per_mhz=math.nan,
            fitted_time_ms=math.nan)

    def _level_table(self, levels_mhz: Sequence[float] | FloatArray, settings: ModelSettings
                     ) -> FloatArray:
        """The `govd.model.tick` level rows [levels MHz, g(f)], after checking the levels."""
        levels = np.asarray(levels_mhz, dtype=np.float64)
        if levels.ndim != 1 or not (2 <= levels.size <= MAX_LEVELS):
            raise ValueError(f"need 2..{MAX_LEVELS} levels, got {levels.size}")
        if not (np.all(np.isfinite(levels)) and levels[0] > 0 and np.all(np.diff(levels) > 0)):
            raise ValueError("levels must be positive, finite and strictly ascending")
        volts = np.asarray(settings.volts, dtype=np.float64) if settings.volts else None
        if volts is None:
            volts = default_volts(levels)
        elif volts.shape != levels.shape or not np.all(volts > 0):
            raise ValueError("volts needs one positive voltage per level")
        lv = np.empty((2, levels.size))
        lv[k.LEVELS] = levels
        lv[k.G] = (levels / levels[-1]) * (volts / volts.max()) ** 2
        return lv

    @property
    def n_coefficients(self) -> int:
        """Coefficients of the frame-time model: the leading terms, then one per counter."""
        return self.lead_features + len(self.settings.counters)

    def _configure(self, idle_power_w: float) -> None:
        s = self.settings
        m = self.n_coefficients
        self.cfg[k.LAM] = s.forgetting
        self.cfg[k.MU] = s.mu
        self._base_trace = s.max_trace_factor * m / s.mu
        self.cfg[k.PLAM] = s.power_forgetting
        self.cfg[k.PP0] = s.power_p0
        self.cfg[k.PMAX_TRACE] = 4.0 * s.power_p0
        self.cfg[k.IDLE_W] = idle_power_w
        self.cfg[k.DCD_H] = s.dcd_h
        self.cfg[k.SIGMA0] = s.noise_prior
        self.icfg[k.ALGO] = k.ALGO_RLS if s.algorithm == "rls" else k.ALGO_DCD
        self.icfg[k.MB] = s.dcd_mb
        self.icfg[k.NU] = s.dcd_nu
        self.icfg[k.WARMUP] = m if s.warmup < 0 else s.warmup
        self.vecs[k.A_INIT] = s.a_init
        self.vecs[k.SCALE] = 1.0
        if s.counter_scales:
            self.vecs[k.SCALE, self.lead_features:] = s.counter_scales
        # Power prior: dynamic power only (c2 = 1 W at the top level), so that before any
        # measurement the energy policy prefers the slowest level that meets the target.
        self.pw[k.C_INIT] = (0.0, 0.0, 1.0, 0.0)

    def reset(self) -> None:
        """Forget everything learned: coefficients back to their priors, history cleared."""
        m = self.n_coefficients
        self.vecs[k.A] = self.vecs[k.A_INIT]
        self.vecs[k.RES] = 0.0
        self.vecs[k.PREV] = 0.0
        if self.settings.algorithm == "rls":
            self.P[:] = np.eye(m) / self.settings.mu
        else:
            self.P[:] = np.eye(m) * self.settings.mu
        self.cfg[k.MAX_TRACE] = self._base_trace
        self.pw[k.C] = self.pw[k.C_INIT]
        self.Pc[:] = np.eye(4) * self.settings.power_p0
        self.stats[:] = 0
        self.out[:] = math.nan
        self.scal[:] = math.nan
        self.scal[k.ERR2:k.N_ERR + 1] = 0.0  # no a-priori error seen yet

    def update(
        self,
        frame_time_ms: float,
        freq_mhz: float,
        counters: FloatArray = _NO_COUNTERS,
        power_w: float = math.nan,
        busy: float = math.nan,
        mem_activity: float = math.nan,
        deadline_ms: float = math.nan,
        mem_freq_mhz: float = math.nan,
    ) -> int:
        """Learn from one tick and predict for the next; returns `govd.model.tick` flags.

        ``frame_time_ms``: mean GPU time per frame over the tick (NaN when no frame finished);
        ``freq_mhz``: the frequency that actually ran; ``counters``: the configured counters in
        order; ``power_w``: average power over the tick; ``busy``: utilisation 0..1;
        ``mem_activity``: 0..1; ``deadline_ms``: frame deadline (NaN for throughput work);
        ``mem_freq_mhz``: not read (one clock domain). Bad numbers are skipped and counted,
        never raised.
        """
        # Names bound at import: each attribute lookup is ~20 ns of a ~1 µs tick.
        flags: int = model_tick(self.state, counters, frame_time_ms, freq_mhz, power_w, busy,
                                mem_activity, deadline_ms)
        if flags & RESCALE_DUE and self._rescale:
            self.rescale_counters()
        return flags

    def rescale_counters(self) -> None:
        """Bring every counter whose latest scaled value left the band back into it by an exact
        power-of-two change of its scale and of the learned state (`govd.model.rescale`); the
        predictions do not change. `update` calls it when the kernel flags a counter, so the
        first sample sets the scales of raw counters (with P0 = I/μ = 1e14·I, raw counters of
        ~1e4 make the covariance update cancel: rendering-test, mean APE 1985 % and 12 resets
        unscaled, 7 % and none scaled) and a counter that grows during a run is followed."""
        rescale_counters(self.vecs, self.P, self.cfg, self.lead_features,
                         self.settings.algorithm == "rls", self._base_trace,
                         learned=bool(self.stats[k.UPDATES]))

    def seed(self, a_ms: FloatArray, cov_block: FloatArray) -> None:
        """Start the frame-time model from a prior (`govd.model.prior`): a0 and a1 (ms/GHz) set
        to ``a_ms`` and their covariance (RLS P; DCD-RLS R = its inverse) to ``cov_block``
        (2×2); the counters' coefficients keep their values and get the initial covariance."""
        m = self.settings.n_features
        self.vecs[k.A, :2] = a_ms
        if self.settings.algorithm == "rls":
            self.P[:] = np.eye(m) / self.settings.mu
            self.P[:2, :2] = cov_block
        else:
            self.P[:] = np.eye(m) * self.settings.mu
            self.P[:2, :2] = np.linalg.inv(cov_block)
            self.vecs[k.RES] = 0.0

    def predictions(self) -> Predictions:
        """The record of the last `update` (`govd.model.base.Predictions`): the model's one
        record, its scalars refreshed here (one list of the kernel's scalars, not a NumPy
        scalar per field: this runs every tick)."""
        scal = self.scal.tolist()
        p = self._record
        p.time_noise = math.sqrt(blend(scal[k.ERR2], scal[k.N_ERR], self._noise_sq) / 2.0)
        p.ready = scal[k.READY] == 1.0
        p.work_ticks = max(int(self.stats.item(k.TICKS)) - 1, 0)
        p.sensitivity_ms_per_mhz = scal[k.SENS]
        p.fitted_time_ms = scal[k.T_FIT]
        return p

    @property
    def counter_scales(self) -> FloatArray:
        """Copy of the divisor applied to each counter now: the configured one (1 if none)
        changed by powers of two whenever the counter left the band (`rescale_counters`)."""
        return np.array(self.vecs[k.SCALE, self.lead_features:])

    @property
    def sensitivity_ms_per_mhz(self) -> float:
        """dt/df at the running frequency. Units: ms/MHz."""
        return float(self.scal[k.SENS])

    @property
    def ready(self) -> bool:
        """True once enough updates were made for the predictions to mean something."""
        return bool(self.scal[k.READY] == 1.0)

    @property
    def idle_power_w(self) -> float:
        """Idle power used in the energy predictions. Units: W."""
        return float(self.scal[k.P_IDLE])

    @property
    def fitted_time_ms(self) -> float:
        """The model's a-priori estimate of the last tick's frame time, with the counters it
        saw (the one-step prediction error is measured against this). Units: ms."""
        return float(self.scal[k.T_FIT])

    @property
    def coefficients(self) -> FloatArray:
        """Copy of [a0, a1 (ms/GHz), a_counter...]."""
        return np.array(self.vecs[k.A])

    @property
    def power_coefficients(self) -> FloatArray:
        """Copy of [c_idle, c_static_busy, c_dynamic, c_memory] in W."""
        return np.array(self.pw[k.C])

    def stats_dict(self) -> dict[str, int]:
        """Counters: ticks, updates, skipped samples, resets, power updates/skips/resets."""
        names = ("ticks", "updates", "skipped", "resets", "has_sample", "power_updates",
                 "power_skipped", "power_resets")
        return {name: int(v) for name, v in zip(names, self.stats, strict=True)}
