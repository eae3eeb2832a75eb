"""Following one MangoHud CSV log: units, partial lines, new logs, truncation, replacement
(real logs, several logs at once, sampled and write-at-stop logs: test_mangohud_real.py)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from govd.sources.mangohud import MangoHudSource, app_of_log

PREAMBLE = (
    "os,cpu,gpu,ram,kernel,driver,cpuscheduler\n"
    "Debian 12,AMD Ryzen 7,AMD Radeon,32768,6.1.0,Mesa 23.0,\n"
)
NEW_HEADER = (
    "fps,frametime,cpu_load,cpu_power,gpu_load,cpu_temp,gpu_temp,gpu_core_clock,gpu_mem_clock,"
    "gpu_vram_used,gpu_power,ram_used,swap_used,process_rss,elapsed\n"
)
OLD_HEADER = (
    "fps,frametime,cpu_load,gpu_load,cpu_temp,gpu_temp,gpu_core_clock,gpu_mem_clock,"
    "gpu_vram_used,gpu_power,ram_used,elapsed\n"
)


def new_row(frame_ms: float, elapsed_ns: int = 0) -> str:
    fps = 1000 / frame_ms
    return f"{fps:.1f},{frame_ms},12,30,95,60,70,1800,1000,2.1,150,8.2,0,1.5,{elapsed_ns}\n"


def old_row(frame_us: int, elapsed_ns: int = 0) -> str:
    return f"{1e6 / frame_us:.1f},{frame_us},12,95,60,70,1800,1000,2.1,150,8.2,{elapsed_ns}\n"


def append(path: Path, text: str) -> None:
    with open(path, "a") as f:
        f.write(text)


def touch_newer(path: Path, than: Path) -> None:
    t = than.stat().st_mtime_ns + 1_000_000_000
    os.utime(path, ns=(t, t))


def started(
    folder: Path,
    head: str = PREAMBLE + NEW_HEADER + new_row(99.0),
    name: str = "game_2024-01-02_03-04-05.csv",
) -> tuple[MangoHudSource, Path]:
    """A source following a log that already holds ``head`` when it starts."""
    path = folder / name
    path.write_text(head)
    src = MangoHudSource(folder, rescan_s=0)
    assert src.drain() == []  # rows from before govd started are history
    return src, path


def test_new_builds_log_milliseconds(tmp_path: Path) -> None:
    src, path = started(tmp_path)
    append(path, new_row(16.6) + new_row(8.3))
    frames = src.drain()
    assert [f.gpu_time_ms for f in frames] == pytest.approx([16.6, 8.3])
    assert frames[0].app == "game"


def test_old_builds_log_microseconds(tmp_path: Path) -> None:
    src, path = started(tmp_path, PREAMBLE + OLD_HEADER + old_row(99000))
    append(path, old_row(16600) + old_row(8300))
    assert [f.gpu_time_ms for f in src.drain()] == pytest.approx([16.6, 8.3])


def test_unit_from_magnitude_when_there_is_no_fps_column(tmp_path: Path) -> None:
    src, path = started(tmp_path, PREAMBLE + "frametime,elapsed\n")
    append(path, "16600,1\n17000,2\n")
    assert [f.gpu_time_ms for f in src.drain()] == pytest.approx([16.6, 17.0])


def test_versioned_log_header_is_found(tmp_path: Path) -> None:
    versioning = "v1\n0.7.1\n---SYSTEM INFO---\n"
    src, path = started(tmp_path, versioning + PREAMBLE + "---FRAME METRICS---\n" + NEW_HEADER)
    append(path, new_row(10.0))
    assert [f.gpu_time_ms for f in src.drain()] == pytest.approx([10.0])


def test_partial_line_waits_for_its_newline(tmp_path: Path) -> None:
    src, path = started(tmp_path)
    row = new_row(12.5)
    append(path, row[:7])
    assert src.drain() == []
    append(path, row[7:])
    assert [f.gpu_time_ms for f in src.drain()] == pytest.approx([12.5])
    assert src.stats().get("bad_rows", 0) == 0


def test_bad_rows_are_skipped_and_counted(tmp_path: Path) -> None:
    src, path = started(tmp_path)
    append(path, "60,16.6,12\n" + new_row(10.0) + new_row(10.0).replace("10.0", "x", 1) + "\n")
    append(path, new_row(10.0).replace(",10.0,", ",-3,") + new_row(20.0))
    assert [f.gpu_time_ms for f in src.drain()] == pytest.approx([10.0, 20.0])
    assert src.stats()["bad_rows"] == 3  # wrong field count, non-numeric, negative
    assert src.stats()["rows"] == 5


def test_header_without_frame_time_is_reported_once_and_fps_used(tmp_path: Path) -> None:
    src, path = started(tmp_path, PREAMBLE + "fps,gpu_load,elapsed\n")
    append(path, "50,90,1\n")
    assert [f.gpu_time_ms for f in src.drain()] == pytest.approx([20.0])
    assert len(src.errors) == 1 and "1000/fps" in src.errors[0]


def test_unusable_header_is_reported_once_then_newer_log_used(tmp_path: Path) -> None:
    src, bad = started(tmp_path, PREAMBLE + "cpu_load,gpu_load\n")
    append(bad, "1,2\n3,4\n")
    assert src.drain() == [] and src.drain() == []
    assert len(src.errors) == 1 and "neither" in src.errors[0]
    good = tmp_path / "g_2024-01-02_03-05-00.csv"
    good.write_text(PREAMBLE + NEW_HEADER + new_row(5.0))
    touch_newer(good, bad)
    assert [f.gpu_time_ms for f in src.drain()] == pytest.approx([5.0])


def test_new_log_is_read_from_its_start_beside_the_old(tmp_path: Path) -> None:
    src, old = started(tmp_path)
    append(old, new_row(16.0))
    assert len(src.drain()) == 1
    new = tmp_path / "other_2024-01-02_04-00-00.csv"
    new.write_text(PREAMBLE + NEW_HEADER + new_row(7.0) + new_row(8.0))
    touch_newer(new, old)
    frames = src.drain()
    assert [f.gpu_time_ms for f in frames] == pytest.approx([7.0, 8.0])
    assert frames[0].app == "other" and src.stats()["logs"] == 2


def test_summary_files_are_not_followed(tmp_path: Path) -> None:
    src, path = started(tmp_path)
    summary = tmp_path / "game_2024-01-02_03-04-05_summary.csv"
    summary.write_text("0.1% Min FPS,1% Min FPS\n1,2\n")
    touch_newer(summary, path)
    append(path, new_row(9.0))
    assert [f.gpu_time_ms for f in src.drain()] == pytest.approx([9.0])


def test_a_log_rewritten_shorter_gives_only_the_rows_appended_after(tmp_path: Path) -> None:
    # Not what MangoHud does (a new file per launch): what the file holds then is history, so
    # no row is ever delivered twice (tests/sources/test_mangohud_hostile.py: a few bytes cut).
    src, path = started(tmp_path)
    append(path, new_row(16.0))
    src.drain()
    path.write_text(PREAMBLE + NEW_HEADER + new_row(11.0))  # same inode, shorter
    assert src.drain() == []
    append(path, new_row(12.0))
    assert [f.gpu_time_ms for f in src.drain()] == pytest.approx([12.0])
    assert src.stats()["truncated"] == 1


def test_replaced_log_is_reopened_and_its_new_rows_read(tmp_path: Path) -> None:
    src, path = started(tmp_path)
    replacement = tmp_path / "tmp.part"
    replacement.write_text(PREAMBLE + OLD_HEADER + old_row(25000) + old_row(26000) * 40)
    os.replace(replacement, path)
    assert src.drain() == []  # what it held when it took the name: history
    append(path, old_row(27000))
    frames = src.drain()
    assert len(frames) == 1 and frames[0].gpu_time_ms == pytest.approx(27.0)
    assert src.stats()["reopened"] == 1


def test_empty_or_missing_folder_gives_no_frames(tmp_path: Path) -> None:
    assert MangoHudSource(tmp_path / "missing").drain() == []
    assert MangoHudSource(tmp_path).drain() == []


def test_app_name_comes_from_the_file_name() -> None:
    assert app_of_log(Path("my_game_2024-01-02_03-04-05.csv")) == "my_game"
    assert app_of_log(Path("custom.csv")) == "custom"
