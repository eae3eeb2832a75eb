"""EnergyMeter: counters that wrap, reset, stall; fallback to power samples."""

from __future__ import annotations

import math

import numpy as np
import pytest

from govd.device.energy import EnergyMeter


def test_power_is_energy_delta_over_time():
    meter = EnergyMeter()
    assert math.isnan(meter.update(0.0, energy_mj=1000.0))
    assert meter.update(0.05, energy_mj=1500.0) == pytest.approx(10.0)


def test_stalled_counter_gives_nan_then_spreads_the_delta_over_the_whole_gap():
    meter = EnergyMeter()
    meter.update(0.0, energy_mj=0.0)
    assert meter.update(0.05, energy_mj=500.0) == pytest.approx(10.0)
    assert math.isnan(meter.update(0.10, energy_mj=500.0))
    # 1000 mJ over the 0.1 s since the counter last moved, not over one 50 ms tick.
    assert meter.update(0.15, energy_mj=1500.0) == pytest.approx(10.0)


def test_wrapping_counter_adds_the_wrap():
    meter = EnergyMeter(wrap_mj=2**32 / 1000)
    meter.update(0.0, energy_mj=2**32 / 1000 - 100.0)
    assert meter.update(0.1, energy_mj=400.0) == pytest.approx(5.0)


def test_counter_going_backwards_is_a_reset_not_negative_power():
    meter = EnergyMeter(wrap_mj=1e9)
    meter.update(0.0, energy_mj=5000.0)
    assert math.isnan(meter.update(0.1, energy_mj=100.0))
    assert meter.update(0.2, energy_mj=600.0) == pytest.approx(5.0)


def test_reset_falls_back_to_the_power_sample_for_that_tick():
    meter = EnergyMeter()
    meter.update(0.0, energy_mj=5000.0)
    assert meter.update(0.1, energy_mj=10.0, power_w=7.5) == 7.5


def test_power_samples_are_used_when_there_is_no_counter():
    meter = EnergyMeter()
    assert meter.update(0.0, power_w=12.0) == 12.0
    assert math.isnan(meter.update(0.05))


def test_time_not_advancing_gives_nan():
    meter = EnergyMeter()
    meter.update(1.0, energy_mj=0.0)
    assert math.isnan(meter.update(1.0, energy_mj=10.0))


def test_wrap_must_be_positive():
    with pytest.raises(ValueError, match="wrap_mj"):
        EnergyMeter(wrap_mj=0)


def test_a_jittered_counter_seen_moving_at_two_ticks_in_a_row_is_not_read_as_twice_the_power():
    """NVML's counter steps every ~100 ms, not on the dot: read every 50 ms, it is sometimes
    seen to move at two ticks in a row, and the second step (~100 ms of energy) spread over
    50 ms read as twice the power (1337 W on an H200 drawing ~650 W). No tick reads more than
    a step's jitter above the power, and the energy counted is the counter's, to the mJ."""
    rng = np.random.default_rng(7)
    power_w, tick_s = 600.0, 0.05
    updates = np.cumsum(rng.uniform(0.07, 0.13, 400))  # the counter's own update times
    meter = EnergyMeter()
    readings, counted_mj, first_mj = [], 0.0, None
    for k in range(1, int(updates[-1] / tick_s)):
        now = k * tick_s
        seen = updates[updates <= now]
        energy_mj = 1000.0 * power_w * (seen[-1] if seen.size else 0.0)
        watts = meter.update(now, energy_mj=energy_mj)
        if math.isfinite(meter.tick_energy_mj):
            first_mj = energy_mj if first_mj is None else first_mj
            counted_mj += meter.tick_energy_mj
            if meter.tick_energy_mj > 0 and k > 20:
                readings.append(watts)
    assert max(readings) < 1.5 * power_w
    assert np.mean(readings) == pytest.approx(power_w, rel=0.1)
    assert counted_mj == pytest.approx(energy_mj - first_mj, abs=1e-6)
