"""Reading the run trace `govd run --record` writes (DESIGN §5).

CSV with header ``time_s,frame_time_ms,frame_count,freq_mhz,power_w[,<counter>...]`` (the
seed's column order), one row per tick; an empty cell is a value the tick did not have
(no frame finished, no power reading), never a zero.

Format 2 (what govd writes since the governor is replayed from its traces) adds, as sweep
tables do, ``# key: value`` lines before the header (``govd run trace: 2``, the governed
``levels_mhz``, ``mem_levels_mhz`` with pairs, ``bounds_mhz`` and ``period_s``) and the named
columns `TICK_COLUMNS` among the counters: the rest of what the governor was given each tick
(tick length, utilisation, memory clock, share of late frames, the target in force) and the
level it chose. Every number is written to the last digit (Python's shortest repr), so that
a replay feeds the governor what the live run fed it, bit for bit. A reader of format 1 stops
at the first ``#`` line, which is what a new format should make it do.
"""

from __future__ import annotations

import csv
import io
import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from govd.formats.regular_file import MAX_TABLE_BYTES, read_regular
from govd.model.arrays import FloatArray

COLUMNS = ("time_s", "frame_time_ms", "frame_count", "freq_mhz", "power_w")
TICK_COLUMNS = ("interval_s", "busy", "mem_freq_mhz", "late_share", "target_fps",
                "max_slowdown", "level_mhz", "mem_level_mhz")
"""Format 2's named columns (never counters): the tick's length (s), utilisation (0..1),
memory clock (MHz), share of frames over the deadline, the target in force (one of the two
set), and the level chosen for the next tick (MHz; the memory clock with pairs)."""
FORMAT_KEY = "govd run trace"
VERSION = 2
MAX_META_LINES = 64


class TraceFormatError(ValueError):
    """A run trace that cannot be used; the message names the file and line."""


@dataclass
class RunTrace:
    """A run trace in memory: one entry per tick, NaN where the tick had no value."""

    time_s: FloatArray
    frame_time_ms: FloatArray
    frame_count: FloatArray
    freq_mhz: FloatArray
    power_w: FloatArray
    counters: dict[str, FloatArray] = field(default_factory=dict)
    path: str = ""
    tick: dict[str, FloatArray] = field(default_factory=dict)
    """Format 2's `TICK_COLUMNS` present in the file, by name."""
    meta: dict[str, str] = field(default_factory=dict)
    """The ``# key: value`` lines before the header."""

    @property
    def ticks(self) -> int:
        """Number of ticks (rows)."""
        return int(self.time_s.size)

    def column(self, name: str) -> FloatArray:
        """A `TICK_COLUMNS` column, all NaN where the file has none (format 1)."""
        values = self.tick.get(name)
        return values if values is not None else np.full(self.ticks, math.nan)

    def numbers(self, key: str) -> FloatArray | None:
        """The comma-separated numbers of metadata ``key``, None when absent. Raises
        TraceFormatError when they are not finite numbers."""
        text = self.meta.get(key)
        if text is None:
            return None
        try:
            values = np.array([float(v) for v in text.split(",")], dtype=np.float64)
        except ValueError:
            raise TraceFormatError(f"{self.path}: # {key}: not numbers: {text[:80]!r}") from None
        if not np.all(np.isfinite(values)):
            raise TraceFormatError(f"{self.path}: # {key}: not finite numbers")
        return values


