"""Energy counters that wrap, reset, jump or stall: never negative, huge or NaN-poisoned energy."""

from __future__ import annotations

import math

import pytest

from govd.device.energy import MAX_POWER_W, STALL_S, EnergyMeter
from tests.faults.rigs import PERIOD_S, devfreq_rig

UJ_32_BIT_MJ = 2**32 / 1000  # a 32-bit µJ hwmon counter wraps here


def test_32_bit_microjoule_wrap_is_undone_without_being_told_the_width():
    meter = EnergyMeter()
    meter.update(0.0, energy_mj=UJ_32_BIT_MJ - 100.0)
    assert meter.update(0.1, energy_mj=400.0) == pytest.approx(5.0)
    assert meter.tick_energy_mj == pytest.approx(500.0)


def test_64_bit_microjoule_wrap_is_undone_too():
    meter = EnergyMeter()
    meter.update(0.0, energy_mj=2**64 / 1000 - 200.0)
    assert meter.update(0.1, energy_mj=300.0) == pytest.approx(5.0, rel=0.01)


def test_reset_to_zero_falls_back_to_the_power_sample_and_starts_afresh():
    meter = EnergyMeter()
    meter.update(0.0, energy_mj=1e7)
    assert meter.update(0.05, energy_mj=0.0, power_w=42.0) == 42.0
    assert math.isnan(meter.tick_energy_mj) and meter.resets == 1
    assert meter.update(0.10, energy_mj=1000.0) == pytest.approx(20.0)


def test_jump_beyond_any_board_power_is_a_reset_not_energy():
    meter = EnergyMeter()
    meter.update(0.0, energy_mj=1000.0)
    jump_mj = 2 * MAX_POWER_W * 1000 * 0.05
    assert math.isnan(meter.update(0.05, energy_mj=1000.0 + jump_mj))
    assert math.isnan(meter.tick_energy_mj) and meter.resets == 1


def test_stalled_counter_falls_back_to_power_samples_then_starts_afresh():
    meter = EnergyMeter()
    meter.update(0.0, energy_mj=1000.0)
    ticks = int(STALL_S / PERIOD_S) + 5
    for k in range(1, ticks):
        power_w = meter.update(k * PERIOD_S, energy_mj=1000.0, power_w=30.0)
        assert power_w == 30.0
    assert meter.stalls == 1 and math.isnan(meter.tick_energy_mj)
    # Moving again: the stale gap is not spread as one average, the counter restarts.
    assert meter.update(ticks * PERIOD_S, energy_mj=1500.0, power_w=30.0) == 30.0
    assert meter.update((ticks + 1) * PERIOD_S, energy_mj=3000.0) == pytest.approx(30.0)


def test_power_samples_outside_any_board_power_are_unknown():
    meter = EnergyMeter()
    assert math.isnan(meter.update(0.0, power_w=-3.0))
    assert math.isnan(meter.update(0.05, power_w=MAX_POWER_W * 2))
    assert math.isnan(meter.update(0.10, power_w=math.inf))


def test_runner_feeds_no_negative_or_huge_power_through_wrap_reset_jump_and_stall(tmp_path):
    rig = devfreq_rig(tmp_path)
    counter = rig.device.path.parent.parent / "hwmon/hwmon0/energy1_input"
    seen = []
    step = rig.runner.governor.step
    rig.runner.governor.step = lambda sample: seen.append(sample.power_w) or step(sample)
    stall_ticks = int(STALL_S / PERIOD_S) + 3
    values_uj = ([2**32 - 1_000_000, 2**32 - 500_000, 0, 500_000]  # 10 W, wraps
                 + [0, 500_000]  # driver reload
                 + [500_000 + 10**13, 10**13 + 1_000_000]  # a glitch
                 + [10**13 + 1_500_000] * stall_ticks + [10**13 + 2_000_000, 10**13 + 2_500_000])
    records = []
    for k, value in enumerate(values_uj):
        counter.write_text(f"{value}\n")
        records.append(rig.runner.tick(k * PERIOD_S, PERIOD_S, []))
    assert all(math.isnan(p) or 0 <= p <= MAX_POWER_W for p in seen)
    assert seen[1:4] == pytest.approx([10.0] * 3)
    assert seen[-1] == pytest.approx(10.0)
    energies = [r.energy_j for r in records if r is not None and r.energy_j is not None]
    assert all(0 <= e <= MAX_POWER_W * PERIOD_S for e in energies)
    # seven vetted 0.5 J steps; the reload, the glitch and the stalled gap count nothing
    assert rig.runner.energy_j == pytest.approx(3.5)
