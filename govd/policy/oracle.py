"""The oracle: the truly least-energy level for every unit of a sweep table (DESIGN §5).

It sees every row of the table, so it knows what each level would really have cost; every
other policy is scored against it. Energies follow the evaluator's scoring exactly.
"""

from __future__ import annotations

import math
from typing import ClassVar

import numpy as np
import numpy.typing as npt

from govd.formats.sweep import SweepTable
from govd.policy.base import Outlook
from govd.target import Target

IntArray = npt.NDArray[np.intp]


def oracle_levels(
    sweep: SweepTable,
    target: Target,
    idle_power_w: float | None = None,
    lo: int = 0,
    hi: int | None = None,
) -> IntArray:
    """For every unit, the level in [lo, hi] with the least true energy that meets the target.

    With ``target.fps``: T = 1000/fps ms, energy = power·time + idle_power·max(0, T − time) and a
    level is feasible when time <= T. With ``max_slowdown`` S: energy = power·time, feasible when
    time <= (1 + S)·(the unit's fastest time over all levels). A unit no allowed level can meet
    runs at its fastest allowed level. ``idle_power_w`` (W) defaults to the table's own, 0 when
    it has none. Returns level indices, shape [units].
    """
    n_levels = len(sweep.levels_mhz)
    hi = n_levels - 1 if hi is None else hi
    if not 0 <= lo <= hi < n_levels:
        raise ValueError(f"bounds [{lo}, {hi}] do not fit the table's {n_levels} levels")
    if idle_power_w is None:
        idle_power_w = 0.0 if math.isnan(sweep.idle_power_w) else sweep.idle_power_w
    if not (math.isfinite(idle_power_w) and idle_power_w >= 0):
        raise ValueError(f"idle power must be a number >= 0 W, got {idle_power_w!r}")
    time_ms = np.where(np.isnan(sweep.time_ms), np.inf, sweep.time_ms)
    busy_mj = sweep.power_w * time_ms
    if target.fps is not None:
        deadline_ms = target.deadline_ms
        energy_mj = busy_mj + idle_power_w * np.maximum(0.0, deadline_ms - time_ms)
        feasible = time_ms <= deadline_ms
    else:
        assert target.max_slowdown is not None
        energy_mj = busy_mj
        feasible = time_ms <= (1.0 + target.max_slowdown) * time_ms.min(axis=1, keepdims=True)
    allowed = slice(lo, hi + 1)
    feasible = feasible[:, allowed] & ~np.isnan(energy_mj[:, allowed])
    best = np.argmin(np.where(feasible, energy_mj[:, allowed], np.inf), axis=1)
    fastest = np.argmin(time_ms[:, allowed], axis=1)
    choices: IntArray = np.where(feasible.any(axis=1), best, fastest).astype(np.intp) + lo
    return choices


class OraclePolicy:
    """Replays a sweep table: the decision at step k is the oracle's level for unit k + 1.

    ``idle_power_w`` (W) overrides the table's ``# idle_power_w`` metadata. The choices for a
    (target, bounds) pair are computed once, so `decide` is a lookup.
    """

    name: ClassVar[str] = "oracle"
    uses_model: ClassVar[bool] = False

    def __init__(self, sweep: SweepTable, idle_power_w: float | None = None) -> None:
        if sweep.units == 0:
            raise ValueError(f"sweep table {sweep.path or '(in memory)'} has no units")
        self.sweep = sweep
        self.idle_power_w = idle_power_w
        self._choices: dict[tuple[Target, int, int], IntArray] = {}

    def levels(self, target: Target, lo: int, hi: int) -> IntArray:
        """The oracle's level for every unit under ``target`` within [lo, hi] (cached)."""
        key = (target, lo, hi)
        choices = self._choices.get(key)
        if choices is None:
            choices = oracle_levels(self.sweep, target, self.idle_power_w, lo, hi)
            self._choices[key] = choices
        return choices

    def decide(self, view: Outlook) -> int:
        """The oracle's level for the next unit (the last unit's once the table runs out)."""
        if len(view.levels_mhz) != len(self.sweep.levels_mhz):
            raise ValueError(f"the device has {len(view.levels_mhz)} levels, the sweep table "
                             f"{len(self.sweep.levels_mhz)}")
        choices = self.levels(view.target, view.lo, view.hi)
        return int(choices[min(view.tick + 1, len(choices) - 1)])

    def reset(self) -> None:
        """Nothing to forget: the choices depend only on the table, target and bounds."""
