"""govd's logging: structured fields to the journal under systemd, plain lines on stderr elsewhere.

What a reader of the journal sees by default is one INFO summary per device every few seconds and
the first warning of each episode; per-tick decisions go to DEBUG. Every record can carry
structured `GOVD_*` fields (``GOVD_DEVICE``, ``GOVD_LEVEL_MHZ``, ``GOVD_FRAME_MS`` …) so that
``journalctl -t govd GOVD_DEVICE=card0 -o json`` answers questions without parsing messages.
"""

from __future__ import annotations

import logging
import os
import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import import_module

SYSLOG_IDENTIFIER = "govd"
FIELD_PREFIX = "GOVD_"
_FIELD_NAME = re.compile(r"[a-z][a-z0-9_]*")
# Marks the handler setup_logging installed, so a second call replaces it instead of doubling lines.
_GOVD_HANDLER = "_govd_handler"
MAX_MESSAGE_CHARS = 1000
"""Longest message logged; the rest is cut (a sysfs file of 60 000 NUL bytes quoted in an error
was a 240 kB journal line)."""


class OneLine(logging.Filter):
    """Every message one printable, bounded line: what others choose (device names in a tree
    given with --sysfs-root, file contents quoted in errors) can neither forge a journal line
    nor flood it. A traceback, attached apart, is left as it is."""

    def filter(self, record: logging.LogRecord) -> bool:
        """Rewrite the record's message in place; never drops a record."""
        message = record.getMessage()
        if len(message) > MAX_MESSAGE_CHARS:
            message = message[:MAX_MESSAGE_CHARS - 1] + "…"
        if not message.isprintable():
            message = "".join(c if c.isprintable() else "?" for c in message)
        record.msg, record.args = message, None
        return True


def running_under_systemd(environ: Mapping[str, str] | None = None) -> bool:
    """True when systemd started us: it sets INVOCATION_ID for every unit, JOURNAL_STREAM when
    stdout/stderr go to the journal."""
    env = os.environ if environ is None else environ
    return bool(env.get("JOURNAL_STREAM") or env.get("INVOCATION_ID"))


def journal_field_name(name: str) -> str:
    """The journal field for a lowercase keyword with its unit: ``level_mhz`` → ``GOVD_LEVEL_MHZ``.

    Raises ValueError for names the journal would silently drop (it takes only A–Z, 0–9 and _).
    """
    if not _FIELD_NAME.fullmatch(name):
        raise ValueError(
            f"log field {name!r}: use lowercase letters, digits and _ with the unit in the name "
            "(e.g. frame_ms, power_w)"
        )
    return FIELD_PREFIX + name.upper()


def log_fields(
    logger: logging.Logger, level: int, msg: str, /, **fields: object
) -> None:
    """Log `msg` at `level` with each keyword as a structured field (``power_w=3.2`` →
    ``GOVD_POWER_W=3.2``). Values are sent as text; None values are left out."""
    _emit(logger, level, msg, fields, stacklevel=3)


def _emit(
    logger: logging.Logger, level: int, msg: str, fields: Mapping[str, object], stacklevel: int
) -> None:
    if not logger.isEnabledFor(level):
        return
    extra = {journal_field_name(k): v for k, v in fields.items() if v is not None}
    # stacklevel counts from here, so CODE_FILE/CODE_LINE name govd's caller, not these helpers.
    logger.log(level, msg, extra=extra, stacklevel=stacklevel)


def record_fields(record: logging.LogRecord) -> dict[str, object]:
    """The GOVD_* fields attached to a record by `log_fields`, in the order they were given."""
    return {k: v for k, v in record.__dict__.items() if k.startswith(FIELD_PREFIX)}


class StderrFormatter(logging.Formatter):
    """``govd: LEVEL logger: message [key=value …]``: the journal's fields, for a terminal."""

    def format(self, record: logging.LogRecord) -> str:
        """One line with the structured fields appended as lowercase key=value pairs."""
        line = f"govd: {record.levelname} {record.name}: {record.getMessage()}"
        pairs = " ".join(
            f"{k[len(FIELD_PREFIX):].lower()}={v}" for k, v in record_fields(record).items()
        )
        if pairs:
            line = f"{line} [{pairs}]"
        if record.exc_info:
            line = f"{line}\n{self.formatException(record.exc_info)}"
        return line


def _journal_handler() -> logging.Handler | None:
    try:
        journal = import_module("systemd.journal")
    except ImportError:
        return None
    # JournalHandler turns every upper-case record attribute (our GOVD_* extras) into a field.
    handler: logging.Handler = journal.JournalHandler(SYSLOG_IDENTIFIER=SYSLOG_IDENTIFIER)
    return handler


