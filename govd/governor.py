"""The pure core: one `Governor` per device turns a tick's `Sample` into a `Decision`.

No I/O, no clock, no logging: the daemon, the evaluator, trace replay and the tests all drive
this same object; only what feeds it differs. Everything it counts in time it counts in ticks
of the period it is given (the fallback's grace, the dwell), never in the work's own time nor
the wall clock's, so that a replay decides as the live run did.
"""

from __future__ import annotations

import math
from bisect import bisect_left
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from govd.model import forms
from govd.model.arrays import FloatArray
from govd.model.base import Model, SeedableModel
from govd.model.prior import Prior, PriorSeeder
from govd.model.settings import ModelSettings
from govd.model.stress import StressDetector, StressSettings
from govd.model.tick import STRESS_RESET, WAS_RESET
from govd.model.two_domain import nearest_pair
from govd.policy.base import Outlook, Policy
from govd.policy.static import Performance
from govd.sample import Sample
from govd.target import Target

__all__ = ["Decision", "Governor", "Sample"]

ERROR_WEIGHT = 0.05
"""Weight of the newest squared prediction error in the running RMS (about 20 ticks, 1 s)."""

FALLBACK_GRACE_S = 1.0
"""How long the fallback policy decides after model stress (20 ticks of 50 ms; RLS relearns in
0.05–0.3 s, seed 000). Units: s."""

PERIOD_S = 0.05
"""The nominal tick period the grace and the dwell are counted in when none is given. Units:
s. They are counted in ticks, not in the work's own time: a unit of compute work may last
0.04 ms, and a 1 s grace counted in unit durations lasted 25 000 units on V100 kernel mixes
(issue #11)."""


def ticks_of(duration_s: float, period_s: float) -> int:
    """Whole ticks of ``period_s`` in ``duration_s`` (s), at least one for any positive
    duration (a duration shorter than a tick still holds for the tick it starts in)."""
    return max(1, round(duration_s / period_s)) if duration_s > 0 else 0


@dataclass(slots=True)
class Decision:
    """The level chosen for the next tick, and what the model predicted."""

    level: int
    """Index of the level to run next (ascending table): the policy's choice, or the level
    in force while the dwell holds it (``held``)."""
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
    held: bool = False
    """The policy asked for another level and the dwell kept this one."""


