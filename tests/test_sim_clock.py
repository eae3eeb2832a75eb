"""The live simulated GPU's time, shared with the daemon that governs it, in lockstep."""

from __future__ import annotations

import select
import threading
import time
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
    reader.wait(0.05, lambda wall_s, wake_fd=None: None)
    assert sim_clock._read(writer._map, sim_clock.READER_AT) == pytest.approx(now + 0.05)
    # (a fresh read would have let the simulator run to 1.10: a tick missed, an overrun)


def test_the_simulator_waits_for_the_daemon_and_runs_on_alone_if_it_stops(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sim_clock, "START_WAIT_S", 0.05)
    writer = ClockWriter(tmp_path)
    reader = SimClock(tmp_path, speed=10.0)
    assert not writer.wait_for_reader(0.05)  # no daemon: gives up...
    assert writer.gave_up_s == 0.0
    reader.wait(1.0, lambda wall_s, wake_fd=None: None)
    assert not writer.wait_for_reader(0.05)  # ...and waits no more, ever


def test_the_simulator_runs_up_to_the_deadline_and_no_further(tmp_path: Path) -> None:
    writer = ClockWriter(tmp_path)
    reader = SimClock(tmp_path, speed=10.0)
    reader.now_s()
    reader.wait(0.1, lambda wall_s, wake_fd=None: None)  # the daemon's next tick is at 0.1 s
    assert writer.wait_for_reader(0.05) and writer.wait_for_reader(0.1)
    sim_clock.STALL_WAIT_S, saved = 0.05, sim_clock.STALL_WAIT_S
    try:
        assert not writer.wait_for_reader(0.15)  # past the deadline: it waited (then gave up)
    finally:
        sim_clock.STALL_WAIT_S = saved


def _select_wait(wall_s: float, wake_fd: int | None = None) -> None:
    """The daemon's wait on the wall clock as `SignalFlags.wait` does it, without signals."""
    select.select([] if wake_fd is None else [wake_fd], [], [], wall_s)


def test_the_simulator_sleeps_until_the_daemon_moves_its_deadline(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Woken, not polling: the simulator waits 0.5 s for the daemon's next deadline on less
    than 5 ms of CPU. Looking every 0.5 ms, as it used to, costs about 20 µs of CPU a look
    (an mmap read and a ``time.sleep`` call), some 18 ms over this wait, for each side of the
    pair all the time it waits (21 ms measured); asleep on the FIFO, about 0.5 ms (starting the
    thread that plays the daemon included).
    The CPU is the waiting thread's own (``time.thread_time``), which a loaded machine
    stretches no more than the wait: no busier neighbour makes it grow."""
    monkeypatch.setattr(sim_clock, "START_WAIT_S", 5.0)  # a lost wake-up fails in 5 s, not 60
    writer = ClockWriter(tmp_path)
    reader = SimClock(tmp_path, speed=10.0)
    reader.now_s()
    daemon = threading.Timer(0.5, reader.wait, (0.05, lambda wall_s, wake_fd=None: None))
    cpu_s, wall_s = time.thread_time(), time.monotonic()
    daemon.start()
    try:
        assert writer.wait_for_reader(0.05)
    finally:
        daemon.join()
    waited_s, cpu_s = time.monotonic() - wall_s, time.thread_time() - cpu_s
    assert 0.45 < waited_s < 4.0, "it did not wait for the deadline, or was not woken by it"
    assert cpu_s < 0.005, f"{cpu_s * 1e3:.1f} ms of CPU to wait 0.5 s: polling again?"


def test_the_daemon_sleeps_until_the_simulator_publishes(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The daemon's wait ends when the simulated time moves, not at a polling interval."""
    monkeypatch.setattr(sim_clock, "LOOK_AGAIN_WALL_S", 5.0)
    writer = ClockWriter(tmp_path)
    reader = SimClock(tmp_path, speed=10.0)
    reader.now_s()
    simulator = threading.Timer(0.3, writer.publish, (0.05,))
    wall_s = time.monotonic()
    simulator.start()
    try:
        reader.wait(0.05, _select_wait)
    finally:
        simulator.join()
    assert 0.25 < time.monotonic() - wall_s < 4.0
    assert reader.now_s() == 0.05


def test_a_time_published_between_the_schedulers_look_and_its_wait_is_not_slept_through(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sim_clock, "LOOK_AGAIN_WALL_S", 5.0)
    writer = ClockWriter(tmp_path)
    reader = SimClock(tmp_path, speed=10.0)
    writer.publish(0.05)
    reader.wait(0.05, _select_wait)  # a byte from earlier: the wait drains it, so none left
    assert reader.now_s() == 0.05  # the scheduler looks: due at 0.10
    writer.publish(0.10)  # the simulator gets there before the scheduler waits
    wall_s = time.monotonic()
    reader.wait(0.05, _select_wait)
    assert time.monotonic() - wall_s < 1.0


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
