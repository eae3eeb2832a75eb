"""Signals as flags the control loop reads: the handlers only set a flag, never do work.

`signal.set_wakeup_fd` writes a byte to a pipe when a signal arrives, so the loop, which waits
for its next deadline on that pipe, wakes at once instead of finishing its sleep.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
from types import FrameType


class SignalFlags:
    """SIGTERM/SIGINT set `stop`, SIGHUP sets `reload`; `wait` sleeps until a deadline or a
    signal. Installed on construction, removed by `close` (main thread only)."""

    def __init__(self) -> None:
        self.stop: int | None = None
        """The stopping signal's number, None until one arrives."""
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
