"""The MangoHud source driven by real logs (``../shared/data/mangohud``), as games write them:
appended row by row, two at once, written whole at stop, sampled; and a folder govd cannot read."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest

from govd.sources.base import Frame
from govd.sources.mangohud import MangoHudSource
from govd.sources.mangohud_log import MAX_FRAME_MS

DATA = Path(__file__).resolve().parents[2] / ".." / "shared" / "data" / "mangohud"
LOGS = sorted(DATA.glob("*.csv")) if DATA.is_dir() else []
PER_FRAME = [p for p in LOGS if "perframe" in p.name]
SAMPLED = [p for p in LOGS if "interval100" in p.name]
AT_STOP = [p for p in LOGS if "0.6.8" in p.name]  # the data README: written when logging stops
LIVE = [p for p in LOGS if p not in AT_STOP and "0.4" not in p.name]
needs_data = pytest.mark.skipif(not LOGS, reason=f"{DATA} absent")
SOURCE_LOGGER = "govd.sources.mangohud"
"""Captured at its own level: the fuzz bench, run in-process earlier, leaves "govd" at ERROR."""


class Table:
    """A real log split the way a test needs it: the lines before the first row, the rows, and
    what each row says (read here with the csv header, independently of the source)."""

    def __init__(self, path: Path) -> None:
        lines = path.read_bytes().splitlines(keepends=True)
        header = next((i for i, line in enumerate(lines) if line.startswith(b"fps,")), None)
        self.head = b"".join(lines[: (header + 1) if header is not None else 0])
        self.rows = [line for line in lines[len(self.head.splitlines()):] if line.strip()]
        self.columns = lines[header].decode().strip().split(",") if header is not None else []
        self.scale_to_ms = 1e-3 if "0.6.8" in path.name else 1.0  # the data README: 0.6.8 is µs

    def values(self, row: bytes) -> dict[str, float]:
        return {c: float(v) for c, v in zip(self.columns, row.decode().strip().split(","),
                                             strict=True)}

    def usable_frame_ms(self) -> list[float]:
        """Each row's frame time in ms (µs logs: the 0.6.8 ones), rows out of limits left out."""
        times = [self.values(r)["frametime"] * self.scale_to_ms for r in self.rows]
        return [t for t in times if 0 < t <= MAX_FRAME_MS]


table = Table


def name_of(path: Path, app: str) -> str:
    """The file name MangoHud would give ``app``'s log (the real log's own name is not one)."""
    return f"{app}_2026-01-02_03-04-05.csv"


class LogClock:
    """The clock of a replay at the log's own pace: a log created at 0 s, each row read once the
    time its ``elapsed`` says has come (rows replayed faster than they were written would look
    like a log written whole at stop)."""

    def __init__(self) -> None:
        self.now_s = 0.0

    def __call__(self) -> float:
        return self.now_s

    def reached(self, t: Table, row: bytes) -> None:
        elapsed = t.values(row).get("elapsed") if t.columns else None
        self.now_s = max(self.now_s, elapsed / 1e9 if elapsed is not None else self.now_s)


def follow(folder: Path, clock: LogClock | None = None) -> MangoHudSource:
    """A source following ``folder``, which it listed once (empty) at 0 s."""
    src = MangoHudSource(folder, rescan_s=0, clock=clock or LogClock())
    assert src.drain() == []
    return src


def append(path: Path, data: bytes) -> None:
    with open(path, "ab") as f:
        f.write(data)


def replay_live(folder: Path, t: Table, app: str) -> tuple[MangoHudSource, list[Frame]]:
    """``t`` written into ``folder`` as ``app``'s new log, row by row at its own pace, drained
    after each row; the source and every frame it gave."""
    clock = LogClock()
    src = follow(folder, clock)
    live = folder / f"{app}_2026-01-02_03-04-05.csv"
    live.write_bytes(t.head)
    frames: list[Frame] = []
    for row in t.rows:
        append(live, row)
        clock.reached(t, row)
        frames += src.drain()
    return src, frames


@needs_data
@pytest.mark.parametrize("path", LOGS, ids=[p.name for p in LOGS])
def test_every_real_log_appended_row_by_row_gives_each_row_once(tmp_path: Path,
                                                                path: Path) -> None:
    t = table(path)
    src, frames = replay_live(tmp_path, t, "game")
    if not t.columns:  # MangoHud 0.4 wrote no header: nothing to read, and govd says why
        assert frames == []
        assert any("no column header" in p and "0.6.9" in p for p in src.problems())
        return
    if path in AT_STOP:  # its version line or µs frame times: a MangoHud that writes at stop
        assert frames == []
        assert any("written whole" in p and "0.6.9" in p for p in src.problems())
        assert src.stats()["stale_rows"] == len(t.usable_frame_ms())
        return
    assert all(f.app == "game" for f in frames)
    if path in PER_FRAME:
        assert [f.gpu_time_ms for f in frames] == pytest.approx(t.usable_frame_ms())
        assert all(f.count == 1.0 for f in frames)
    else:  # sampled: one row per 100 ms, each standing for the frames presented meanwhile
        assert len(frames) == len(t.usable_frame_ms())
        assert sum(f.count for f in frames) > 10 * len(frames)
    assert src.stats()["accepted"] == len(frames)


