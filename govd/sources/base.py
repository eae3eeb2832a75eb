"""The frame-source interface: frames completed since the last tick."""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any


# Not frozen: a frozen dataclass's __init__ sets each field through a Python-level
# object.__setattr__ call, 4x the cost of a plain one (~2.5 µs an object in a cold 50 ms
# tick, bench/README.md "Daemon cost"); built for every frame received, and read-only by convention.
@dataclass(slots=True)
class Frame:
    """One completed frame (or unit of compute work)."""

    gpu_time_ms: float
    """GPU time spent on the frame. Units: ms."""
    pid: int = 0
    """Sender process id (from SCM_CREDENTIALS for the socket; 0 when unknown)."""
    uid: int = -1
    """Sender user id (-1 when unknown)."""
    app: str = ""
    """Application name (process name, or the sender's ``app=`` key)."""
    target_fps: float | None = None
    """Frame-rate target the sender asked for, if any (the config decides whether it counts)."""
    device: str | None = None
    """The governed device the frame ran on (the socket's ``device=`` key); None: every one."""
    count: float = 1.0
    """How many frames this record stands for: 1, except for a row of a sampled MangoHud log,
    which stands for every frame presented since the row before it (its time is their typical
    frame time)."""


def one_line(text: str) -> str:
    """``text`` with every character that is not printable (line breaks, terminal escapes,
    undecodable bytes) as ``?``: names that other users choose (process names, log file names)
    end up in journal and status lines, and must not split or forge them."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else "?" for c in text)


class FrameSource(ABC):
    """Where frame times come from: the socket, MangoHud logs, busy time, or the simulator."""

    @abstractmethod
    def drain(self) -> list[Frame]:
        """Frames completed since the previous call, oldest first. Never blocks, never raises on
        bad input (bad input is dropped and counted in `stats`)."""

    def stats(self) -> dict[str, int]:
        """Counters of what was received, accepted and rejected (and why)."""
        return {}

    def report(self) -> dict[str, Any]:
        """What `govd status` shows about the source: ``problems`` (one line each, what the user
        must change) and whatever else the source tells (JSON-able)."""
        return {}

    def close(self) -> None:  # noqa: B027 - optional hook: not every source holds resources
        """Release sockets and files."""
