"""Mangled sweep tables and run traces: a `SweepFormatError`/`TraceFormatError` naming the file
and the line, never another exception."""

from __future__ import annotations

import re
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from govd.formats.sweep import SweepFormatError, SweepTable, read_sweep
from govd.formats.trace import RunTrace, TraceFormatError, read_trace

SWEEP = "# source: fuzz\nunit,freq_mhz,time_ms,power_w,busy,alu\n" + "".join(
    f"{u},{f},{1 + u + f / 1000:.3f},{10 + f / 100:g},0.5,{u * 3}\n"
    for u in range(3)
    for f in (300, 600, 900)
)
TRACE = "time_s,frame_time_ms,frame_count,freq_mhz,power_w,alu\n" + "".join(
    f"{t * 0.05:.2f},{'16.6' if t % 3 else ''},1,600,5.0,{t}\n" for t in range(8)
)
NASTY = [b"", b",", b"\n", b"\r\n", b"nan", b"inf", b"-1", b"1e999", b"0", b"\x00", b"\xff",
         b"#", b'"', b"1_0", b"  ", b"9" * 400, b"-", b".", b"+1", b"1e-400", b"\xc3"]


@st.composite
def mangled(draw: st.DrawFn, text: str) -> bytes:
    """``text`` with 1-5 cells, lines or bytes deleted, replaced, duplicated or cut off."""
    data = bytearray(text.encode())
    for _ in range(draw(st.integers(1, 5))):
        op = draw(st.sampled_from(["delete", "insert", "byte", "cut", "dup_line", "cell"]))
        at = draw(st.integers(0, len(data)))
        if op == "delete":
            del data[at : at + draw(st.integers(1, 20))]
        elif op == "insert":
            data[at:at] = draw(st.sampled_from(NASTY))
        elif op == "byte" and at < len(data):
            data[at] = draw(st.integers(0, 255))
        elif op == "cut":
            del data[at:]
        else:
            lines = bytes(data).split(b"\n")
            i = draw(st.integers(0, len(lines) - 1))
            if op == "dup_line":
                lines.insert(i, lines[draw(st.integers(0, len(lines) - 1))])
            else:
                cells = lines[i].split(b",")
                cells[draw(st.integers(0, len(cells) - 1))] = draw(st.sampled_from(NASTY))
                lines[i] = b",".join(cells)
            data = bytearray(b"\n".join(lines))
    return bytes(data)


FUZZ = settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


@pytest.fixture(scope="module")
def folder() -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix="govd-fuzz-") as d:
        yield Path(d)


def _names_file_and_line(message: str, path: Path) -> bool:
    return re.match(rf"^{re.escape(str(path))}:\d+: \S", message) is not None


@FUZZ
@given(data=mangled(SWEEP))
def test_mangled_sweep_table_reads_or_names_file_and_line(folder: Path, data: bytes) -> None:
    path = folder / "sweep.csv"
    path.write_bytes(data)
    try:
        table = read_sweep(path)
    except SweepFormatError as exc:
        assert _names_file_and_line(str(exc), path), str(exc)
    else:
        assert isinstance(table, SweepTable) and table.time_ms.shape[1] == table.levels_mhz.size


@FUZZ
@given(data=mangled(TRACE))
def test_mangled_run_trace_reads_or_names_file_and_line(folder: Path, data: bytes) -> None:
    path = folder / "trace.csv"
    path.write_bytes(data)
    try:
        trace = read_trace(path)
    except TraceFormatError as exc:
        assert _names_file_and_line(str(exc), path), str(exc)
    else:
        assert isinstance(trace, RunTrace) and trace.ticks >= 1


def test_trace_that_is_not_utf8_names_the_line(tmp_path: Path) -> None:
    path = tmp_path / "t.csv"
    path.write_bytes(TRACE.encode() + b"0.5,1,1,600,\xff5,1\n")
    with pytest.raises(TraceFormatError, match=rf"^{re.escape(str(path))}:10: not UTF-8"):
        read_trace(path)


def test_trace_line_numbers_count_lines_inside_quoted_cells(tmp_path: Path) -> None:
    path = tmp_path / "t.csv"
    header = TRACE.splitlines()[0]
    path.write_text(f'{header}\n0," \n",1,600,5,0\n0.05,x,1,600,5,0\n')
    with pytest.raises(TraceFormatError, match=r":4: column frame_time_ms: 'x'"):
        read_trace(path)


def test_missing_trace_is_a_trace_error_naming_the_file(tmp_path: Path) -> None:
    with pytest.raises(TraceFormatError, match=r"absent\.csv: cannot read"):
        read_trace(tmp_path / "absent.csv")
