"""The metrics endpoint's HTTP side: one thread, a bounded number of connections, idle clients cut.

prometheus-client's own server spends a thread and a descriptor on every connection for as long
as the client keeps it open: a thousand idle connections took govd to its open-files limit, and
then it could read no device, restore none, write no status (issue 28 item 5). Here one thread
waits on every connection at once (epoll), holds at most `MAX_CONNECTIONS`, gives each
`REQUEST_TIMEOUT_S` to send its request and take the answer, and reads at most
`MAX_REQUEST_BYTES` of it: whatever clients do, the endpoint holds a bounded number of
descriptors and one thread.

With every place taken, a new connection takes the place of the oldest one that has sent
nothing for `MIN_IDLE_S` (a scrape sends its request at once, so it is never the one closed);
while none has, new connections wait in the kernel's accept queue, holding no descriptor of
govd's. So idle clients that reconnect as fast as they can cost at most
``MAX_CONNECTIONS / MIN_IDLE_S`` accepts a second, and a scrape waiting behind them gets its
turn (bench/bench_metrics_load.py measures how soon). (Closing the oldest for every new one
turned a thousand idle clients into a storm of thousands of accepts a second, which delayed the
loop's ticks; never closing one left scrapes waiting behind them for tens of seconds.) `close`
returns at once (no poll interval to wait out, which stalled the loop when a reload turned
metrics off).

It answers ``GET /metrics`` (and ``/``) with the exposition, ``HEAD`` likewise without a body,
404 and 405 otherwise, and closes each connection after its answer.
"""

from __future__ import annotations

import contextlib
import logging
import os
import selectors
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

log = logging.getLogger(__name__)

MAX_CONNECTIONS = 16
"""Connections held at once; the others wait in the kernel's accept queue. A scrape takes one
for a few milliseconds."""
LISTEN_BACKLOG = 32
"""Connections the kernel queues until the thread accepts them (holding no descriptor of govd's
meanwhile). Short, so that a scrape waits behind few idle clients: the kernel drops what does
not fit, and those clients try again a second later."""
MIN_IDLE_S = 0.25
"""How long a connection that sent nothing keeps its place against a newer one. Units: s."""
REQUEST_TIMEOUT_S = 2.0
"""How long a connection may take to send its request and take the answer: a scrape over
loopback takes milliseconds; an idle client holds a place this long. Units: s."""
MAX_REQUEST_BYTES = 8192
"""A request longer than this (its headers) is answered 431 and closed."""
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


@dataclass
class _Connection:
    sock: socket.socket
    deadline_s: float
    accepted_s: float
    received: bytes = b""
    answer: bytes = field(default=b"")
    writing: bool = False


