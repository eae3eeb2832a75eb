"""The live simulated GPU's time, shared with the daemon that governs it.

`govd run --sim` paces the simulated GPU at ``--speed`` times the wall clock, but a loaded
machine cannot always keep that pace: the simulator then falls behind while a daemon counting
``speed × wall time`` runs ahead of it, and sees ticks without frames, intervals longer than
the work in them, and decisions that depend on the machine's load and on ``--speed`` (a run at
``--speed 20`` and one at ``--speed 4`` told different stories). So the simulator publishes its
own time, and the daemon's loop runs on it (`SimClock`): a tick of the daemon is due when the
simulated GPU has reached it, whatever the wall clock says.

The two also run in lockstep: each time the daemon waits for its next tick it writes the
loop time of that tick beside the simulated time, and a simulator started with ``lockstep``
does not run past it (`ClockWriter.wait_for_reader`). A tick of the daemon then always sees the
simulated GPU exactly at its deadline, with the frames completed up to it, as a daemon on real
hardware does within a fraction of a millisecond, instead of lagging by its own processing time
multiplied by the speed-up (0.5 ms a tick is 10 ms of simulated time at ``--speed 20``). What
the demo measures then no longer depends on ``--speed`` nor on the machine's load.

Each time is one little-endian float64 (s) in a small file (``ROOT/sim_clock``: the simulated
time at offset 0, the daemon's next deadline at offset 8), written in place and read through a
shared mapping: a read costs no system call. Each side only moves its own value forward; a
reader takes a value only when two reads agree.

Neither side polls the other's value: beside each one is a FIFO (``sim_clock.time``,
``sim_clock.deadline``) into which its writer puts a byte after each move, and the other side
sleeps in ``select`` on it. A waiter empties the FIFO before it looks at the value, so a move
made between its look and its sleep leaves a byte that ends the sleep at once: no wake-up is
lost, and a full FIFO (a side that stopped reading) already holds one. Each side used to look
every 0.5 ms instead, at ~20 µs of CPU a look: some 4 % of a CPU for each side all the time it
waited (the demo's daemon spent a quarter of its CPU on it).
"""

from __future__ import annotations

import contextlib
import mmap
import os
import select
import struct
import time
from pathlib import Path

from govd.daemon.loop import Clock, WallWait

CLOCK_NAME = "sim_clock"
TIME_WAKE_NAME, DEADLINE_WAKE_NAME = "sim_clock.time", "sim_clock.deadline"
"""The FIFOs that say the simulated time, and the daemon's deadline, moved."""
_TIME = struct.Struct("<d")
SIM_AT, READER_AT = 0, 8
"""Offsets of the simulated time and of the daemon's next deadline in the file."""
START_WAIT_S = 60.0
"""How long (wall) a lockstep simulator waits for the daemon's first deadline: the daemon
loads its model kernels and takes the device first. Units: s."""
STALL_WAIT_S = 10.0
"""How long (wall) it waits for the next one before it runs on alone (the daemon stopped or
hangs; the run must end anyway). Units: s."""
SLACK_S = 1e-6
"""The daemon's deadlines are sums of float periods (0.05 is not exact) while the simulated
time moves in exact 50 ms steps: a deadline may land a hair before the simulated tick it
stands for. The simulator counts a deadline within this of a tick's end as reaching it (the
daemon's scheduler does the same, `govd.daemon.loop.ON_TIME_S`). Units: s."""
LOOK_AGAIN_WALL_S = 0.05
"""Longest wall-clock wait of the daemon for the simulated time to move. The simulator wakes
it each time it does; this only bounds how late the daemon's loop looks at what no FIFO
announces: that its simulator has exited (the demo's ``should_stop``). Units: s."""


