"""Model stress (issue #6): inputs the online model cannot learn from, detected per tick.

Four conditions, each measured on what actually breaks:

- ``diverged``: the update kernel itself had to reset a settled model (its state stopped
  being finite or positive on the diagonal); the fallback covers the relearning.

- ``jump``: a run of a-priori errors far beyond the recent RMS. One outlier is a hiccup (a
  shader compile, a dropped frame); several in a row mean the workload or a counter changed
  by orders of magnitude (a 100x jump) and the learned coefficients now mislead the policy.
- ``saturated counter``: a counter stuck at its own maximum, or not finite, for a long run.
  A saturated counter no longer moves with the work, so what it explained is misattributed.
- ``ill-conditioned``: the covariance (RLS's P, DCD's R) is no longer numerically positive
  definite (a Cholesky factorisation fails). P itself stays bounded under hours of constant
  input (the million-tick test), so its size is not the symptom. What does happen, measured
  at λ = 0.98 with one feature unexcited: the trace clamp holds the unexcited direction at the
  bound and scales the excited ones down every tick, so cond(P) grows linearly (about 2e7 per
  tick) and the excited directions' gain decays as 1/k: forgetting is lost. A reset cures
  that only for ~500 ticks, so it is not treated as stress here (the cure belongs in the RLS
  update); what is treated is the end of that road, P no longer factorising.

`StressDetector.observe` is edge-triggered: it names a condition once when its run completes,
and None otherwise.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from govd.model.arrays import FloatArray
from govd.model.settings import ModelSettings
from govd.model.tick import UPDATED, WAS_RESET

DIVERGED = "diverged"
JUMP = "jump"
SATURATED = "saturated counter"
ILL_CONDITIONED = "ill-conditioned"


@dataclass(frozen=True, slots=True)
class StressSettings:
    """Thresholds of the stress detector (defaults chosen so normal workloads never trip them)."""

    jump_factor: float = 10.0
    """An a-priori relative error counts as an outlier beyond this many recent RMS..."""
    jump_ratio: float = 10.0
    """...and a run starts only with a frame time off the prediction by this factor either
    way: a phase change (a new kernel, a new scene) the model relearns in a few updates is no
    stress, an order-of-magnitude surprise is; 0: no jump is ever stress. Measured on the V100
    kernels: starting runs at 50 % errors reset the model at most kernel switches (1.10 →
    1.13x oracle's energy)."""
    jump_floor: float = 0.5
    """Later updates of a run must still err beyond this (50 %), so a near-perfect model is
    not twitchy."""
    jump_run: int = 2
    """Consecutive outlying updates that make a jump. Measured: RLS refits a 100x workload
    jump in two updates, leaving coefficients fitted to two samples (errors 10x the calm RMS
    afterwards), so the run must be short to catch it; one outlier alone is a hiccup."""
    settle_updates: int = 20
    """Updates after a reset before the error RMS is trusted (it is learning then)."""
    stuck_ticks: int = 200
    """Consecutive ticks a counter stays at its maximum (or not finite) to count as saturated."""
    condition_every: int = 64
    """Ticks between covariance checks (a Cholesky factorisation, a few µs)."""


ERROR_WEIGHT = 0.05
"""Weight of the newest squared a-priori error in the detector's RMS (about 20 updates)."""


class Watched(Protocol):
    """What the detector reads of a model (`OnlineModel`, `ScalingModel`)."""

    P: FloatArray
    """The coefficients' covariance (RLS) or its inverse (DCD)."""
    settings: ModelSettings

    @property
    def fitted_time_ms(self) -> float: ...

    def stats_dict(self) -> dict[str, int]: ...


class StressDetector:
    """Watches one model (`OnlineModel`, `ScalingModel`) tick by tick; `observe` after each
    update."""

    def __init__(self, model: Watched, settings: StressSettings | None = None) -> None:
        """``model``: the model whose updates are watched (its state is only read)."""
        self.model = model
        self.settings = settings or StressSettings()
        n = len(model.settings.counters)
        # Plain lists: a handful of counters, looked at every tick; NumPy's per-call cost on
        # such small arrays was half of a governor step.
        self._counter_max = [-math.inf] * n
        self._counter_last = [math.nan] * n
        self._stuck = [0] * n
        self._varied = [False] * n
        self._ticks = 0
        self.reset()

    def reset(self) -> None:
        """Forget the error history (after a model reset). Counter tracking is kept: a counter
        still stuck after a reset is the same episode, not a new one."""
        self._error_sq = math.nan
        self._updates = 0
        self._run = 0

    def observe(self, flags: int, frame_time_ms: float, counters: FloatArray) -> str | None:
        """Fold in one tick (``flags`` from `OnlineModel.update`, the measured frame time in ms,
        the raw counters); returns the condition that just became true, or None."""
        self._ticks += 1
        s = self.settings
        # Every detector sees every tick (each keeps its own run); the first to fire is named.
        jumped = bool(flags & UPDATED) and self._jumped(frame_time_ms)
        saturated = counters.size > 0 and self._saturated(counters)
        if flags & WAS_RESET:
            # While it learns from P0 = I/μ the update can cancel and reset itself, harmlessly
            # (DCD and RLS both relearn in a few updates): only a settled model diverges.
            settled = self._updates > s.settle_updates
            self.reset()
            if settled:
                return DIVERGED
        if jumped:
            return JUMP
        if saturated:
            return SATURATED
        # Right after a reset the first updates from P0 = I/μ cancel (P is then numerically
        # indefinite for a few updates, harmlessly): judge P only once it has settled.
        if (self._ticks % s.condition_every == 0
                and self.model.stats_dict()["updates"] >= s.settle_updates
                and self._ill_conditioned()):
            return ILL_CONDITIONED
        return None

    def _jumped(self, frame_time_ms: float) -> bool:
        fit = self.model.fitted_time_ms
        error = frame_time_ms / fit - 1.0 if fit > 0 else math.inf
        s = self.settings
        self._updates += 1
        rms = math.sqrt(self._error_sq) if self._error_sq == self._error_sq else math.inf
        surprise = max(error + 1.0, 1.0 / (error + 1.0)) if error > -1.0 else math.inf
        outlying = (s.jump_ratio > 0
                    and abs(error) > max(s.jump_factor * rms, s.jump_floor)
                    and (self._run > 0 or surprise >= s.jump_ratio))
        if self._updates > s.settle_updates and outlying:
            self._run += 1
            if self._run >= s.jump_run:
                self._run = 0
                return True
            return False
        self._run = 0
        # Outliers stay out of the RMS, so a run is measured against the calm before it.
        err_sq = min(error * error, 100.0)
        if math.isnan(self._error_sq):
            self._error_sq = err_sq
        else:
            self._error_sq += ERROR_WEIGHT * (err_sq - self._error_sq)
        return False

    def _saturated(self, counters: FloatArray) -> bool:
        """Whether a counter has just spent `stuck_ticks` ticks not finite, or unchanged at the
        highest value it ever had after having moved before."""
        limit = self.settings.stuck_ticks
        fired = False
        for i, x in enumerate(counters.tolist()):
            last = self._counter_last[i]
            if not math.isfinite(x):
                stuck = True
            else:
                if math.isfinite(last) and x != last:
                    self._varied[i] = True
                if x > self._counter_max[i]:
                    self._counter_max[i] = x
                stuck = x == self._counter_max[i] and x == last and self._varied[i]
            self._stuck[i] = self._stuck[i] + 1 if stuck else 0
            self._counter_last[i] = x
            fired = fired or self._stuck[i] == limit
        return fired

    def _ill_conditioned(self) -> bool:
        cov = self.model.P
        if not np.all(np.isfinite(cov)):
            return True
        try:
            np.linalg.cholesky(cov)
        except np.linalg.LinAlgError:
            return True
        return False
