"""The loop's wait: a deadline, a signal, or a watched fd, whichever comes first."""

from __future__ import annotations

import os

from govd.custody.signals import SignalFlags


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
