"""MangoHud logs written to hurt: elapsed times that jump by years, absurd fps columns, links to
files govd must not read, lines of megabytes. Each costs a counted bad row at most; the daemon
keeps ticking."""

from __future__ import annotations

import json
import logging
import math
import os
from pathlib import Path

from govd.sources.mangohud import (
    HISTORY_READ_BYTES,
    MAX_APPS_SHOWN,
    MAX_LOGS_PER_DRAIN,
    MAX_OPEN_LOGS,
    MAX_PROBLEMS,
    MAX_TRACKED_LOGS,
    MangoHudSource,
)
from govd.sources.mangohud_folder import STEP_ENTRIES, FolderScan
from govd.sources.mangohud_log import MAX_FRAME_MS, MIN_FRAME_MS
from tests.sources.test_mangohud_source import PREAMBLE, append
from tests.sources.test_source_plugs import PERIOD_S, runner_on

HEADER = "fps,frametime,elapsed\n"
NAME = "game_2024-01-02_03-04-05.csv"


def following(folder: Path, head: str = PREAMBLE + HEADER + "60,16.6,0\n") -> tuple[
        MangoHudSource, Path]:
    path = folder / NAME
    path.write_text(head)
    src = MangoHudSource(folder, rescan_s=0)
    assert src.drain() == []
    return src, path


def test_row_after_a_huge_elapsed_jump_or_with_an_absurd_fps_stands_for_bounded_frames(
        tmp_path: Path) -> None:
    src, path = following(tmp_path)
    append(path, "60,16.6,16600000\n"                    # one frame later
                 "60,16.6,9000000000000000000\n"         # elapsed leaps ~285 years
                 "1e308,16.6,9000000000002000000\n"      # 2 s later, fps at the float's top
                 "60,16.6,9000000000003000000\n")
    frames = src.drain()
    assert len(frames) == 4
    longest_gap_ms = MAX_FRAME_MS
    for frame in frames:
        assert math.isfinite(frame.count) and 1 <= frame.count <= longest_gap_ms / MIN_FRAME_MS
    assert frames[1].count == 1.0  # a leap beyond any sample interval is a pause, not frames
    # What the daemon does with them: one tick, the frames it journals are bounded too.
    record = runner_on(tmp_path / "dev", 50).tick(0.0, PERIOD_S, frames)
    assert record is not None and record.frames <= sum(f.count for f in frames) + 1
    assert len(record.frame_times_ms) == len(frames)  # one entry a row, whatever it stands for


def test_frame_time_under_the_shortest_present_is_a_bad_row(tmp_path: Path) -> None:
    src, path = following(tmp_path)
    append(path, "60,1e-300,20000000\n60,16.6,36600000\n")
    frames = src.drain()
    assert [f.gpu_time_ms for f in frames] == [16.6]
    assert src.stats()["bad_rows"] == 1


def test_link_in_the_folder_is_not_followed_and_said_once(tmp_path: Path, caplog) -> None:
    caplog.set_level(logging.WARNING, logger="govd.sources.mangohud")  # whatever another test set
    folder, secret = tmp_path / "logs", tmp_path / "root-only.csv"
    folder.mkdir()
    # Whoever may write MangoHud's folder must not make govd (root) read another file for them.
    secret.write_text(PREAMBLE + HEADER + "60,16.6,0\n")
    src = MangoHudSource(folder, rescan_s=0)
    assert src.drain() == []
    (folder / NAME).symlink_to(secret)
    append(secret, "60,16.6,16600000\n60,16.6,33200000\n")
    assert src.drain() == [] and src.drain() == []
    said = [r.getMessage() for r in caplog.records if NAME in r.getMessage()]
    assert len(said) == 1 and "link" in said[0] and "\n" not in said[0]


