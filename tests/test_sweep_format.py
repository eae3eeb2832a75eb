"""Reading and writing sweep tables (DESIGN §5): round trips and one clear error per bad file."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from govd.formats.csv_numbers import PARSE_OK, format_rows, parse_rows
from govd.formats.sweep import SweepFormatError, SweepTable, read_sweep, write_sweep


def _table(units: int = 5, two_clocks: bool = False) -> SweepTable:
    rng = np.random.default_rng(1)
    levels = np.array([200.0, 311.0, 511.0])
    mem = None
    if two_clocks:
        levels = np.array([500.0, 500.0, 1000.0, 1000.0])
        mem = np.array([500.0, 1000.0, 500.0, 1000.0])
    shape = (units, levels.size)
    return SweepTable(
        levels_mhz=levels,
        time_ms=rng.uniform(1, 30, shape),
        power_w=rng.uniform(0.5, 3, shape),
        mem_levels_mhz=mem,
        busy=rng.uniform(0, 1, shape),
        counters={"vs_active": rng.uniform(0, 1e6, shape), "z_fail": rng.uniform(0, 1e-4, shape)},
        meta={"idle_power_w": "0.3", "scenario": "art3"},
    )


def _write_text(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "sweep.csv"
    path.write_text(text)
    return path


GOOD = (
    "# idle_power_w: 0.25\n"
    "unit,freq_mhz,time_ms,power_w\n"
    "0,200,10,1\n0,400,6,2\n1,200,11,1.1\n1,400,6.5,2.1\n"
)


def test_round_trip_keeps_every_column_to_seven_digits(tmp_path: Path) -> None:
    table = _table()
    write_sweep(tmp_path / "a.csv", table)
    back = read_sweep(tmp_path / "a.csv")
    np.testing.assert_array_equal(back.levels_mhz, table.levels_mhz)
    np.testing.assert_allclose(back.time_ms, table.time_ms, rtol=1e-6)
    np.testing.assert_allclose(back.power_w, table.power_w, rtol=1e-6)
    assert back.busy is not None and table.busy is not None
    np.testing.assert_allclose(back.busy, table.busy, rtol=1e-6)
    assert list(back.counters) == ["vs_active", "z_fail"]
    np.testing.assert_allclose(back.counters["z_fail"], table.counters["z_fail"], rtol=1e-6)
    assert back.meta == table.meta
    assert back.idle_power_w == 0.3
    assert back.mem_levels_mhz is None


def test_rewriting_what_was_read_reproduces_the_file(tmp_path: Path) -> None:
    write_sweep(tmp_path / "a.csv", _table())
    write_sweep(tmp_path / "b.csv", read_sweep(tmp_path / "a.csv"))
    assert (tmp_path / "a.csv").read_bytes() == (tmp_path / "b.csv").read_bytes()


def test_two_clock_levels_are_pairs_sorted_by_core_then_memory(tmp_path: Path) -> None:
    table = _table(two_clocks=True)
    write_sweep(tmp_path / "a.csv", table)
    lines = (tmp_path / "a.csv").read_text().splitlines()
    assert lines[2].startswith("unit,freq_mhz,time_ms,power_w,mem_freq_mhz,busy,")
    back = read_sweep(tmp_path / "a.csv")
    assert back.mem_levels_mhz is not None
    assert list(zip(back.levels_mhz, back.mem_levels_mhz, strict=True)) == [
        (500, 500), (500, 1000), (1000, 500), (1000, 1000)]
    np.testing.assert_allclose(back.time_ms, table.time_ms, rtol=1e-6)


def test_rows_in_any_order_are_arranged_by_unit_and_level(tmp_path: Path) -> None:
    text = "unit,freq_mhz,time_ms,power_w\n1,400,4,2\n0,400,3,2\n1,200,8,1\n0,200,6,1\n"
    table = read_sweep(_write_text(tmp_path, text))
    np.testing.assert_array_equal(table.levels_mhz, [200, 400])
    np.testing.assert_array_equal(table.time_ms, [[6, 3], [8, 4]])


def test_columns_in_another_order_and_crlf_are_accepted(tmp_path: Path) -> None:
    text = "# source: lab\r\nfreq_mhz,unit,power_w,time_ms,busy\r\n200,0,1,5,0.5\r\n"
    table = read_sweep(_write_text(tmp_path, text))
    assert table.meta == {"source": "lab"}
    assert table.time_ms[0, 0] == 5 and table.busy is not None and table.busy[0, 0] == 0.5


@pytest.mark.parametrize(
    ("text", "line", "words"),
    [
        ("", 1, "empty file"),
        ("# idle_power_w: 1\n\n", 2, "empty file"),
        ("unit,freq_mhz,time_ms\n0,200,1\n", 1, "lacks required column(s) power_w"),
        ("unit,freq_mhz,time_ms,power_w,time_ms\n", 1, "'time_ms' appears twice"),
        ("unit,freq_mhz,,time_ms,power_w\n", 1, "empty or invalid column name"),
        ("unit,freq_mhz,time_ms,power_w\n", 1, "no rows"),
        ("unit,freq_mhz,time_ms,power_w\n0,200,1,1\n0,400,x,1\n", 3, "column time_ms: 'x'"),
        ("unit,freq_mhz,time_ms,power_w\n0,200,1,1\n0,400,nan,1\n", 3, "column time_ms: 'nan'"),
        ("unit,freq_mhz,time_ms,power_w\n0,200,1,1\n0,400,1\n", 3, "3 cells, the header has 4"),
        ("unit,freq_mhz,time_ms,power_w\n0,200,1,1,9\n", 2, "5 cells"),
        ("unit,freq_mhz,time_ms,power_w\n0,200,1,1\n\n0,400,1,1\n", 3, "blank line"),
        ("unit,freq_mhz,time_ms,power_w\n0,200,1,1\n0,400,1,1\n1,200,1,1\n", 4,
         "unit 1 has no row for freq_mhz=400"),
        ("unit,freq_mhz,time_ms,power_w\n0,200,1,1\n0,200,2,1\n", 3, "duplicate row for unit 0"),
        ("unit,freq_mhz,time_ms,power_w\n0,200,1,1\n2,200,1,1\n", 3, "unit 1 has no rows"),
        ("unit,freq_mhz,time_ms,power_w\n0.5,200,1,1\n", 2, "not a non-negative integer"),
        ("unit,freq_mhz,time_ms,power_w\n0,200,0,1\n", 2, "time_ms 0 is not positive"),
        ("unit,freq_mhz,time_ms,power_w,busy\n0,200,1,1,1.5\n", 2, "busy 1.5 is outside 0..1"),
    ],
)
def test_bad_file_raises_one_message_naming_file_and_line(
    tmp_path: Path, text: str, line: int, words: str
) -> None:
    path = _write_text(tmp_path, text)
    with pytest.raises(SweepFormatError) as caught:
        read_sweep(path)
    message = str(caught.value)
    assert message.startswith(f"{path}:{line}: "), message
    assert words in message
    assert "\n" not in message


def test_missing_file_is_a_sweep_format_error(tmp_path: Path) -> None:
    with pytest.raises(SweepFormatError, match="cannot read"):
        read_sweep(tmp_path / "absent.csv")


def test_writing_refuses_nonfinite_values(tmp_path: Path) -> None:
    table = _table()
    table.time_ms[1, 1] = np.nan
    with pytest.raises(ValueError, match="time_ms"):
        write_sweep(tmp_path / "a.csv", table)


def test_compiled_parser_agrees_with_python_float() -> None:
    rng = np.random.default_rng(7)
    values = rng.lognormal(0, 6, (500, 4)) * rng.choice([-1, 1], (500, 4))
    text = "\n".join(",".join(repr(float(v)) for v in row) for row in values) + "\n"
    parsed, status, _ = parse_rows(np.frombuffer(text.encode(), np.uint8), 4)
    assert status == PARSE_OK
    np.testing.assert_allclose(parsed, values, rtol=1e-15)


def test_compiled_formatter_matches_percent_g_to_seven_digits() -> None:
    rng = np.random.default_rng(8)
    values = rng.lognormal(0, 8, (400, 3)) * rng.choice([-1, 1], (400, 3))
    values[0] = [0.0, 1e-7, 123456789.0]
    text = format_rows(values, np.zeros(3, dtype=bool), 7).tobytes().decode()
    cells = [float(c) for line in text.splitlines() for c in line.split(",")]
    expected = [float(f"{v:.7g}") for v in values.ravel()]
    assert cells == expected
