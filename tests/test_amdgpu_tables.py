"""pp_dpm_sclk and pp_od_clk_voltage read as kernels print them (govd.device.amdgpu_tables)."""

from __future__ import annotations

import pytest

from govd.device.amdgpu_tables import (
    MAX_SCLK_LINES,
    od_sclk_pair,
    od_sections,
    parse_od,
    parse_sclk,
    parse_voltage_curve,
)
from govd.device.sysfs import SysfsIO, attribute_text, excerpt
from tests.amdgpu_cards import HAND_WRITTEN_OD


@pytest.mark.parametrize("unit", ["Mhz", "MHz"])
def test_discrete_table_parses_levels_and_running_index(unit):
    table = parse_sclk(f"0: 300{unit} \n1: 600{unit} *\n2: 900{unit} \n3: 1100{unit} \n")
    assert table.levels_mhz == (300, 600, 900, 1100) and not table.fine
    assert (table.running_index, table.current_mhz) == (1, 600)


@pytest.mark.parametrize("first", [0, 1], ids=["numbered-from-0", "numbered-from-1"])
def test_deep_sleep_line_is_the_clock_running_and_no_level(first):
    """Kernels from 6.17 number the levels after ``S:`` from 1; older ones from 0."""
    lines = "".join(f"{first + i}: {mhz}Mhz\n" for i, mhz in enumerate((615, 800, 888, 1000)))
    table = parse_sclk("S: 19Mhz *\n" + lines)
    assert table.levels_mhz == (615, 800, 888, 1000)
    assert (table.current_mhz, table.running_index, table.sleeping) == (19, None, True)


def test_fine_grained_table_in_deep_sleep_numbered_from_one_is_read_not_refused():
    table = parse_sclk("S: 19Mhz *\n1: 500Mhz \n2: 2520Mhz \n")
    assert (table.levels_mhz, table.fine, table.current_mhz) == ((500, 2520), True, 19)


def test_fine_grained_middle_line_is_the_running_clock_not_a_level():
    table = parse_sclk("0: 500Mhz \n1: 1283Mhz *\n2: 2660Mhz ")
    assert (table.levels_mhz, table.fine, table.current_mhz) == ((500, 2660), True, 1283)
    assert table.running_index is None


def test_apu_placeholder_middle_line_is_neither_level_nor_clock():
    """Van Gogh prints a fixed 1100 MHz middle line when the clock sits at min or max."""
    table = parse_sclk("0: 200Mhz \n1: 1100Mhz \n2: 1600Mhz *\n")
    assert (table.levels_mhz, table.current_mhz, table.running_index) == ((200, 1600), 1600, 1)


def test_current_clock_line_marked_f_or_unnumbered_is_the_clock_running():
    assert parse_sclk("F: 1283Mhz *\n0: 500Mhz \n1: 2660Mhz \n").current_mhz == 1283
    assert parse_sclk("0: 500Mhz \n1: 2660Mhz \n   1283Mhz *\n").current_mhz == 1283


def test_table_marking_no_line_is_read_with_the_clock_unknown():
    """An RX 5700 XT at its maximum marks nothing: read, not refused."""
    table = parse_sclk("0: 800Mhz\n1: 2100Mhz\n")
    assert (table.levels_mhz, table.current_mhz, table.running_index) == ((800, 2100), None, None)


def test_two_marks_give_a_clock_only_when_they_agree():
    assert parse_sclk("0: 0Mhz *\n1: 0Mhz *").current_mhz == 0
    assert parse_sclk("0: 500Mhz *\n1: 2000Mhz *").current_mhz is None


@pytest.mark.parametrize("text", [
    "nothing here", "1: 300Mhz *\n2: 600Mhz\n3: 900Mhz\n4: 1000Mhz",
    "0: 600Mhz *\n1: 300Mhz\n2: 900Mhz\n3: 1000Mhz", "0: 300Mhz\n0: 600Mhz\n1: 900Mhz\n2: 1000",
], ids=["no-levels", "from-one-without-sleep", "descending", "number-twice"])
def test_table_no_kernel_prints_is_refused_in_one_line(text):
    with pytest.raises(ValueError) as caught:
        parse_sclk(text)
    assert "\n" not in str(caught.value) and len(str(caught.value)) < 200


