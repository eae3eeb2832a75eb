"""The pure core: one `Governor` per device turns a tick's `Sample` into a `Decision`.

No I/O, no clock, no logging: the daemon, the evaluator, trace replay and the tests all drive
this same object; only what feeds it differs.
"""

from __future__ import annotations

import math
from bisect import bisect_left
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from govd.model.arrays import FloatArray
from govd.model.online import OnlineModel
from govd.model.prior import Prior, PriorSeeder
from govd.model.scaling_model import ScalingModel
from govd.model.settings import ModelSettings
from govd.model.stress import StressDetector, StressSettings
from govd.model.tick import STRESS_RESET, WAS_RESET
from govd.model.two_domain import TwoDomainModel, nearest_pair
from govd.policy.base import Outlook, Policy
from govd.policy.static import Performance
from govd.target import Target

_NO_COUNTERS = np.zeros(0)

ERROR_WEIGHT = 0.05
"""Weight of the newest squared prediction error in the running RMS (about 20 ticks, 1 s)."""

FALLBACK_GRACE_S = 1.0
"""How long the fallback policy decides after model stress (20 ticks of 50 ms; RLS relearns in
0.05–0.3 s, seed 000). Units: s."""

PERIOD_S = 0.05
"""The nominal tick period the grace is counted in. Units: s. The grace is counted in ticks,
not in the work's own time: a unit of compute work may last 0.04 ms, and a 1 s grace counted
in unit durations lasted 25 000 units on V100 kernel mixes (issue #11)."""


@dataclass(slots=True)
class Sample:
    """What one tick observed on one device."""

    freq_mhz: float
    """Frequency that actually ran (read back). Units: MHz."""
    frame_time_ms: float = math.nan
    """Mean GPU time per frame completed in the tick; NaN when none completed. Units: ms."""
    frame_count: int = 0
    """Frames completed in the tick."""
    interval_s: float = 0.05
    """Length of the tick. Units: s."""
    busy: float = math.nan
    """Device utilisation 0..1; NaN lets the governor derive it from the frames."""
    power_w: float = math.nan
    """Average power over the tick (idle included). Units: W."""
    mem_activity: float = math.nan
    """Memory activity 0..1, NaN when unknown."""
    counters: FloatArray = field(default_factory=lambda: _NO_COUNTERS)
    """The model's counters, in `ModelSettings.counters` order."""
    mem_freq_mhz: float = math.nan
    """Memory clock that actually ran, with two clock domains (NaN otherwise). Units: MHz."""
    late_share: float = math.nan
    """Share of the tick's frames that took longer than the frame deadline, 0..1 (NaN: not
    judged, e.g. pseudo-frames of busy time, which have no deadline)."""


@dataclass(slots=True)
class Decision:
    """The level chosen for the next tick, and what the model predicted."""

    level: int
    """Index of the chosen level (ascending table)."""
    freq_mhz: float
    """The chosen level's frequency. Units: MHz."""
    outlook: Outlook
    """Everything the policy saw, predictions included (views valid until the next step)."""
    model_flags: int
    """`govd.model.tick` flags of this step's update (updated, skipped, reset...)."""
    fallback: str | None = None
    """Why the fallback policy chose this level (a `govd.model.stress` condition), None while
    the main policy decides."""
    mem_freq_mhz: float | None = None
    """The chosen level's memory clock with two clock domains, else None. Units: MHz."""


