"""`energy`: the least predicted energy per frame that still meets the target.

With a frame-rate target, a level is feasible when its predicted frame time, inflated by the
safety margin, fits the deadline 1000/fps ms; with a slowdown target, when it is within
(1 + max_slowdown) of the predicted time at the fastest level. Among feasible levels the one
with the least predicted energy (busy + idle until the deadline) wins; the running level is
kept unless the winner saves more than ``hysteresis`` of its energy, so the choice does not
flap on noise, but never where the winner is the fastest allowed level and the running level
is predicted dearer: a level slower and dearer than full speed is worth nothing. Under a frame
deadline the hysteresis halves for every ``probe_ticks`` ticks the choice has held: it stops
a flap, not a lasting saving (on a 100-level table the choice sat for thousands of ticks at the
lowest clock, where a clock near the optimum saved 1.5 % every tick). Nothing feasible, or a
model not yet ready: the fastest allowed level.

Safety margins come from how well the model knows each level. A model whose spread comes from
ratios measured between levels (the scaling form: `Predictions.spread_from_pairs`; its
`time_sd_now`, `time_sd_top` plus the measured noise of a ratio, 2·`time_noise`², in variance:
`_ratio_spreads`) gets a margin per level of ``confidence`` standard deviations, in log time:
under a slowdown target on the ratio to the fastest level (the common part of the error
cancels), under a frame deadline on the ratio to the running level combined with the recent
error of absolute frame times (the frame-to-frame variation of the work). A model whose spread
is derived (the seed form) gets the fixed ``margin``, grown under a deadline to
``error_weight`` times the recent RMS error.

With ``price_misses`` (off by default) a slowdown target gets a price on misses instead
(`_choose_in_budget`): each level's chance of missing, from the spread of its predicted ratio
to the fastest level and from the work-change hedge below, is charged at a price that feedback
moves until the chances of the levels chosen average ``miss_budget``; the level of least energy
plus that charge wins, so the budget goes where a miss saves most. It is not the default
because it trusts the model's spread to be calibrated, which held-out runs showed it is not
always.

Under a frame deadline the margins are scaled by what they achieve: after every tick that ran
below the fastest allowed level (probes excluded: they are meant to find out; a level held
below the choice by the daemon's dwell time or a change in flight included), the scale rises by
``margin_rate`` per frame that missed the deadline (in share of the tick's frames) and falls by
``margin_rate · miss_budget / (1 − miss_budget)`` per frame that made it, so misses settle at
``miss_budget`` of such frames whatever the work's frame-to-frame noise (a fixed number of
standard deviations is too tight on noisy scenes and too loose on steady ones). The scale stays
within [1/4, 4] and starts at 1.

Under a slowdown target the standard deviations of margin (``confidence``: the choice's, the
probes', the measured guard's) are scaled the same way, by what they achieve where it can be
measured: after a tick that ran a choice below the fastest allowed level for work whose time
at the fastest level the guard has measured, the scale rises by ``margin_rate`` if that tick
was over the limit against that time and falls by ``margin_rate · miss_budget / (1 −
miss_budget)`` if not. The smaller margin applies only to such work; work not yet run at the
fastest level keeps at least ``confidence`` deviations, since only the model knows its ratio to
the top. A fixed two deviations spent little of the budget where the ratio's spread is
calibrated (the V100 tables at 10 %: 0.2 % of units over the limit, the hedged reference 1 %).

A model only learns how time scales with frequency from ticks where the frequency changed; a
policy that holds one level never teaches it. So after ``probe_ticks`` ticks at one level the
policy runs one tick lower (under a frame deadline as far down as time growing as 1/f from the
choice still fits it, where the model agrees: on a 100-level grid one level is 1 % of clock,
which teaches nothing against the noise; else one level), but only where the model does not
already call that level infeasible with confidence (where it gives its uncertainty: the
predicted time less ``confidence`` standard deviations of what it does not know meets the
target; else the predicted time itself) and predicts it to save energy: a probe into a level
known to be too slow is a violation bought for nothing. With a model that says what it knows,
a probe that leaves the choice as it was doubles the wait before the next one (up to 64 ×
``probe_ticks``); a new choice starts it afresh. The seed form does not say, and learns how
its work scales only from such probes: it keeps probing every ``probe_ticks``.

Under a slowdown target the work may change before the next tick, and the level chosen for the
work that ran then runs the next (a memory-bound kernel's cheapest level, a low core clock, can
run the compute-bound kernel after it far slower). So the policy remembers the predicted curves
(log t/t_top per allowed level) of the last ``HEDGE_TICKS`` ticks and how often the curve moved
between two ticks at the same level (the chance that the next tick runs other work; a move
across two levels may be the model learning), and refuses a level where that chance times the
mean chance that one unit of a remembered curve's work misses the budget there (its ratio's
noise, √2 · `time_noise`, about the curve) exceeds ``miss_budget``. With
``price_misses`` the moves are counted over ``CHANGE_TICKS`` and the product below the cap is
part of the level's priced chance.

Under a slowdown target the model's curve is checked against what the work itself measured
(`govd.policy.guard.MeasuredGuard`): once the current work has run at the fastest allowed level,
a level whose measured ratio to it, plus the margin of one unit's ratio noise, misses the limit
is refused with every level its slope puts further over, and a level measured dearer than the
fastest is refused, until the work changes. A model learns a ratio only from pairs of ticks at
two levels, so a curve learned wrong while the policy holds one level is otherwise never
corrected.

With two clock domains a level is a (core, memory) pair and the probes step along the core and
the memory clock in turn (see `_neighbour`).

What these choices achieve, and the designs measured and left out, with their figures: see
bench/README.md ("Policies", "Energy policy: designs measured and left out"), beside the JSON
under bench/results/ that holds them.
"""