class _FormState:
    """One form's model and what watches it; a governor keeps one per form it has run, so
    that switching back (``model.form: auto``, another kind of target) resumes it."""

    __slots__ = ("model", "seeder", "stress")

    def __init__(self, model: Model, stress: StressDetector, seeder: PriorSeeder | None) -> None:
        self.model = model
        self.stress = stress
        self.seeder = seeder


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
        min_dwell_s: float = 0.0,
    ) -> None:
        """``levels_mhz``: the device's levels, ascending; ``bounds_mhz``: (min, max) core
        clock allowed, None for all; ``idle_power_w``: known idle power (W) or NaN to learn it;
        ``fallback``: the policy that decides for ``fallback_grace_s`` (s) after model stress
        (performance when None); ``mem_levels_mhz``: with two clock domains, the memory clock of
        each level (levels are then (core, memory) pairs sorted by core then memory clock),
        else None; ``prior``: clusters of scaling curves that seed the model after its first
        samples (`govd.model.prior`, one clock domain, forms that take one), None to start
        from a_init; ``period_s``: the tick period (s) the grace and the dwell are counted in;
        ``min_dwell_s``: shortest time (s) a level is kept before another is chosen.
        Raises ValueError for any of them out of range, a prior with pairs or with a form
        that takes none."""
        if prior is not None and mem_levels_mhz is not None:
            raise ValueError("a prior holds core-clock scaling curves: one clock domain only")
        if not (math.isfinite(fallback_grace_s) and fallback_grace_s >= 0):
            raise ValueError(f"fallback_grace_s must be >= 0 s, got {fallback_grace_s}")
        if not (math.isfinite(period_s) and period_s > 0):
            raise ValueError(f"period_s must be > 0 s, got {period_s}")
        if not (math.isfinite(min_dwell_s) and min_dwell_s >= 0):
            raise ValueError(f"min_dwell_s must be >= 0 s, got {min_dwell_s}")
        self.model_settings = settings = model_settings or ModelSettings()
        self._levels_in = np.asarray(levels_mhz, dtype=np.float64)
        self._mems_in = (None if mem_levels_mhz is None
                         else np.asarray(mem_levels_mhz, dtype=np.float64))
        self.idle_power_w = idle_power_w
        self.prior = prior
        self.stress_settings = stress_settings
        self._states: dict[str, _FormState] = {}
        self.target = target
        frame_rate = target.fps is not None
        # Every form the setting can put in force is built now, so that a table one of them
        # refuses is refused here, not at the tick the target changes.
        for name in sorted(forms.forms_in_force(settings.form, None, prior is not None)):
            self._state(name)
        self.form = ""
        """The name of the form in force."""
        self.model: Model
        self.stress: StressDetector
        self.seeder: PriorSeeder | None
        self._use(forms.resolve(settings.form, frame_rate, prior is not None))
        self._frame_rate = frame_rate
        self.policy = policy
        self.fallback = fallback if fallback is not None else Performance()
        self.fallback_grace_s = fallback_grace_s
        self.period_s = period_s
        self.grace_ticks = ticks_of(fallback_grace_s, period_s)
        self.min_dwell_s = min_dwell_s
        self.dwell_ticks = ticks_of(min_dwell_s, period_s)
        """Ticks a chosen level is kept at least (0: none)."""
        self.fallback_reason: str | None = None
        """The stress condition whose grace period is running, None when none is."""
        self._grace_left = 0
        self.stress_episodes = 0
        """Times the model was reset for stress."""
        self.levels_mhz: FloatArray = self.model.levels_mhz
        self.mem_levels_mhz: FloatArray | None = self.model.mem_levels_mhz
        self._levels = [float(f) for f in self.levels_mhz]
        self.lo, self.hi = 0, len(self._levels) - 1
        if bounds_mhz is not None:
            self.set_bounds(*bounds_mhz)
        self.ticks = 0
        self._expected_level = -1
        self._expected_ms = math.nan
        self._error_sq = math.nan
        self._chosen = -1
        self._since_change = 0

    def _state(self, name: str) -> _FormState:
        """The state of form ``name``, built on first use."""
        state = self._states.get(name)
        if state is None:
            entry = forms.form(name)
            if self.prior is not None and not entry.takes_prior:
                raise ValueError(f"a prior seeds the seed form only (model.form: {name} "
                                 "takes none)")
            model = entry.build(self._levels_in, self._mems_in, self.model_settings,
                                self.idle_power_w)
            seeder = (PriorSeeder(self.prior, model.levels_mhz) if self.prior is not None
                      else None)
            state = _FormState(model, StressDetector(model, self.stress_settings), seeder)
            self._states[name] = state
        return state

    def _use(self, name: str) -> None:
        """Put form ``name`` in force (its state as it was left)."""
        state = self._state(name)
        self.form = name
        self.model = state.model
        self.stress = state.stress
        self.seeder = state.seeder

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
        # that were called once per tick (error tracking, late share) are written out here.
        busy = sample.busy
        frame_time_ms = sample.frame_time_ms
        frame_count = round(sample.frame_count)  # whole frames, as the daemon always gave
        interval_s = sample.interval_s
        if not math.isfinite(busy) and frame_count > 0 and interval_s > 0:
            busy = min(1.0, frame_count * frame_time_ms / (interval_s * 1e3))
        target = self.target
        frame_rate = target.fps is not None
        if frame_rate is not self._frame_rate:
            # another kind of target (another application's): the form in force may change
            self._frame_rate = frame_rate
            self._use(forms.resolve(self.model_settings.form, frame_rate, self.prior is not None))
        model = self.model
        flags = model.update(
            frame_time_ms, sample.freq_mhz, sample.counters, sample.power_w, busy,
            sample.mem_activity, target.deadline_ms, sample.mem_freq_mhz,
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
        # last tick's prediction for the level that then ran, against this tick's frames
        expected_ms = self._expected_ms
        if (current == self._expected_level and frame_time_ms > 0 and expected_ms > 0
                and math.isfinite(frame_time_ms)):
            err = min(frame_time_ms / expected_ms - 1.0, 10.0)
            if math.isnan(self._error_sq):
                self._error_sq = err * err
            else:
                self._error_sq += ERROR_WEIGHT * (err * err - self._error_sq)
        predictions = model.predictions()
        view = Outlook(
            levels_mhz=self.levels_mhz,
            lo=lo,
            hi=hi,
            current=current,
            predictions=predictions,
            time_error=math.sqrt(self._error_sq),
            # NaN without frames or a frame-rate target
            late_share=sample.late_share if frame_rate and frame_count > 0 else math.nan,
            busy=busy,
            interval_s=interval_s,
            target=target,
            tick=self.ticks,
            frame_time_ms=frame_time_ms,
            power_w=sample.power_w,
            mem_levels_mhz=mem_levels,
        )
        deciding = self.policy if self.fallback_reason is None else self.fallback
        level = min(max(int(deciding.decide(view)), lo), hi)
        held = self._dwell(level, lo, hi)
        if held:
            level = self._chosen
        self.ticks += 1
        self._expected_level = level
        self._expected_ms = float(predictions.time_ms[level]) if predictions.ready else math.nan
        mem_mhz = None if mem_levels is None else float(mem_levels[level])
        return Decision(level, levels[level], view, flags, fallback=self.fallback_reason,
                        mem_freq_mhz=mem_mhz, held=held)

    def _dwell(self, level: int, lo: int, hi: int) -> bool:
        """Whether the dwell keeps the level chosen before instead of ``level``: another level
        is taken only ``dwell_ticks`` after the last change (a level outside the bounds in
        force is left at once)."""
        chosen = self._chosen
        if level == chosen or chosen < 0 or not lo <= chosen <= hi \
                or self._since_change >= self.dwell_ticks:
            self._since_change = 1 if level != chosen else self._since_change + 1
            self._chosen = level
            return False
        self._since_change += 1
        return True

    def _seed_from_prior(self, flags: int, sample: Sample) -> None:
        """Feed the prior's seeder; a model reset (numeric or stress) starts it over."""
        assert self.seeder is not None
        if flags & (WAS_RESET | STRESS_RESET):
            self.seeder.reset()
        seeded = self.seeder.observe(sample.freq_mhz, sample.frame_time_ms)
        if seeded is not None:
            model = self.model
            assert isinstance(model, SeedableModel)
            model.seed(seeded[1], seeded[2])

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
        """Forget every form's model and the policy's history (new workload, device taken
        back)."""
        for state in self._states.values():
            state.model.reset()
            state.stress.reset()
            if state.seeder is not None:
                state.seeder.reset()
        self.policy.reset()
        self.fallback_reason = None
        self._grace_left = 0
        self.ticks = 0
        self._expected_level = -1
        self._expected_ms = math.nan
        self._error_sq = math.nan
        self._chosen = -1
        self._since_change = 0
