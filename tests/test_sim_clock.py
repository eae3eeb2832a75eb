"""The live simulated GPU's time, shared with the daemon that governs it, in lockstep."""

from __future__ import annotations

from pathlib import Path

import pytest

from govd.daemon.loop import DeadlineScheduler
from govd.sim import clock as sim_clock
from govd.sim.clock import ClockWriter, SimClock


def test_the_daemon_reads_the_simulated_time_and_never_goes_back(tmp_path: Path) -> None:
    writer = ClockWriter(tmp_path)
    reader = SimClock(tmp_path, speed=10.0)
    writer.publish(1.25)
    assert reader.now_s() == 1.25
    writer.publish(1.0)  # a torn or stale value must not move loop time backwards
    assert reader.now_s() == 1.25


def test_the_deadline_is_the_one_the_scheduler_computed_not_a_later_read(
        tmp_path: Path) -> None:
    writer = ClockWriter(tmp_path)
    reader = SimClock(tmp_path, speed=10.0)
    writer.publish(1.0)
    now = reader.now_s()  # the scheduler reads 1.0 and will wait 0.05 s for 1.05
    writer.publish(1.05)  # meanwhile the simulator reached the previous deadline
    reader.wait(0.05, lambda wall_s: None)
    assert sim_clock._read(writer._map, sim_clock.READER_AT) == pytest.approx(now + 0.05)
    # (a fresh read would have let the simulator run to 1.10: a tick missed, an overrun)


def test_the_simulator_waits_for_the_daemon_and_runs_on_alone_if_it_stops(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sim_clock, "START_WAIT_S", 0.05)
    writer = ClockWriter(tmp_path)
    reader = SimClock(tmp_path, speed=10.0)
    assert not writer.wait_for_reader(0.05)  # no daemon: gives up...
    assert writer.gave_up_s == 0.0
    reader.wait(1.0, lambda wall_s: None)
    assert not writer.wait_for_reader(0.05)  # ...and waits no more, ever


def test_the_simulator_runs_up_to_the_deadline_and_no_further(tmp_path: Path) -> None:
    writer = ClockWriter(tmp_path)
    reader = SimClock(tmp_path, speed=10.0)
    reader.now_s()
    reader.wait(0.1, lambda wall_s: None)  # the daemon's next tick is at 0.1 s
    assert writer.wait_for_reader(0.05) and writer.wait_for_reader(0.1)
    sim_clock.STALL_WAIT_S, saved = 0.05, sim_clock.STALL_WAIT_S
    try:
        assert not writer.wait_for_reader(0.15)  # past the deadline: it waited (then gave up)
    finally:
        sim_clock.STALL_WAIT_S = saved


def test_a_clock_in_exact_50_ms_steps_meets_deadlines_summed_in_floats() -> None:
    # 0.05 is not exact in binary: the k-th deadline lands a rounding error off k * 0.05 s,
    # where a simulated clock stops. It used to wait for it forever (or count an overrun).
    now = [0.0]
    waits: list[float] = []
    scheduler = DeadlineScheduler(0.05, lambda: now[0], waits.append)
    for k in range(1, 200):
        now[0] = round(k * 0.05, 10)  # the simulator's exact step
        tick = scheduler.next_tick()
        assert tick is not None, f"tick {k} not taken at {now[0]}"
    assert scheduler.overruns == 0
