"""The frame-socket protocol: one ``F <gpu_time_us> [key=value ...]`` line per frame.

A "frame" is any unit of GPU work a program completes: a rendered frame, or a step of a
training loop (`govd.client` sends either), whose GPU time may be up to an hour.

Keys govd reads: ``app=NAME`` (the application, for per-application targets), ``target_fps=F``
(the frame rate the sender asks for) and ``device=NAME`` (the governed device the frame ran on,
as `govd devices` names it: ``card0``, ``fde60000.gpu``, or an NVIDIA GPU's UUID such as
``GPU-5a1f0d2c-...``). A frame without ``device=`` belongs to every governed device, which is
right when there is only one; one naming a device govd does not govern is counted and said by
the socket (`govd.sources.socket`). Other keys are ignored, so a newer sender keeps working
with an older govd.

A line either parses into a `FrameLine` or is rejected with a short reason (a stable word used as a
counter name in the source's `stats`), so a misbehaving sender costs a counter, never the daemon.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

MAX_GPU_TIME_US = 3_600_000_000.0
"""Longest frame accepted: an hour. A training step of a large model can take minutes (10 s
was the limit, and dropped such steps as too long); anything past an hour is a unit mistake
or garbage. Units: µs."""
MIN_GPU_TIME_US = 0.001
"""Shortest frame accepted: 1 ns, less than any GPU submission takes. Shorter is garbage, and
below about 5e-321 µs the time becomes 0 ms in the unit change. Units: µs."""
MAX_TARGET_FPS = 1000.0
"""Highest frame-rate target a sender may ask for. Units: frames/s."""
MAX_APP_CHARS = 64
"""Longest ``app=`` value kept (longer ones are cut, not rejected)."""
MAX_DEVICE_CHARS = 64
"""Longest ``device=`` value accepted (sysfs names are far shorter)."""

# Plain decimal or scientific notation only: float() would also take "1_000", "nan" and "inf".
_NUMBER = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?")
_NOT_FINITE = {"nan", "inf", "infinity"}
# What nearly every sender sends: "F <digits>[.<digits>]" and at most an app= of printable
# ASCII without spaces. Such a line is parsed by this one match; any other line (other keys,
# signs, exponents, odd spacing, UTF-8, an out-of-range time) takes the full parser below,
# which gives the same answer for these lines, more slowly. Values with "=" in them are
# printable too, as the full parser reads them (key up to the first "=").
_COMMON = re.compile(rb"F (\d+(?:\.\d*)?)(?: app=([\x21-\x7e]+))?")

# Reasons a line is dropped; each is counted as ``dropped_<reason>``.
REASONS = (
    "encoding",  # not UTF-8 (ASCII is the protocol; UTF-8 app names are tolerated)
    "tag",  # first token is not "F"
    "missing_time",  # "F" alone
    "not_numeric",
    "not_finite",  # NaN or infinity
    "non_positive",  # zero or negative time
    "too_small",  # positive, below MIN_GPU_TIME_US
    "too_large",  # above MAX_GPU_TIME_US
    "malformed_key",  # a token after the time that is not key=value
    "bad_target_fps",
    "bad_app",  # empty or non-printable app name
    "bad_device",  # empty, non-printable or overlong device name
    "unknown_device",  # names a device govd does not govern (counted by the socket)
)


# Not frozen: a frozen dataclass's __init__ sets each field through a Python-level
# object.__setattr__ call, 4x the cost of a plain one (~2.5 µs an object in a cold 50 ms
# tick, bench/README.md "Daemon cost"); built for every line parsed, and read-only by convention.
@dataclass(slots=True)
class FrameLine:
    """One frame as the sender described it (identity comes from the socket, not from here)."""

    gpu_time_ms: float
    """GPU time of the frame. Units: ms."""
    app: str | None
    """The sender's ``app=`` value, if it gave one."""
    target_fps: float | None
    """The sender's ``target_fps=`` value, if it gave one. Units: frames/s."""
    device: str | None = None
    """The sender's ``device=`` value: the device the frame ran on; None: every device."""


class LineRejected(ValueError):
    """A line that does not follow the protocol; ``reason`` is one of `REASONS`."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def _number(token: str) -> float:
    if _NUMBER.fullmatch(token) is None:
        if token.lstrip("+-").lower() in _NOT_FINITE:
            raise LineRejected("not_finite")
        raise LineRejected("not_numeric")
    return float(token)


def parse_frame_line(raw: bytes) -> FrameLine:
    """Parse one protocol line (without its newline); raise `LineRejected` if it does not follow
    the protocol. The time is given in µs on the wire and returned in ms."""
    common = _COMMON.fullmatch(raw)
    if common is not None:
        time_us, app = common.groups()
        gpu_time_us = float(time_us)
        if MIN_GPU_TIME_US <= gpu_time_us <= MAX_GPU_TIME_US:
            return FrameLine(gpu_time_us / 1000.0,
                             None if app is None else app[:MAX_APP_CHARS].decode("ascii"), None)
    return _parse_any(raw)


def _parse_any(raw: bytes) -> FrameLine:
    """`parse_frame_line` for every line: the protocol in full."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise LineRejected("encoding") from None
    tokens = text.split()
    if not tokens or tokens[0] != "F":
        raise LineRejected("tag")
    if len(tokens) < 2:
        raise LineRejected("missing_time")
    time_us = _number(tokens[1])
    if time_us > MAX_GPU_TIME_US:  # also catches literals that overflow to inf, e.g. 1e999
        raise LineRejected("too_large")
    if time_us <= 0:
        raise LineRejected("non_positive")
    if time_us < MIN_GPU_TIME_US:
        raise LineRejected("too_small")
    app: str | None = None
    target_fps: float | None = None
    device: str | None = None
    for token in tokens[2:]:
        key, sep, value = token.partition("=")
        if not sep or not key:
            raise LineRejected("malformed_key")
        if key == "app":
            if not value or not value.isprintable():
                raise LineRejected("bad_app")
            app = value[:MAX_APP_CHARS]
        elif key == "target_fps":
            try:
                fps = _number(value)
            except LineRejected:
                raise LineRejected("bad_target_fps") from None
            if not (math.isfinite(fps) and 0 < fps <= MAX_TARGET_FPS):
                raise LineRejected("bad_target_fps")
            target_fps = fps
        elif key == "device":
            # Not cut as app= is: a cut name would match no device and the frame vanish unseen.
            if not value or not value.isprintable() or len(value) > MAX_DEVICE_CHARS:
                raise LineRejected("bad_device")
            device = value
        # Unknown keys are ignored so that newer senders keep working with an older govd.
    return FrameLine(gpu_time_ms=time_us / 1000.0, app=app, target_fps=target_fps,
                     device=device)
