"""The frame-source interface: frames completed since the last tick."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, ClassVar


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


@dataclass(frozen=True, slots=True)
class Opening:
    """What the daemon tells a source it opens, besides the configuration's ``frames``."""

    now_s: Callable[[], float]
    """The loop's clock. Units: s."""
    paces_the_work: bool = False
    """Whether the work waits for the loop's tick (the simulated GPU in lockstep): reads are
    then bounded by counts, never by wall time, or the run would depend on the machine's load."""


class SourceSetupError(Exception):
    """A frame source cannot be opened as configured; one line, which govd prints as it is."""


class FrameSource(ABC):
    """Where frame times come from: the socket, MangoHud logs, busy time, or the simulator.

    A source registers by name in `govd.sources.registry` (``frames.source`` in the
    configuration) with a function that opens it from the configuration. What the daemon asks
    of a source beyond `drain` has a default here that suits a source that needs nothing.
    """

    meter_busy_time: ClassVar[bool] = False
    """Whether the daemon should measure each device's busy time from DRM fdinfo where the
    device reports none (i915, xe): this source's frames do not say when the GPU idles, and the
    idle back-off and busy-time policies need it."""

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

    def wake_fd(self) -> int | None:
        """A descriptor the daemon waits on between ticks, readable when frames arrive (then it
        calls `receive`); None when there is none, or when nothing more may be read before the
        next `drain`."""
        return None

    def receive(self, max_items: int | None = None, until_s: float | None = None) -> int:
        """Move what has arrived into the source's queue, at most ``max_items`` and not past
        ``until_s`` (monotonic s); how many were moved. Called when `wake_fd` is readable."""
        return 0

    def set_devices(self, names: Iterable[str]) -> None:  # noqa: B027 - optional hook
        """The devices govd governs now (frames naming another may be dropped and counted)."""

    def reconfigure(self, frames: Any) -> None:  # noqa: B027 - optional hook
        """Apply a reloaded configuration's ``frames`` section (`govd.conf.schema.FramesConfig`)
        to what can change without reopening the source (``frames.source`` itself cannot)."""

    def no_frames_hint(self) -> str:
        """What a user without frames can do, for the journal and `govd status` ("" for
        nothing to say)."""
        return ""