def read_trace(path: str | Path) -> RunTrace:
    """Read a run trace; raises TraceFormatError naming file and line on any bad row, and for a
    file that cannot be read."""
    path = Path(path)
    try:
        data = read_regular(path, MAX_TABLE_BYTES)
    except OSError as exc:
        raise TraceFormatError(f"{path}: cannot read: {exc.strerror or exc}") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise TraceFormatError(f"{path}:{line}: not UTF-8 text") from None
    meta, skipped = _metadata(text, path)
    rows, lines = _csv_rows(text.split("\n", skipped)[-1] if skipped else text, path)
    lines = [line + skipped for line in lines]
    if not rows:
        raise TraceFormatError(f"{path}:1: empty file, expected the header "
                               f"{','.join(COLUMNS)}")
    header = [h.strip() for h in rows[0]]
    if tuple(header[:5]) != COLUMNS:
        raise TraceFormatError(f"{path}:{lines[0]}: header must start with {','.join(COLUMNS)}, "
                               f"got {','.join(header[:5])}")
    if len(set(header)) != len(header):
        raise TraceFormatError(f"{path}:{lines[0]}: duplicate column names")
    values = np.full((len(rows) - 1, len(header)), math.nan)
    for i, row in enumerate(rows[1:]):
        line = lines[i + 1]
        if len(row) != len(header):
            raise TraceFormatError(f"{path}:{line}: {len(row)} cells, header has "
                                   f"{len(header)}")
        for j, cell in enumerate(row):
            cell = cell.strip()
            if not cell:
                continue
            try:
                value = float(cell)
            except ValueError:
                raise TraceFormatError(f"{path}:{line}: column {header[j]}: {cell!r} is not a "
                                       f"number") from None
            if not math.isfinite(value):
                raise TraceFormatError(f"{path}:{line}: column {header[j]}: {cell!r}: write an "
                                       f"empty cell for a missing value")
            values[i, j] = value
    if values.shape[0] == 0:
        raise TraceFormatError(f"{path}:{lines[0] + 1}: no ticks after the header")
    if np.isnan(values[:, 0]).any() or np.isnan(values[:, 3]).any():
        bad = lines[int(np.flatnonzero(np.isnan(values[:, 0]) | np.isnan(values[:, 3]))[0]) + 1]
        raise TraceFormatError(f"{path}:{bad}: time_s and freq_mhz are required on every row")
    return RunTrace(
        time_s=values[:, 0], frame_time_ms=values[:, 1],
        frame_count=np.nan_to_num(values[:, 2]), freq_mhz=values[:, 3], power_w=values[:, 4],
        counters={name: values[:, j] for j, name in enumerate(header)
                  if j >= 5 and name not in TICK_COLUMNS},
        path=str(path),
        tick={name: values[:, j] for j, name in enumerate(header) if name in TICK_COLUMNS},
        meta=meta,
    )


def _metadata(text: str, path: Path) -> tuple[dict[str, str], int]:
    """The ``# key: value`` lines at the top of ``text`` and how many lines they take."""
    meta: dict[str, str] = {}
    count = 0
    for line in text.split("\n"):
        if not line.startswith("#"):
            break
        count += 1
        if count > MAX_META_LINES:
            raise TraceFormatError(f"{path}:{count}: more than {MAX_META_LINES} '#' lines")
        key, colon, value = line[1:].partition(":")
        if not colon or not key.strip():
            raise TraceFormatError(f"{path}:{count}: a '#' line must read '# key: value'")
        meta[key.strip()] = value.strip()
    version = meta.get(FORMAT_KEY)
    if count and version != str(VERSION):
        raise TraceFormatError(f"{path}:1: not a govd run trace of format {VERSION} "
                               f"(# {FORMAT_KEY}: {(version or '')[:20]!r})")
    return meta, count


def _csv_rows(text: str, path: Path) -> tuple[list[list[str]], list[int]]:
    """The CSV rows of ``text`` and the 1-based line each starts on (a quoted cell may span
    lines, so row and line numbers can differ)."""
    reader = csv.reader(io.StringIO(text, newline=""))
    rows: list[list[str]] = []
    lines: list[int] = []
    while True:
        start = reader.line_num + 1
        try:
            row = next(reader)
        except StopIteration:
            return rows, lines
        except csv.Error as exc:
            raise TraceFormatError(f"{path}:{start}: not a CSV run trace: {exc}") from None
        if row:  # csv gives [] for a blank line
            rows.append(row)
            lines.append(start)
