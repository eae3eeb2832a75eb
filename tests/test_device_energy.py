"""EnergyMeter: counters that wrap, reset, stall; fallback to power samples."""

from __future__ import annotations

import math

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
