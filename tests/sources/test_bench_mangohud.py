"""The MangoHud replay benchmark's own arithmetic (the replay itself: bench/bench_mangohud.py)."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

import pytest

from govd.sources.base import Frame

BENCH = Path(__file__).resolve().parents[2] / "bench"


@pytest.fixture
def bench(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    monkeypatch.syspath_prepend(str(BENCH))
    import bench_mangohud

    return bench_mangohud


def log(tmp_path: Path, rows: list[str]) -> Path:
    path = tmp_path / "x.csv"
    path.write_text("os,cpu\nLinux,cpu\nfps,frametime,elapsed\n" + "".join(r + "\n" for r in rows))
    return path


def test_per_frame_log_rate_is_rows_per_second_of_elapsed(tmp_path: Path,
                                                           bench: ModuleType) -> None:
    replay = bench.Replay("g", log(tmp_path, [f"99,10,{i * 10_000_000}" for i in range(11)]), 1.0)
    assert not replay.sampled and replay.own_fps == pytest.approx(100.0)


def test_sampled_log_rate_is_its_fps_column(tmp_path: Path, bench: ModuleType) -> None:
    rows = [f"{240 + i % 2},4.16,{i * 100_000_000}" for i in range(10)]
    replay = bench.Replay("g", log(tmp_path, rows), 1.0)
    assert replay.sampled and replay.own_fps == pytest.approx(240.5)


def test_rows_are_written_when_their_elapsed_time_has_come(tmp_path: Path,
                                                           bench: ModuleType) -> None:
    replay = bench.Replay("g", log(tmp_path, [f"100,10,{i * 10_000_000}" for i in range(5)]), 1.0)
    replay.start(tmp_path, 0.0)
    replay.grow(0.025)
    assert replay.written == 3 and not replay.done
    replay.grow(1.0)
    assert replay.done and len(replay.file.read_text().splitlines()) == 3 + 5  # type: ignore


def test_compare_counts_duplicates_and_missing_rows(tmp_path: Path, bench: ModuleType) -> None:
    rows = ["100,10,0", "100,11,10000000", "100,12,20000000"]
    replay = bench.Replay("g", log(tmp_path, rows), 1.0)
    frames = [Frame(10.0, app="g"), Frame(10.0, app="g"), Frame(12.0, app="g"),
              Frame(11.0, app="other")]
    got = bench.compare(replay, frames)
    assert (got["frames_delivered"], got["duplicates_or_spurious"], got["missing"]) == (3, 1, 1)
    assert not got["in_order"]