@needs_data
@pytest.mark.skipif(len(LIVE) < 2, reason="needs two logs of MangoHud >= 0.6.9")
def test_logs_growing_at_once_give_each_row_once_to_its_program(tmp_path: Path) -> None:
    tables, clock = [table(p) for p in LIVE], LogClock()
    src = follow(tmp_path, clock)
    paths = [tmp_path / name_of(p, f"app{i}") for i, p in enumerate(LIVE)]
    for path, t in zip(paths, tables, strict=True):
        path.write_bytes(t.head)
    frames: list[Frame] = []
    for i in range(max(len(t.rows) for t in tables)):
        for path, t in zip(paths, tables, strict=True):
            if i < len(t.rows):
                append(path, t.rows[i])
                clock.reached(t, t.rows[i])
        if i % 7 == 0:  # drains between some rows, not all: several rows of each per drain
            frames += src.drain()
        if i % 50 == 0:  # another log newest now and then: none is re-read when that changes
            os.utime(paths[(i // 50) % len(paths)])
    frames += src.drain()
    for i, t in enumerate(tables):
        assert [f.gpu_time_ms for f in frames if f.app == f"app{i}"] == pytest.approx(
            t.usable_frame_ms())
    assert len(frames) == sum(len(t.usable_frame_ms()) for t in tables)


@needs_data
@pytest.mark.parametrize(("name", "said"), [
    ("glxgears-llvmpipe-mangohud0.6.8-perframe.csv", "frame times in µs"),
    ("glxgears-llvmpipe-mangohud0.6.8-interval100-versioned.csv", "says MangoHud 0.6.8"),
    ("vkcube-rtx2060-mangohud0.8.2-perframe.csv", "appeared holding 0.8 s of rows"),  # half
])
def test_log_written_whole_at_stop_is_reported_and_none_of_its_rows_counted(
        tmp_path: Path, name: str, said: str, caplog: pytest.LogCaptureFixture) -> None:
    if not (DATA / name).exists():
        pytest.skip(f"{name} absent")
    data = (DATA / name).read_bytes()
    src = follow(tmp_path)
    log = tmp_path / name_of(DATA / name, "glxgears")
    # Written at stop, as the real 0.6.8 does, in pieces that span several drains.
    cut = data.index(b"\n", len(data) // 2) + 1
    with caplog.at_level(logging.WARNING, logger=SOURCE_LOGGER):
        log.write_bytes(data[:cut])
        assert src.drain() == []
        append(log, data[cut:])
        for _ in range(len(data) // src.max_read_bytes + 1):  # a bounded read per drain
            assert src.drain() == []
    problems = src.problems()
    assert len(problems) == 1 and "0.6.9" in problems[0] and "busy time" in problems[0]
    assert f"({said})" in problems[0]
    assert sum("written whole" in r.message for r in caplog.records) == 1
    assert src.stats()["stale_rows"] == len(table(DATA / name).usable_frame_ms())
    assert not src.live


@needs_data
@pytest.mark.skipif(not SAMPLED, reason="no sampled log")
def test_sampled_log_counts_frames_from_elapsed_not_rows(tmp_path: Path) -> None:
    t = table(SAMPLED[-1])
    src, frames = replay_live(tmp_path, t, "overwatch")
    first, last = t.values(t.rows[0]), t.values(t.rows[-1])
    span_s = (last["elapsed"] - first["elapsed"]) / 1e9
    fps = [t.values(r)["fps"] for r in t.rows]
    log_fps = sum(fps) / len(fps)  # the log's own frame rate
    counted_fps = sum(f.count for f in frames[1:]) / span_s  # the first row opens the span
    assert counted_fps == pytest.approx(log_fps, rel=0.02)
    assert len(frames) / span_s < 11  # ten rows a second: counting rows would say 10 FPS
    assert src.report()["sampled"] == ["overwatch"]


def test_sampled_rows_stand_for_the_frames_between_them(tmp_path: Path) -> None:
    src = follow(tmp_path)
    path = tmp_path / "game_2026-01-02_03-04-05.csv"
    path.write_text("fps,frametime,elapsed\n")
    # 240 FPS logged every 100 ms: each row after the first stands for 24 frames
    append(path, b"".join(f"240,4.1667,{100_000_000 * (i + 1)}\n".encode() for i in range(5)))
    frames = src.drain()
    assert [f.count for f in frames] == pytest.approx([1, 24, 24, 24, 24])
    assert [f.gpu_time_ms for f in frames] == pytest.approx([4.1667] * 5)


def test_per_frame_rows_count_one_frame_each_even_through_a_hitch(tmp_path: Path) -> None:
    src = follow(tmp_path)
    path = tmp_path / "game_2026-01-02_03-04-05.csv"
    path.write_text("fps,frametime,elapsed\n")
    # fps is averaged over 500 ms; a 120 ms hitch is still one frame, 120 ms after the last
    append(path, b"100,10,10000000\n100,10,20000000\n98,120,140000000\n97,10,150000000\n")
    assert [f.count for f in src.drain()] == [1.0, 1.0, 1.0, 1.0]
    assert src.report()["sampled"] == []


def test_missing_folder_is_reported_once_loudly_counted_and_recovered(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    folder = tmp_path / "mangohud"
    src = MangoHudSource(folder, rescan_s=0)
    with caplog.at_level(logging.WARNING, logger=SOURCE_LOGGER):
        for _ in range(3):
            assert src.drain() == []
    loud = [r for r in caplog.records if "does not exist" in r.message]
    assert len(loud) == 1 and loud[0].levelno == logging.ERROR
    assert src.stats()["folder_unreadable"] == 3
    assert "does not exist" in src.report()["problems"][0]
    folder.mkdir()
    log = folder / "game_2026-01-02_03-04-05.csv"
    log.write_text("fps,frametime,elapsed\n")
    assert src.drain() == []
    append(log, b"60,16.6,1000\n")
    assert [f.gpu_time_ms for f in src.drain()] == pytest.approx([16.6])
    assert src.problems() == [] and src.live


def test_folder_that_is_a_file_is_reported(tmp_path: Path) -> None:
    folder = tmp_path / "mangohud"
    folder.write_text("")
    src = MangoHudSource(folder, rescan_s=0)
    assert src.drain() == []
    assert "is not a folder" in src.problems()[0]


def test_unreadable_folder_is_reported(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = tmp_path / "mangohud"
    folder.mkdir()

    def scandir(path: os.PathLike[str]) -> None:  # what ProtectHome= does to $HOME
        raise PermissionError(13, "Permission denied", str(path))

    monkeypatch.setattr("govd.sources.mangohud_folder.os.scandir", scandir)
    src = MangoHudSource(folder, rescan_s=0)
    assert src.drain() == []
    assert "permission denied" in src.problems()[0]


def test_rows_present_at_start_are_history_even_when_their_log_grows_later(
        tmp_path: Path) -> None:
    old = tmp_path / "game_2026-01-02_03-04-05.csv"
    old.write_text("fps,frametime,elapsed\n" + "".join(f"60,16.6,{i}\n" for i in range(50)))
    src = follow(tmp_path)
    append(old, b"50,20,1000000000\n")
    assert [f.gpu_time_ms for f in src.drain()] == pytest.approx([20.0])
    assert src.stats()["skipped_rows"] == 50


def test_not_live_without_recent_frames(tmp_path: Path) -> None:
    now = [0.0]
    src = MangoHudSource(tmp_path, rescan_s=0, clock=lambda: now[0])
    path = tmp_path / "game_2026-01-02_03-04-05.csv"
    path.write_text("fps,frametime,elapsed\n")
    src.drain()
    assert not src.live  # no frame yet: the daemon uses busy time
    append(path, b"60,16.6,1000\n")
    src.drain()
    assert src.live
    now[0] = 10.0
    assert not src.live


def test_idle_log_is_closed_and_read_on_from_its_offset_when_it_grows(tmp_path: Path) -> None:
    now = [0.0]
    src = MangoHudSource(tmp_path, rescan_s=0, clock=lambda: now[0])
    src.drain()
    path = tmp_path / "game_2026-01-02_03-04-05.csv"
    path.write_text("fps,frametime,elapsed\n")
    src.drain()
    append(path, b"60,16.6,1000\n")
    assert len(src.drain()) == 1
    now[0] = 100.0  # idle past IDLE_CLOSE_S: the file is closed
    assert src.drain() == []
    assert all(m._file is None for m in src._logs.values())
    append(path, b"50,20,2000\n")
    now[0] = 101.0
    assert [f.gpu_time_ms for f in src.drain()] == pytest.approx([20.0])  # not the first again


def test_logs_found_when_an_unreadable_folder_becomes_readable_are_history(
        tmp_path: Path) -> None:
    folder = tmp_path / "mangohud"
    src = MangoHudSource(folder, rescan_s=0)
    assert src.drain() == []  # missing at start
    folder.mkdir()
    old = folder / "game_2026-01-02_03-04-05.csv"
    old.write_text("fps,frametime,elapsed\n" + "".join(f"60,16.6,{i}\n" for i in range(30)))
    assert src.drain() == []  # the rows written before govd could look are not this tick's
    append(old, b"50,20,1000000000\n")
    assert [f.gpu_time_ms for f in src.drain()] == pytest.approx([20.0])