class MetricsEndpoint:
    """Serves ``exposition()`` at http://``address``:``port``/metrics from one thread; port 0
    picks a free port (see `port`). Raises OSError when it cannot listen."""

    def __init__(self, exposition: Callable[[], bytes], address: str, port: int) -> None:
        self._exposition = exposition
        family = socket.AF_INET6 if ":" in address else socket.AF_INET
        listener = socket.socket(family, socket.SOCK_STREAM | socket.SOCK_CLOEXEC)
        try:
            listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            listener.bind((address, port))
            listener.listen(LISTEN_BACKLOG)
            listener.setblocking(False)
        except OSError:
            listener.close()
            raise
        self._listener = listener
        self.port: int = listener.getsockname()[1]
        self._wake_read, self._wake_write = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        self._connections: dict[int, _Connection] = {}
        self._closing = False
        self.counts = {"served": 0, "timed_out": 0, "refused": 0, "failed": 0, "evicted": 0,
                       "full": 0}
        """Answers sent; connections closed for taking too long; requests refused (too long,
        not GET); scrapes answered 500 because the metrics could not be rendered; idle
        connections closed for a newer one; times every place was taken by connections too
        fresh to close (new ones then wait in the kernel)."""
        self._listening = True
        self._thread = threading.Thread(target=self._serve, name="govd-metrics", daemon=True)
        self._thread.start()

    @property
    def connections(self) -> int:
        """Connections held now."""
        return len(self._connections)

    def close(self) -> None:
        """Stop serving, close every connection and free the port (returns within
        milliseconds: the thread is woken, not polled)."""
        if self._closing:
            return
        self._closing = True
        # a thread that already stopped (it logged why) has closed the pipe's other end: the
        # write fails, and there is nothing to wake
        with contextlib.suppress(OSError):
            os.write(self._wake_write, b"x")
        self._thread.join(timeout=2.0)
        os.close(self._wake_write)

    # -- the thread ----------------------------------------------------------------------------
    def _serve(self) -> None:
        selector = selectors.EpollSelector()
        try:
            selector.register(self._listener, selectors.EVENT_READ, None)
            selector.register(self._wake_read, selectors.EVENT_READ, None)
            while not self._closing:
                timeout_s = self._next_deadline_s()
                for key, _ in selector.select(timeout_s):
                    if key.fileobj is self._listener:
                        self._accept(selector)
                    elif key.fileobj == self._wake_read:
                        self._closing = True
                    else:
                        self._on_ready(selector, key.fd)
                self._expire(selector)
                if not self._listening and self._idle_since(time.monotonic()) is not None:
                    selector.register(self._listener, selectors.EVENT_READ, None)
                    self._listening = True
        except Exception as exc:  # never a traceback from the thread; `close` still works
            log.error("metrics endpoint stopped: %s: %s", type(exc).__name__, exc)
        finally:
            for fd in list(self._connections):
                self._drop(selector, fd)
            selector.close()
            self._listener.close()
            os.close(self._wake_read)

    def _next_deadline_s(self) -> float | None:
        if not self._connections:
            return None
        first = min(c.deadline_s for c in self._connections.values())
        if not self._listening:  # also when an idle one may make way for those waiting
            first = min([first, *(c.accepted_s + MIN_IDLE_S for c in self._connections.values()
                                  if not c.received)])
        return max(0.0, first - time.monotonic())

    def _idle_since(self, now_s: float) -> int | None:
        """The oldest connection that has sent nothing for `MIN_IDLE_S`, None if none has."""
        for fd, conn in self._connections.items():  # dicts keep their insertion order
            if not conn.received and now_s - conn.accepted_s >= MIN_IDLE_S:
                return fd
        return None

    def _accept(self, selector: selectors.BaseSelector) -> None:
        while True:
            now_s = time.monotonic()
            victim = None
            if len(self._connections) >= MAX_CONNECTIONS:
                victim = self._idle_since(now_s)
                if victim is None:
                    # Every place taken by a fresh or busy connection: the others wait in the
                    # kernel's queue until one is done or has idled long enough.
                    selector.unregister(self._listener)
                    self._listening = False
                    self.counts["full"] += 1
                    return
            try:
                sock, _ = self._listener.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:  # EMFILE and kin: the connection waits in the kernel
                log.warning("metrics endpoint: cannot accept a connection: %s", exc.strerror)
                return
            if victim is not None:
                self.counts["evicted"] += 1
                self._drop(selector, victim)
            sock.setblocking(False)
            self._connections[sock.fileno()] = _Connection(
                sock, now_s + REQUEST_TIMEOUT_S, now_s)
            selector.register(sock, selectors.EVENT_READ, None)

    def _on_ready(self, selector: selectors.BaseSelector, fd: int) -> None:
        conn = self._connections.get(fd)
        if conn is None:
            return
        try:
            if conn.writing:
                sent = conn.sock.send(conn.answer)
                conn.answer = conn.answer[sent:]
                if not conn.answer:
                    self._drop(selector, fd)
                return
            chunk = conn.sock.recv(4096)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            self._drop(selector, fd)
            return
        if not chunk:  # the client went away before a whole request
            self._drop(selector, fd)
            return
        conn.received += chunk
        if b"\r\n\r\n" not in conn.received and b"\n\n" not in conn.received:
            if len(conn.received) > MAX_REQUEST_BYTES:
                self._answer(selector, conn, 431, b"request too long\n")
            return
        self._answer(selector, conn, *self._respond(conn.received))

    def _respond(self, request: bytes) -> tuple[int, bytes, bool]:
        """(status, body, whether to send the body) for a whole request."""
        words = request.split(b"\r\n", 1)[0].split(b"\n", 1)[0].split()
        if len(words) < 2 or words[0] not in (b"GET", b"HEAD"):
            return 405, b"only GET and HEAD\n", True
        path = words[1].split(b"?", 1)[0]
        if path not in (b"/metrics", b"/"):
            return 404, b"not found: try /metrics\n", True
        try:
            body = self._exposition()
        except Exception as exc:  # one failed scrape, not an endpoint that stops serving
            log.error("metrics endpoint: the metrics could not be rendered: %s: %s",
                      type(exc).__name__, exc)
            return 500, b"the metrics could not be rendered\n", True
        return 200, body, words[0] == b"GET"

    def _answer(self, selector: selectors.BaseSelector, conn: _Connection, status: int,
                body: bytes, with_body: bool = True) -> None:
        reason = {200: "OK", 404: "Not Found", 405: "Method Not Allowed",
                  431: "Request Header Fields Too Large", 500: "Internal Server Error"}[status]
        self.counts["served" if status == 200 else "failed" if status == 500 else "refused"] += 1
        head = (f"HTTP/1.1 {status} {reason}\r\nContent-Type: {CONTENT_TYPE}\r\n"
                f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n").encode()
        conn.answer = head + (body if with_body else b"")
        conn.writing = True
        selector.modify(conn.sock, selectors.EVENT_WRITE, None)

    def _expire(self, selector: selectors.BaseSelector) -> None:
        now_s = time.monotonic()
        late = [fd for fd, c in self._connections.items() if c.deadline_s <= now_s]
        for fd in late:
            self.counts["timed_out"] += 1
            self._drop(selector, fd)

    def _drop(self, selector: selectors.BaseSelector, fd: int) -> None:
        conn = self._connections.pop(fd, None)
        if conn is None:
            return
        with contextlib.suppress(KeyError, ValueError):
            selector.unregister(conn.sock)
        conn.sock.close()
        if not self._listening and not self._closing:
            selector.register(self._listener, selectors.EVENT_READ, None)
            self._listening = True
