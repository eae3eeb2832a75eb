"""sd_notify against a datagram socket we bind ourselves, as systemd would listen on it."""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from govd.telemetry.notify import Notifier, WatchdogPinger, watchdog_interval_s


@pytest.fixture
def listener(tmp_path: Path) -> Iterator[tuple[socket.socket, str]]:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    path = str(tmp_path / "notify.sock")
    sock.bind(path)
    sock.settimeout(2.0)
    yield sock, path
    sock.close()


def received(sock: socket.socket) -> list[str]:
    return sock.recv(4096).decode().split("\n")


def pending(sock: socket.socket) -> bool:
    sock.setblocking(False)
    try:
        sock.recv(4096)
    except BlockingIOError:
        return False
    finally:
        sock.settimeout(2.0)
    return True


def test_process_environment_path_sends_ready_status_watchdog(
    listener: tuple[socket.socket, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    sock, path = listener
    monkeypatch.setenv("NOTIFY_SOCKET", path)
    notifier = Notifier()
    assert notifier.enabled
    assert notifier.ready("governing card0")
    assert received(sock) == ["READY=1", "STATUS=governing card0"]
    assert notifier.status("card0 at 900 MHz")
    assert received(sock) == ["STATUS=card0 at 900 MHz"]
    assert notifier.watchdog()
    assert received(sock) == ["WATCHDOG=1"]
    assert notifier.stopping("restoring clocks")
    assert received(sock) == ["STOPPING=1", "STATUS=restoring clocks"]


def test_a_full_notify_socket_drops_the_message_instead_of_blocking(
    listener: tuple[socket.socket, str],
) -> None:
    """Nobody reads the socket: the queue fills and every further send returns False at once
    (a blocking send here once hung the daemon on SIGTERM)."""
    _sock, path = listener
    notifier = Notifier({"NOTIFY_SOCKET": path})
    results = [notifier.watchdog() for _ in range(5000)]
    assert results[0] is True
    assert results[-1] is False


def test_abstract_socket_name_is_reached() -> None:
    name = f"govd-test-notify-{os.getpid()}"
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
        sock.bind("\0" + name)
        sock.settimeout(2.0)
        assert Notifier({"NOTIFY_SOCKET": "@" + name}).ready()
        assert received(sock) == ["READY=1"]


def test_reloading_carries_monotonic_usec(listener: tuple[socket.socket, str]) -> None:
    sock, path = listener
    assert Notifier({"NOTIFY_SOCKET": path}).reloading(monotonic_usec=123456789)
    assert received(sock) == ["RELOADING=1", "MONOTONIC_USEC=123456789"]


def test_reloading_reads_monotonic_clock_when_not_given(
    listener: tuple[socket.socket, str],
) -> None:
    sock, path = listener
    Notifier({"NOTIFY_SOCKET": path}).reloading()
    lines = received(sock)
    assert lines[0] == "RELOADING=1"
    assert lines[1].startswith("MONOTONIC_USEC=") and int(lines[1].split("=")[1]) > 0


def test_status_newlines_cannot_inject_assignments(listener: tuple[socket.socket, str]) -> None:
    sock, path = listener
    Notifier({"NOTIFY_SOCKET": path}).status("bad\nREADY=1")
    assert received(sock) == ["STATUS=bad READY=1"]


def test_without_notify_socket_nothing_is_sent() -> None:
    notifier = Notifier({})
    assert not notifier.enabled
    assert not notifier.ready()


def test_missing_socket_file_is_not_fatal(tmp_path: Path) -> None:
    assert not Notifier({"NOTIFY_SOCKET": str(tmp_path / "gone.sock")}).watchdog()


@pytest.mark.parametrize(
    ("environ", "expected_s"),
    [
        ({"WATCHDOG_USEC": "10000000"}, 10.0),
        ({"WATCHDOG_USEC": "10000000", "WATCHDOG_PID": "4242"}, 10.0),
        ({"WATCHDOG_USEC": "10000000", "WATCHDOG_PID": "999"}, None),
        ({"WATCHDOG_USEC": "0"}, None),
        ({"WATCHDOG_USEC": "ten"}, None),
        ({"WATCHDOG_USEC": "10000000", "WATCHDOG_PID": "x"}, None),
        ({}, None),
    ],
)
def test_watchdog_interval_only_for_our_pid(
    environ: dict[str, str], expected_s: float | None
) -> None:
    assert watchdog_interval_s(environ, pid=4242) == expected_s


def test_pinger_sends_at_most_every_half_interval(listener: tuple[socket.socket, str]) -> None:
    sock, path = listener
    pinger = WatchdogPinger(Notifier({"NOTIFY_SOCKET": path}), interval_s=2.0)
    sent = [pinger.tick(t) for t in (0.0, 0.05, 0.5, 0.99, 1.0, 1.05, 2.0, 2.5)]
    assert sent == [True, False, False, False, True, False, True, False]
    for _ in range(3):
        assert received(sock) == ["WATCHDOG=1"]
    assert not pending(sock)


def test_pinger_without_watchdog_never_pings() -> None:
    pinger = WatchdogPinger(Notifier({"NOTIFY_SOCKET": "/nonexistent"}), interval_s=None)
    assert not any(pinger.tick(t) for t in (0.0, 100.0, 1e6))