from __future__ import annotations

import math
from typing import ClassVar

import numpy as np

from govd.model.base import Predictions
from govd.policy.base import Outlook
from govd.policy.guard import MeasuredGuard

CHANGE_TICKS = 1024
"""Ticks over which the hedge counts how often the work changed, with ``price_misses``: long
enough to tell a rate at a 0.5 % budget (about 5 changes) from one above it (without, the
``HEDGE_TICKS`` of curves)."""
HEDGE_TICKS = 128
"""Ticks of predicted curves the work-change hedge remembers (a few phases of work)."""
CURVE_MOVE = 0.05
"""Move of a tick's predicted log time ratio, at any level, that counts as other work (the
per-unit noise of the measured tables is ~1 %, of a ratio ~1.4 %)."""
HEDGE_MIN_TICKS = 8
"""Ticks of history before the hedge judges how often the work changes."""
MAX_MISS_CHANCE = 0.16
"""Largest chance of a miss a level may carry under a slowdown target, whatever it saves (its
predicted ratio one standard deviation inside the limit)."""
PRICE_RATE = 0.2
"""Move of the price of a miss per tick, per unit of (chance of the level chosen − budget); the
price is in shares of the fastest level's energy per unit of chance. A tick at a 5 % chance
against a 1 % budget raises it by 0.008, a tick at no risk lowers it by 0.002: it follows the
mix of work over thousands of ticks, not one phase (a price that moved within a phase made the
choice flap, and a flapping choice is never steady long enough to probe)."""
MAX_PRICE = 1000.0
"""Ceiling of the price (a level with a 1 % chance must then save 10x the fastest level's
energy: none does)."""
PRICE0 = 5.0
"""Starting price: a level with a 5 % chance of a miss must save a quarter of the energy."""


