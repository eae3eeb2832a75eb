"""`ScalingModel`: the scaling form (`govd.model.scaling`) of one device, as preallocated arrays.

A `govd.model.base.Model`, as `govd.model.online.OnlineModel` (the seed's eq. 10) is, so the
governor, the evaluator and the stress detector drive either. Its spread comes from ratios
measured between pairs of levels (`Predictions.spread_from_pairs`), its per-unit noise from the
measured ratio error (`ratio_error`), and it judges when the work changed (`WORK_CHANGED`).
One class serves one clock domain and (core, memory) pairs: one domain is a table whose memory
clock is the same at every level. Registered as the form ``scaling`` (`SCALING`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import ClassVar

import numpy as np

from govd.model import scaling as s
from govd.model.arrays import FloatArray
from govd.model.base import Predictions
from govd.model.forms import Form
from govd.model.settings import ModelSettings
from govd.model.two_domain import level_rows

_NO_COUNTERS = np.zeros(0)
STATIC_SHARE = 0.3
"""Prior share of busy power that does not scale with the clock (seed 004: a static term is
mandatory); learned away per level as levels are visited."""
MEMORY_SHARE = 0.15
"""Prior share of busy power that goes with the memory clock (two clock domains)."""
SHAPE_VAR0 = 0.25
"""Prior variance of a level's log power offset from the prior shape (±50 %), the part shared
smoothly with its neighbours."""
SHAPE_NUGGET = 0.05**2
"""Prior variance of a level's own log power offset, apart from the smooth part (±5 %): a
GPU's voltage steps at some clocks and not at others, so two neighbouring levels of a fine grid
may differ by a few percent that say nothing of the levels further away. Without it a bump
measured between two levels 0.5 % of clock apart read as a steep slope of the smooth shape and
lifted every unvisited level below to the top's power, erasing the predicted saving
(tests/test_model_scaling.py)."""
SHAPE_Q = 1e-5
"""Variance added to every level's offset per learned pair: the shape may drift (temperature)."""
SHAPE_NOISE = 0.02**2
"""Variance of one measured log power ratio between two ticks."""
SLOT_TOLERANCE = 0.1
"""Difference of log time at the top level within which two ticks are the same remembered
piece of work (their counters must agree within ``same_work``, which also allows for counters
that move a little with the clock). Tighter than the pair gate: two kinds of work sharing a
slot learn a curve that is neither's (unsafe), one kind split over two slots only learns
twice (safe). It also holds between two ticks at one clock; across a move with the counters
unchanged the slot stays (`govd.model.scaling._remember`): there the time at the top comes
through a curve that may be wrong for this work, and a split by clock never learned at all."""


