"""`energy` with a memory: the energy policy deciding, under a slowdown limit, on what each
piece of work measured at each clock, where it measured it.

On a fine clock grid a model of time against clock learns little: a pair of ticks one level
(0.5-1 % of clock) apart measures a slope against a unit's 1 % noise, one such pair set a work's
curve to t ∝ f^-2, and a curve no later tick corrects keeps every lower clock predicted
infeasible or dearer, so the policy on the model alone runs the top clock (bench/README.md,
eighth, thirteenth and fourteenth passes). This policy keeps, beside the model, the work's own
measurements and decides on them where they exist:

- **A record per piece of work** (`Predictions.work_id`, the model's work slot): per clock the
  count, mean log time and mean log energy of the work's ticks there. It outlives the run of
  ticks that made it (the work comes back to its record) and is dropped where a tick's time
  at a clock the record knows lies more than ``JUMP_Z`` deviations from its mean, on arrival
  or twice in a row (other work under the same slot).
- **The noise σ** of one tick's log time is measured where it is the noise alone: the spread of
  one work's ticks at one clock, pooled over every record (the model's ``time_noise`` also
  holds its curve's misfit), and per record, that pool its prior of ``WORK_NOISE_PRIOR``
  ticks: never less than the pool (a training step's noise on the H200 is several times a
  memory-bound step's, and one margin for both let the noisy work over the limit).
- **Verified, refused, undecided clocks.** A clock where the work ran at least twice is
  *verified* when the next unit's ratio there stays inside the slowdown budget but for
  ``miss_budget`` of the time: its mean log time over the fastest clock the work measured,
  plus z_u = Φ⁻¹(1 − ``miss_budget``) deviations of one unit's ratio about that mean (its own
  noise and the top's, 2σ², and the mean's error, sd², added as independent deviations).
  Adding ``z`` deviations of the mean on top of a unit's margin counted the mean's doubt twice:
  on the made-up A40 stage at 10 % the clock one fixed clock runs, 5.6 % slower than the top
  where the limit after a unit's margin is 5.8 %, could never be verified. A clock is
  *refused* when its mean less ``z`` deviations of that mean is over the budget less a
  unit's margin (z_u · √2 · σ); else *undecided*. A verified clock is feasible whatever the
  model predicts; refused and undecided clocks are not (the model's curve is what measured
  them wrong: on the H200's training step it called 1365 MHz 8 % slower than the top where
  100 ticks there measured 17 %). Where the top's own count is what keeps a clock undecided,
  and ticks at the top could still verify it, the next tick measures the top again (an
  anchor); a clock whose own mean keeps it out of reach sends no work to the top (on the
  A100 stage with an optimiser step at 25 %, 1155 MHz sat on the limit for the forward
  micro-batch, and the top ran every time its count fell behind).
- **Clocks the work never measured** are feasible where the model says so and where time
  growing at most as 1/f below the clocks the work measured keeps them inside the limit: the
  model's curve reaches no further than physics allows from what was measured. Spanning
  probes (below) measure the rest.
- **Energies.** A clock measured twice counts with its measured energy, relative to the top's,
  plus its standard deviation times √(2 ln k) for the k clocks so measured (the least of k
  noisy means is that far below its truth: on a table whose clocks cost the same within 1 %,
  the cheapest-looking of them was the noisiest); one measured dearer than the top and not
  verified is not chosen. Between two verified clocks the cheaper by these energies is
  run, with no hysteresis: neither risks a miss, and the hysteresis of 2 % in energy held the
  A40 stage at the first clock it verified, 1665 MHz, for the rest of the run, 0.6 % dearer
  than 1650 MHz, which it had verified too. The work-change hedge still applies (a clock
  verified for this work may run the next), with this work's curve remembered no steeper at
  a clock measured twice than its mean there plus ``z`` deviations of that mean (on the H100
  stage at 10 % the model called 1870 MHz 6.9 % slower than the top where the table's mean is
  5.1 %: the hedge put a 0.72 % chance of a miss on the clock the work had verified, and held
  it at 1890 MHz for the whole run), and the measured guard (`govd.policy.guard`) where the
  work measured nothing better.
- **Spanning probes.** A probe steps from the lowest verified clock (the top before any) to
  ``ROOM`` of the room left to the budget in log clock, where time growing as 1/f would leave
  it inside: far enough in clock to measure a slope against the noise on any grid. Where that
  reaches no lower clock, one level down to a clock not yet judged, when that step spans at
  least the noise of a ratio (a coarse grid; a verified clock probed again taught nothing and
  cost a unit each time), and never past halfway to a clock measured over the limit. That
  level is the one below the choice, or below the lowest verified clock where the choice
  sits above it and the model, its spread included, calls the level inside the limit: on the
  simulated V100 at 10 % memory-bound kernels held 1102 MHz with 1087 MHz verified, the level
  below the choice, and never measured 945 MHz, 14 % lower in clock, where the model put
  them 0.8 % slower than the top (one probe more per work; from any clock the model did not
  vouch for, such probes cost v100-units 1.4 % of units over the limit). A probe the 1/f
  bound keeps inside the budget runs without the model's leave; others need it
  (`EnergyPolicy._worth_probing`). Work that has run only at the top probes after
  ``FIRST_WAIT`` ticks; while the room is large the policy probes every ``FAST_WAIT`` ticks.
- **Anchors.** New work (the first tick after the model saw a change, or after a record was
  dropped) runs one tick at the top when its record has no time there: the budget is a ratio
  to the fastest clock, which only a measurement there gives.
- **Where it stands aside.** For work whose unit margin leaves no room inside the limit (ticks
  more than about 2.9 % apart under a 10 % limit), the model decides alone, as with
  ``memory: false``: such work could verify no clock and would run the top (the simulated
  gpgpu demo's saving went from 2.7 % to 0.05 %).

Slowdown limits with one clock domain and a model whose spread is measured between levels
(the scaling form); everything else, and everything with ``memory: false``, is
`EnergyPolicy`'s. What it achieves against `EnergyPolicy` alone, table by table:
bench/README.md ("Eighteenth pass").
"""