class EnergyPolicy:
    """Energy minimum under a frame-rate or slowdown constraint (seed 000 §V-F)."""

    name: ClassVar[str] = "energy"
    uses_model: ClassVar[bool] = True

    def __init__(
        self,
        margin: float = 0.05,
        hysteresis: float = 0.02,
        error_weight: float = 2.0,
        probe_ticks: int = 40,
        confidence: float = 2.0,
        miss_budget: float = 0.01,
        margin_rate: float = 0.05,
        price_misses: bool = False,
    ) -> None:
        """``margin``: least safety margin: predicted times are inflated by (1 + margin) before
        the feasibility test; ``error_weight``: the margin grows to error_weight times the
        recent RMS prediction error when that is larger (noisy workloads get more headroom,
        steady ones less); ``hysteresis``: relative energy saving needed to leave a feasible
        running level; ``probe_ticks``: ticks at one level before probing one level lower
        (0: never probe); ``confidence``: standard deviations of predicted log time a level
        must clear a frame deadline by, where the model gives them (2: ~2.3 % one-sided), and
        that a probe must not be known to miss by; ``miss_budget``: share of frames run below
        the fastest allowed level that may miss a frame deadline (1 %: the violations over the
        oracle's that issue #24's targets and its references allow), the aim of the margin's
        feedback; under a slowdown target, the average chance of a miss of the levels chosen
        (the aim of the price's feedback) and the most that the work-change hedge allows at
        one level, and the aim of the slowdown margins' feedback; ``margin_rate``: how far one
        missed frame (under a slowdown target: one unit over the limit against its work's
        measured time at the fastest level) raises the margins' scale (0: fixed margins);
        ``price_misses``:
        under a slowdown target, charge each level's chance of a miss at a price fed back to
        ``miss_budget`` (`_choose_in_budget`) instead of refusing levels within ``confidence``
        standard deviations of the limit. Off by default: it relies on the model's spread being
        calibrated, and on held-out V100 runs it was not (see the module's notes)."""
        if not isinstance(price_misses, bool):
            raise ValueError(f"price_misses must be true or false, got {price_misses!r}")
        self.price_misses = price_misses
        self._change_ticks = CHANGE_TICKS if price_misses else HEDGE_TICKS
        if not (math.isfinite(miss_budget) and 0.0 < miss_budget < 0.5):
            raise ValueError(f"miss_budget must be in (0, 0.5), got {miss_budget!r}")
        if not (math.isfinite(margin_rate) and 0.0 <= margin_rate <= 1.0):
            raise ValueError(f"margin_rate must be in [0, 1], got {margin_rate!r}")
        self.miss_budget = miss_budget
        self.margin_rate = margin_rate
        self._scale = 1.0
        self._limit_scale = 1.0
        self._z = confidence
        self._judged = False
        if not (math.isfinite(confidence) and 0.0 <= confidence <= 10.0):
            raise ValueError(f"confidence must be in [0, 10], got {confidence!r}")
        self.confidence = confidence
        if not (math.isfinite(margin) and 0.0 <= margin < 1.0):
            raise ValueError(f"margin must be in [0, 1), got {margin!r}")
        if not (math.isfinite(error_weight) and 0.0 <= error_weight <= 10.0):
            raise ValueError(f"error_weight must be in [0, 10], got {error_weight!r}")
        self.error_weight = error_weight
        if not (isinstance(probe_ticks, int) and probe_ticks >= 0):
            raise ValueError(f"probe_ticks must be an integer >= 0, got {probe_ticks!r}")
        self.probe_ticks = probe_ticks
        self._level = -1
        self._steady = 0
        self._held = 0
        self._probes = 0
        self._wait = probe_ticks
        if not (math.isfinite(hysteresis) and 0.0 <= hysteresis < 1.0):
            raise ValueError(f"hysteresis must be in [0, 1), got {hysteresis!r}")
        self.margin = margin
        self.hysteresis = hysteresis
        self._curves = np.zeros((0, 0))
        self._misses = np.zeros((0, 0))
        self._miss_sum = np.zeros(0)
        self._curve_sd = np.zeros(0)
        self._hedge_budget = math.nan
        self._moved = np.zeros(0, dtype=np.int8)
        self._seen = 0
        self._last_level = -1
        self._price = PRICE0
        self._spreads: tuple[np.ndarray, np.ndarray] | None = None
        self.guard = MeasuredGuard(confidence)
        self._refused: np.ndarray | None = None  # the guard's refusals this tick

    @staticmethod
    def inert_parameters(spread_from_pairs: bool, frame_rate: bool) -> frozenset[str]:
        """The parameters that change no decision for a model form whose spread is (or is not)
        measured between levels (`Predictions.spread_from_pairs`), under a frame-rate target
        (``frame_rate``) or a slowdown target: ``govd check-config`` refuses them set where
        they act under none of the forms and targets in force. Read from the rules above:
        ``margin`` is the margin of a derived spread, ``error_weight`` its growth under a
        deadline; ``confidence`` and ``price_misses`` (slowdown targets) need a measured
        spread; ``margin_rate`` learns from missed deadlines, and under a slowdown target from
        units over the limit, which the margins of a measured spread answer; ``miss_budget``
        aims the deadline margins' feedback, and under a slowdown target the hedge, the price
        and the margins' feedback, which need a measured spread."""
        inert = set()
        if spread_from_pairs:
            inert |= {"margin", "error_weight"}
        else:
            inert |= {"confidence", "price_misses"}
            if not frame_rate:
                inert.add("miss_budget")
        if frame_rate:
            inert.add("price_misses")
        else:
            inert.add("error_weight")
            if not spread_from_pairs:
                inert.add("margin_rate")
        return frozenset(inert)

    def decide(self, view: Outlook) -> int:
        """The least-energy feasible level in [lo, hi]; the fastest allowed if none."""
        self._learn_margin(view)
        self._spreads = _ratio_spreads(view.predictions)
        self._refused = None
        self._z = self.confidence
        if (self._spreads is not None and view.target.max_slowdown is not None
                and view.predictions.ready):
            missed = self.guard.observe(view, self._limit_z(view))
            self._learn_limit_margin(missed)
            self._z = self._limit_z(view)
            self._refused = self.guard.refused(view)
        level = self._decide(view)
        # the next tick's frames judge the margin if they ran below the top (not after a probe)
        self._judged = level == self._level
        return level

    def _learn_margin(self, view: Outlook) -> None:
        """Scale the deadline margins by the share of the last tick's frames that missed."""
        late = view.late_share
        if not (self._judged and self.margin_rate and math.isfinite(late)
                and view.current < view.hi):
            return
        self._scale = self._followed(self._scale, late)

    def _followed(self, scale: float, late: float) -> float:
        """``scale`` moved by one judged tick whose share ``late`` missed: up by
        ``margin_rate`` per miss, down by ``margin_rate · miss_budget / (1 − miss_budget)`` per
        unit that made it, so misses settle at ``miss_budget``; within [1/4, 4]."""
        made = (1.0 - late) * self.miss_budget / (1.0 - self.miss_budget)
        return min(max(scale + self.margin_rate * (late - made), 0.25), 4.0)

    def _limit_z(self, view: Outlook) -> float:
        """Standard deviations of margin under a slowdown limit: ``confidence`` scaled by what
        the margins achieve on work whose time at the fastest level is measured
        (`_learn_limit_margin`); never below ``confidence`` for work that has not run there,
        whose ratio to the top nothing but the model knows."""
        scale = self._limit_scale
        if not self.guard.anchored(view):
            scale = max(scale, 1.0)
        return self.confidence * scale

    def _learn_limit_margin(self, missed: bool | None) -> None:
        """Scale the slowdown margins by whether the last tick, a choice (not a probe) below
        the fastest level for work measured there, missed the limit (`MeasuredGuard.observe`),
        as the deadline margins follow their missed frames (`_followed`)."""
        if missed is None or not (self._judged and self.margin_rate):
            return
        self._limit_scale = self._followed(self._limit_scale, 1.0 if missed else 0.0)

    def _decide(self, view: Outlook) -> int:
        choice = self._choose(view)
        if choice == self._level:
            self._steady += 1
            self._held += 1
        else:
            self._level, self._steady, self._held = choice, 0, 0
            self._wait = self.probe_ticks
        if self.probe_ticks and self._steady >= self._wait:
            probe = self._below(view, choice) if view.mem_levels_mhz is None else \
                self._neighbour(view, choice)
            if probe >= view.lo and self._worth_probing(view, probe, choice):
                self._steady = 0
                if self._spreads is not None:
                    self._wait = min(2 * self._wait, 64 * self.probe_ticks)
                return probe
        elif self.probe_ticks and choice > view.lo and view.mem_levels_mhz is None:
            # work the model does not know yet (a new kernel): learn it now, while it runs.
            # One clock domain only: over (core, memory) pairs such probes were measured to
            # cost violations (3.8 % on the GTX 1080 Ti pairs) for no saving.
            probe = choice - 1
            if self._unknown(view, probe) and self._worth_probing(view, probe, choice):
                return probe
        return choice

    def _below(self, view: Outlook, choice: int) -> int:
        """The level a probe from ``choice`` tries, with one clock domain. Under a frame
        deadline: the lowest level where the deadline still holds, with the margin of
        `_choose`, if time grows as fast as 1/f below the choice's predicted time (no work's
        time grows faster as its clock falls), and that the model does not predict to miss
        it: the probe spans as much clock as is safe, so a fine grid teaches as much as a
        coarse one. One level lower where no level is that safe, and under a slowdown
        limit."""
        below = choice - 1
        p = view.predictions
        if view.target.fps is None or not p.ready:
            return below
        t = float(p.time_ms[choice])
        floor_mhz = (float(view.levels_mhz[choice]) * t * (1.0 + self._deadline_margin(view))
                     / view.target.deadline_ms)
        if not math.isfinite(floor_mhz):
            return below
        with np.errstate(invalid="ignore"):
            safe = np.flatnonzero((view.levels_mhz[view.lo:choice] >= floor_mhz)
                                  & (p.time_ms[view.lo:choice] <= view.target.deadline_ms))
        return view.lo + int(safe[0]) if safe.size else below

    def _unknown(self, view: Outlook, probe: int) -> bool:
        """Whether the model's uncertainty about ``probe``'s time, beyond the noise every
        ratio carries, exceeds that noise (false where the model does not say)."""
        if self._spreads is None or not view.predictions.ready:
            return False
        sd_now = self._spreads[0]
        sd = float(sd_now[probe])
        noise = float(sd_now[view.current])
        return sd * sd > 2.0 * noise * noise

    def _worth_probing(self, view: Outlook, probe: int, choice: int) -> bool:
        """Whether a one-tick probe of ``probe`` may teach something for nothing too dear: the
        model does not call it infeasible, nor more costly than ``choice``."""
        p = view.predictions
        if not p.ready:
            return True
        refused = self._refused
        if refused is not None and refused[probe - view.lo]:
            return False
        t = p.time_ms
        unknown = 0.0
        if self._spreads is not None:
            sd_now, sd_top = self._spreads
            sd = sd_top if view.target.fps is None else sd_now
            # what the model does not know, without the noise every ratio carries
            noise = float(min(sd_now[view.current], sd[probe]))
            unknown = self._z * math.sqrt(max(float(sd[probe]) ** 2 - noise**2, 0.0))
        optimistic = float(t[probe]) * math.exp(-unknown)
        if view.target.fps is not None:
            if optimistic > view.target.deadline_ms:
                return False
        else:
            assert view.target.max_slowdown is not None
            fastest = float(t[view.hi]) if self._spreads is not None else float(
                t[view.lo:view.hi + 1].min())
            if optimistic > (1.0 + view.target.max_slowdown) * fastest:
                return False
        if self._spreads is None:
            return True  # the seed form: its energy says nothing until it has moved
        return bool(p.energy_mj[probe] < p.energy_mj[choice])

    def _neighbour(self, view: Outlook, level: int) -> int:
        """With two clock domains, the pair one step from ``level`` along one clock, the clocks
        taken in turn: one lower where there is one, else one higher (a model learns a clock's
        effect only from moves along it, and the least-energy pair often sits at the bottom
        of one axis). -1 when neither exists within the bounds."""
        assert view.mem_levels_mhz is not None
        self._probes += 1
        cores, mems = view.levels_mhz, view.mem_levels_mhz
        if self._probes % 2:
            along, fixed = cores, mems
        else:
            along, fixed = mems, cores
        line = np.flatnonzero(fixed == fixed[level])
        line = line[(line >= view.lo) & (line <= view.hi)]
        below = line[along[line] < along[level]]
        if below.size:
            return int(below[np.argmax(along[below])])
        above = line[along[line] > along[level]]
        return int(above[np.argmin(along[above])]) if above.size else -1

    def _choose(self, view: Outlook) -> int:
        p = view.predictions
        if not p.ready:
            return view.hi
        if self._spreads is not None:
            return self._choose_with_spread(view, *self._spreads)
        time_ms, energy_mj = p.time_ms, p.energy_mj
        margin = self.margin
        if view.target.fps is not None:
            limit_ms = view.target.deadline_ms
            margin = self._deadline_margin(view)
        else:
            assert view.target.max_slowdown is not None
            limit_ms = (1.0 + view.target.max_slowdown) * float(time_ms.min())
        limit_ms /= 1.0 + margin
        # Vectorised over the allowed levels: a loop cost grew with the level count (~0.5 µs a
        # level: 90 µs a tick at an NVML grid's 190). NaN times and energies are never chosen.
        lo, hi = view.lo, view.hi
        energy = energy_mj[lo:hi + 1]
        with np.errstate(invalid="ignore"):
            ok = (time_ms[lo:hi + 1] <= limit_ms) & (energy < math.inf)
        best, best_mj = hi, math.inf
        if ok.any():
            first = int(np.argmin(np.where(ok, energy, math.inf)))  # the first of equals
            best, best_mj = lo + first, float(energy[first])
        current = view.current
        if (
            best_mj < math.inf
            and view.lo <= current <= view.hi
            and time_ms[current] <= limit_ms
            and self._holds(view, float(energy_mj[current]), best_mj, best == hi)
        ):
            return current
        return best

    def _holds(self, view: Outlook, held: float, best: float, best_is_fastest: bool) -> bool:
        """Whether the running level, at ``held`` (its predicted energy, or cost), is kept
        against the winner at ``best``: unless the winner saves more than ``hysteresis`` of
        it, and never where the winner is the fastest allowed level and the running level
        costs more. A level slower and dearer than full speed is worth nothing: on a 15 MHz
        grid a probe one level below the top, predicted 1.5 % dearer than the top after it ran,
        was held by the hysteresis for a whole run (the H200 rows of `bench_decisions.py`:
        5 % of units over a 10 % limit, more energy than the top)."""
        if best_is_fastest and held > best:
            return False
        return held <= best * (1.0 + self._hysteresis_now(view))

    def _hysteresis_now(self, view: Outlook) -> float:
        """``hysteresis``, halved under a frame deadline for every ``probe_ticks`` ticks the
        choice has held (`_holds`). Measured on the game suite (`bench_decisions.py`, three
        seeds): game-light on 100 levels went 1.029 -> 1.020 (one fixed clock 1.018), with no
        row of the thirty over one fixed clock that was not before; under a slowdown limit
        the same decay let the choice follow the model's noise across (core, memory) pairs
        (dl-gtx1080Ti-googlenet at 25 %: 1.007 -> 1.030), so there the hysteresis stays."""
        if view.target.fps is None or not self.probe_ticks:
            return self.hysteresis
        return float(self.hysteresis * 0.5 ** (self._held / self.probe_ticks))

    def _deadline_margin(self, view: Outlook) -> float:
        """The derived spread's margin under a frame deadline: ``margin``, grown to
        ``error_weight`` times the recent RMS error (scaled by the misses' feedback), at most
        0.5."""
        if not math.isfinite(view.time_error):
            return self.margin
        weight = self.error_weight * self._scale
        return max(self.margin, min(weight * view.time_error, 0.5))

    def _choose_with_spread(self, view: Outlook, sd_now: np.ndarray, sd_top: np.ndarray
                            ) -> int:
        """`_choose` with a margin per level from the model's spread of log time."""
        lo, hi = view.lo, view.hi
        time_ms, energy_mj = view.predictions.time_ms, view.predictions.energy_mj
        with np.errstate(all="ignore"):
            log_t = np.log(time_ms[lo:hi + 1])
        if view.target.max_slowdown is not None and self.price_misses:
            return self._choose_in_budget(view, log_t, sd_top[lo:hi + 1])
        z = self._z
        with np.errstate(all="ignore"):
            if view.target.fps is not None:
                scene = view.time_error if math.isfinite(view.time_error) else 0.0
                spread = np.sqrt(sd_now[lo:hi + 1] ** 2 + scene * scene)
                ok = log_t + z * self._scale * spread <= math.log(view.target.deadline_ms)
            else:
                assert view.target.max_slowdown is not None
                # the highest allowed level is the fastest (the scaling form's time never
                # falls as a clock falls) and the level `time_sd_top` is measured against
                spread = sd_top[lo:hi + 1].copy()
                spread[-1] = 0.0
                budget = math.log1p(view.target.max_slowdown)
                ok = log_t - log_t[-1] + z * spread <= budget
                ok &= self._change_risk(log_t - log_t[-1], budget, view.current,
                                        view.predictions.time_noise) <= self.miss_budget
                if self._refused is not None:
                    ok &= ~self._refused
        ok &= np.isfinite(log_t)
        if not ok.any():
            return hi
        e = np.where(ok, energy_mj[lo:hi + 1], np.inf)
        best = lo + int(np.argmin(e))
        best_mj = float(e[best - lo])
        current = view.current
        if (lo <= current <= hi and ok[current - lo]
                and self._holds(view, float(energy_mj[current]), best_mj, best == hi)):
            return current
        return best

    def _choose_in_budget(self, view: Outlook, log_t: np.ndarray, sd_top: np.ndarray) -> int:
        """Under a slowdown target: the level of least energy plus ``price`` × its chance of
        a miss, where the chance is that of the per-unit noise and the model's uncertainty
        (normal in log time, from `time_sd_top`) plus that of the work changing before the next
        tick (`_change_risk`). A level whose chance exceeds ``MAX_MISS_CHANCE``, or whose
        work-change risk alone exceeds ``miss_budget``, is refused. After each choice the price
        moves by ``PRICE_RATE`` × (the chosen level's chance − ``miss_budget``): the chances
        of the levels chosen average ``miss_budget``, spent where a miss buys the most energy.
        A fixed number of standard deviations spent none of it where levels are far from the
        limit, and refused levels a few percent inside it (v100-sim, convolution kernels at
        1.075x the top with a spread of 1.5 %: 1.049x the oracle against 1.015x for the hedged
        reference; see the module's notes for where it fails)."""
        lo, hi = view.lo, view.hi
        energy = view.predictions.energy_mj[lo:hi + 1]
        assert view.target.max_slowdown is not None
        budget = math.log1p(view.target.max_slowdown)
        # the highest allowed level is the fastest (the scaling form's time never falls as a
        # clock falls) and the level `time_sd_top` is measured against
        curve = log_t - log_t[-1]
        spread = sd_top.copy()
        spread[-1] = 0.0
        risk = self._change_risk(curve, budget, view.current, view.predictions.time_noise)
        with np.errstate(all="ignore"):
            z = (budget - curve) / (math.sqrt(2.0) * spread)
        # a NaN (no prediction) counts as a sure miss; the top's own chance is 0
        noise = np.array([0.5 * math.erfc(v) if math.isfinite(v) else float(v < 0 or v != v)
                          for v in z.tolist()])
        noise[-1] = 0.0
        chance = noise + risk
        ok = np.isfinite(log_t) & np.isfinite(energy) & (risk <= self.miss_budget)
        ok &= chance <= MAX_MISS_CHANCE
        if self._refused is not None:
            ok &= ~self._refused
        if not ok.any():
            return hi
        with np.errstate(all="ignore"):
            cost = np.where(ok, energy / energy[-1] + self._price * chance, np.inf)
        best = int(np.argmin(cost))
        current = view.current - lo
        if (0 <= current < cost.size and np.isfinite(cost[current])
                and self._holds(view, float(cost[current]), float(cost[best]),
                                best == cost.size - 1)):
            best = current
        self._price = min(max(self._price + PRICE_RATE * (float(chance[best])
                                                          - self.miss_budget), 0.0), MAX_PRICE)
        return lo + best

    def _change_risk(self, curve: np.ndarray, budget: float, current: int,
                     noise: float) -> np.ndarray:
        """Per allowed level, the chance that the work that may run next tick misses the budget
        there: remembers ``curve`` (predicted log t/t_top over the allowed levels); the chance
        is (share of ticks whose curve moved) × (the mean, over the remembered curves, of the
        chance that one unit of that work misses ``budget`` there: its ratio's noise,
        √2 · ``noise`` in log time, about its curve). A curve just inside the budget misses
        with the next unit's noise; counting only the curves over it let new work run where a
        third of its units missed (v100-units at 25 %: 1.9 % of units missed, 27 of 39 on the
        first unit of new work). A move counts only between two ticks at the same level
        (``current``): a pair at two levels teaches the model, and what it learns moves the
        curve without any change of work. All 0 until ``HEDGE_MIN_TICKS`` such pairs were
        seen."""
        n = curve.size
        if self._curves.shape[1] != n:
            self._curves = np.zeros((HEDGE_TICKS, n))
            self._misses = np.zeros((HEDGE_TICKS, n))
            self._miss_sum = np.zeros(n)
            self._curve_sd = np.zeros(HEDGE_TICKS)
            self._moved = np.zeros(self._change_ticks, dtype=np.int8)  # -1 not comparable, 0, 1
            self._seen = 0
        if not np.all(np.isfinite(curve)):
            return np.zeros(n)
        slot = self._seen % HEDGE_TICKS
        last = self._curves[(self._seen - 1) % HEDGE_TICKS]
        moved = self._seen % self._change_ticks
        if self._seen and current == self._last_level:
            self._moved[moved] = float(np.max(np.abs(curve - last))) > CURVE_MOVE
        else:
            self._moved[moved] = -1
        kept = min(self._seen + 1, HEDGE_TICKS)
        exact = slot == 0  # the running sum made exact once a round, so it cannot drift
        if budget != self._hedge_budget:  # another target: every remembered chance anew
            self._hedge_budget = budget
            self._misses[:kept] = _miss_chance(self._curves[:kept], budget,
                                               self._curve_sd[:kept, None])
            exact = True
        spread = math.sqrt(2.0) * noise if math.isfinite(noise) and noise > 0.0 else 0.0
        self._curves[slot] = curve
        self._curve_sd[slot] = spread
        row = _miss_chance(curve, budget, spread)
        if not exact:  # the row leaves the sum and the new one enters: O(L) a tick
            if self._seen >= HEDGE_TICKS:
                self._miss_sum -= self._misses[slot]
            self._miss_sum += row
        self._misses[slot] = row
        if exact:
            self._miss_sum = self._misses[:kept].sum(axis=0)
        self._last_level = current
        self._seen += 1
        judged = min(self._seen, self._change_ticks)
        compared = self._moved[:judged] >= 0
        if compared.sum() < HEDGE_MIN_TICKS:
            return np.zeros(n)
        change = float((self._moved[:judged] == 1).sum()) / float(compared.sum())
        over = self._miss_sum / kept
        chance: np.ndarray = change * over
        return chance

    def reset(self) -> None:
        """Forget how long the level has been steady, and the margins' learnt scale."""
        self._curves = np.zeros((0, 0))
        self._misses = np.zeros((0, 0))
        self._miss_sum = np.zeros(0)
        self._curve_sd = np.zeros(0)
        self._hedge_budget = math.nan
        self._moved = np.zeros(0, dtype=np.int8)
        self._seen = 0
        self._last_level = -1
        self._price = PRICE0
        self._scale = 1.0
        self._limit_scale = 1.0
        self._judged = False
        self._level = -1
        self._steady = 0
        self._held = 0
        self._probes = 0
        self._wait = self.probe_ticks
        self.guard.reset()