def setup_logging(level: int | str, under_systemd: bool | None = None) -> logging.Handler:
    """Send govd's logging to the journal (under systemd) or to stderr, at `level` for govd's
    own loggers and WARNING for libraries. `under_systemd=None` detects it from the environment.

    Returns the handler installed on the root logger; calling again replaces it.
    """
    if isinstance(level, str):
        level_no = logging.getLevelName(level.upper())
        if not isinstance(level_no, int):
            raise ValueError(f"log level {level!r}: use debug, info, warning or error")
        level = level_no
    if under_systemd is None:
        under_systemd = running_under_systemd()
    handler = _journal_handler() if under_systemd else None
    fallback_reason = None
    if handler is None:
        if under_systemd:
            fallback_reason = "systemd-python is not installed; logging to stderr instead"
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(StderrFormatter())
    setattr(handler, _GOVD_HANDLER, True)
    handler.addFilter(OneLine())
    root = logging.getLogger()
    for old in [h for h in root.handlers if getattr(h, _GOVD_HANDLER, False)]:
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(logging.WARNING)
    logging.getLogger(SYSLOG_IDENTIFIER).setLevel(level)
    if fallback_reason:
        logging.getLogger(SYSLOG_IDENTIFIER).warning(fallback_reason)
    return handler


@dataclass
class _Episode:
    first_msg: str
    started_s: float
    last_report_s: float
    suppressed: int = 0


class EpisodeLimiter:
    """Rate-limits a warning per episode, keyed by e.g. (device, kind).

    The first occurrence of an episode is logged; the rest are counted and reported as
    "… repeated N times over S s" every `report_every_s` seconds and when the episode ends
    (`clear`). Times are passed in by the caller (the control loop's monotonic clock, seconds),
    so nothing here reads a clock.
    """

    def __init__(
        self, logger: logging.Logger, report_every_s: float = 60.0, level: int = logging.WARNING
    ) -> None:
        if report_every_s <= 0:
            raise ValueError(f"report_every_s must be > 0, got {report_every_s}")
        self._logger = logger
        self._report_every_s = report_every_s
        self._level = level
        self._episodes: dict[tuple[str, str], _Episode] = {}

    @property
    def quiet(self) -> bool:
        """True while no episode is open (nothing for `clear` to end)."""
        return not self._episodes

    def active(self, key: tuple[str, str]) -> bool:
        """True while an episode for `key` is open."""
        return key in self._episodes

    def warn(self, key: tuple[str, str], now_s: float, msg: str, **fields: object) -> bool:
        """Report one occurrence at time `now_s` (s); returns True when a line was logged."""
        device, kind = key
        episode = self._episodes.get(key)
        if episode is None:
            self._episodes[key] = _Episode(msg, started_s=now_s, last_report_s=now_s)
            self._log(msg, device, kind, fields, stacklevel=4)
            return True
        episode.suppressed += 1
        if now_s - episode.last_report_s >= self._report_every_s:
            self._report(episode, device, kind, now_s, "still going", fields)
            return True
        return False

    def clear(self, key: tuple[str, str], now_s: float) -> bool:
        """End the episode for `key` at `now_s` (s); logs the count of suppressed repeats, if
        any. Returns True when a line was logged."""
        episode = self._episodes.pop(key, None)
        if episode is None or episode.suppressed == 0:
            return False
        device, kind = key
        self._report(episode, device, kind, now_s, "ended", {})
        return True

    def _report(
        self,
        episode: _Episode,
        device: str,
        kind: str,
        now_s: float,
        state: str,
        fields: Mapping[str, object],
    ) -> None:
        span_s = now_s - episode.last_report_s
        msg = (
            f"{episode.first_msg} … repeated {episode.suppressed} times over {span_s:.1f} s "
            f"({state})"
        )
        repeat_fields = {
            **fields,
            "repeats": episode.suppressed,
            "episode_s": round(now_s - episode.started_s, 3),
        }
        self._log(msg, device, kind, repeat_fields, stacklevel=5)
        episode.suppressed = 0
        episode.last_report_s = now_s

    def _log(
        self,
        msg: str,
        device: str,
        kind: str,
        fields: Mapping[str, object],
        stacklevel: int,
    ) -> None:
        all_fields = {"device": device, "warning_kind": kind, **fields}
        _emit(self._logger, self._level, msg, all_fields, stacklevel)
