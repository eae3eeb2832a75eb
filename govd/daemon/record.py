"""`govd run --record FILE`: the run trace, one CSV row per tick (DESIGN.md §5, format 2 of
`govd.formats.trace`).

Columns, in the seed's order: ``time_s,frame_time_ms,frame_count,freq_mhz,power_w``, then
`govd.formats.trace.TICK_COLUMNS` and the counters; ``# key: value`` lines before the header
say which levels were governed and the tick period. `govd replay` reruns the model over it, and
with ``--config`` the whole governor, which then decides as the live run did. A tick without
frames has an empty frame time; unknown power or counters are empty too, so a reader never
mistakes a missing value for a zero. Numbers are written to the last digit.
"""

from __future__ import annotations

import contextlib
import logging
import math
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TextIO

from govd.formats.trace import COLUMNS, FORMAT_KEY, TICK_COLUMNS, VERSION
from govd.governor import Governor
from govd.sample import Sample
from govd.target import Target

log = logging.getLogger("govd.daemon")


def _cell(value: float) -> str:
    """The number to its last digit (shortest repr), empty when it is not finite."""
    return repr(float(value)) if math.isfinite(value) else ""


def _nan(value: float | None) -> float:
    return math.nan if value is None else value


class TraceRecorder:
    """Appends one row per tick to a run-trace CSV; ``counters`` names the extra columns.

    The trace is a by-product: a write that fails (a full disk, a quota, a removed medium)
    is logged once, the recording stops there (rows already flushed stay), and nothing is
    raised, so governing and the restore at exit go on."""

    def __init__(self, path: str | Path, counters: Sequence[str] = (),
                 meta: Mapping[str, str] | None = None) -> None:
        """``counters``: the model's counters, in order; ``meta``: the ``# key: value`` lines
        after the format's (levels_mhz, period_s...)."""
        self.path = Path(path)
        self._file: TextIO | None = open(self.path, "w", buffering=1 << 16)  # noqa: SIM115
        self.failed: str | None = None
        """Why recording stopped (None while it goes on)."""
        lines = [f"# {FORMAT_KEY}: {VERSION}"] + [f"# {k}: {v}" for k, v in (meta or {}).items()]
        self._write("\n".join((*lines, ",".join((*COLUMNS, *TICK_COLUMNS, *counters)))) + "\n")

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

    def row(self, time_s: float, sample: Sample, target: Target, level_mhz: float,
            mem_level_mhz: float | None = None) -> None:
        """One tick: time since the run began (s), the `Sample` the governor was given (its
        counters in the header's order), the target in force, and the level it chose (MHz;
        the memory clock with pairs)."""
        cells = [
            _cell(time_s), _cell(sample.frame_time_ms), _cell(sample.frame_count),
            _cell(sample.freq_mhz), _cell(sample.power_w), _cell(sample.interval_s),
            _cell(sample.busy), _cell(sample.mem_freq_mhz), _cell(sample.late_share),
            _cell(_nan(target.fps)), _cell(_nan(target.max_slowdown)), _cell(level_mhz),
            _cell(_nan(mem_level_mhz)), *(_cell(c) for c in sample.counters.tolist()),
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


def trace_meta(governor: Governor) -> dict[str, str]:
    """What a replay needs to build ``governor`` again beside its configuration: the levels
    (and memory clocks of pairs) it governs, its bounds, the device's voltage table and its
    tick period."""

    def numbers(values: Iterable[float]) -> str:
        return ",".join(repr(float(v)) for v in values)

    meta = {"levels_mhz": numbers(governor.levels_mhz)}
    if governor.mem_levels_mhz is not None:
        meta["mem_levels_mhz"] = numbers(governor.mem_levels_mhz)
    meta["bounds_mhz"] = numbers((governor.levels_mhz[governor.lo],
                                  governor.levels_mhz[governor.hi]))
    volts = governor.model_settings.volts
    if volts:
        meta["volts"] = numbers(volts)
    meta["period_s"] = repr(governor.period_s)
    return meta
