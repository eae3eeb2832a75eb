"""Pseudo-frames from GPU busy time, for devices and workloads that report no frames at all.

Each tick the caller reports the device's busy fraction over the tick (`BusySource.observe`), and
the next `drain` returns one pseudo-frame whose time is the busy time of that tick
(busy fraction × tick length). The model then learns how *busy time* scales with frequency instead
of frame time: a compute job that keeps the GPU 40 % busy at the fastest level and 80 % at a slower
one took twice the GPU time there. Such work has no frame deadline, so pair this source with a
``max_slowdown`` target: the energy policy then still has a signal to trade time for energy.

A tick with no busy time yields no pseudo-frame: an idle GPU says nothing about how work scales.
"""

from __future__ import annotations

import math
from collections import Counter
from typing import Any

from govd.sources.base import Frame, FrameSource, Opening


class BusySource(FrameSource):
    """One pseudo-frame per observed tick, of length busy fraction × tick length."""

    def __init__(self, app: str = "") -> None:
        self.app = app
        self._pending: list[Frame] = []
        self._counts: Counter[str] = Counter()

    def observe(self, busy: float, interval_s: float) -> None:
        """Record one tick: ``busy`` is the fraction of it the GPU was busy (0..1; values a little
        outside, as some counters report, are clamped), ``interval_s`` its length (s). A NaN or
        otherwise unusable reading is counted as ``bad_readings`` and ignored."""
        if not (math.isfinite(busy) and math.isfinite(interval_s) and interval_s > 0):
            self._counts["bad_readings"] += 1
            return
        busy_time_ms = min(max(busy, 0.0), 1.0) * interval_s * 1000.0
        if busy_time_ms <= 0:
            self._counts["idle_ticks"] += 1
            return
        self._pending.append(Frame(gpu_time_ms=busy_time_ms, app=self.app))
        self._counts["accepted"] += 1

    def drain(self) -> list[Frame]:
        """The pseudo-frames of the ticks observed since the last call, oldest first."""
        frames, self._pending = self._pending, []
        return frames

    def stats(self) -> dict[str, int]:
        """Counters: ``accepted``, ``idle_ticks``, ``bad_readings``."""
        return dict(self._counts)


def open_busy(frames: Any, opening: Opening) -> None:
    """No shared source: with ``frames.source: busy`` the daemon gives each device its own
    `BusySource`, fed by that device's readings; the source ``busy`` in
    `govd.sources.registry`."""
    return None