class ScalingModel:
    """Online frame-time scaling and power-shape model of one device over its level table."""

    form: ClassVar[str] = "scaling"

    def __init__(
        self,
        levels_mhz: Sequence[float] | FloatArray,
        settings: ModelSettings | None = None,
        idle_power_w: float = math.nan,
        mem_levels_mhz: Sequence[float] | FloatArray | None = None,
    ) -> None:
        """``levels_mhz``: core clock of every level (MHz); ``mem_levels_mhz``: with two clock
        domains the memory clock of each (levels sorted by core then memory clock), else None;
        ``idle_power_w``: known idle power (W) or NaN to learn it."""
        self.settings = settings = settings or ModelSettings()
        cores = np.asarray(levels_mhz, dtype=np.float64)
        two = mem_levels_mhz is not None
        rows = level_rows(cores, np.asarray(mem_levels_mhz, dtype=np.float64) if two else None,
                          settings)
        mems = rows[s.MEM]
        self.nb = 3 if two else 2
        self.nx = len(settings.counters)
        self.m = self.nb * (1 + self.nx)
        n = cores.size
        self.off = s.layout(self.m, self.nb, self.nx, n, settings.work_slots)
        self.state = np.zeros(int(self.off[s.N_SECTIONS]))
        self._views()
        self.lv[:] = rows
        self.levels_mhz = cores.copy()
        self.mem_levels_mhz = mems.copy() if two else None
        u_max = max(math.log(cores[-1] / cores[0]), 1e-3)
        for k in range(n):
            s.basis_at.py_func(cores[k], mems[k], self.lv, u_max, self.nb, self.basis[k])
        share_m = MEMORY_SHARE if two else 0.0
        self.lrho0[:] = np.log(STATIC_SHARE + (1.0 - STATIC_SHARE - share_m) * self.lv[s.G]
                               + share_m * self.lv[s.GM])
        self._shape_prior = _smooth_prior(self.lv, two, SHAPE_VAR0)
        self._configure(idle_power_w, u_max)
        self.reset()
        self.time_ms: FloatArray = self.out[s.OUT_T]
        """Predicted frame time at each level for the next tick (view). Units: ms."""
        self.power_w: FloatArray = self.out[s.OUT_P]
        """Predicted power while busy at each level (view). Units: W."""
        self.energy_mj: FloatArray = self.out[s.OUT_E]
        """Predicted energy per unit at each level under the deadline (view). Units: mJ."""
        self.time_sd_now: FloatArray = self.out[s.OUT_SD_NOW]
        """Standard deviation of log(t(level) / t(running level)) as predicted, the model's
        own uncertainty (view)."""
        self.time_sd_top: FloatArray = self.out[s.OUT_SD_TOP]
        """Standard deviation of log(t(level) / t(fastest level)) as predicted (view)."""
        for view in (self.time_ms, self.power_w, self.energy_mj, self.time_sd_now,
                     self.time_sd_top):
            view.flags.writeable = False
        self._record = Predictions(
            time_ms=self.time_ms, power_w=self.power_w, energy_mj=self.energy_mj,
            time_sd_now=self.time_sd_now, time_sd_top=self.time_sd_top, time_noise=math.nan,
            ready=False, work_ticks=0, sensitivity_ms_per_mhz=math.nan,
            fitted_time_ms=math.nan, spread_from_pairs=True)

    def _views(self) -> None:
        st, off = self.state, self.off

        def sec(i: int) -> FloatArray:
            return st[off[i]:off[i + 1]]

        def mat(i: int, cols: int) -> FloatArray:
            return sec(i).reshape(-1, cols)

        n = int(off[s.HDR_L])
        self.beta, self.beta0 = sec(s.BETA), sec(s.BETA0)
        self.P = mat(s.PCOV, self.m)
        self.xscale, self.lv, self.basis = sec(s.XSCALE), mat(s.LV, n), mat(s.BASIS, self.nb)
        self.lrho0, self.delta, self.shape_cov = sec(s.LRHO0), sec(s.DELTA), mat(s.SCOV, n)
        self.lreff = sec(s.LREFF)
        self.pc, self.pc0, self.pP = sec(s.PC), sec(s.PC0), mat(s.PP, 2)
        self.out, self.sc, self.cf = mat(s.OUT, n), sec(s.SC), sec(s.CF)

    def _configure(self, idle_power_w: float, u_max: float) -> None:
        st = self.settings
        p0 = (st.prior_sd / st.noise_prior) ** 2
        cf = self.cf
        cf[s.LAM] = st.forgetting
        cf[s.P0] = p0
        cf[s.MAX_TRACE] = st.max_trace_factor * self.m * p0
        cf[s.SIGMA0] = st.noise_prior
        cf[s.GATE] = st.gate
        cf[s.SAME_WORK] = st.same_work
        cf[s.PLAM] = st.power_forgetting
        cf[s.PP0] = st.power_p0
        cf[s.SHAPE_VAR0] = SHAPE_VAR0
        cf[s.SHAPE_Q] = SHAPE_Q
        cf[s.SHAPE_NOISE] = SHAPE_NOISE
        cf[s.IDLE_W] = idle_power_w
        cf[s.WARMUP] = max(st.warmup, 0)
        cf[s.U_MAX] = u_max
        cf[s.N_SLOTS] = st.work_slots
        cf[s.SLOT_P0] = (st.work_sd / st.noise_prior) ** 2
        cf[s.SLOT_TOL] = SLOT_TOLERANCE
        cf[s.ALGO] = s.ALGO_RLS if st.algorithm == "rls" else s.ALGO_DCD
        cf[s.DCD_H], cf[s.DCD_MB], cf[s.DCD_NU] = st.dcd_h, st.dcd_mb, st.dcd_nu
        nz = 1 + self.nx
        self.beta0[:] = 0.0
        self.beta0[0] = st.prior_share          # c0: the scalable share, in log form
        if self.nb > 2:
            self.beta0[2 * nz] = st.prior_share  # c_m: the memory clock's share
        self.xscale[:] = st.counter_scales if st.counter_scales else 1.0
        self.pc0[:] = (0.0, 1.0)

    def reset(self) -> None:
        """Forget everything learned: coefficients, covariance, power shape, history."""
        self.beta[:] = self.beta0
        # RLS keeps the covariance (P0 = p0·I), DCD-RLS the information matrix (R0 = I/p0)
        rls = self.settings.algorithm == "rls"
        self.P[:] = np.eye(self.m) * (self.cf[s.P0] if rls else 1.0 / self.cf[s.P0])
        self.state[self.off[s.RES]:self.off[s.RES + 1]] = 0.0
        self.delta[:] = 0.0
        self.shape_cov[:] = self._shape_prior
        self.lreff[:] = self.lrho0
        self.pc[:] = self.pc0
        self.pP[:] = np.eye(2) * self.settings.power_p0
        self.sc[:] = 0.0
        self.sc[s.LVL_PREV] = -1.0
        self.sc[s.LVL_NOW] = -1.0
        self.sc[s.PB_PREV] = -1.0
        self.sc[s.SHAPE_DIRTY] = 1.0
        self.sc[s.CUR_SLOT] = -1.0
        self.state[self.off[s.SLOT_SIG]:self.off[s.SLOT_META + 1]] = 0.0
        self.out[:] = math.nan
        self._scaled = bool(self.settings.counter_scales) or self.nx == 0
        self._work_ticks = 0
        self._slot_ids = [-1] * self.settings.work_slots  # `Predictions.work_id` per slot
        self._slots_made = 0

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
        """Learn from one tick and predict for the next; returns flags (`govd.model.scaling`).

        As `OnlineModel.update`; ``mem_freq_mhz``: the memory clock that ran (two clock
        domains; ignored with one). ``mem_activity`` is not used: the counters carry it."""
        if not self._scaled:
            self._scale_from(counters)
        flags: int = s.scaling_tick(self.state, self.off, counters, frame_time_ms, freq_mhz,
                                    mem_freq_mhz, power_w, busy, deadline_ms)
        self._work_ticks = 0 if flags & s.WORK_CHANGED else self._work_ticks + 1
        made = int(self.sc[s.SLOTS_MADE])
        if made != self._slots_made:  # the slot in use was (re)made for this work
            self._slots_made = made
            slot = int(self.sc[s.CUR_SLOT])
            if 0 <= slot < len(self._slot_ids):
                self._slot_ids[slot] = made
        return flags

    def predictions(self) -> Predictions:
        """The record of the last `update` (`govd.model.base.Predictions`), the model's one
        record with its scalars refreshed here: per-unit noise ``time_noise`` = `ratio_error`
        / √2 (a measured ratio holds two units' noise)."""
        sc = self.sc.tolist()
        p = self._record
        p.time_noise = self._ratio_error(sc) / math.sqrt(2.0)
        p.ready = sc[s.READY] == 1.0
        p.work_ticks = self._work_ticks
        slot = int(sc[s.CUR_SLOT])
        p.work_id = self._slot_ids[slot] if 0 <= slot < len(self._slot_ids) else -1
        p.sensitivity_ms_per_mhz = sc[s.SENS]
        p.fitted_time_ms = sc[s.T_FIT]
        return p

    def _scale_from(self, counters: FloatArray) -> None:
        """Without configured scales, the first finite sample of each counter sets its scale
        to the power of two nearest its magnitude, so that raw counters of any unit (bytes,
        transactions, fractions) enter the regression at order 1."""
        x = np.asarray(counters, dtype=np.float64)
        if x.shape != (self.nx,) or not np.all(np.isfinite(x)):
            return
        mag = np.abs(x)
        self.xscale[:] = np.where(mag > 0, 2.0 ** np.round(np.log2(np.where(mag > 0, mag, 1))),
                                  1.0)
        self._scaled = True

    @property
    def counter_scales(self) -> FloatArray:
        """Copy of the divisor applied to each counter."""
        return np.array(self.xscale)

    @property
    def sensitivity_ms_per_mhz(self) -> float:
        """dt/df at the running core clock. Units: ms/MHz."""
        return float(self.sc[s.SENS])

    @property
    def ready(self) -> bool:
        """True once a valid sample was seen (the prior makes every prediction meaningful)."""
        return bool(self.sc[s.READY] == 1.0)

    @property
    def idle_power_w(self) -> float:
        """Idle power used in the energy predictions. Units: W."""
        return float(self.sc[s.P_IDLE])

    @property
    def fitted_time_ms(self) -> float:
        """The model's a-priori estimate of the last tick's frame time from the tick before
        (its time times the predicted ratio between the two clocks). Units: ms."""
        return float(self.sc[s.T_FIT])

    @property
    def ratio_error(self) -> float:
        """Measured RMS error of predicted log time ratios between levels, blended with the
        prior noise level until ~20 pairs were learned from."""
        return self._ratio_error(self.sc.tolist())

    def _ratio_error(self, sc: list[float]) -> float:
        n = min(sc[s.N_ERR], 1.0 / s.ERR_WEIGHT)
        var = ((n * sc[s.ERR2] + s.ERR_PRIOR_PAIRS * self.settings.noise_prior ** 2)
               / (n + s.ERR_PRIOR_PAIRS))
        return math.sqrt(var)

    @property
    def coefficients(self) -> FloatArray:
        """Copy of the coefficients w (c_b = w_b · [1, x...], b over [u, u², u_m])."""
        return np.array(self.beta)

    @property
    def power_coefficients(self) -> FloatArray:
        """Copy of [idle power, busy power at the top level] in W."""
        return np.array(self.pc)

    @property
    def power_shape(self) -> FloatArray:
        """Busy power of each level relative to the highest, as learned now."""
        return np.exp(self.lreff - self.lreff.max())

    def stats_dict(self) -> dict[str, int]:
        """Counters: ticks, updates, skipped samples, resets, pairs gated as work changes,
        power updates/skips, power-shape updates."""
        sc = self.sc
        return {"ticks": int(sc[s.TICKS]), "updates": int(sc[s.UPDATES]),
                "skipped": int(sc[s.SKIPPED]), "resets": int(sc[s.RESETS]),
                "gated": int(sc[s.GATED_N]), "power_updates": int(sc[s.P_UPDATES]),
                "power_skipped": int(sc[s.P_SKIPPED]),
                "shape_updates": int(sc[s.SHAPE_UPDATES]), "work_slots_made": int(sc[s.SLOTS_MADE])}