def test_followed_log_replaced_by_a_link_gives_nothing_from_its_target(tmp_path: Path) -> None:
    src, path = following(tmp_path)
    secret = tmp_path.parent / f"{tmp_path.name}-secret.csv"
    secret.write_text(PREAMBLE + HEADER + "60,16.6,0\n60,16.6,16600000\n")
    path.unlink()
    path.symlink_to(secret)
    assert src.drain() == []
    append(secret, "60,16.6,33200000\n")
    assert src.drain() == []


def test_line_of_megabytes_is_dropped_whole_not_its_tail_taken_for_a_row(tmp_path: Path) -> None:
    src, path = following(tmp_path)
    # Longer than one read: its tail arrives alone, and looks like a row.
    append(path, "x" * 3_000_000 + ",16.6,20000000\n" + "60,8.0,36600000\n")
    frames = [f for _ in range(3_000_100 // src.max_read_bytes + 2) for f in src.drain()]
    assert [f.gpu_time_ms for f in frames] == [8.0]
    assert src.stats()["bad_rows"] == 1


def _open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def test_thousands_of_growing_logs_hold_few_files_open_and_each_row_comes_once(
        tmp_path: Path) -> None:
    # Whoever may write the folder could make govd hold a descriptor per log until it hits its
    # open-files limit (1024 under systemd), and then fail to open the GPU's own sysfs files.
    src = MangoHudSource(tmp_path, rescan_s=0)
    assert src.drain() == []
    logs = 3 * MAX_OPEN_LOGS
    for i in range(logs):
        (tmp_path / f"p{i}_2024-01-02_03-04-05.csv").write_text(
            PREAMBLE + HEADER + "60,16.6,0\n")
    before = _open_fds()
    got = []
    for _ in range(logs):
        frames = src.drain()
        assert _open_fds() - before <= MAX_OPEN_LOGS
        assert len({f.app for f in frames}) <= MAX_LOGS_PER_DRAIN
        got += frames
    assert sorted(f.app for f in got) == sorted(f"p{i}" for i in range(logs))
    src.close()


def test_hundreds_of_broken_logs_say_a_bounded_number_of_short_lines(
        tmp_path: Path, caplog) -> None:
    caplog.set_level(logging.WARNING, logger="govd.sources.mangohud")
    src = MangoHudSource(tmp_path, rescan_s=0)
    assert src.drain() == []
    junk = "a," * 1500 + "b\n"  # a 3 kB header with neither frametime nor fps
    for i in range(300):
        (tmp_path / f"junk{i}_2024-01-02_03-04-05.csv").write_text(PREAMBLE + junk + "1,2\n")
    for _ in range(100):
        src.drain()
    said = [r.getMessage() for r in caplog.records if r.name == "govd.sources.mangohud"]
    assert 1 <= len(said) <= MAX_PROBLEMS + 1
    assert all(len(line) < 1000 and "\n" not in line for line in said)
    assert 1 <= len(src.problems()) <= MAX_PROBLEMS
    assert all(len(line) < 1000 for line in src.report()["problems"])
    src.close()


def test_unusable_rows_are_said_once_per_log_with_why(tmp_path: Path, caplog) -> None:
    caplog.set_level(logging.WARNING, logger="govd.sources.mangohud")
    src, path = following(tmp_path)
    append(path, "60,16.6,1,2,16600000\n" * 5 + "60,16.6,33200000\n" + "60,abc,49800000\n" * 3)
    assert [f.gpu_time_ms for f in src.drain()] == [16.6]
    said = [r.getMessage() for r in caplog.records if NAME in r.getMessage()]
    assert len(said) == 1 and "5 fields" in said[0] and "3" in said[0]
    assert src.stats()["bad_rows"] == 8


def test_bytes_read_per_drain_are_bounded_over_all_logs(tmp_path: Path) -> None:
    # A sparse file of a terabyte, or dozens of big logs, must not cost each tick megabytes.
    src = MangoHudSource(tmp_path, rescan_s=0, max_read_bytes=1 << 20)
    assert src.drain() == []
    rows = PREAMBLE + HEADER + "60,16.6,0\n" * 100_000  # ~1 MB each
    for i in range(20):
        (tmp_path / f"big{i}_2024-01-02_03-04-05.csv").write_text(rows)
    for _ in range(5):
        before = sum(m.offset for m in src._logs.values())
        src.drain()
        assert sum(m.offset for m in src._logs.values()) - before <= src.max_read_bytes


def test_file_name_with_line_breaks_and_escapes_gives_a_one_line_program_name(
        tmp_path: Path, caplog) -> None:
    caplog.set_level(logging.WARNING, logger="govd.sources.mangohud")
    src = MangoHudSource(tmp_path, rescan_s=0)
    assert src.drain() == []
    # A name that would forge a line in `govd status` and colour the terminal reading it.
    name = "game\nproblem: none\x1b[2J_2024-01-02_03-04-05.csv"
    (tmp_path / name).write_text(PREAMBLE + "fps,x\n60,1\n60,1\n" + "x\n" * 3)
    frames = src.drain()
    assert frames and all(f.app.isprintable() for f in frames)
    report = src.report()
    assert all(app.isprintable() for app in report["frames_by_app"])
    assert report["problems"] and all(p.isprintable() for p in report["problems"])
    said = [r.getMessage() for r in caplog.records if r.name == "govd.sources.mangohud"]
    assert said and all(line.isprintable() for line in said)


def test_status_names_a_bounded_number_of_programs_and_forgets_removed_logs(
        tmp_path: Path) -> None:
    src = MangoHudSource(tmp_path, rescan_s=0)
    assert src.drain() == []
    for i in range(3 * MAX_APPS_SHOWN):
        (tmp_path / f"p{i}_2024-01-02_03-04-05.csv").write_text(
            PREAMBLE + HEADER + "60,16.6,0\n" * (i + 1))
    for _ in range(10):
        src.drain()
    shown = src.report()["frames_by_app"]
    assert len(shown) == MAX_APPS_SHOWN
    assert min(shown.values()) >= 2 * MAX_APPS_SHOWN  # the programs with most frames
    for log_file in tmp_path.glob("*.csv"):
        log_file.unlink()
    src.drain()
    assert src.report()["frames_by_app"] == {}


def test_twenty_thousand_junk_entries_hide_no_live_log_and_each_drain_looks_at_a_bound(
        tmp_path: Path, caplog, monkeypatch) -> None:
    # The round-3 attack: 20 000 entries in the folder, and every live log went unseen while
    # the message blamed old logs. Now the listing goes on over the drains until it is whole.
    caplog.set_level(logging.WARNING, logger="govd.sources.mangohud")
    looked: list[int] = []
    real_step = FolderScan.step

    def counted(scan: FolderScan, max_entries: int = STEP_ENTRIES) -> bool:
        before = scan.listing.entries
        done = real_step(scan, max_entries)
        looked.append(scan.listing.entries - before)
        return done

    monkeypatch.setattr(FolderScan, "step", counted)
    for i in range(20_000):
        (tmp_path / f"junk{i}").touch()
    src = MangoHudSource(tmp_path, rescan_s=0)
    assert src.drain() == []
    for i in range(3):
        (tmp_path / f"p{i}_2024-01-02_03-04-05.csv").write_text(PREAMBLE + HEADER)
    for _ in range(30):
        src.drain()
    assert len(src._sizes) == 3  # every live log found
    assert max(looked) <= STEP_ENTRIES  # and no drain looked at more than its step
    said = [r.getMessage() for r in caplog.records]
    assert not any("old logs" in line for line in said)
    assert any("20003 entries, 3 of them MangoHud logs" in line for line in said)


def test_a_folder_of_more_logs_than_followed_keeps_the_newest(tmp_path: Path) -> None:
    src = MangoHudSource(tmp_path, rescan_s=0)
    for i in range(MAX_TRACKED_LOGS + 10):
        path = tmp_path / f"old{i}_2024-01-02_03-04-05.csv"
        path.touch()
        os.utime(path, (1_000_000 + i, 1_000_000 + i))
    live = tmp_path / "game_2024-01-02_03-04-05.csv"
    live.write_text(PREAMBLE + HEADER)
    for _ in range(10):
        src.drain()
    assert len(src._sizes) == MAX_TRACKED_LOGS and live in src._sizes
    assert any(f"govd follows the {MAX_TRACKED_LOGS} written last; remove old logs" in p
               for p in src.problems())


def test_a_hard_link_in_the_folder_is_never_read_nor_quoted(tmp_path: Path) -> None:
    folder = tmp_path / "mangohud"
    folder.mkdir()
    secret = tmp_path / "shadow"
    secret.write_text("root:$6$secret-hash:19000:0:99999:7:::\n")
    secret.chmod(0o600)
    src = MangoHudSource(folder, rescan_s=0)
    assert src.drain() == []
    os.link(secret, folder / "x_2024-01-02_03-04-05.csv")  # protected_hardlinks = 0
    for _ in range(3):
        src.drain()
    report = json.dumps(src.report())
    assert "secret-hash" not in report and "root:" not in report
    assert "a hard link" in report


def test_a_log_truncated_by_a_few_bytes_is_not_counted_again(tmp_path: Path) -> None:
    src, path = following(tmp_path)
    append(path, "60,16.6,16600000\n60,16.6,33200000\n")
    assert len(src.drain()) == 2
    with open(path, "r+b") as f:  # a few bytes cut off its end
        f.truncate(path.stat().st_size - 3)
    append(path, "6\n")
    assert src.drain() == []  # what it holds was delivered once already
    append(path, "60,8.0,49800000\n")
    assert [f.gpu_time_ms for f in src.drain()] == [8.0]
    assert src.stats()["truncated"] == 1


def test_a_log_replaced_by_a_copy_is_not_counted_again(tmp_path: Path) -> None:
    src, path = following(tmp_path)
    append(path, "60,16.6,16600000\n60,16.6,33200000\n")
    assert len(src.drain()) == 2
    copy = tmp_path / "copy"
    copy.write_bytes(path.read_bytes())
    copy.rename(path)  # a new inode under the log's name, the same rows
    assert src.drain() == []
    append(path, "60,8.0,49800000\n")
    assert [f.gpu_time_ms for f in src.drain()] == [8.0]
    assert src.stats()["reopened"] == 1


def test_status_names_a_bounded_number_of_sampled_logs(tmp_path: Path) -> None:
    src = MangoHudSource(tmp_path, rescan_s=0)
    assert src.drain() == []
    for i in range(3 * MAX_APPS_SHOWN):  # rows 100 ms apart: sampled logs
        (tmp_path / f"p{i}_2024-01-02_03-04-05.csv").write_text(
            PREAMBLE + HEADER + "60,16.6,0\n60,16.6,100000000\n")
    for _ in range(10):
        src.drain()
    assert len(src.report()["sampled"]) == MAX_APPS_SHOWN


def test_hours_of_history_at_start_are_passed_over_in_a_few_drains(tmp_path: Path) -> None:
    # govd restarted while a game has logged for hours: its rows are history, only counted,
    # and its new rows must not wait for the history to trickle through the frames' share.
    history = "60,16.6,0\n" * 400_000  # 4 MB
    src, path = following(tmp_path, PREAMBLE + HEADER + history)
    append(path, "60,8.0,16600000\n")
    drains = len(history) // HISTORY_READ_BYTES + 2
    frames = [f for _ in range(drains) for f in src.drain()]
    assert [f.gpu_time_ms for f in frames] == [8.0]
    assert src.stats()["skipped_rows"] == 400_000
