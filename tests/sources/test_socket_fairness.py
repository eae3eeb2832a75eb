"""The frame socket under floods (issue 28, medium): the per-sender budget was per pid, so
forking beat it; and four flooding senders kept the kernel's 10-datagram queue full, so a
legitimate 250 fps sender lost 96 % of its frames. The budget is per user now, and a flood of a
user with no budget left is dropped from the kernel's queue unread, at a fraction of a read's
cost. (A flood by users of the socket's group that block on the full queue still takes most of
its ten places from a sender that does not block: who may send is `allow_uids`/`allow_gids`.)"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import socket
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from govd.sources.socket import SocketSource

FLOOD = b"F 1\n" * (65536 // 4)  # the socket's largest datagram, every line a frame
TICK_S = 0.05


@pytest.fixture
def sock_dir() -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix="govd-", dir="/tmp") as d:
        os.chmod(d, 0o755)
        yield Path(d)


def _as_user(uid: int) -> None:
    os.setgid(uid)
    os.setuid(uid)


def _forks(path: str, uid: int, seconds: float, children: int) -> None:
    """One user sending from ``children`` processes, each at 300 frames/s."""
    _as_user(uid)
    pids = []
    for _ in range(children):
        pid = os.fork()
        if pid == 0:
            # non-blocking, as govd.client sends: blocked on the full queue once the reader
            # stopped, a child outlived its seconds (the join below then waited its 30 s)
            with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
                sock.setblocking(False)
                end = time.monotonic() + seconds
                while time.monotonic() < end:
                    with contextlib.suppress(BlockingIOError, ConnectionRefusedError,
                                             FileNotFoundError):
                        sock.sendto(b"F 1000 app=fork\n" * 3, path)
                    time.sleep(0.01)
            os._exit(0)
        pids.append(pid)
    for pid in pids:
        os.waitpid(pid, 0)


def serve(src: SocketSource, seconds: float) -> list[str]:
    """The daemon's way of reading: whatever arrives between ticks, a drain every tick; the
    apps of the frames taken."""
    apps: list[str] = []
    end = time.monotonic() + seconds
    next_tick = time.monotonic() + TICK_S
    import select

    while time.monotonic() < end:
        wait_s = max(0.0, next_tick - time.monotonic())
        if not src.backlog_full and select.select([src.fileno()], [], [], wait_s)[0]:
            src.receive(32, until_s=next_tick)
            continue
        time.sleep(max(0.0, next_tick - time.monotonic()))
        next_tick += TICK_S
        apps += [frame.app for frame in src.drain()]
    return apps


def test_a_user_forking_many_senders_has_the_budget_of_one(sock_dir: Path) -> None:
    src = SocketSource(sock_dir / "f.sock", group=None, rate_fps=100, burst=10)
    os.chmod(src.path, 0o666)
    ctx = multiprocessing.get_context("fork")
    user = ctx.Process(target=_forks, args=(str(src.path), 1001, 2.0, 20))
    user.start()
    try:
        apps = serve(src, 2.5)
    finally:
        user.join(timeout=30)
        if user.is_alive():
            user.kill()
        src.close()
    # 20 processes x 300 frames/s: a budget per pid let 20 x 100 through, one per uid 100
    assert 0 < apps.count("fork") <= 100 * 2.5 + 10 + 50


def test_a_flood_of_a_user_with_no_budget_is_dropped_unread_and_the_others_still_read(
        sock_dir: Path) -> None:
    src = SocketSource(sock_dir / "f.sock", group=None, rate_fps=1, burst=1, clock=lambda: 5.0)
    os.chmod(src.path, 0o666)
    ctx = multiprocessing.get_context("fork")
    # eight 64 KiB datagrams and the other user's one: all fit the kernel's ten places
    flooder = ctx.Process(target=_send_as, args=(str(src.path), 2000, [FLOOD] * 8))
    flooder.start()
    flooder.join(timeout=30)
    other = ctx.Process(target=_send_as, args=(str(src.path), 3000, [b"F 4000 app=legit\n"]))
    other.start()
    other.join(timeout=30)
    assert src.receive() == 9
    frames = src.drain()
    stats = src.stats()
    # the flood's first datagram read (its budget's one frame taken, the rest counted), the
    # second read and found without budget, the next six seen to be the same user's and
    # dropped unread; the other user's frame taken
    assert len(frames) == 2 and frames[-1].app == "legit"
    assert stats["rate_limited_datagrams"] == 6 and stats["datagrams"] == 9
    assert stats["rate_limited"] == 2 * len(FLOOD) // 4 - 1
    src.close()


def _send_as(path: str, uid: int, payloads: list[bytes]) -> None:
    _as_user(uid)
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4 << 20)
        for payload in payloads:
            sock.sendto(payload, path)
