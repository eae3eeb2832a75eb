"""Report frame or step times to govd from any Python program: a game loop, a renderer, a
training loop. Standard library only (no numpy, nothing else of govd), safe to import anywhere.

    import govd.client

    with govd.client.step(app="train"):      # times the block, reports it when it ends
        ...                                  # one unit of GPU work, finished on the GPU

    govd.client.send(0.0123, app="game")     # or report a time measured yourself (seconds)

Each report is one datagram ``F <gpu_time_us> [app=NAME] [device=NAME]`` to govd's frame
socket (`govd.sources.frame_line`): ``GOVD_FRAMES_SOCKET`` if set, else
``/run/govd/frames.sock``, which members of the group ``govd`` may write to. govd takes times
up to an hour, so a training step of several minutes is one report. What govd cannot hear
(no govd running, not in the group, the socket's queue full) is dropped without blocking and
without raising: a governor must never stop the program it measures. It is counted
(`Reporter.dropped`) and said once through the ``govd.client`` logger, with its reason.

A step's time is what the block took on the wall clock: with CUDA, end the block with
``torch.cuda.synchronize()`` so that it measures the GPU's work and not only its queueing.
Set a slowdown target for the program's name in govd's configuration (``apps: {train:
{max_slowdown: 0.1}}``): training steps have no frame deadline.
"""

from __future__ import annotations

import errno
import logging
import os
import socket
import threading
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager

DEFAULT_SOCKET = "/run/govd/frames.sock"
SOCKET_ENV = "GOVD_FRAMES_SOCKET"
MAX_NAME_CHARS = 64
"""govd keeps at most this much of an ``app=`` name and refuses longer ``device=`` names."""

log = logging.getLogger("govd.client")

_WHY = {
    errno.ENOENT: "no frame socket (is govd running?)",
    errno.ECONNREFUSED: "nobody reads the frame socket (is govd running?)",
    errno.EACCES: "no permission to send (join the group govd, then log in again)",
    errno.EPERM: "no permission to send (join the group govd, then log in again)",
    errno.EAGAIN: "the frame socket's queue is full (govd is behind)",
}


def _name(value: str) -> str:
    """``value`` as the protocol carries it: printable, no spaces, at most `MAX_NAME_CHARS`."""
    cleaned = "".join(c if c.isprintable() and not c.isspace() else "_" for c in value)
    return cleaned[:MAX_NAME_CHARS] or "_"


class Reporter:
    """Sends frame or step times to one frame socket. Thread-safe; one socket for its life.

    ``app``: the program's name for govd's per-application targets (default: the process
    name, as govd reads it itself); ``device``: the governed device the work runs on (as
    `govd devices` names it), for machines with several GPUs; ``path``: the socket
    (default: ``GOVD_FRAMES_SOCKET``, else ``/run/govd/frames.sock``)."""

    def __init__(self, app: str | None = None, device: str | None = None,
                 path: str | None = None) -> None:
        self.path = path or os.environ.get(SOCKET_ENV) or DEFAULT_SOCKET
        keys = (f" app={_name(app)}" if app else "") + (f" device={_name(device)}"
                                                         if device else "")
        self._keys = keys
        self._lock = threading.Lock()
        self._sock: socket.socket | None = None
        self.sent = 0
        """Reports govd's socket took."""
        self.dropped: Counter[str] = Counter()
        """Reports dropped, by reason."""

    def send(self, seconds: float) -> bool:
        """Report one frame or step that took ``seconds`` (s) of GPU time; returns whether the
        socket took it. Never raises for what govd cannot hear, never blocks."""
        if not (seconds > 0 and seconds < float("inf")):
            self._drop("not a positive, finite time")
            return False
        line = f"F {seconds * 1e6:.0f}{self._keys}\n".encode()
        with self._lock:
            try:
                if self._sock is None:
                    self._sock = socket.socket(socket.AF_UNIX,
                                               socket.SOCK_DGRAM | socket.SOCK_CLOEXEC)
                    self._sock.setblocking(False)
                self._sock.sendto(line, self.path)
            except OSError as exc:
                self._drop(_WHY.get(exc.errno or 0, exc.strerror or str(exc)))
                return False
            self.sent += 1
            return True

    @contextmanager
    def step(self) -> Iterator[None]:
        """Time the block on the wall clock and report it when it ends without an exception
        (a step that failed did no whole unit of work)."""
        started = time.perf_counter()
        yield
        self.send(time.perf_counter() - started)

    def _drop(self, why: str) -> None:
        first = not self.dropped[why]
        self.dropped[why] += 1
        if first:
            log.warning("frame or step time not sent to %s: %s; counted in Reporter.dropped, "
                        "not said again", self.path, why)

    def close(self) -> None:
        """Close the socket (a later `send` opens a new one)."""
        with self._lock:
            if self._sock is not None:
                self._sock.close()
                self._sock = None

    def __enter__(self) -> Reporter:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


_reporters: dict[tuple[str | None, str | None, str | None], Reporter] = {}
_reporters_lock = threading.Lock()


def _reporter(app: str | None, device: str | None) -> Reporter:
    """One `Reporter` per (app, device, socket) for the module-level functions."""
    key = (app, device, os.environ.get(SOCKET_ENV))
    with _reporters_lock:
        found = _reporters.get(key)
        if found is None:
            found = _reporters[key] = Reporter(app, device)
        return found


def send(seconds: float, app: str | None = None, device: str | None = None) -> bool:
    """Report one frame or step that took ``seconds`` (s) of GPU time (see `Reporter.send`)."""
    return _reporter(app, device).send(seconds)


@contextmanager
def step(app: str | None = None, device: str | None = None) -> Iterator[None]:
    """Time the block and report it to govd when it ends (see `Reporter.step`)."""
    with _reporter(app, device).step():
        yield