from __future__ import annotations

import math
from collections import OrderedDict
from statistics import NormalDist
from typing import Any, ClassVar

import numpy as np

from govd.policy.base import Outlook
from govd.policy.energy import EnergyPolicy
from govd.policy.guard import LogMean

ROOM = 0.75
"""Share of the room left to the budget (log) a probe spans in log clock below the lowest
verified clock."""
FAST_WAIT = 4
"""Ticks between probes while the room left exceeds a quarter of the budget."""
FIRST_WAIT = 2
"""Ticks at the top before the first probe of work that has run nowhere else."""
JUMP_Z = 4.0
"""Deviations of a tick's log time from its record's mean at that clock that say other work."""
NOISE_PRIOR_TICKS = 3.0
"""Ticks' worth of weight the model's ``time_noise`` keeps in the pooled per-unit noise."""
WORK_NOISE_PRIOR = 32.0
"""Ticks' worth of weight the pooled noise keeps in one work's own."""
MAX_RECORDS = 256
"""Records kept (the least recently used is dropped)."""


def _added_squares(stats: LogMean, value: float) -> float:
    """What ``value`` adds to the sum of squared deviations of the values ``stats`` holds (one
    degree of freedom more, Welford's update)."""
    return (value - stats.mean) ** 2 * stats.n / (stats.n + 1)


def _energy_penalty(energy_rel: np.ndarray, energy_sd: np.ndarray) -> np.ndarray:
    """What to add to k measured energies before the least is taken: each one's deviation
    times √(2 ln k), about how far the least of k noisy means falls below its truth (one
    deviation for a single clock)."""
    k = int(np.isfinite(energy_rel).sum())
    z = math.sqrt(2.0 * math.log(k)) if k >= 2 else 1.0
    return z * energy_sd


