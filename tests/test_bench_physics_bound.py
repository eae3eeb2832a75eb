"""bench/bench_physics_bound.py: what it reports of work at the 1/f-safe clock f_top / (1 + b)."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))

from bench_physics_bound import check

from govd.formats.sweep import SweepTable

LEVELS = np.array([900.0, 1000.0, 1100.0, 1200.0, 1300.0, 1400.0, 1500.0])


def table(*curves: np.ndarray, units: int = 10) -> SweepTable:
    """``units`` units of each curve (times in ms at LEVELS), one phase per curve."""
    time_ms = np.concatenate([np.repeat(c[None, :], units, axis=0) for c in curves])
    return SweepTable(levels_mhz=LEVELS.copy(), time_ms=time_ms,
                      power_w=np.full_like(time_ms, 100.0))


def test_work_that_scales_as_1_over_f_never_misses_at_the_safe_clock() -> None:
    compute = 10.0 * LEVELS[-1] / LEVELS
    memory = np.full(LEVELS.size, 30.0)
    r = check(table(compute, memory), 0.10)
    assert r["level_mhz"] == 1400.0  # log(1500/1400) <= log(1.1) < log(1500/1300)
    assert r["phases_over"] == 0.0 and r["units_over"] == 0.0
    assert r["max_excess"] == pytest.approx(0.0, abs=1e-12)
    assert r["top_not_fastest"] == 0.0 and r["phases"] == 2


def test_a_slow_clock_and_a_slow_top_are_counted() -> None:
    compute = 10.0 * LEVELS[-1] / LEVELS
    bump = compute.copy()
    bump[5] *= 1.08  # 1400 MHz runs 8 % slower than 1/f: over a 10 % budget there
    slow_top = 20.0 * LEVELS[-1] / LEVELS
    slow_top[-1] = slow_top[-2] * 1.05  # the top is slower than the clock below it
    r = check(table(compute, bump, slow_top), 0.10)
    assert r["phases"] == 3
    assert r["phases_over"] == pytest.approx(1 / 3)
    assert r["units_over"] == pytest.approx(1 / 3)
    assert r["max_excess"] == pytest.approx(math.log(1.08))
    assert r["top_not_fastest"] == pytest.approx(1 / 3)
    assert r["clock_tail_max"] == pytest.approx(1 / 3) and r["clock_tail_mhz"] == 1400.0


def test_a_clock_slow_for_every_work_stands_out_and_a_steep_work_does_not() -> None:
    """At a 30 % budget the safe range is 1200-1400 MHz (the top excluded from the tails)."""
    works = [k * LEVELS[-1] / LEVELS for k in (5.0, 10.0, 20.0, 40.0)]
    for w in works:
        w[4] *= 1.05  # 1300 MHz runs 5 % slower than 1/f for every work
    r = check(table(*works), 0.30)
    assert r["level_mhz"] == 1200.0
    assert r["clock_tail_max"] == 1.0 and r["clock_tail_mhz"] == 1300.0
    assert r["clock_tail_median"] == 0.0
    steep = [k * (LEVELS[-1] / LEVELS) ** 1.5 for k in (5.0, 10.0)]  # its own excess
    r = check(table(*steep), 0.30)
    assert r["clock_tail_max"] == 1.0 and r["clock_tail_median"] == 1.0
