"""sd_notify against a datagram socket we bind ourselves, as systemd would listen on it."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from itertools import pairwise
from pathlib import Path

import pytest

from govd.telemetry.notify import Notifier, WatchdogPinger, watchdog_interval_s
from tests.live_gpu import (
    DEVICE,
    WAIT_S,
    daemon_command,
    govd_env,
    start_sim,
    stop,
    wait_for,
)


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


# -- the real daemon: READY after the devices are taken, STATUS, the watchdog from the loop ------

WATCHDOG_USEC = 2_000_000


def notifications(sock: socket.socket, duration_s: float) -> list[tuple[float, list[str]]]:
    """Every datagram that arrives within `duration_s`, with its arrival (monotonic, s)."""
    got = []
    end_s = time.monotonic() + duration_s
    while (left_s := end_s - time.monotonic()) > 0:
        sock.settimeout(left_s)
        try:
            data = sock.recv(4096)
        except TimeoutError:
            break
        got.append((time.monotonic(), data.decode().split("\n")))
    sock.settimeout(2.0)
    return got


def drain(sock: socket.socket) -> None:
    """Drop every datagram already queued (without waiting for more)."""
    sock.setblocking(False)
    try:
        while True:
            sock.recv(4096)
    except BlockingIOError:
        pass
    finally:
        sock.settimeout(2.0)


def first_with(sock: socket.socket, line: str, within_s: float = WAIT_S) -> list[str]:
    """The first datagram holding `line` (others before it are dropped)."""
    end_s = time.monotonic() + within_s
    while time.monotonic() < end_s:
        for _, lines in notifications(sock, min(1.0, end_s - time.monotonic())):
            if line in lines:
                return lines
    pytest.fail(f"no {line} within {within_s} s")


def pings(got: list[tuple[float, list[str]]]) -> list[float]:
    return [t for t, lines in got if "WATCHDOG=1" in lines]


@pytest.fixture
def watched(tmp_path: Path, listener: tuple[socket.socket, str]) -> Iterator[
        tuple[Path, Path, socket.socket, subprocess.Popen[bytes], subprocess.Popen[bytes]]]:
    """(work, tree root, notify socket, daemon, sim): `govd run` with NOTIFY_SOCKET,
    WATCHDOG_USEC and WATCHDOG_PID (its own pid, set by the shell it execs from)."""
    sock, path = listener
    root = tmp_path / "gpu"
    sim = start_sim(root, tmp_path / "frames.sock")
    config = tmp_path / "govd.yaml"
    config.write_text("policy: {name: energy}\n")
    env = govd_env({"NOTIFY_SOCKET": path, "WATCHDOG_USEC": str(WATCHDOG_USEC)})
    with open(tmp_path / "daemon.err", "wb") as stderr:
        daemon = subprocess.Popen(
            ["sh", "-c", 'WATCHDOG_PID=$$ exec "$@"', "sh",
             *daemon_command(tmp_path, root, config)],
            env=env, stdout=subprocess.DEVNULL, stderr=stderr)
    try:
        yield tmp_path, root, sock, daemon, sim
    finally:
        stop(daemon)
        stop(sim)


def test_ready_comes_after_the_state_file_and_status_names_device_policy_fps(watched) -> None:
    work, _root, sock, daemon, _sim = watched
    ready = first_with(sock, "READY=1")
    assert (work / "state.json").exists()  # the devices were taken before READY
    assert ready[1].startswith("STATUS=governing govd-sim0 (energy)")
    status_re = re.compile(r"STATUS=govd-sim0: energy \(60 FPS\), \d+ MHz, [0-9.]+ fps, ")
    deadline_s = time.monotonic() + WAIT_S
    while not any(status_re.match(line) for _, lines in notifications(sock, 1.0)
                  for line in lines):
        assert time.monotonic() < deadline_s and daemon.poll() is None, "no STATUS= with fps"
    assert stop(daemon) == 0


def test_watchdog_pings_while_ticking_and_stops_while_a_tick_hangs(watched) -> None:
    """The loop pings every WATCHDOG_USEC/2; a tick stuck in a sysfs read (cur_freq made a FIFO
    nobody writes, as a hung driver would) sends nothing, so systemd would kill it."""
    _work, root, sock, daemon, sim = watched
    interval_s = WATCHDOG_USEC / 1e6
    first_with(sock, "READY=1")
    ticking = pings(notifications(sock, 2.5 * interval_s))
    assert len(ticking) >= 2
    # systemd kills a service whose pings are further apart than WATCHDOG_USEC
    assert max(b - a for a, b in pairwise(ticking)) < interval_s

    cur_freq = root / DEVICE / "cur_freq"
    found = cur_freq.read_text()
    sim.send_signal(signal.SIGSTOP)  # it would replace the FIFO at its next tick
    try:
        cur_freq.unlink()
        os.mkfifo(cur_freq)
        # Opening the writing end without blocking succeeds only once a reader is in open():
        # proof that the daemon's loop is stuck in the read.
        writer = wait_for(lambda: _open_writer(cur_freq), "the loop to block on cur_freq", daemon)
        drain(sock)  # what was sent before it blocked
        assert pings(notifications(sock, 1.5 * interval_s)) == []
        unstuck = cur_freq.with_name("cur_freq.new")
        unstuck.write_text(found)
        os.replace(unstuck, cur_freq)
        os.write(writer, found.encode())
        os.close(writer)
    finally:
        sim.send_signal(signal.SIGCONT)
    first_with(sock, "WATCHDOG=1", 2 * interval_s)  # ticking again
    assert stop(daemon) == 0


def _open_writer(path: Path) -> int | None:
    try:
        return os.open(path, os.O_WRONLY | os.O_NONBLOCK)
    except OSError:  # ENXIO: no reader yet
        return None
