"""sd_notify(3) for govd's `Type=notify` unit: READY, STATUS, WATCHDOG, STOPPING, RELOADING.

Outside systemd (no NOTIFY_SOCKET) every call is a cheap no-op, so the daemon calls these
unconditionally. The watchdog is pinged from the control loop itself: a loop that hangs (a stuck
driver call, a numba kernel gone wrong) stops pinging and systemd restarts govd, whose
`ExecStopPost=govd restore` then puts the clocks back.
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Callable, Mapping


def _send_datagram(socket_path: str, message: str) -> bool:
    # sd_notify(3): a name starting with '@' is in the abstract namespace.
    address = "\0" + socket_path[1:] if socket_path.startswith("@") else socket_path
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC) as sock:
        # Never block the control loop: when nobody drains the socket (systemd stuck, a test
        # harness gone) the notification is dropped (EAGAIN → OSError → False), not awaited.
        sock.sendto(message.encode("utf-8"), socket.MSG_DONTWAIT, address)
    return True


class Notifier:
    """Sends sd_notify messages to `NOTIFY_SOCKET` (path or abstract ``@name``).

    Sends each message as one non-blocking datagram (not libsystemd's sd_notify, which may
    block the sender when the socket's queue is full: a governor must never wait on it).
    Every method returns True when the message was sent.
    """

    def __init__(self, environ: Mapping[str, str] | None = None) -> None:
        env = os.environ if environ is None else environ
        self.socket_path: str | None = env.get("NOTIFY_SOCKET") or None
        self._send: Callable[[str], bool] = self._send_plain

    @property
    def enabled(self) -> bool:
        """True when systemd is listening for notifications."""
        return self.socket_path is not None

    def send(self, *assignments: str) -> bool:
        """Send ``KEY=value`` assignments in one datagram."""
        if self.socket_path is None:
            return False
        try:
            return bool(self._send("\n".join(assignments)))
        except OSError:
            # A notification lost must never stop the governor.
            return False

    def _send_plain(self, message: str) -> bool:
        assert self.socket_path is not None
        return _send_datagram(self.socket_path, message)

    def ready(self, status: str | None = None) -> bool:
        """Tell systemd start-up is complete (every configured device is taken)."""
        return self.send("READY=1", *([f"STATUS={status}"] if status else []))

    def status(self, text: str) -> bool:
        """Set the one-line status `systemctl status govd` shows."""
        return self.send(f"STATUS={_one_line(text)}")

    def watchdog(self) -> bool:
        """Ping the service watchdog (WatchdogSec=)."""
        return self.send("WATCHDOG=1")

    def stopping(self, status: str | None = None) -> bool:
        """Tell systemd govd is shutting down (restoring clocks)."""
        return self.send("STOPPING=1", *([f"STATUS={_one_line(status)}"] if status else []))

    def reloading(self, monotonic_usec: int | None = None) -> bool:
        """Tell systemd a reload (SIGHUP) began; send `ready()` when it is done.

        sd_notify(3) asks for MONOTONIC_USEC (CLOCK_MONOTONIC, µs) with RELOADING=1 so that
        systemd can tell this reload from an older one; pass it in or it is read here.
        """
        if monotonic_usec is None:
            monotonic_usec = time.clock_gettime_ns(time.CLOCK_MONOTONIC) // 1000
        return self.send("RELOADING=1", f"MONOTONIC_USEC={monotonic_usec}")


def _one_line(text: str) -> str:
    # A newline would start a new assignment in the datagram.
    return " ".join(text.split())


def watchdog_interval_s(
    environ: Mapping[str, str] | None = None, pid: int | None = None
) -> float | None:
    """The watchdog timeout systemd expects pings within (s), or None when there is none.

    systemd sets WATCHDOG_USEC (µs) and WATCHDOG_PID; the watchdog is ours only when WATCHDOG_PID
    is unset or is our pid (`pid`, default os.getpid()), as in sd_watchdog_enabled(3).
    """
    env = os.environ if environ is None else environ
    try:
        usec = int(env.get("WATCHDOG_USEC", ""))
    except ValueError:
        return None
    if usec <= 0:
        return None
    watchdog_pid = env.get("WATCHDOG_PID")
    if watchdog_pid:
        try:
            if int(watchdog_pid) != (os.getpid() if pid is None else pid):
                return None
        except ValueError:
            return None
    return usec / 1e6


class WatchdogPinger:
    """Called by the control loop every tick; sends WATCHDOG=1 at most every interval/2.

    Half the interval, as sd_watchdog_enabled(3) recommends, leaves room for one slow tick.
    With no watchdog (`interval_s` None) `tick` does nothing.
    """

    def __init__(self, notifier: Notifier, interval_s: float | None) -> None:
        self._notifier = notifier
        self.period_s: float | None = None if interval_s is None else interval_s / 2
        self._last_ping_s: float | None = None

    def tick(self, now_s: float) -> bool:
        """Ping if due at loop time `now_s` (monotonic, s); returns True when a ping was sent."""
        if self.period_s is None:
            return False
        if self._last_ping_s is not None and now_s - self._last_ping_s < self.period_s:
            return False
        self._last_ping_s = now_s
        return self._notifier.watchdog()