def test_endless_table_is_refused_without_parsing_it_all():
    text = "".join(f"{i}: {300 + i}Mhz\n" for i in range(10 * MAX_SCLK_LINES))
    with pytest.raises(ValueError, match=f"more than {MAX_SCLK_LINES}"):
        parse_sclk(text)


def test_nul_padding_is_dropped_at_every_read(tmp_path):
    """Some kernels pad an attribute to a page with NULs (at its end, or between the sections of
    pp_od_clk_voltage): "auto\\n\\0\\0..." is "auto", not another tool's performance level."""
    perf = tmp_path / "power_dpm_force_performance_level"
    perf.write_bytes(b"auto\n" + b"\0" * 4091)
    assert SysfsIO().read_text(perf) == "auto"
    od = attribute_text(b"OD_SCLK:\n0: 500Mhz\n1: 2660Mhz\n" + b"\0" * 300
                        + b"OD_RANGE:\nSCLK: 500Mhz 2800Mhz\n" + b"\0" * 900)
    assert parse_od(od).range_mhz("SCLK") == (500, 2800)


def test_excerpt_of_a_huge_file_is_one_short_printable_line():
    quoted = excerpt("\0" * 60_000 + "\x1b[2J\n")
    assert quoted.isprintable() and len(quoted) < 400 and "60005 characters" in quoted


def test_od_table_of_a_fine_grained_part():
    od = parse_od(HAND_WRITTEN_OD["rdna2_od"])
    assert od.sclk_mhz == (500, 2660) and od.range_mhz("SCLK") == (500, 3150)
    assert not od.has_sclk_offset and not od.apu_like
    assert od_sections(od.without("OD_SCLK"))["OD_MCLK"] == ("0: 97Mhz", "1: 1000MHz")


def test_polaris_od_points_are_no_min_max_pair():
    od = parse_od(HAND_WRITTEN_OD["polaris"])
    assert od.sclk_mhz is None and len(od.sclk_points()) == 8


@pytest.mark.parametrize("kind", ["rdna4", "rdna4_old"])
def test_rdna4_offset_is_never_read_as_clocks(kind):
    """Linux 6.12/6.13 printed the offset's limits as "0: -400Mhz / 1: 800Mhz": no clocks."""
    od = parse_od(HAND_WRITTEN_OD[kind])
    assert od.has_sclk_offset and od.sclk_mhz is None and od.range_mhz("SCLK") is None
    assert od.range_mhz("SCLK_OFFSET") == (-400, 800)


def test_apu_od_table_is_told_from_a_discrete_gpus():
    assert parse_od(HAND_WRITTEN_OD["phoenix"]).apu_like
    vangogh = "OD_SCLK:\n0: 1600Mhz\n1: 1600Mhz\nOD_RANGE:\nSCLK: 200Mhz 1600Mhz\n" \
              "CCLK: 1400Mhz 3500Mhz\nCCLK_RANGE in Core0:\n0: 1400Mhz\n1: 3500Mhz\n"
    assert parse_od(vangogh).apu_like and parse_od(vangogh).sclk_mhz == (1600, 1600)
    assert parse_od("\n").empty


def test_vddc_curve_gives_the_volts():
    assert parse_voltage_curve(HAND_WRITTEN_OD["rdna2_od"]) == [
        (500, 0.7), (1580, 0.85), (2660, 1.15)]
    assert parse_voltage_curve(HAND_WRITTEN_OD["polaris"])[0] == (300, 0.75)


@pytest.mark.parametrize("kind", sorted(HAND_WRITTEN_OD))
def test_quick_od_sclk_read_agrees_with_the_whole_parse(kind):
    """The tick's check reads only OD_SCLK: it must say what the full parse says."""
    text = HAND_WRITTEN_OD[kind]
    assert od_sclk_pair(text) == parse_od(text).sclk_mhz
    padded = attribute_text(text.replace("OD_RANGE:", "\0" * 300 + "OD_RANGE:").encode())
    assert od_sclk_pair(padded) == parse_od(padded).sclk_mhz
