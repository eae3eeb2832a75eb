"""Another tool changing govd's setting behind its back: when to write it again, when to step
back.

A second governor, a user's ``echo`` or a driver's resume path may change the clock govd set.
When the device's setting differs from govd's for `OVERRIDE_TICKS` ticks in a row
(`Device.override`), govd writes its level again; a tool that undoes it more than
`OVERRIDE_REAPPLIES` times in one episode wins: govd steps back, leaving the device as that tool
set it (restoring govd's saved state would only start the fight again), and tries again after
`CONTESTED_RETRY_S`, doubling each time it is undone again. An episode ends once govd's setting
has held for `OVERRIDE_QUIET_S`.

`OverrideWatch` keeps only that bookkeeping; the device runner reads the device, logs and
writes.
"""

from __future__ import annotations

import math
from enum import Enum

OVERRIDE_TICKS = 3
"""Ticks in a row a changed setting must last to count as another tool's: a tool's own two-step
write (min, then max) or the driver's resume path is over within a tick or two."""
OVERRIDE_REAPPLIES = 3
"""Re-applies in one episode before govd steps back: a tool that undoes govd this often is
fighting it, and two governors fighting flap the clock for both."""
OVERRIDE_QUIET_S = 10.0
"""How long govd's setting must hold for an override episode to end. Units: s."""
CONTESTED_RETRY_S = 60.0
"""How long govd leaves a device to the tool that kept changing it before trying again; doubles
up to `MAX_CONTESTED_RETRY_S` while the fight goes on. Units: s."""
MAX_CONTESTED_RETRY_S = 960.0


class Verdict(Enum):
    """What the runner should do about this tick's reading of the setting."""

    NOTHING = "nothing"
    QUIET = "quiet"
    """govd's setting held long enough: the override episode is over."""
    REAPPLY = "reapply"
    """Another tool's setting lasted `OVERRIDE_TICKS`: write govd's level again."""
    STEP_BACK = "step back"
    """The tool undid govd more than `OVERRIDE_REAPPLIES` times: leave the device to it."""


class OverrideWatch:
    """One device's override episodes; `observe` once per tick after govd's last write."""

    def __init__(self) -> None:
        self._changed_ticks = 0
        self._reapplies = 0
        self._last_reapply_s = -math.inf
        self._retry_s = CONTESTED_RETRY_S

    def observe(self, now_s: float, changed: str | None) -> Verdict:
        """Fold in this tick's `Device.override` (None: govd's setting holds) at loop time
        ``now_s`` (s)."""
        if changed is None:
            self._changed_ticks = 0
            if self._reapplies and now_s - self._last_reapply_s >= OVERRIDE_QUIET_S:
                self._reapplies = 0
                self._retry_s = CONTESTED_RETRY_S
                return Verdict.QUIET
            return Verdict.NOTHING
        self._changed_ticks += 1
        if self._changed_ticks < OVERRIDE_TICKS:
            return Verdict.NOTHING
        self._changed_ticks = 0
        self._reapplies += 1
        self._last_reapply_s = now_s
        if self._reapplies > OVERRIDE_REAPPLIES:
            self._reapplies = 0
            return Verdict.STEP_BACK
        return Verdict.REAPPLY

    def back_off_s(self) -> float:
        """How long to leave the device to the other tool this time (s); the next is longer."""
        wait_s = self._retry_s
        self._retry_s = min(self._retry_s * 2, MAX_CONTESTED_RETRY_S)
        return wait_s
