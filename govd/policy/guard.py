"""`MeasuredGuard`: levels that this work's own measurements say miss a slowdown limit, or cost
more than the fastest level.

A model of the scaling form learns how time scales with the clock from pairs of ticks at two
levels. While a policy holds one level no pair teaches it, so a curve learned early from a few
noisy pairs can stay wrong for as long as the work runs: on the GTX 1080 Ti training table at a
10 % limit the model put the level it held for 1 300 iterations at 1.6 % slower than the top;
measured, it was 7 %, and 4.5 % of the iterations missed the limit. The guard keeps, for the
current work (from `Predictions.work_ticks`), the mean log time and log energy of its ticks at
the fastest allowed level and at the level running now, and refuses:

- the running level, and every level the same slope would put further over, when its measured
  mean ratio to the fastest level, plus the margin the choice itself keeps for the noise of one
  unit's ratio (``confidence`` · √2 · `Predictions.time_noise`), misses the limit: a unit misses
  when its own ratio does, not when the mean does. With one clock the slope is the measured
  ratio per unit of log clock below the top (time grows at least that fast further down); with
  (core, memory) pairs, every pair no faster on either clock;
- the running level alone when its measured energy per unit exceeds the fastest level's by more
  than ``confidence`` standard deviations of the difference of the two means (their sample
  variances): a level slower and dearer than the top is never worth its slowdown, whatever the
  model predicts for its power.

Refusals hold until the work changes; the guard needs a tick of this work at the fastest allowed
level, so work that never ran there is never refused. Each tick below the fastest level it
judges against that measured time (`observe`'s answer, whether the tick missed the limit) is
what the energy policy scales its slowdown margins by. Only slowdown limits: under a frame
deadline the deadline itself is measured every tick, and the margins' feedback answers misses.
"""

from __future__ import annotations

import math

import numpy as np

from govd.policy.base import Outlook


class LogMean:
    """Running mean and sample variance of log values."""

    __slots__ = ("n", "squares", "total")

    def __init__(self) -> None:
        self.n, self.total, self.squares = 0, 0.0, 0.0

    def add(self, x: float) -> None:
        self.n += 1
        self.total += x
        self.squares += x * x

    @property
    def mean(self) -> float:
        return self.total / self.n

    def var_of_mean(self) -> float:
        """Variance of the mean (from the sample variance; needs n >= 2)."""
        m = self.total / self.n
        var = max(self.squares / self.n - m * m, 0.0) * self.n / (self.n - 1)
        return var / self.n