class Governor:
    """Model + policy for one device: `step` once per tick."""

    def __init__(
        self,
        levels_mhz: Sequence[float] | FloatArray,
        policy: Policy,
        target: Target,
        model_settings: ModelSettings | None = None,
        bounds_mhz: tuple[float, float] | None = None,
        idle_power_w: float = math.nan,
        fallback: Policy | None = None,
        fallback_grace_s: float = FALLBACK_GRACE_S,
        stress_settings: StressSettings | None = None,
        mem_levels_mhz: Sequence[float] | FloatArray | None = None,
        prior: Prior | None = None,
        period_s: float = PERIOD_S,
    ) -> None:
        """``levels_mhz``: the device's levels, ascending; ``bounds_mhz``: (min, max) core
        clock allowed, None for all; ``idle_power_w``: known idle power (W) or NaN to learn it;
        ``fallback``: the policy that decides for ``fallback_grace_s`` (s) after model stress
        (performance when None); ``mem_levels_mhz``: with two clock domains, the memory clock of
        each level (levels are then (core, memory) pairs sorted by core then memory clock),
        else None; ``prior``: clusters of scaling curves that seed the model after its first
        samples (`govd.model.prior`, one clock domain), None to start from a_init;
        ``period_s``: the tick period (s) the fallback grace is counted in."""
        if prior is not None and mem_levels_mhz is not None:
            raise ValueError("a prior holds core-clock scaling curves: one clock domain only")
        if not (math.isfinite(fallback_grace_s) and fallback_grace_s >= 0):
            raise ValueError(f"fallback_grace_s must be >= 0 s, got {fallback_grace_s}")
        if not (math.isfinite(period_s) and period_s > 0):
            raise ValueError(f"period_s must be > 0 s, got {period_s}")
        self.model: OnlineModel | ScalingModel
        self.mem_levels_mhz: FloatArray | None = None
        settings = model_settings or ModelSettings()
        form = settings.form_for(throughput=target.max_slowdown is not None)
        if prior is not None and settings.form == "auto":
            form = "seed"  # a prior holds eq. 10's coefficients
        if form == "scaling":
            if prior is not None:
                raise ValueError("a prior seeds the seed form only (model.form: seed)")
            self.model = ScalingModel(levels_mhz, settings, idle_power_w, mem_levels_mhz)
            self.mem_levels_mhz = self.model.mem_levels_mhz
        elif mem_levels_mhz is None:
            self.model = OnlineModel(levels_mhz, model_settings, idle_power_w)
        else:
            self.model = TwoDomainModel(levels_mhz, mem_levels_mhz, model_settings, idle_power_w)
            self.mem_levels_mhz = self.model.mem_levels_mhz
        self.policy = policy
        self.fallback = fallback if fallback is not None else Performance()
        self.fallback_grace_s = fallback_grace_s
        self.grace_ticks = max(1, round(fallback_grace_s / period_s)) if fallback_grace_s else 0
        self.stress = StressDetector(self.model, stress_settings)
        self.seeder = PriorSeeder(prior, self.model.levels_mhz) if prior is not None else None
        self.fallback_reason: str | None = None
        """The stress condition whose grace period is running, None when none is."""
        self._grace_left = 0
        self.stress_episodes = 0
        """Times the model was reset for stress."""
        self.target = target
        self.levels_mhz = self.model.levels_mhz
        self._levels = [float(f) for f in self.levels_mhz]
        self.lo, self.hi = 0, len(self._levels) - 1
        if bounds_mhz is not None:
            self.set_bounds(*bounds_mhz)
        self.ticks = 0
        self._expected_level = -1
        self._expected_ms = math.nan
        self._error_sq = math.nan
        # Looked up once, not per tick: the model never changes kind, and each lookup below is
        # another object a cold tick touches.
        self._with_mem_freq = isinstance(self.model, (TwoDomainModel, ScalingModel))
        self._sd_now = hasattr(self.model, "time_sd_now")
        self._sd_top = hasattr(self.model, "time_sd_top")

    def set_bounds(self, min_mhz: float, max_mhz: float) -> None:
        """Restrict decisions to levels within [min_mhz, max_mhz] (at least one level)."""
        if not min_mhz <= max_mhz:
            raise ValueError(f"bounds min {min_mhz} MHz > max {max_mhz} MHz")
        inside = [i for i, f in enumerate(self._levels) if min_mhz <= f <= max_mhz]
        if not inside:
            raise ValueError(f"no level within [{min_mhz}, {max_mhz}] MHz")
        self.lo, self.hi = inside[0], inside[-1]

    def nearest_level(self, freq_mhz: float, mem_freq_mhz: float = math.nan) -> int:
        """Index of the level nearest to ``freq_mhz`` (the hardware may run between levels);
        with two clock domains, the nearest core clock among the pairs at the memory clock
        nearest to ``mem_freq_mhz`` (the highest memory clock when it is unknown)."""
        if self.mem_levels_mhz is not None:
            return nearest_pair(self.levels_mhz, self.mem_levels_mhz, freq_mhz, mem_freq_mhz,
                                self.hi)
        levels = self._levels
        if not math.isfinite(freq_mhz):
            return self.hi
        i = bisect_left(levels, freq_mhz)
        if i == 0:
            return 0
        if i == len(levels):
            return i - 1
        return i if levels[i] - freq_mhz < freq_mhz - levels[i - 1] else i - 1

    def step(self, sample: Sample) -> Decision:
        """Learn from the tick, predict every level, let the policy choose the next one."""
        # Run once per device every 50 ms, each time with cold caches: the one-line helpers
        # that were called once per tick (error tracking, late share) are written out here,
        # and what does not change is looked up at construction (`_with_mem_freq`).
        busy = sample.busy
        frame_time_ms = sample.frame_time_ms
        frame_count = sample.frame_count
        interval_s = sample.interval_s
        if not math.isfinite(busy) and frame_count > 0 and interval_s > 0:
            busy = min(1.0, frame_count * frame_time_ms / (interval_s * 1e3))
        target = self.target
        model = self.model
        if self._with_mem_freq:
            flags = model.update(  # type: ignore[call-arg]
                frame_time_ms, sample.freq_mhz, sample.counters, sample.power_w, busy,
                sample.mem_activity, target.deadline_ms, sample.mem_freq_mhz,
            )
        else:
            flags = model.update(
                frame_time_ms, sample.freq_mhz, sample.counters, sample.power_w, busy,
                sample.mem_activity, target.deadline_ms,
            )
        condition = self.stress.observe(flags, frame_time_ms, sample.counters)
        if condition is not None:
            self._start_fallback(condition)
            flags |= STRESS_RESET
        elif self.fallback_reason is not None:
            self._grace_left -= 1
            if self._grace_left <= 0:
                self._end_fallback()
        if self.seeder is not None:
            self._seed_from_prior(flags, sample)
        mem_levels = self.mem_levels_mhz
        levels = self._levels
        lo, hi = self.lo, self.hi
        current = self.nearest_level(sample.freq_mhz, sample.mem_freq_mhz)
        # `_track_error`: last tick's prediction for the level that then ran, against this
        # tick's frames.
        expected_ms = self._expected_ms
        if (current == self._expected_level and frame_time_ms > 0 and expected_ms > 0
                and math.isfinite(frame_time_ms)):
            err = min(frame_time_ms / expected_ms - 1.0, 10.0)
            if math.isnan(self._error_sq):
                self._error_sq = err * err
            else:
                self._error_sq += ERROR_WEIGHT * (err * err - self._error_sq)
        ready = model.ready
        time_ms = model.time_ms
        view = Outlook(
            levels_mhz=self.levels_mhz,
            lo=lo,
            hi=hi,
            current=current,
            time_ms=time_ms,
            power_w=model.power_w,
            energy_mj=model.energy_mj,
            sensitivity_ms_per_mhz=model.sensitivity_ms_per_mhz,
            model_ready=ready,
            time_error=math.sqrt(self._error_sq),
            # NaN without frames or a frame-rate target
            late_share=(sample.late_share if target.fps is not None and frame_count > 0
                        else math.nan),
            time_sd_now=model.time_sd_now if self._sd_now else None,  # type: ignore[union-attr]
            time_sd_top=model.time_sd_top if self._sd_top else None,  # type: ignore[union-attr]
            busy=busy,
            interval_s=interval_s,
            target=target,
            tick=self.ticks,
            mem_levels_mhz=mem_levels,
        )
        deciding = self.policy if self.fallback_reason is None else self.fallback
        level = min(max(int(deciding.decide(view)), lo), hi)
        self.ticks += 1
        self._expected_level = level
        self._expected_ms = float(time_ms[level]) if ready else math.nan
        mem_mhz = None if mem_levels is None else float(mem_levels[level])
        return Decision(level, levels[level], view, flags,
                        fallback=self.fallback_reason, mem_freq_mhz=mem_mhz)

    def _seed_from_prior(self, flags: int, sample: Sample) -> None:
        """Feed the prior's seeder; a model reset (numeric or stress) starts it over."""
        assert self.seeder is not None
        if flags & (WAS_RESET | STRESS_RESET):
            self.seeder.reset()
        seeded = self.seeder.observe(sample.freq_mhz, sample.frame_time_ms)
        if seeded is not None:
            self.model.seed(seeded[1], seeded[2])

    def _start_fallback(self, condition: str) -> None:
        """Reset the model and hand decisions to the fallback policy for the grace period (a
        condition found during the grace restarts it)."""
        if self.fallback_reason is None:
            self.fallback.reset()
        self.stress_episodes += 1
        self.fallback_reason = condition
        self._grace_left = self.grace_ticks
        self.model.reset()
        self.stress.reset()
        self._expected_level = -1
        self._expected_ms = math.nan
        self._error_sq = math.nan

    def _end_fallback(self) -> None:
        """Give decisions back to the main policy, which starts afresh (its history predates
        the stress)."""
        self.fallback_reason = None
        self._grace_left = 0
        self.policy.reset()

    def reset(self) -> None:
        """Forget the model and the policy's history (new workload, device taken back)."""
        self.model.reset()
        self.policy.reset()
        self.stress.reset()
        if self.seeder is not None:
            self.seeder.reset()
        self.fallback_reason = None
        self._grace_left = 0
        self.ticks = 0
        self._expected_level = -1
        self._expected_ms = math.nan
        self._error_sq = math.nan
