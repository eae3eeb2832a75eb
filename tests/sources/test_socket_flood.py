"""A flooding sender costs the loop bounded time: rate limit and budgets apply before parsing."""

from __future__ import annotations

import socket
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

import govd.sources.socket as socket_module
from govd.sources.frame_line import FrameLine
from govd.sources.socket import DRAIN_BUDGET_S, SocketSource

MAX_DATAGRAM = 65536
FLOOD = b"F 1\n" * (MAX_DATAGRAM // 4)  # 16 384 lines in one datagram


@pytest.fixture
def sock_dir() -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix="govd-", dir="/tmp") as d:
        yield Path(d)


@pytest.fixture
def parsed(monkeypatch: pytest.MonkeyPatch) -> list[bytes]:
    """Every line the source parses."""
    seen: list[bytes] = []
    real = socket_module.parse_frame_line

    def counting(raw: bytes) -> FrameLine:
        seen.append(raw)
        return real(raw)

    monkeypatch.setattr(socket_module, "parse_frame_line", counting)
    return seen


def send(path: Path, *payloads: bytes) -> None:
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 1 << 20)
        for payload in payloads:
            s.sendto(payload, str(path))


def test_lines_past_the_senders_budget_are_counted_not_parsed(
    sock_dir: Path, parsed: list[bytes]
) -> None:
    src = SocketSource(sock_dir / "f.sock", group=None, rate_fps=2000, burst=500,
                       clock=lambda: 10.0)
    send(src.path, FLOOD)
    frames = src.drain()
    assert len(parsed) == 500 and len(frames) == 500
    stats = src.stats()
    assert stats["rate_limited"] == len(FLOOD) // 4 - 500
    assert stats["lines"] == stats["accepted"] + stats["rate_limited"]
    src.close()


def test_parse_work_per_tick_is_bounded_without_a_rate_limit(
    sock_dir: Path, parsed: list[bytes]
) -> None:
    src = SocketSource(sock_dir / "f.sock", group=None, rate_fps=0, max_queue=4)
    send(src.path, b"garbage\n" * 100)
    assert src.drain() == []
    assert len(parsed) == 8  # two lines per frame the queue may hold
    assert src.stats()["dropped_tag"] == 8 and src.stats()["over_budget"] == 92
    send(src.path, b"F 1000\n")
    assert len(src.drain()) == 1  # the next tick has its budget again
    src.close()


def test_full_queue_leaves_the_rest_of_a_datagram_unparsed(
    sock_dir: Path, parsed: list[bytes]
) -> None:
    src = SocketSource(sock_dir / "f.sock", group=None, rate_fps=0, max_queue=10)
    send(src.path, b"F 1000\n" * 1000)
    assert len(src.drain()) == 10
    assert len(parsed) == 10 and src.stats()["queue_full"] == 990
    src.close()


def test_receive_stops_at_its_deadline(sock_dir: Path) -> None:
    src = SocketSource(sock_dir / "f.sock", group=None, rate_fps=0)
    send(src.path, b"F 1000\n", b"F 2000\n", b"F 3000\n")
    assert src.receive(until_s=0.0) == 1  # past already: one datagram, then it returns
    assert src.receive() == 2
    src.close()


def test_drain_keeps_to_its_wall_clock_budget_unless_the_work_waits_for_the_tick(
        sock_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A real tick's drain stops at its wall-clock budget; with the simulated GPU in lockstep
    (``drain_budget_s=None``) a preempted drain must not leave a frame to the next tick."""
    wall = [0.0]

    def slow_clock() -> float:  # every look at the wall clock finds 10 ms gone
        wall[0] += 0.010
        return wall[0]

    monkeypatch.setattr("govd.sources.socket.time.monotonic", slow_clock)
    for budget_s, taken in ((DRAIN_BUDGET_S, 1), (None, 3)):
        src = SocketSource(sock_dir / "f.sock", group=None, rate_fps=0,
                           drain_budget_s=budget_s)
        send(src.path, b"F 1000\n", b"F 2000\n", b"F 3000\n")
        assert len(src.drain()) == taken
        src.close()


def test_bytes_read_per_tick_are_bounded(sock_dir: Path) -> None:
    src = SocketSource(sock_dir / "f.sock", group=None, rate_fps=0, max_read_bytes=3 * 4096)
    send(src.path, *[b"F 1\n" * 1024] * 5)  # 4 KiB each
    assert src.receive() == 3 and src.backlog_full
    assert len(src.drain()) == 3 * 1024
    assert src.receive() == 2  # the rest waited in the kernel for the next tick
    src.close()
