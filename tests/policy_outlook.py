"""An `Outlook` for policy tests: only what a test cares about needs saying."""

from __future__ import annotations

import math

import numpy as np

from govd.policy.base import Outlook
from govd.target import Target


def outlook(
    levels_mhz: list[float],
    *,
    current: int = 0,
    lo: int = 0,
    hi: int | None = None,
    busy: float = math.nan,
    interval_s: float = 0.05,
    target: Target | None = None,
    tick: int = 0,
) -> Outlook:
    """A view with the given levels and status; predictions are NaN (these policies ignore them)."""
    levels = np.asarray(levels_mhz, dtype=np.float64)
    unknown = np.full(len(levels), math.nan)
    return Outlook(
        levels_mhz=levels,
        lo=lo,
        hi=len(levels) - 1 if hi is None else hi,
        current=current,
        time_ms=unknown,
        power_w=unknown.copy(),
        energy_mj=unknown.copy(),
        sensitivity_ms_per_mhz=math.nan,
        model_ready=False,
        time_error=math.nan,
        busy=busy,
        interval_s=interval_s,
        target=target or Target(fps=60.0),
        tick=tick,
    )
