"""The sweep table (DESIGN §5): the same stream of work measured at every level.

CSV: optional ``# key: value`` metadata lines, then the header
``unit,freq_mhz,time_ms,power_w[,mem_freq_mhz][,busy][,<counter>...]``, one row per (unit, level);
every unit has a row for every level. This module holds the in-memory form; reading and writing
live in `read_sweep` / `write_sweep`.
"""

from __future__ import annotations

import logging
import math
import os
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from govd.formats.csv_numbers import PARSE_BLANK_LINE, PARSE_OK, format_rows, parse_rows
from govd.formats.regular_file import MAX_TABLE_BYTES, read_regular

log = logging.getLogger("govd.formats")

FloatArray = npt.NDArray[np.float64]


class SweepFormatError(ValueError):
    """A sweep table that cannot be used; the message names the file and line."""


@dataclass
class SweepTable:
    """A sweep table in memory: arrays indexed [unit, level], levels ascending.

    A level is a core clock (``levels_mhz[l]``), or with two clock domains a (core, memory) pair
    (``levels_mhz[l]``, ``mem_levels_mhz[l]``), pairs sorted by core then memory clock.
    """

    levels_mhz: FloatArray
    """Core clock of each level, shape [L]. Units: MHz."""
    time_ms: FloatArray
    """GPU time of each unit at each level, shape [U, L]. Units: ms."""
    power_w: FloatArray
    """Average GPU power while processing each unit at each level, shape [U, L]. Units: W."""
    mem_levels_mhz: FloatArray | None = None
    """Memory clock of each level, shape [L], or None for one clock domain. Units: MHz."""
    busy: FloatArray | None = None
    """Device utilisation during each unit at each level (0..1), shape [U, L], or None."""
    counters: dict[str, FloatArray] = field(default_factory=dict)
    """Counters by name, each shape [U, L], as measured at that level."""
    meta: dict[str, str] = field(default_factory=dict)
    """``# key: value`` metadata (``idle_power_w``, ``source``, ``scenario``...)."""
    path: str = ""
    """Where it was read from (for messages), empty for tables built in memory."""

    @property
    def units(self) -> int:
        """Number of units of work."""
        return int(self.time_ms.shape[0])

    @property
    def idle_power_w(self) -> float:
        """Idle power from the metadata, NaN when absent. Units: W."""
        value = self.meta.get("idle_power_w")
        return float(value) if value is not None else math.nan


REQUIRED_COLUMNS = ("unit", "freq_mhz", "time_ms", "power_w")
OPTIONAL_COLUMNS = ("mem_freq_mhz", "busy")
SIGNIFICANT_DIGITS = 7
"""Values are written with 7 significant digits: far below any measurement's noise."""
_WRITE_CHUNK_ROWS = 200_000


def read_sweep(path: str | os.PathLike[str]) -> SweepTable:
    """Read a sweep table (DESIGN §5) from a CSV file.

    Rows may come in any order; the table is returned with units 0..U-1 and levels ascending (by
    core then memory clock). Raises `SweepFormatError`, naming the file and line, for an empty
    file, a missing or duplicate column, a cell that is not a finite number, a unit missing a
    level, a duplicate (unit, level) row, or a gap in the unit numbers.
    """
    name = str(path)
    try:
        data = read_regular(path, MAX_TABLE_BYTES)
    except OSError as exc:
        raise SweepFormatError(f"{name}: cannot read: {exc.strerror or exc}") from exc
    meta, columns, header_line, body_start = _read_preamble(data, name)
    buf = np.frombuffer(data, dtype=np.uint8, offset=body_start)
    values, status, row = parse_rows(buf, len(columns))
    if status != PARSE_OK:
        _raise_for_line(name, data[body_start:], row, header_line + 1 + row, columns, status)
    if values.shape[0] == 0:
        raise SweepFormatError(f"{name}:{header_line}: no rows after the header")
    first_line = header_line + 1
    table = _table_from_rows(name, meta, columns, values, first_line)
    # What no steady stream of work measured at every level gives (a table recorded while the
    # work changed): said to whoever reads it, `govd eval` included, never refused.
    from govd.formats.sweep_checks import implausible  # (it imports this module)

    for problem in implausible(table):
        log.warning("%s", problem)
    return table


