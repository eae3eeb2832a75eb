"""An `Outlook` for policy tests: only what a test cares about needs saying."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from govd.model.base import Predictions
from govd.policy.base import Outlook
from govd.target import Target


def predictions(
    levels: int,
    *,
    time_ms: Sequence[float] | None = None,
    power_w: Sequence[float] | None = None,
    energy_mj: Sequence[float] | None = None,
    sd_now: Sequence[float] | None = None,
    sd_top: Sequence[float] | None = None,
    time_noise: float = 0.0,
    ready: bool = False,
    spread_from_pairs: bool = False,
    work_ticks: int = 0,
) -> Predictions:
    """A record over ``levels`` levels: what is not given is NaN (a spread: 0)."""

    def array(values: Sequence[float] | None, fill: float = math.nan) -> np.ndarray:
        return np.full(levels, fill) if values is None else np.array(values, dtype=float)

    return Predictions(
        time_ms=array(time_ms), power_w=array(power_w), energy_mj=array(energy_mj),
        time_sd_now=array(sd_now, 0.0), time_sd_top=array(sd_top, 0.0), time_noise=time_noise,
        ready=ready, work_ticks=work_ticks, sensitivity_ms_per_mhz=math.nan,
        fitted_time_ms=math.nan, spread_from_pairs=spread_from_pairs,
    )


def outlook(
    levels_mhz: Sequence[float],
    *,
    current: int = 0,
    lo: int = 0,
    hi: int | None = None,
    busy: float = math.nan,
    interval_s: float = 0.05,
    target: Target | None = None,
    tick: int = 0,
    predicted: Predictions | None = None,
    time_error: float = math.nan,
    mem_levels_mhz: Sequence[float] | None = None,
    frame_time_ms: float = math.nan,
    power_w: float = math.nan,
) -> Outlook:
    """A view with the given levels and status; predictions NaN unless ``predicted`` is
    given (most policies ignore them)."""
    levels = np.asarray(levels_mhz, dtype=np.float64)
    return Outlook(
        levels_mhz=levels,
        lo=lo,
        hi=len(levels) - 1 if hi is None else hi,
        current=current,
        predictions=predicted or predictions(len(levels)),
        time_error=time_error,
        busy=busy,
        interval_s=interval_s,
        target=target or Target(fps=60.0),
        tick=tick,
        frame_time_ms=frame_time_ms,
        power_w=power_w,
        mem_levels_mhz=None if mem_levels_mhz is None else np.asarray(mem_levels_mhz, float),
    )