class MeasuredGuard:
    """What the current work's measured times and energies refuse (see the module's notes)."""

    def __init__(self, confidence: float) -> None:
        """``confidence``: standard deviations of margin, as the energy policy's."""
        self.confidence = confidence
        self._version = 0  # of the refusals: the key of the mask's cache
        self.reset()

    def reset(self) -> None:
        """Forget the work and its refusals."""
        self._work_start = -1
        self._hi = -1
        self._top_time, self._top_energy = LogMean(), LogMean()
        self._at = -1
        self._at_time, self._at_energy = LogMean(), LogMean()
        self._slope_limit = math.inf  # log clock below the top from which levels are refused
        self._pair: tuple[float, float] | None = None  # (core, memory) refused and below
        self._dear: set[int] = set()
        self._version += 1
        self._cache: tuple[tuple[int, int, int], np.ndarray | None] | None = None

    def anchored(self, view: Outlook) -> bool:
        """Whether the work that ran the tick just ended has run at the fastest allowed level:
        its ratio to the top is measured, not only predicted."""
        return self._top_time.n > 0 and self._holds(view)

    def _holds(self, view: Outlook) -> bool:
        """Whether what the guard keeps belongs to the work (and the bounds) of this tick."""
        return (view.tick - view.predictions.work_ticks == self._work_start
                and view.hi == self._hi)

    def observe(self, view: Outlook, confidence: float | None = None) -> bool | None:
        """Learn from the tick that just ended at ``view.current`` (a slowdown limit in force
        and the model ready; see `EnergyPolicy.decide`), its refusals with ``confidence``
        standard deviations of margin (default: the guard's own). Returns whether that tick,
        run below the fastest level, missed the limit against this work's measured time at
        the fastest level; None where it cannot say (at the top, no such time, no frames)."""
        if not self._holds(view):
            self.reset()
            self._work_start, self._hi = view.tick - view.predictions.work_ticks, view.hi
        t = view.frame_time_ms
        if not (math.isfinite(t) and t > 0.0):
            return None
        log_t = math.log(t)
        w = view.power_w
        log_e = log_t + math.log(w) if math.isfinite(w) and w > 0.0 else math.nan
        cur = view.current
        if cur == view.hi:
            self._top_time.add(log_t)
            if math.isfinite(log_e):
                self._top_energy.add(log_e)
            return None
        if cur != self._at:
            self._at, self._at_time, self._at_energy = cur, LogMean(), LogMean()
        self._at_time.add(log_t)
        if math.isfinite(log_e):
            self._at_energy.add(log_e)
        if not self._top_time.n:
            return None
        z = self.confidence if confidence is None else confidence
        self._judge_energy(cur, z)
        self._judge_time(view, cur, z)
        assert view.target.max_slowdown is not None
        return log_t - self._top_time.mean > math.log1p(view.target.max_slowdown)

    def _judge_energy(self, cur: int, z: float) -> None:
        top, at = self._top_energy, self._at_energy
        if top.n < 2 or at.n < 2:
            return
        sd = math.sqrt(top.var_of_mean() + at.var_of_mean())
        if at.mean - top.mean > z * sd and cur not in self._dear:
            self._dear.add(cur)
            self._version += 1

    def _judge_time(self, view: Outlook, cur: int, z: float) -> None:
        assert view.target.max_slowdown is not None
        ratio = self._at_time.mean - self._top_time.mean
        noise = view.predictions.time_noise
        noise = noise if math.isfinite(noise) else 0.0
        limit = math.log1p(view.target.max_slowdown) - z * math.sqrt(2.0) * noise
        if ratio <= limit:
            return
        f = view.levels_mhz
        if view.mem_levels_mhz is None:
            below = math.log(float(f[view.hi]) / float(f[cur]))
            # refused from where the measured slope crosses the limit (at the latest, here);
            # a margin that leaves no room refuses every level below the top (the ratio may
            # then be 0 or less: frame times of whole milliseconds measure equal times)
            crossing = below * limit / ratio if limit > 0.0 else 0.0
            if crossing >= self._slope_limit:
                return
            self._slope_limit = crossing
        else:
            pair = (float(f[cur]), float(view.mem_levels_mhz[cur]))
            if pair == self._pair:
                return
            self._pair = pair
        self._version += 1  # the refusals changed: the mask is built anew

    def refused(self, view: Outlook) -> np.ndarray | None:
        """Per allowed level (``lo``..``hi``), whether the guard refuses it; None when it
        refuses none. The fastest allowed level is never refused. The same array until the
        refusals or the bounds change: a caller must not write into it."""
        lo, hi = view.lo, view.hi
        key = (self._version, lo, hi)
        if self._cache is not None and self._cache[0] == key:
            return self._cache[1]
        mask = self._mask(view)
        self._cache = (key, mask)
        return mask

    def _mask(self, view: Outlook) -> np.ndarray | None:
        lo, hi = view.lo, view.hi
        if (hi != self._hi or (not self._dear and self._pair is None
                               and not math.isfinite(self._slope_limit))):
            return None
        f = view.levels_mhz[lo:hi + 1]
        out = np.zeros(hi + 1 - lo, dtype=bool)
        if math.isfinite(self._slope_limit):
            out |= np.log(float(view.levels_mhz[hi]) / f) >= self._slope_limit
        if self._pair is not None and view.mem_levels_mhz is not None:
            m = view.mem_levels_mhz[lo:hi + 1]
            out |= (f <= self._pair[0]) & (m <= self._pair[1])
        for level in self._dear:
            if lo <= level <= hi:
                out[level - lo] = True
        out[-1] = False
        return out
