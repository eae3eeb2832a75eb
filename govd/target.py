"""What the user asks of the GPU: a frame rate, or a bounded slowdown of throughput work."""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Target:
    """A performance constraint; exactly one of the two fields is set.

    - ``fps``: frames must finish within ``1000 / fps`` ms (a deadline; the GPU idles after it).
    - ``max_slowdown``: throughput work may take at most ``(1 + max_slowdown)`` times the time
      it takes at the fastest level (no deadline; energy is power · time).
    """

    fps: float | None = None
    max_slowdown: float | None = None

    def __post_init__(self) -> None:
        if (self.fps is None) == (self.max_slowdown is None):
            raise ValueError("a target needs exactly one of fps or max_slowdown")
        # 1000 / fps must be finite too: a rate as small as 1e-320 gives an infinite deadline.
        if self.fps is not None and not (math.isfinite(self.fps) and self.fps > 0
                                         and math.isfinite(1000.0 / self.fps)):
            raise ValueError(f"target fps must be a positive number, got {self.fps!r}")
        if self.max_slowdown is not None and not (
            math.isfinite(self.max_slowdown) and self.max_slowdown >= 0
        ):
            raise ValueError(f"max_slowdown must be >= 0, got {self.max_slowdown!r}")

    @property
    def deadline_ms(self) -> float:
        """Frame deadline in ms, or NaN for throughput work (no deadline)."""
        return 1000.0 / self.fps if self.fps is not None else math.nan

    def describe(self) -> str:
        """Human-readable form, e.g. ``60 FPS`` or ``slowdown <= 10 %``."""
        if self.fps is not None:
            return f"{self.fps:g} FPS"
        assert self.max_slowdown is not None
        return f"slowdown <= {self.max_slowdown * 100:g} %"
