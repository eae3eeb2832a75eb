"""Idle back-off: when the GPU has had nothing to do for a while, the loop ticks slowly.

A tick is quiet when no frame came in it and no governed device was busy (busy fraction below
``idle.busy_below``; a device that reports no busy time counts on frames alone). After
``idle.after_s`` of quiet ticks the daemon idles: each device goes to its lowest level and the
loop ticks every ``idle.period_ms``; the first frame datagram (the socket stays in the wait set)
or a busy reading at a slow tick ends it. This module only keeps the state and decides; the
daemon acts on it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from govd.conf.schema import IdleConfig


@dataclass(frozen=True, slots=True)
class IdleSettings:
    """The ``idle`` section in the units the loop uses."""

    enabled: bool
    after_s: float
    """Quiet time before idling. Units: s of loop time."""
    period_s: float
    """Tick period while idling. Units: s."""
    busy_below: float
    """Busy fraction (0..1) below which a device counts as idle."""

    @classmethod
    def from_config(cls, config: IdleConfig) -> IdleSettings:
        """Settings from the configuration's ``idle`` section."""
        return cls(config.enabled, config.after_s, config.period_ms / 1000.0, config.busy_below)


class IdleWatch:
    """Whether the loop idles, and since when (loop time, s)."""

    def __init__(self, settings: IdleSettings) -> None:
        self.settings = settings
        self.idle = False
        self.since_s: float | None = None
        """When the current idle episode began; None while not idling."""
        self.woke_s: float | None = None
        """When the first decision after the last idle episode was taken."""
        self.episodes = 0
        self._waking = False
        self._quiet_since_s: float | None = None

    def quiet(self, frames: int, busy: float) -> bool:
        """Whether a tick with ``frames`` frames and the busiest device at ``busy`` (0..1, NaN
        where no device reports it) left the GPU idle."""
        return frames == 0 and not busy >= self.settings.busy_below

    def due(self, now_s: float, frames: int, busy: float) -> bool:
        """Record a tick at the normal period; True when the GPU has been quiet for
        ``after_s`` and the loop should idle now."""
        if not self.settings.enabled or not self.quiet(frames, busy):
            self._quiet_since_s = None
            return False
        if self._quiet_since_s is None:
            self._quiet_since_s = now_s
        return now_s - self._quiet_since_s >= self.settings.after_s

    def enter(self, now_s: float) -> None:
        """Idling starts at ``now_s``."""
        self.idle, self.since_s = True, now_s
        self.episodes += 1

    def leave(self, now_s: float) -> None:
        """Idling ends at ``now_s``; the quiet time counts afresh."""
        self.idle, self.since_s = False, None
        self._quiet_since_s = None
        self._waking = True

    def decided(self, now_s: float) -> None:
        """A tick at the normal period took its decisions at ``now_s``: the first one after an
        idle episode is `woke_s`."""
        if self._waking:
            self.woke_s, self._waking = now_s, False

    def status(self) -> dict[str, Any]:
        """The status file's ``idle`` section (times in s of loop time)."""
        return {"enabled": self.settings.enabled, "idle": self.idle, "since_s": self.since_s,
                "woke_s": self.woke_s, "episodes": self.episodes,
                "period_ms": round(self.settings.period_s * 1000)}


def busiest(values: list[float]) -> float:
    """The highest finite busy fraction in ``values``, NaN when none is finite."""
    finite = [v for v in values if math.isfinite(v)]
    return max(finite) if finite else math.nan