class _Record:
    """One piece of work's log time and log energy per level."""

    __slots__ = ("dof", "energy", "squares", "time")

    def __init__(self) -> None:
        self.time: dict[int, LogMean] = {}
        self.energy: dict[int, LogMean] = {}
        self.squares, self.dof = 0.0, 0

    def noise(self, pooled: float) -> float:
        """This work's per-tick noise of log time, ``pooled`` (every work's) its prior."""
        k = WORK_NOISE_PRIOR
        return max(pooled, math.sqrt((self.squares + k * pooled * pooled) / (self.dof + k)))

    def fastest(self) -> float:
        """The least mean log time over the levels measured (NaN before any)."""
        means = [s.mean for s in self.time.values() if s.n]
        return min(means) if means else math.nan


class MeasuredMemory(EnergyPolicy):
    """`EnergyPolicy` deciding, under a slowdown limit, on each work's measured clocks where
    it has them (see the module's notes)."""

    name: ClassVar[str] = "energy"

    def __init__(self, memory: bool = True, **params: Any) -> None:
        """``memory``: decide on what each work measured where it did (false: the model
        alone, `EnergyPolicy`); the rest are `EnergyPolicy`'s parameters."""
        if not isinstance(memory, bool):
            raise ValueError(f"memory must be true or false, got {memory!r}")
        super().__init__(**params)
        self.memory = memory
        self._unit_z = NormalDist().inv_cdf(1.0 - self.miss_budget)
        """Deviations of one unit's ratio a verified clock leaves inside the budget: units
        over at ``miss_budget`` where the ratio is normal (2.33 at the default 1 %)."""
        self._clear()

    @staticmethod
    def inert_parameters(spread_from_pairs: bool, frame_rate: bool) -> frozenset[str]:
        """`EnergyPolicy.inert_parameters`, and ``memory`` where it changes nothing: under a
        frame-rate target, or with a model whose spread is derived (the seed form)."""
        inert = set(EnergyPolicy.inert_parameters(spread_from_pairs, frame_rate))
        if frame_rate or not spread_from_pairs:
            inert.add("memory")
        return frozenset(inert)

    def _clear(self) -> None:
        self._records: OrderedDict[int, _Record] = OrderedDict()
        self._record: _Record | None = None
        self._pool_squares, self._pool_dof = 0.0, 0
        self._epool_squares, self._epool_dof = 0.0, 0
        self._suspect = 0
        self._fresh = False
        self._anchor = False
        self._noise = math.nan
        self._verified: np.ndarray | None = None
        self._refused_here: np.ndarray | None = None
        self._undecided: np.ndarray | None = None
        self._energy_rel: np.ndarray | None = None
        self._top_short = False
        self._upper = np.zeros(0)
        self._physics = np.zeros(0)

    def reset(self) -> None:
        """Forget the records too."""
        super().reset()
        self._clear()

    # -- the records ------------------------------------------------------------------------

    def decide(self, view: Outlook) -> int:
        p = view.predictions
        self._verified = None
        self._record = None
        if (self.memory and view.target.max_slowdown is not None and p.ready
                and p.spread_from_pairs
                and view.mem_levels_mhz is None and p.work_id >= 0):
            self._observe(view)
            if self._limit(view) <= 0.0:
                self._record = None  # no clock could be verified: the model decides alone
        return super().decide(view)

    def _pooled_noise(self, prior: float) -> float:
        prior = prior if math.isfinite(prior) and prior > 0.0 else 0.01
        k = NOISE_PRIOR_TICKS
        return math.sqrt((self._pool_squares + k * prior * prior) / (self._pool_dof + k))

    def _observe(self, view: Outlook) -> None:
        p = view.predictions
        rec = self._records.get(p.work_id)
        if rec is None:
            rec = self._records[p.work_id] = _Record()
            while len(self._records) > MAX_RECORDS:
                self._records.popitem(last=False)
        else:
            self._records.move_to_end(p.work_id)
        self._noise = noise = self._pooled_noise(p.time_noise)
        t, w = view.frame_time_ms, view.power_w
        if math.isfinite(t) and t > 0.0:
            log_t = math.log(t)
            log_e = log_t + math.log(w) if math.isfinite(w) and w > 0.0 else math.nan
            here = rec.time.get(view.current)
            jump = (here is not None and here.n >= 2
                    and abs(log_t - here.mean) > JUMP_Z * noise * math.sqrt(1.0 + 1.0 / here.n))
            if jump and p.work_ticks == 0:
                rec = self._records[p.work_id] = _Record()
            elif jump:
                self._suspect += 1
                if self._suspect >= 2:
                    rec = self._records[p.work_id] = _Record()
                    self._suspect, self._fresh = 0, True
            else:
                self._suspect = 0
            stats = rec.time.setdefault(view.current, LogMean())
            if stats.n:  # the noise alone: one work's ticks at one clock
                sq = _added_squares(stats, log_t)
                self._pool_squares += sq
                self._pool_dof += 1
                rec.squares += sq
                rec.dof += 1
            stats.add(log_t)
            if math.isfinite(log_e):
                es = rec.energy.setdefault(view.current, LogMean())
                if es.n:
                    self._epool_squares += _added_squares(es, log_e)
                    self._epool_dof += 1
                es.add(log_e)
        self._record = rec
        self._noise = rec.noise(self._pooled_noise(p.time_noise))

    def _limit(self, view: Outlook) -> float:
        assert view.target.max_slowdown is not None
        return math.log1p(view.target.max_slowdown) - self._unit_z * math.sqrt(2.0) * self._noise

    def _judge(self, view: Outlook) -> bool:
        """Fill the verified, refused and undecided masks, the measured energies (their
        deviations added, `_energy_penalty`) and the 1/f bound over lo..hi; False where the
        work has no time at the top yet."""
        rec = self._record
        lo, hi = view.lo, view.hi
        if rec is None or hi not in rec.time:
            return False
        ref = rec.fastest()
        top_e = rec.energy.get(hi)
        n_top = rec.time[hi].n
        limit, z, unit_z = self._limit(view), self._z, self._unit_z
        assert view.target.max_slowdown is not None
        budget = math.log1p(view.target.max_slowdown)
        noise = self._noise
        size = hi + 1 - lo
        verified, refused = np.zeros(size, bool), np.zeros(size, bool)
        undecided = np.zeros(size, bool)
        short = False
        energy_rel = np.full(size, math.nan)
        upper = np.full(size, math.nan)
        energy_sd = np.zeros(size)
        enoise = math.sqrt((self._epool_squares + NOISE_PRIOR_TICKS * self._noise ** 2)
                           / (self._epool_dof + NOISE_PRIOR_TICKS))

        def unit_inside(ratio: float, sd: float) -> bool:
            """Whether the next unit's ratio, about a mean ``ratio`` known to ``sd``, stays
            inside the budget but for ``miss_budget`` of the time."""
            return ratio + unit_z * math.sqrt(2.0 * noise**2 + sd**2) <= budget

        for level, stats in rec.time.items():
            if not lo <= level < hi:
                continue
            ratio = stats.mean - ref
            sd = noise * math.sqrt(1.0 / stats.n + 1.0 / n_top)
            if stats.n >= 2:
                upper[level - lo] = ratio + z * sd
            if stats.n >= 2 and unit_inside(ratio, sd):
                verified[level - lo] = True
            elif ratio - z * sd > limit:
                refused[level - lo] = True
            elif stats.n >= 2:
                undecided[level - lo] = True
                # the top's ticks could verify it: with the top known exactly, sd² = σ² / n
                short |= n_top < stats.n and unit_inside(ratio, noise / math.sqrt(stats.n))
            e = rec.energy.get(level)
            if e is not None and e.n >= 2 and top_e is not None and top_e.n:
                energy_rel[level - lo] = e.mean - top_e.mean
                energy_sd[level - lo] = enoise * math.sqrt(1.0 / e.n + 1.0 / top_e.n)
        self._verified, self._refused_here = verified, refused
        self._energy_rel = energy_rel + _energy_penalty(energy_rel, energy_sd)
        self._undecided, self._top_short = undecided, short
        self._upper = upper
        self._physics = self._one_over_f(view, ref)
        return True

    def _one_over_f(self, view: Outlook, fastest: float) -> np.ndarray:
        """Per level over lo..hi, the most its mean log time can exceed the work's fastest,
        time growing at most as 1/f below every clock the work measured (twice, or the top):
        the least over those clocks above it of their measured ratio plus log(f_clock / f).
        Infinite where no clock above was measured, and at the top."""
        assert self._record is not None
        lo, hi = view.lo, view.hi
        u = np.log(float(view.levels_mhz[hi]) / view.levels_mhz[lo:hi + 1])
        c = np.full(hi + 1 - lo, np.inf)
        for level, stats in self._record.time.items():
            if lo <= level <= hi and (stats.n >= 2 or level == hi):
                c[level - lo] = stats.mean - fastest - u[level - lo]
        above = np.minimum.accumulate(c[::-1])[::-1]
        bound: np.ndarray = u + np.append(above[1:], np.inf)
        return bound

    def _room(self, view: Outlook) -> tuple[int, float]:
        """The lowest verified level (the top where none) and the room left to the limit
        from its measured ratio."""
        assert self._record is not None and self._verified is not None
        rec = self._record
        idx = np.flatnonzero(self._verified)
        start = view.lo + int(idx[0]) if idx.size else view.hi
        ratio = rec.time[start].mean - rec.fastest() if start != view.hi else 0.0
        return start, self._limit(view) - ratio

    # -- the choice -------------------------------------------------------------------------

    def _decide(self, view: Outlook) -> int:
        self._anchor = False
        if self._record is not None:
            if self._judge(view):
                if self._top_short:
                    self._anchor = True
                _, room = self._room(view)
                assert view.target.max_slowdown is not None
                top = self._record.time[view.hi]
                if len(self._record.time) == 1 and top.n >= 2:
                    self._wait = min(self._wait, FIRST_WAIT)
                elif room > 0.25 * math.log1p(view.target.max_slowdown):
                    self._wait = min(self._wait, FAST_WAIT)
            else:
                self._anchor = view.predictions.work_ticks <= 1 or self._fresh
        return super()._decide(view)

    def _choose_with_spread(self, view: Outlook, sd_now: np.ndarray, sd_top: np.ndarray
                            ) -> int:
        if self._anchor and view.target.max_slowdown is not None:
            self._fresh = False
            return view.hi  # an anchor: this work's time at the top
        verified = self._verified
        if verified is None or view.target.max_slowdown is None or self.price_misses:
            return super()._choose_with_spread(view, sd_now, sd_top)
        assert self._refused_here is not None and self._energy_rel is not None
        lo, hi = view.lo, view.hi
        p = view.predictions
        with np.errstate(all="ignore"):
            log_t = np.log(p.time_ms[lo:hi + 1])
            spread = sd_top[lo:hi + 1].copy()
            spread[-1] = 0.0
            budget = math.log1p(view.target.max_slowdown)
            ok = log_t - log_t[-1] + self._z * spread <= budget
            ok &= self._physics <= self._limit(view)
            ok |= verified
            ok &= ~self._refused_here
            assert self._undecided is not None
            ok &= ~self._undecided
            # the work-change hedge remembers this work's curve no steeper than what it
            # measured allows (`_judge`'s upper bounds)
            hedged = np.fmin(log_t - log_t[-1], self._upper)
            ok &= self._change_risk(hedged, budget, view.current,
                                    p.time_noise) <= self.miss_budget
        if self._refused is not None:  # the guard's slope, where this work measured no better
            ok &= ~(self._refused & ~verified)
        ok &= np.isfinite(log_t)
        ok[-1] = True
        energy = np.array(p.energy_mj[lo:hi + 1], dtype=float)
        known = np.isfinite(self._energy_rel)
        energy[known] = float(p.energy_mj[hi]) * np.exp(self._energy_rel[known])
        energy[known & (self._energy_rel > 0.0) & ~verified] = np.inf
        energy = np.where(ok, energy, np.inf)
        best = lo + int(np.argmin(energy))
        best_mj = float(energy[best - lo])
        current = view.current
        # The hysteresis alone, not `_holds`: its "never hold a level dearer than the fastest"
        # would read measured energies here, whose √(2 ln k) penalty can put a held verified
        # clock a little above the top on noise alone and send the work back to the top
        # (`_holds` measured: synergy-187-s1 at 10 % 1.106 -> 1.131, synergy-187 at 25 % over
        # one fixed clock; bench/README.md, twentieth pass). None between two verified clocks
        # (the module's notes).
        if not lo <= current <= hi or not ok[current - lo]:
            return best
        both_verified = bool(verified[current - lo] and verified[best - lo])
        hysteresis = 0.0 if both_verified else self.hysteresis
        return current if energy[current - lo] <= best_mj * (1.0 + hysteresis) else best

    def _below(self, view: Outlook, choice: int) -> int:
        if self._verified is None or view.target.max_slowdown is None:
            return super()._below(view, choice)
        assert self._refused_here is not None
        lo, hi = view.lo, view.hi
        start, room = self._room(view)
        if room < math.sqrt(2.0) * self._noise:
            return -1
        u = np.log(float(view.levels_mhz[hi]) / view.levels_mhz[lo:hi + 1])
        reach = float(u[start - lo]) + ROOM * room
        refused = np.flatnonzero(self._refused_here[:start - lo])
        if refused.size:  # halfway to the nearest clock measured over the limit
            reach = min(reach, 0.5 * (float(u[start - lo]) + float(u[refused[-1]])))
        untried = ~(self._verified | self._refused_here)
        within = np.flatnonzero((u[:start - lo] <= reach + 1e-12) & untried[:start - lo])
        if within.size:
            return lo + int(within[0])
        lowest = min(choice, start)
        below = lowest - 1
        if (below >= lo and untried[below - lo]
                and u[below - lo] - u[lowest - lo] >= 2.0 * math.sqrt(2.0) * self._noise
                and (lowest == choice or self._model_inside(view, below))):
            return below
        return -1

    def _model_inside(self, view: Outlook, level: int) -> bool:
        """Whether the model, its spread included, calls ``level`` inside the limit with a
        unit's margin."""
        p = view.predictions
        t, top = float(p.time_ms[level]), float(p.time_ms[view.hi])
        if self._spreads is None or not (t > 0.0 and top > 0.0 and math.isfinite(t / top)):
            return False  # no prediction (NaN, 0 or infinite) vouches for nothing
        return math.log(t / top) + self._z * float(self._spreads[1][level]) <= self._limit(view)

    def _worth_probing(self, view: Outlook, probe: int, choice: int) -> bool:
        if self._verified is None or view.target.max_slowdown is None:
            return super()._worth_probing(view, probe, choice)
        assert self._refused_here is not None and self._record is not None
        if self._refused_here[probe - view.lo]:
            return False
        if self._bound(view, probe, choice) <= math.log1p(view.target.max_slowdown):
            return True  # time grows at most as 1/f: this one unit keeps the budget
        return super()._worth_probing(view, probe, choice)

    def _bound(self, view: Outlook, probe: int, choice: int) -> float:
        """The most ``probe``'s log time can exceed the work's fastest, time growing at most
        as 1/f below a clock it measured: the least over ``choice`` (its mean, the top's 0)
        and the clocks above the probe measured at least twice. From the choice alone, a
        choice held above the lowest verified clock (equal energies within the noise) kept
        every probe past it out of reach: on the H200's memory-bound step, 1905 MHz held
        for 900 ticks with 1785 MHz verified 0.1 % slower."""
        assert self._record is not None
        rec = self._record
        fastest = rec.fastest()
        f_probe = float(view.levels_mhz[probe])
        ratio = rec.time[choice].mean - fastest if choice != view.hi and choice in rec.time \
            else 0.0
        best = ratio + math.log(float(view.levels_mhz[choice]) / f_probe)
        for level, stats in rec.time.items():
            if probe < level <= view.hi and stats.n >= 2:
                bound = stats.mean - fastest + math.log(float(view.levels_mhz[level]) / f_probe)
                best = min(best, bound)
        return best