class ClockWriter:
    """The simulator's side: creates ``ROOT/sim_clock`` and moves the time forward."""

    def __init__(self, root: Path) -> None:
        self.path = Path(root) / CLOCK_NAME
        for name in (TIME_WAKE_NAME, DEADLINE_WAKE_NAME):  # before the clock: a reader opens both
            with contextlib.suppress(FileNotFoundError):
                os.unlink(Path(root) / name)  # an earlier run's, perhaps still open there
            os.mkfifo(Path(root) / name, 0o600)
        self._time_wake = _open_wake(Path(root) / TIME_WAKE_NAME)
        self._deadline_wake = _open_wake(Path(root) / DEADLINE_WAKE_NAME)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o644)
        try:
            os.write(fd, bytes(mmap.PAGESIZE))
            self._map = mmap.mmap(fd, mmap.PAGESIZE)
        finally:
            os.close(fd)
        self._published_s = 0.0
        self._answered = False
        self._alone = False
        self.gave_up_s: float | None = None
        """The simulated time at which the daemon stopped answering (None: it never did)."""

    def publish(self, now_s: float) -> None:
        """The simulated time is now ``now_s`` (s)."""
        _TIME.pack_into(self._map, SIM_AT, now_s)
        self._published_s = now_s
        _nudge(self._time_wake)  # after the value: the daemon wakes to the new time

    def wait_for_reader(self, until_s: float) -> bool:
        """Block until the daemon's next deadline is at least ``until_s`` (s of simulated
        time), woken by the daemon each time it moves it; returns False (and waits no more,
        ever) when it gave up: no first deadline in `START_WAIT_S`, or none further in
        `STALL_WAIT_S`."""
        if self._alone:
            return False
        started = time.monotonic()
        patience_s = STALL_WAIT_S if self._answered else START_WAIT_S
        while True:
            _drain(self._deadline_wake)  # before the look: a later move leaves its byte
            reader_s = _read(self._map, READER_AT)
            if reader_s > 0:
                self._answered = True
            if reader_s >= until_s - SLACK_S:
                return True
            left_s = started + patience_s - time.monotonic()
            if left_s < 0:
                self._alone = True
                self.gave_up_s = self._published_s
                return False
            select.select([self._deadline_wake], [], [], left_s)

    def close(self) -> None:
        """Unmap and close the FIFOs (the files stay, the clock with the last time)."""
        self._map.close()
        os.close(self._time_wake)
        os.close(self._deadline_wake)


class SimClock(Clock):
    """Loop time read from a simulator's ``sim_clock`` (s); ``speed`` is the nominal pace,
    used only to size the waits."""

    paces_the_work = True  # a lockstep simulator runs no further than the daemon's deadline

    def __init__(self, root: Path, speed: float) -> None:
        super().__init__(speed)
        fd = os.open(Path(root) / CLOCK_NAME, os.O_RDWR | os.O_CLOEXEC)
        try:
            self._map = mmap.mmap(fd, mmap.PAGESIZE)
        finally:
            os.close(fd)
        self._time_wake = _open_wake(Path(root) / TIME_WAKE_NAME)
        self._deadline_wake = _open_wake(Path(root) / DEADLINE_WAKE_NAME)
        self._last_s = 0.0
        self._deadline_s = 0.0

    def now_s(self) -> float:
        """The simulated GPU's time now (s): never earlier than a value read before."""
        now = _read(self._map, SIM_AT)
        if now > self._last_s:
            self._last_s = now
        return self._last_s

    def wait(self, duration_s: float, wait_wall_s: WallWait) -> None:
        """Tell the simulator the next deadline (``duration_s`` from now: it runs up to it and
        no further), then wait until the simulated time moves (at most `LOOK_AGAIN_WALL_S`):
        the scheduler looks at the time again and waits more if the simulated GPU has not
        reached the deadline yet."""
        # From the time the scheduler read, not a fresh one: the simulator may have moved on
        # since (up to the previous deadline), and a fresh read would push this one past a tick.
        deadline_s = self._last_s + duration_s
        if deadline_s > self._deadline_s:
            self._deadline_s = deadline_s
            _TIME.pack_into(self._map, READER_AT, deadline_s)
            _nudge(self._deadline_wake)
        # The bytes of the times the scheduler has read go; one for a time it has not is gone
        # too, so look once more before sleeping on the FIFO.
        _drain(self._time_wake)
        if _read(self._map, SIM_AT) > self._last_s:
            return
        wait_wall_s(LOOK_AGAIN_WALL_S, self._time_wake)

    def close(self) -> None:
        """Unmap and close the FIFOs."""
        self._map.close()
        os.close(self._time_wake)
        os.close(self._deadline_wake)


def _open_wake(path: Path) -> int:
    """A FIFO, opened for both reading and writing: neither end then waits for the other to
    open (Linux), nor sees an end of file or a broken pipe when the other process is gone."""
    return os.open(path, os.O_RDWR | os.O_NONBLOCK | os.O_CLOEXEC)


def _nudge(fd: int) -> None:
    """Wake whoever sleeps on the FIFO ``fd``."""
    with contextlib.suppress(BlockingIOError):  # full: its reader has bytes enough to wake on
        os.write(fd, b"\0")


def _drain(fd: int) -> None:
    """Empty the FIFO ``fd`` (a byte or two, as a rule: one read)."""
    with contextlib.suppress(BlockingIOError):
        while len(os.read(fd, 4096)) == 4096:
            pass


def _read(shared: mmap.mmap, offset: int) -> float:
    """The time at ``offset``, once two reads agree (the other side may be writing it)."""
    while True:
        first = _TIME.unpack_from(shared, offset)[0]
        if _TIME.unpack_from(shared, offset)[0] == first:
            return float(first)
