"""`govd run --record FILE`: the run trace, one CSV row per tick (DESIGN.md §5).

Columns, in the seed's order: ``time_s,frame_time_ms,frame_count,freq_mhz,power_w,<counter>...``
(`govd replay` reruns the model over it). A tick without frames has an empty frame time; unknown
power or counters are empty too, so a reader never mistakes a missing value for a zero.
"""

from __future__ import annotations

import contextlib
import logging
import math
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TextIO

log = logging.getLogger("govd.daemon")

HEADER = ("time_s", "frame_time_ms", "frame_count", "freq_mhz", "power_w")


def _cell(value: float, digits: int) -> str:
    return f"{value:.{digits}f}" if math.isfinite(value) else ""


class TraceRecorder:
    """Appends one row per tick to a run-trace CSV; ``counters`` names the extra columns.

    The trace is a by-product: a write that fails (a full disk, a quota, a removed medium)
    is logged once, the recording stops there (rows already flushed stay), and nothing is
    raised, so governing and the restore at exit go on."""

    def __init__(self, path: str | Path, counters: Sequence[str] = ()) -> None:
        self.path = Path(path)
        self._file: TextIO | None = open(self.path, "w", buffering=1 << 16)  # noqa: SIM115
        self.failed: str | None = None
        """Why recording stopped (None while it goes on)."""
        self._write(",".join((*HEADER, *counters)) + "\n")

    def _write(self, text: str) -> None:
        if self._file is None:
            return
        try:
            self._file.write(text)
        except OSError as exc:
            self._stop(exc)

    def _stop(self, exc: OSError) -> None:
        self.failed = exc.strerror or str(exc)
        log.error("%s: recording stopped (%s); governing goes on", self.path, self.failed)
        file, self._file = self._file, None
        if file is not None:
            with contextlib.suppress(OSError):  # the buffer's flush fails again: already said
                file.close()

    def row(
        self, time_s: float, frame_time_ms: float, frame_count: int, freq_mhz: float,
        power_w: float, counters: Iterable[float] = (),
    ) -> None:
        """One tick: time since the run began (s), mean frame time (ms, NaN when none),
        frames, frequency running (MHz), power (W, NaN when unknown), counter values."""
        cells = [
            f"{time_s:.4f}", _cell(frame_time_ms, 4), str(frame_count), _cell(freq_mhz, 3),
            _cell(power_w, 4), *(_cell(float(c), 6) for c in counters),
        ]
        self._write(",".join(cells) + "\n")

    def close(self) -> None:
        """Flush and close the file (a failing flush is logged like a failing write)."""
        if self._file is None:
            return
        try:
            self._file.close()
        except OSError as exc:
            self._stop(exc)
        self._file = None


def trace_path(path: Path, device: str, devices: int) -> Path:
    """The trace file of ``device``: ``path`` itself when one device is governed, else
    ``<stem>.<device><suffix>`` beside it."""
    if devices <= 1:
        return path
    return path.with_name(f"{path.stem}.{device}{path.suffix or '.csv'}")