def write_sweep(path: str | os.PathLike[str], table: SweepTable) -> None:
    """Write `table` as a sweep-table CSV (DESIGN §5): metadata, header, rows unit by unit.

    Counter columns follow in the table's order. Floats get `SIGNIFICANT_DIGITS` significant
    digits, so writing what was read reproduces the file. Raises `ValueError` for a table whose
    arrays disagree in shape or hold values that are not finite.
    """
    columns, arrays = _columns_of(table)
    units, levels = table.time_ms.shape
    for key, value in table.meta.items():
        if "\n" in f"{key}{value}" or ":" in key or not key.strip():
            raise ValueError(f"metadata {key!r}: keys need no ':' and neither may hold a newline")
    preamble = "".join(f"# {key}: {value}\n" for key, value in table.meta.items())
    integer_cols = np.array([c == "unit" for c in columns])
    with open(path, "wb") as out:
        out.write((preamble + ",".join(columns) + "\n").encode())
        for first in range(0, units, max(1, _WRITE_CHUNK_ROWS // levels)):
            last = min(units, first + max(1, _WRITE_CHUNK_ROWS // levels))
            block = np.empty(((last - first) * levels, len(columns)), dtype=np.float64)
            for c, array in enumerate(arrays):
                block[:, c] = array[first:last].ravel()
            out.write(format_rows(block, integer_cols, SIGNIFICANT_DIGITS).tobytes())


def _columns_of(table: SweepTable) -> tuple[list[str], list[FloatArray]]:
    """Column names and [U, L] arrays in file order, checked for shape and finiteness."""
    units, levels = table.time_ms.shape
    grid = np.broadcast_to
    columns = ["unit", "freq_mhz", "time_ms", "power_w"]
    arrays = [
        grid(np.arange(units, dtype=np.float64)[:, None], (units, levels)),
        grid(np.asarray(table.levels_mhz, dtype=np.float64)[None, :], (units, levels)),
        table.time_ms,
        table.power_w,
    ]
    if table.mem_levels_mhz is not None:
        columns.append("mem_freq_mhz")
        arrays.append(grid(np.asarray(table.mem_levels_mhz, np.float64)[None, :], (units, levels)))
    if table.busy is not None:
        columns.append("busy")
        arrays.append(table.busy)
    for name, counter in table.counters.items():
        if name in REQUIRED_COLUMNS or name in OPTIONAL_COLUMNS or not _is_column_name(name):
            raise ValueError(f"counter name {name!r} is not a usable column name")
        columns.append(name)
        arrays.append(counter)
    for name, array in zip(columns, arrays, strict=True):
        if np.shape(array) != (units, levels):
            raise ValueError(f"column {name}: shape {np.shape(array)}, expected {(units, levels)}")
        if not np.all(np.isfinite(array)):
            raise ValueError(f"column {name}: values must be finite")
    return columns, arrays


def _is_column_name(name: str) -> bool:
    return bool(name) and name == name.strip() and not any(c in name for c in ",#\n\r\"")


def _read_preamble(data: bytes, name: str) -> tuple[dict[str, str], list[str], int, int]:
    """Metadata, column names, the header's 1-based line and the byte offset of the first row."""
    meta: dict[str, str] = {}
    pos = 0
    line_no = 0
    while pos < len(data):
        end = data.find(b"\n", pos)
        end = len(data) if end < 0 else end
        line_no += 1
        try:
            line = data[pos:end].decode("utf-8").strip()
        except UnicodeDecodeError:
            raise SweepFormatError(f"{name}:{line_no}: not UTF-8 text") from None
        pos = end + 1
        if not line:
            continue
        if line.startswith("#"):
            key, sep, value = line[1:].partition(":")
            if sep and key.strip():
                meta[key.strip()] = value.strip()
            continue
        return meta, _parse_header(line, name, line_no), line_no, min(pos, len(data))
    raise SweepFormatError(f"{name}:{max(line_no, 1)}: empty file: no header line "
                           f"({','.join(REQUIRED_COLUMNS)},...)")


def _parse_header(line: str, name: str, line_no: int) -> list[str]:
    columns = [c.strip() for c in line.split(",")]
    seen: set[str] = set()
    for column in columns:
        if not _is_column_name(column):
            raise SweepFormatError(f"{name}:{line_no}: header has an empty or invalid column name "
                                   f"{column!r}")
        if column in seen:
            raise SweepFormatError(f"{name}:{line_no}: column {column!r} appears twice")
        seen.add(column)
    missing = [c for c in REQUIRED_COLUMNS if c not in seen]
    if missing:
        raise SweepFormatError(f"{name}:{line_no}: header lacks required column(s) "
                               f"{', '.join(missing)} (got {line!r})")
    return columns


def _raise_for_line(name: str, body: bytes, row: int, line_no: int, columns: list[str],
                    status: int) -> None:
    """Explain why body line `row` (file line `line_no`) did not parse; always raises."""
    lines = body.split(b"\n")
    text = lines[row].decode("utf-8", errors="replace").strip() if row < len(lines) else ""
    if status == PARSE_BLANK_LINE:
        raise SweepFormatError(f"{name}:{line_no}: blank line among the rows")
    cells = text.split(",")
    if len(cells) != len(columns):
        raise SweepFormatError(f"{name}:{line_no}: {len(cells)} cells, the header has "
                               f"{len(columns)}: {text!r}")
    bad = [(column, cell) for column, cell in zip(columns, cells, strict=True)
           if not _is_plain_number(cell)]
    column, cell = bad[0] if bad else (columns[0], cells[0])
    raise SweepFormatError(f"{name}:{line_no}: column {column}: {cell.strip()!r} is not a number")


def _is_plain_number(cell: str) -> bool:
    """What `parse_rows` accepts: a finite decimal, no nan/inf/underscores."""
    try:
        return math.isfinite(float(cell)) and "_" not in cell
    except ValueError:
        return False


def _table_from_rows(name: str, meta: dict[str, str], columns: list[str], values: FloatArray,
                     first_line: int) -> SweepTable:
    """Check the rows' (unit, level) grid and arrange the columns as [U, L] arrays."""
    def fail(row: int, message: str) -> SweepFormatError:
        return SweepFormatError(f"{name}:{first_line + int(row)}: {message}")

    col = {c: values[:, i] for i, c in enumerate(columns)}
    finite = np.isfinite(values).all(axis=1)
    if not finite.all():
        row = int(np.argmin(finite))
        raise fail(row, "value is not a finite number")
    for column, bad in (("time_ms", col["time_ms"] <= 0), ("power_w", col["power_w"] < 0),
                        ("freq_mhz", col["freq_mhz"] <= 0)):
        if bad.any():
            row = int(np.argmax(bad))
            raise fail(row, f"{column} {col[column][row]:g} is not positive")
    unit = col["unit"]
    bad_unit = (unit < 0) | (unit != np.floor(unit))
    if bad_unit.any():
        row = int(np.argmax(bad_unit))
        raise fail(row, f"unit {unit[row]:g} is not a non-negative integer")
    freq = col["freq_mhz"]
    mem = col.get("mem_freq_mhz", np.zeros_like(freq))
    cores, core_index = np.unique(freq, return_inverse=True)
    mems, mem_index = np.unique(mem, return_inverse=True)
    keys, level = np.unique(core_index * mems.size + mem_index, return_inverse=True)
    pairs = np.stack([cores[keys // mems.size], mems[keys % mems.size]], axis=1)  # core, then mem
    n_levels = pairs.shape[0]
    n_units = int(unit.max()) + 1
    cell = unit.astype(np.int64) * n_levels + level
    counts = np.bincount(cell, minlength=n_units * n_levels)
    if (counts > 1).any():
        dup_cell = int(np.argmax(counts > 1))
        rows = np.flatnonzero(cell == dup_cell)
        raise fail(rows[1], f"duplicate row for unit {dup_cell // n_levels} at "
                            f"{_level_name(pairs[dup_cell % n_levels], 'mem_freq_mhz' in col)} "
                            f"(first at line {first_line + int(rows[0])})")
    if (counts == 0).any():
        gap = int(np.argmax(counts == 0))
        gap_unit, gap_level = divmod(gap, n_levels)
        present = np.flatnonzero(unit == gap_unit)
        if present.size == 0:
            later = np.flatnonzero(unit > gap_unit)
            row = int(later[np.argmin(unit[later])])
            raise fail(row, f"unit {gap_unit} has no rows (units are numbered 0, 1, 2, ... "
                            "without gaps)")
        raise fail(int(present[0]), f"unit {gap_unit} has no row for "
                   f"{_level_name(pairs[gap_level], 'mem_freq_mhz' in col)} (every unit needs "
                   f"a row at each of the {n_levels} levels)")
    order = np.argsort(cell, kind="stable")

    def grid(column: str) -> FloatArray:
        return np.ascontiguousarray(col[column][order].reshape(n_units, n_levels))

    fixed = set(REQUIRED_COLUMNS) | set(OPTIONAL_COLUMNS)
    busy = grid("busy") if "busy" in col else None
    if busy is not None and ((busy < 0) | (busy > 1)).any():
        row = int(order[np.argmax(((busy < 0) | (busy > 1)).ravel())])
        raise fail(row, f"busy {col['busy'][row]:g} is outside 0..1")
    return SweepTable(
        levels_mhz=pairs[:, 0].copy(),
        time_ms=grid("time_ms"),
        power_w=grid("power_w"),
        mem_levels_mhz=pairs[:, 1].copy() if "mem_freq_mhz" in col else None,
        busy=busy,
        counters={c: grid(c) for c in columns if c not in fixed},
        meta=meta,
        path=name,
    )


def _level_name(pair: FloatArray, two_clocks: bool) -> str:
    if two_clocks:
        return f"freq_mhz={pair[0]:g}, mem_freq_mhz={pair[1]:g}"
    return f"freq_mhz={pair[0]:g}"
