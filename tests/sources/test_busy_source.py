"""Pseudo-frames from busy time."""

from __future__ import annotations

import math

import pytest

from govd.sources.busy import BusySource


def test_pseudo_frame_is_busy_fraction_times_tick() -> None:
    src = BusySource(app="compute")
    src.observe(0.4, 0.05)
    src.observe(0.8, 0.05)
    frames = src.drain()
    assert [f.gpu_time_ms for f in frames] == pytest.approx([20.0, 40.0])
    assert frames[0].app == "compute"
    assert src.drain() == []


def test_idle_and_unusable_readings_yield_no_frame() -> None:
    src = BusySource()
    src.observe(0.0, 0.05)
    src.observe(math.nan, 0.05)
    src.observe(0.5, 0.0)
    assert src.drain() == []
    assert src.stats() == {"idle_ticks": 1, "bad_readings": 2}


def test_busy_above_one_is_clamped_to_the_tick() -> None:
    src = BusySource()
    src.observe(1.03, 0.05)
    assert [f.gpu_time_ms for f in src.drain()] == pytest.approx([50.0])
