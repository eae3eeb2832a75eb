"""Mangled sweep tables and run traces: a `SweepFormatError`/`TraceFormatError` naming the file
and the line, never another exception."""

from __future__ import annotations

import random
import re
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bench.bench_fuzz import SWEEP, TRACE, mangle
from govd.formats.sweep import SweepFormatError, SweepTable, read_sweep
from govd.formats.trace import RunTrace, TraceFormatError, read_trace

FUZZ = settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


@pytest.fixture(scope="module")
def folder() -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix="govd-fuzz-") as d:
        yield Path(d)


@pytest.mark.parametrize(("base", "reader", "error"), [
    (SWEEP, read_sweep, SweepFormatError),
    (TRACE, read_trace, TraceFormatError),
], ids=["sweep", "trace"])
@FUZZ
@given(rng=st.randoms(use_true_random=False))
def test_mangled_table_reads_or_raises_its_error_naming_file_and_line(
    folder: Path, base: str, reader: Callable[[Path], object], error: type[Exception],
    rng: random.Random,
) -> None:
    path = folder / "table.csv"
    path.write_bytes(mangle(rng, base))
    try:
        table = reader(path)
    except error as exc:
        assert re.match(rf"^{re.escape(str(path))}:\d+: \S", str(exc)), str(exc)
    else:
        assert isinstance(table, SweepTable | RunTrace)


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
