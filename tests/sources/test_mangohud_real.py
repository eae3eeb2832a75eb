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
needs_data = pytest.mark.skipif(not LOGS, reason=f"{DATA} absent")


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


def follow(folder: Path) -> MangoHudSource:
    src = MangoHudSource(folder, rescan_s=0)
    assert src.drain() == []
    return src


def append(path: Path, data: bytes) -> None:
    with open(path, "ab") as f:
        f.write(data)


@needs_data
@pytest.mark.parametrize("path", LOGS, ids=[p.name for p in LOGS])
def test_every_real_log_appended_row_by_row_gives_each_row_once(tmp_path: Path,
                                                                path: Path) -> None:
    t = table(path)
    src = follow(tmp_path)
    live = tmp_path / name_of(path, "game")
    live.write_bytes(t.head)
    frames: list[Frame] = []
    for row in t.rows:
        append(live, row)
        frames += src.drain()
    if not t.columns:  # MangoHud 0.4 wrote no header: nothing to read, and govd says why
        assert frames == []
        assert any("no column header" in p and "0.6.9" in p for p in src.problems())
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
@pytest.mark.skipif(len(PER_FRAME) < 2, reason="needs two per-frame logs")
def test_two_logs_growing_at_once_give_each_row_once_to_its_program(tmp_path: Path) -> None:
    a, b = table(PER_FRAME[0]), table(PER_FRAME[1])
    src = follow(tmp_path)
    path_a, path_b = tmp_path / name_of(PER_FRAME[0], "game"), tmp_path / name_of(PER_FRAME[1],
                                                                                  "launcher")
    path_a.write_bytes(a.head)
    path_b.write_bytes(b.head)
    frames: list[Frame] = []
    for i in range(max(len(a.rows), len(b.rows))):
        for path, t in ((path_a, a), (path_b, b)):
            if i < len(t.rows):
                append(path, t.rows[i])
        if i % 7 == 0:  # drains between some rows, not all: several rows of each per drain
            frames += src.drain()
        if i % 50 == 0:  # the other log newer now and then: none is re-read when it switches
            os.utime(path_a if i % 100 else path_b)
    frames += src.drain()
    game = [f.gpu_time_ms for f in frames if f.app == "game"]
    launcher = [f.gpu_time_ms for f in frames if f.app == "launcher"]
    assert game == pytest.approx(a.usable_frame_ms())
    assert launcher == pytest.approx(b.usable_frame_ms())
    assert len(frames) == len(game) + len(launcher)


@needs_data
@pytest.mark.parametrize("name", ["glxgears-llvmpipe-mangohud0.6.8-perframe.csv",
                                  "glxgears-llvmpipe-mangohud0.6.8-interval100-versioned.csv"])
def test_log_written_whole_at_stop_is_reported_and_its_rows_not_counted(
        tmp_path: Path, name: str, caplog: pytest.LogCaptureFixture) -> None:
    if not (DATA / name).exists():
        pytest.skip(f"{name} absent")
    src = follow(tmp_path)
    (tmp_path / name_of(DATA / name, "glxgears")).write_bytes((DATA / name).read_bytes())
    with caplog.at_level(logging.WARNING):
        assert src.drain() == []  # MangoHud 0.6.8 wrote it when logging stopped: not live
        assert src.drain() == []
    problems = src.problems()
    assert len(problems) == 1 and "0.6.9" in problems[0] and "busy time" in problems[0]
    # the version line tells, when the log has one; otherwise that it appeared whole
    assert ("says MangoHud 0.6.8" in problems[0]) == ("versioned" in name)
    assert sum("written whole" in r.message for r in caplog.records) == 1
    assert src.stats()["stale_rows"] == len(table(DATA / name).usable_frame_ms())
    assert not src.live


@needs_data
@pytest.mark.skipif(not SAMPLED, reason="no sampled log")
def test_sampled_log_counts_frames_from_elapsed_not_rows(tmp_path: Path) -> None:
    t = table(SAMPLED[-1])
    src = follow(tmp_path)
    path = tmp_path / name_of(SAMPLED[-1], "overwatch")
    path.write_bytes(t.head)
    frames: list[Frame] = []
    for row in t.rows:
        append(path, row)
        frames += src.drain()
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
    with caplog.at_level(logging.WARNING):
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

    monkeypatch.setattr("govd.sources.mangohud.os.scandir", scandir)
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