def _smooth_prior(lv: FloatArray, two: bool, var0: float,
                  nugget: float = SHAPE_NUGGET) -> FloatArray:
    """Prior covariance of the per-level log power offsets: a smooth part of variance
    ``var0`` with correlation exp(−d²/2ℓ²), d the distance in log clock (both clocks with two
    domains) and ℓ a third of the table's log range, so that what one pair of levels teaches
    carries to their neighbours and fades with distance; plus each level's own variance
    ``nugget`` (`SHAPE_NUGGET`), which what is learned at one level does not carry."""
    logs = [np.log(lv[s.CORE])] + ([np.log(lv[s.MEM])] if two else [])
    d2 = np.zeros((lv.shape[1], lv.shape[1]))
    for x in logs:
        ell = max(float(np.ptp(x)) / 3.0, 0.05)
        d2 += ((x[:, None] - x[None, :]) / ell) ** 2
    prior: FloatArray = var0 * np.exp(-0.5 * d2) + nugget * np.eye(lv.shape[1])
    # A pair of ticks measures a *difference* of offsets; their common level is only held by
    # the prior, so visited levels drifted together away from unvisited ones (half of every
    # innovation went to each end), and the monotone clamp then lifted the top to an unvisited
    # neighbour's prior (issue #11: GTX 1080 Ti pairs, 0.90 learned where 0.98 was measured).
    # The shape is relative to the highest level anyway: pin its offset at 0 (the prior
    # conditioned on δ(top) = 0), so that a measured ratio moves the other end only.
    top = prior[:, -1].copy()
    prior -= np.outer(top, top) / top[-1]
    return prior


def scaling_model(levels_mhz: FloatArray, mem_levels_mhz: FloatArray | None,
                  settings: ModelSettings, idle_power_w: float) -> ScalingModel:
    """The scaling form over ``levels_mhz`` (MHz), over (core, memory) pairs when
    ``mem_levels_mhz`` is given; ``idle_power_w``: known idle power (W) or NaN."""
    return ScalingModel(levels_mhz, settings, idle_power_w, mem_levels_mhz)


SCALING = Form("scaling", scaling_model, spread_from_pairs=True,
               inert_settings=frozenset({"mu", "a_init"}))
"""The form ``scaling``, registered in `govd.model.forms`. Its prior is ``prior_share`` and
``prior_sd`` (P0 = (prior_sd / noise_prior)²·I), not eq. 10's ``a_init`` and ``mu``."""
