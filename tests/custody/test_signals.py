"""The loop's wait: a deadline, a signal, or a watched fd, whichever comes first."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator

import pytest

from govd.custody.signals import SignalFlags, held_stops


def test_wait_ends_when_the_watched_fd_is_readable_and_says_so() -> None:
    flags = SignalFlags()
    read_fd, write_fd = os.pipe()
    try:
        assert flags.wait(0.01, read_fd) == []  # nothing to read: the timeout ends it
        os.write(write_fd, b"x")
        assert flags.wait(60.0, read_fd) == [read_fd]  # without the fd this would sleep a minute
        assert flags.stop is None
    finally:
        flags.close()
        os.close(read_fd)
        os.close(write_fd)


def test_wait_watches_several_fds_and_names_those_readable() -> None:
    flags = SignalFlags()
    first, first_w = os.pipe()
    second, second_w = os.pipe()
    try:
        os.write(second_w, b"x")
        assert flags.wait(60.0, None, first, second) == [second]  # None: not watched
    finally:
        flags.close()
        for fd in (first, first_w, second, second_w):
            os.close(fd)


@pytest.fixture
def default_stops() -> Iterator[None]:
    """Python's own handlers for SIGINT and SIGTERM, as in a `govd` process started from a
    terminal (a pytest-xdist worker ignores SIGINT), put back as found afterwards."""
    found = {signum: signal.getsignal(signum) for signum in (signal.SIGINT, signal.SIGTERM)}
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    try:
        yield
    finally:
        for signum, handler in found.items():
            signal.signal(signum, handler)


@pytest.mark.usefixtures("default_stops")
def test_a_stop_while_held_is_raised_again_when_the_hold_ends() -> None:
    """Ctrl-C while govd's modules import is not raised there (a KeyboardInterrupt in a
    finalizer run by an import was lost, and the daemon ran on), but once they have."""
    reached = []
    with pytest.raises(KeyboardInterrupt), held_stops():
        signal.raise_signal(signal.SIGINT)
        reached.append("after the signal")
    assert reached == ["after the signal"]
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


@pytest.mark.usefixtures("default_stops")
def test_signal_flags_built_while_held_take_the_stop_over() -> None:
    with held_stops():
        os.kill(os.getpid(), signal.SIGTERM)
        flags = SignalFlags()
        try:
            assert flags.stop == signal.SIGTERM
        finally:
            flags.close()
    # taken over: nothing raised at the end of the block, and the handlers are those found
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_a_signal_ignored_before_is_left_ignored_while_held() -> None:
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        with held_stops():
            assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
            signal.raise_signal(signal.SIGINT)  # ignored, as before the block
        assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
    finally:
        signal.signal(signal.SIGINT, previous)
