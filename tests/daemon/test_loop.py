"""The deadline scheduler against a fake clock: absolute deadlines, overruns skipped."""

from __future__ import annotations

import pytest

from govd.daemon.loop import Clock, DeadlineScheduler


class FakeClock:
    """Time moves only when the loop waits or the test says work took time."""

    def __init__(self) -> None:
        self.now = 100.0
        self.waits: list[float] = []

    def now_s(self) -> float:
        return self.now

    def wait_s(self, duration_s: float) -> None:
        self.waits.append(duration_s)
        self.now += max(duration_s, 0.0)


def test_deadlines_are_absolute_so_work_time_does_not_drift_the_schedule():
    clock = FakeClock()
    scheduler = DeadlineScheduler(0.05, clock.now_s, clock.wait_s)
    due = []
    for _ in range(200):
        tick = scheduler.next_tick()
        assert tick is not None
        due.append(tick.due_s)
        clock.now += 0.013  # the tick's work
    assert due == pytest.approx([100.0 + 0.05 * k for k in range(1, 201)])
    assert scheduler.overruns == 0


def test_overrun_skips_passed_deadlines_instead_of_piling_up():
    clock = FakeClock()
    scheduler = DeadlineScheduler(0.05, clock.now_s, clock.wait_s)
    first = scheduler.next_tick()
    assert first is not None and first.due_s == pytest.approx(100.05)
    clock.now += 0.12  # ran past the deadlines at 100.10 and 100.15
    second = scheduler.next_tick()
    assert second is not None
    assert second.due_s == pytest.approx(100.20)
    assert second.overruns == 2
    third = scheduler.next_tick()
    assert third is not None and third.due_s == pytest.approx(100.25) and third.overruns == 0
    assert scheduler.overruns == 2


def test_wait_ended_early_returns_none_and_keeps_the_deadline():
    clock = FakeClock()
    woken = []

    def wait_interrupted(duration_s: float) -> None:
        if not woken:
            woken.append(duration_s)
            clock.now += duration_s / 2  # a signal arrived half-way
        else:
            clock.wait_s(duration_s)

    scheduler = DeadlineScheduler(0.05, clock.now_s, wait_interrupted)
    assert scheduler.next_tick() is None
    tick = scheduler.next_tick()
    assert tick is not None and tick.due_s == pytest.approx(100.05) and tick.overruns == 0


def test_new_period_takes_effect_from_the_next_deadline():
    clock = FakeClock()
    scheduler = DeadlineScheduler(0.05, clock.now_s, clock.wait_s)
    scheduler.next_tick()
    scheduler.set_period(0.1)
    dues = [t.due_s for t in (scheduler.next_tick(), scheduler.next_tick()) if t]
    assert dues == pytest.approx([100.10, 100.20])


def test_interval_is_the_time_between_tick_starts():
    clock = FakeClock()
    scheduler = DeadlineScheduler(0.05, clock.now_s, clock.wait_s)
    scheduler.next_tick()
    clock.now += 0.07
    tick = scheduler.next_tick()
    assert tick is not None and tick.interval_s == pytest.approx(0.10)


@pytest.mark.parametrize("period_s", [0.0, -1.0, float("nan")])
def test_period_must_be_positive(period_s):
    clock = FakeClock()
    with pytest.raises(ValueError):
        DeadlineScheduler(period_s, clock.now_s, clock.wait_s)


def test_accelerated_clock_waits_the_wall_clock_length_of_loop_time():
    waited_s: list[float] = []
    Clock(speed=10.0).wait(1.0, waited_s.append)
    assert waited_s == [pytest.approx(0.1)]


def test_restart_on_a_time_already_here_fires_at_once_without_counting_an_overrun():
    clock = FakeClock()
    scheduler = DeadlineScheduler(1.0, clock.now_s, clock.wait_s)  # idling: 1 s period
    assert scheduler.next_tick() is not None
    clock.now += 0.3  # a frame arrived 0.3 s into the idle period
    scheduler.restart(0.05, clock.now - 0.001)
    waits_before = len(clock.waits)
    woke = scheduler.next_tick()
    assert woke is not None and woke.started_s == clock.now
    assert len(clock.waits) == waits_before  # no wait: the tick is now
    assert woke.overruns == 0 and scheduler.overruns == 0
    after = scheduler.next_tick()
    assert after is not None and after.due_s == pytest.approx(woke.due_s + 0.05)


def test_restart_ahead_waits_for_the_new_first_deadline_then_keeps_the_new_period():
    clock = FakeClock()
    scheduler = DeadlineScheduler(0.05, clock.now_s, clock.wait_s)
    assert scheduler.next_tick() is not None
    scheduler.restart(1.0, clock.now + 1.0)  # going idle: next tick a whole idle period away
    ticks = [scheduler.next_tick() for _ in range(3)]
    assert [t.due_s for t in ticks if t is not None] == pytest.approx(
        [100.05 + 1.0, 100.05 + 2.0, 100.05 + 3.0])
    assert scheduler.overruns == 0


def test_restart_refuses_a_period_that_is_not_positive():
    scheduler = DeadlineScheduler(0.05, FakeClock().now_s, FakeClock().wait_s)
    with pytest.raises(ValueError, match="positive"):
        scheduler.restart(0.0, 100.0)
