"""Signals as flags the control loop reads: the handlers only set a flag, never do work.

`signal.set_wakeup_fd` writes a byte to a pipe when a signal arrives, so the loop, which waits
for its next deadline on that pipe, wakes at once instead of finishing its sleep.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import threading
from collections.abc import Iterator
from types import FrameType

HELD = (signal.SIGINT, signal.SIGTERM)
"""The stopping signals `held_stops` holds."""


class _Hold:
    """While govd starts (its modules import, its configuration is read), a stop is noted,
    not acted on: a KeyboardInterrupt raised there can land where Python cannot pass it on (a
    finalizer that runs while a module imports: "Exception ignored in ...", and the daemon
    then runs on, never told), or mark the interpreter to end by SIGINT after `main` has
    returned its status. Nothing is governed yet, so a stop can wait until govd looks."""

    def __init__(self) -> None:
        self.pending: int | None = None
        self.previous: dict[int, signal.Handlers | object] = {}

    def note(self, signum: int, frame: FrameType | None) -> None:
        if self.pending is None:
            self.pending = signum

    def take(self) -> int | None:
        """End the hold: the previous handlers back; the stop noted meanwhile (None: none)."""
        for signum, handler in self.previous.items():
            signal.signal(signum, handler)  # type: ignore[arg-type]
        self.previous = {}
        pending, self.pending = self.pending, None
        return pending


_hold = _Hold()


@contextlib.contextmanager
def held_stops() -> Iterator[None]:
    """Hold SIGINT and SIGTERM for the block: noted, not acted on, unless a `SignalFlags`
    built inside takes the stop over (the daemon's loop then stops at its first look). Where
    the block ends with a stop still held, the signal is raised again with the handlers found
    before the block (Ctrl-C: KeyboardInterrupt; SIGTERM: its default, the end of the
    process). A signal ignored or handled before the block is left as it was; nested blocks,
    and threads other than the main one, hold nothing more."""
    if _hold.previous or threading.current_thread() is not threading.main_thread():
        yield
        return
    for signum in HELD:
        handler = signal.getsignal(signum)
        if handler in (signal.default_int_handler, signal.SIG_DFL):
            _hold.previous[signum] = signal.signal(signum, _hold.note)
    try:
        yield
    finally:
        pending = _hold.take()
        if pending is not None:
            signal.raise_signal(pending)


class SignalFlags:
    """SIGTERM/SIGINT set `stop`, SIGHUP sets `reload`; `wait` sleeps until a deadline or a
    signal. Installed on construction, removed by `close` (main thread only)."""

    def __init__(self) -> None:
        self.stop: int | None = _hold.take()
        """The stopping signal's number, None until one arrives (one held while govd started:
        `held_stops`)."""
        self.reload = False
        self._read_fd, self._write_fd = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        self._alone = [self._read_fd]
        self._old_wakeup = signal.set_wakeup_fd(self._write_fd, warn_on_full_buffer=False)
        self._old = {
            signum: signal.signal(signum, self._on_signal)
            for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
        }

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        if signum == signal.SIGHUP:
            self.reload = True
        else:
            self.stop = signum

    def wait(self, timeout_s: float, *fds: int | None) -> list[int]:
        """Sleep up to ``timeout_s`` (s, wall clock); returns early when a signal arrives, or
        when one of ``fds`` (None: not watched) is readable. Returns those readable."""
        watched = [fd for fd in fds if fd is not None]
        if timeout_s > 0:
            readable = select.select([self._read_fd, *watched] if watched else self._alone,
                                     [], [], timeout_s)[0]
        else:
            readable = self._alone  # no wait: look at the pipe anyway, a flag may be set
        if self._read_fd in readable:
            # Emptied only when it has something: a read of the empty pipe raises, every tick.
            with contextlib.suppress(BlockingIOError):
                while os.read(self._read_fd, 512):
                    pass
        return [fd for fd in watched if fd in readable]

    def close(self) -> None:
        """Put the previous handlers back and close the pipe."""
        for signum, handler in self._old.items():
            signal.signal(signum, handler)
        signal.set_wakeup_fd(self._old_wakeup)
        os.close(self._read_fd)
        os.close(self._write_fd)
