"""`energy`: the least predicted energy per frame that still meets the target.

With a frame-rate target, a level is feasible when its predicted frame time, inflated by the
safety margin, fits the deadline 1000/fps ms; with a slowdown target, when it is within
(1 + max_slowdown) of the predicted time at the fastest level. Among feasible levels the one
with the least predicted energy (busy + idle until the deadline) wins; the running level is
kept unless the winner saves more than ``hysteresis`` of its energy, so the choice does not
flap on noise. Nothing feasible, or a model not yet ready: the fastest allowed level.

Under a frame deadline the margin grows with the recent prediction error of absolute frame
times. Under a slowdown target both sides of the test come from the same prediction, whose
error is mostly common to every level, so only the fixed margin applies.

A model only learns how time scales with frequency from ticks where the frequency changed.
A policy that holds one level never teaches it, and with the seed's fully-scalable prior
(a0 = 1) a lower level can look infeasible forever. So after ``probe_ticks`` ticks at one
level the policy runs one tick a level lower (when the deadline, if any, still looks met).
With two clock domains a level is a (core, memory) pair and the probes step along the core and
the memory clock in turn (see `_neighbour`).
"""

from __future__ import annotations

import math
from typing import ClassVar

import numpy as np

from govd.policy.base import Outlook


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
    ) -> None:
        """``margin``: least safety margin: predicted times are inflated by (1 + margin) before
        the feasibility test; ``error_weight``: the margin grows to error_weight times the
        recent RMS prediction error when that is larger (noisy workloads get more headroom,
        steady ones less); ``hysteresis``: relative energy saving needed to leave a feasible
        running level; ``probe_ticks``: ticks at one level before probing one level lower
        (0: never probe)."""
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
        self._probes = 0
        if not (math.isfinite(hysteresis) and 0.0 <= hysteresis < 1.0):
            raise ValueError(f"hysteresis must be in [0, 1), got {hysteresis!r}")
        self.margin = margin
        self.hysteresis = hysteresis

    def decide(self, view: Outlook) -> int:
        """The least-energy feasible level in [lo, hi]; the fastest allowed if none."""
        choice = self._choose(view)
        if choice == self._level:
            self._steady += 1
        else:
            self._level, self._steady = choice, 0
        if self.probe_ticks and self._steady >= self.probe_ticks:
            probe = choice - 1 if view.mem_levels_mhz is None else self._neighbour(view, choice)
            deadline_ms = view.target.deadline_ms
            if probe >= view.lo and not (view.model_ready and view.time_ms[probe] > deadline_ms):
                self._steady = 0
                return probe
        return choice

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
        if not view.model_ready:
            return view.hi
        time_ms, energy_mj = view.time_ms, view.energy_mj
        margin = self.margin
        if view.target.fps is not None:
            limit_ms = view.target.deadline_ms
            if math.isfinite(view.time_error):
                margin = max(margin, min(self.error_weight * view.time_error, 0.5))
        else:
            assert view.target.max_slowdown is not None
            limit_ms = (1.0 + view.target.max_slowdown) * float(time_ms.min())
        limit_ms /= 1.0 + margin
        best, best_mj = view.hi, math.inf
        for level in range(view.lo, view.hi + 1):
            if time_ms[level] <= limit_ms and energy_mj[level] < best_mj:
                best, best_mj = level, float(energy_mj[level])
        current = view.current
        if (
            best_mj < math.inf
            and view.lo <= current <= view.hi
            and time_ms[current] <= limit_ms
            and energy_mj[current] <= best_mj * (1.0 + self.hysteresis)
        ):
            return current
        return best

    def reset(self) -> None:
        """Forget how long the level has been steady."""
        self._level = -1
        self._steady = 0
        self._probes = 0
