"""Reading the run trace `govd run --record` writes (DESIGN §5).

CSV with header ``time_s,frame_time_ms,frame_count,freq_mhz,power_w[,<counter>...]`` (the
seed's column order), one row per tick; an empty cell is a value the tick did not have
(no frame finished, no power reading), never a zero.
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

    @property
    def ticks(self) -> int:
        """Number of ticks (rows)."""
        return int(self.time_s.size)


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
    rows, lines = _csv_rows(text, path)
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
        counters={name: values[:, j] for j, name in enumerate(header) if j >= 5},
        path=str(path),
    )


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