def _ratio_spreads(p: Predictions) -> tuple[np.ndarray, np.ndarray] | None:
    """The spread of a measured ratio at each level (to the running level, to the fastest):
    the model's own uncertainty and the noise of the two units of a ratio, 2·``time_noise``²
    in variance; None where the spread is not measured between levels (the seed form, which
    gets the fixed margins)."""
    if not p.spread_from_pairs:
        return None
    ratio_var = 2.0 * p.time_noise * p.time_noise
    return (np.sqrt(p.time_sd_now * p.time_sd_now + ratio_var),
            np.sqrt(p.time_sd_top * p.time_sd_top + ratio_var))


_Z = np.linspace(-8.0, 8.0, 4001)
_BELOW = np.array([0.5 * math.erfc(-z / math.sqrt(2.0)) for z in _Z.tolist()])
"""The standard normal distribution function on a grid of 0.004 (linear interpolation between
its points is within 2e-6 of it): one `np.interp` per tick instead of a dozen array operations
for an erfc approximation."""


def _miss_chance(curve: np.ndarray, budget: float, spread: float | np.ndarray) -> np.ndarray:
    """The chance that a unit whose log ratio is normal about ``curve`` with standard deviation
    ``spread`` exceeds ``budget`` (elementwise; a spread of 0: whether ``curve`` does)."""
    if np.ndim(spread) == 0:
        if spread > 0.0:
            below: np.ndarray = np.interp((curve - budget) * (1.0 / float(spread)), _Z, _BELOW)
            return below
        return (curve > budget).astype(float)
    sd = np.asarray(spread)
    with np.errstate(divide="ignore", invalid="ignore"):
        z = (curve - budget) / sd
    chance = np.interp(z.ravel(), _Z, _BELOW).reshape(z.shape)
    return np.where(sd > 0.0, chance, (curve > budget).astype(float))
