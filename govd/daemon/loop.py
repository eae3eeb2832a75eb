"""The control loop's clock: ticks on absolute monotonic deadlines, so the period never drifts.

Tick k is due at ``start + k · period``. Work that overruns its tick does not push the schedule
back (that would drift) nor make the next ticks fire back to back to catch up (that would pile
up): the deadlines already passed are skipped and counted as overruns, and the loop waits for the
next one still ahead. The clock and the wait are injected, so the tests drive the schedule with a
fake clock, and the daemon waits on its signal pipe (a signal ends the wait early).
"""

from __future__ import annotations

import math
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

TICK_HISTORY = 4096
"""Ticks kept for the jitter and CPU statistics."""
ON_TIME_S = 1e-9
"""A time within this of a deadline counts as the deadline: deadlines are sums of float
periods (0.05 s is not exact in binary), and a clock that moves in exact steps (the simulated
GPU's, `govd.sim.clock`) reaches them a rounding error early or late. Units: s."""


class WallWait(Protocol):
    """How a clock waits on the wall clock: up to ``wall_s`` (s), less on a signal, or once
    ``wake_fd`` (if given) is readable."""

    def __call__(self, wall_s: float, wake_fd: int | None = None) -> None: ...


class Clock:
    """Monotonic time, optionally running ``speed`` times faster than the wall clock (the
    simulated GPU's accelerated time). Units: s."""

    paces_the_work = False
    """Whether the work governed waits for the loop (the simulated GPU in lockstep), so that a
    tick's wall-clock budgets, which keep a real tick short, only make the run depend on the
    machine's load."""

    def __init__(self, speed: float = 1.0) -> None:
        if not (math.isfinite(speed) and speed > 0):
            raise ValueError(f"clock speed must be a positive number, got {speed!r}")
        self.speed = speed

    def now_s(self) -> float:
        """Loop time now. Units: s."""
        return time.monotonic() * self.speed

    def to_wall_s(self, duration_s: float) -> float:
        """How long ``duration_s`` of loop time lasts on the wall clock. Units: s."""
        return duration_s / self.speed

    def wait(self, duration_s: float, wait_wall_s: WallWait) -> None:
        """Let ``duration_s`` of loop time pass by waiting its wall-clock length with
        ``wait_wall_s`` (which may return early, on a signal). A simulated clock overrides this
        to wait for its own time instead (`govd.sim.clock.SimClock`: until the simulated GPU
        says it moved)."""
        wait_wall_s(self.to_wall_s(duration_s))


# Not frozen: a frozen dataclass's __init__ sets each field through a Python-level
# object.__setattr__ call, 4x the cost of a plain one (~2.5 µs an object in a cold 50 ms
# tick, bench/README.md "Daemon cost"); built every tick, and read-only by convention.
@dataclass(slots=True)
class Tick:
    """One tick as the scheduler hands it to the loop."""

    due_s: float
    """When it was due. Units: s of loop time."""
    started_s: float
    """When the wait ended (``started_s - due_s`` is the tick's jitter). Units: s."""
    interval_s: float
    """Loop time since the previous tick started (the period, or more after an overrun)."""
    overruns: int
    """Deadlines skipped just before this tick because the previous one ran past them."""


class DeadlineScheduler:
    """Hands out ticks every ``period_s`` of loop time on absolute deadlines.

    ``now_s`` reads loop time (s); ``wait_s(duration)`` waits up to that long (s of loop time)
    and may return early (a signal): `next_tick` then returns None, so the loop can look at
    its flags and call again. The first tick is due one period after construction.
    """

    def __init__(
        self, period_s: float, now_s: Callable[[], float], wait_s: Callable[[float], None]
    ) -> None:
        self._now_s = now_s
        self._wait_s = wait_s
        self.period_s = 0.0
        self.overruns = 0
        """Deadlines skipped so far, in total."""
        self.ticks = 0
        """Ticks handed out so far."""
        self._pending_overruns = 0
        self._last_started_s = now_s()
        self._start_s = self._last_started_s
        self._index = 1
        self._restarted = False
        self.set_period(period_s)

    def set_period(self, period_s: float) -> None:
        """Change the period (a config reload); the new schedule starts at the next deadline."""
        if not (math.isfinite(period_s) and period_s > 0):
            raise ValueError(f"tick period must be a positive number of seconds, got {period_s!r}")
        if period_s == self.period_s:
            return
        next_due_s = self.due_s if self.period_s else self._start_s + period_s
        self.period_s = period_s
        self._start_s, self._index = next_due_s - period_s, 1

    def restart(self, period_s: float, first_due_s: float) -> None:
        """Tick every ``period_s`` from ``first_due_s`` on (s of loop time; a time already
        passed makes the next tick fire at once): idling starts or ends now, not at the next
        deadline of the old period."""
        if not (math.isfinite(period_s) and period_s > 0):
            raise ValueError(f"tick period must be a positive number of seconds, got {period_s!r}")
        self.period_s = period_s
        self._start_s, self._index = first_due_s - period_s, 1
        self._restarted = True

    @property
    def due_s(self) -> float:
        """When the next tick is due. Units: s of loop time."""
        return self._start_s + self._index * self.period_s

    def next_tick(self) -> Tick | None:
        """Wait for the next deadline and return its tick; None when the wait ended early."""
        now_s = self._now_s()
        due_s = self.due_s
        if self._restarted and now_s >= due_s - ON_TIME_S:
            pass  # restarted on a time already here: this tick fires now, nothing was skipped
        elif now_s > due_s + ON_TIME_S:
            # The previous tick ran past this deadline: skip it and every other one passed,
            # and wait for the next one ahead rather than firing late ticks back to back.
            skipped = math.floor((now_s - due_s) / self.period_s) + 1
            self._index += skipped
            self.overruns += skipped
            self._pending_overruns += skipped
            due_s = self.due_s
        if now_s < due_s - ON_TIME_S:
            self._wait_s(due_s - now_s)
            now_s = self._now_s()
            if now_s < due_s - ON_TIME_S:
                return None
        self._restarted = False
        tick = Tick(due_s, now_s, now_s - self._last_started_s, self._pending_overruns)
        self._pending_overruns = 0
        self._last_started_s = now_s
        self._index += 1
        self.ticks += 1
        return tick


@dataclass
class TickStats:
    """Recent ticks' jitter (start − deadline, s) and CPU time (s)."""

    jitter_s: deque[float] = field(default_factory=lambda: deque(maxlen=TICK_HISTORY))
    cpu_s: deque[float] = field(default_factory=lambda: deque(maxlen=TICK_HISTORY))
    ticks: int = 0

    def summary(self) -> dict[str, float | int | None]:
        """p50/p99 jitter and mean CPU per tick, in µs."""
        ordered = sorted(self.jitter_s)  # once for both percentiles: 4096 values

        def pct(q: float) -> float | None:
            if not ordered:
                return None
            return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1e6

        cpu = self.cpu_s
        return {"ticks": self.ticks, "jitter_p50_us": pct(0.5), "jitter_p99_us": pct(0.99),
                "cpu_mean_us": sum(cpu) / len(cpu) * 1e6 if cpu else None}
