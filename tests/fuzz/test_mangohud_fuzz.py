"""A followed MangoHud log that is garbled, cut, replaced, rotated or truncated under the
follower: `drain` never raises and every frame it gives is a usable frame time."""

from __future__ import annotations

import os
import signal
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from govd.sources.mangohud import MAX_FRAME_MS, MangoHudSource
from govd.sources.mangohud_log import MangoHudLog
from tests.sources.test_mangohud_source import NEW_HEADER, OLD_HEADER, PREAMBLE, new_row, old_row

HEADERS = [NEW_HEADER, OLD_HEADER, "fps,elapsed\n", "cpu_load,gpu_load\n", "frametime\n",
           "elapsed,frametime,fps\n", "fps,,frametime,fps\n", ",\n"]
GARBAGE = ["", ",", ",,,,", "nan,nan", "-1,-1", "inf,1e999", "0,0", "1_000,1", "\x00\x00",
           "\ufeff", "é,ü", "9" * 5000, "os,cpu", "---", "v1"]


def rows() -> st.SearchStrategy[str]:
    """One text line: a good row of either build, garbage, or a good row with a cell cut."""
    good = st.one_of(
        st.floats(0.1, 200).map(new_row),
        st.integers(100, 200_000).map(old_row),
    )
    cut = st.tuples(good, st.integers(0, 40)).map(lambda pair: pair[0][: pair[1]])
    return st.one_of(good, cut, st.sampled_from(GARBAGE).map(lambda g: g + "\n"))


actions = st.lists(
    st.one_of(
        st.tuples(st.just("append"), st.lists(rows(), max_size=8).map("".join)),
        st.tuples(st.just("append_bytes"), st.binary(max_size=64)),
        st.tuples(st.just("header"), st.sampled_from(HEADERS)),
        st.tuples(st.just("truncate"), st.integers(0, 400)),
        st.tuples(st.just("replace"), st.sampled_from(HEADERS)),
        st.tuples(st.just("rotate"), st.sampled_from(HEADERS)),
        st.tuples(st.just("remove"), st.none()),
    ),
    max_size=14,
)


@pytest.fixture(scope="module")
def scratch() -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix="govd-fuzz-") as d:
        yield Path(d)


def _apply(folder: Path, current: Path, action: tuple[str, object], step: int) -> Path:
    kind, arg = action
    if kind in ("append", "header"):
        with open(current, "a", encoding="utf-8") as f:
            f.write(str(arg))
    elif kind == "append_bytes":
        with open(current, "ab") as f:
            f.write(arg)  # type: ignore[arg-type]
    elif kind == "truncate" and current.exists():
        os.truncate(current, min(int(arg), current.stat().st_size))  # type: ignore[call-overload]
    elif kind == "replace":
        part = folder / "part.tmp"
        part.write_text(PREAMBLE + str(arg))
        os.replace(part, current)
    elif kind == "rotate":
        current = folder / f"game{step}_2024-01-02_03-04-{step % 60:02d}.csv"
        current.write_text(PREAMBLE + str(arg))
        t = 2_000_000_000_000_000_000 + step * 1_000_000_000
        os.utime(current, ns=(t, t))
    elif kind == "remove":
        current.unlink(missing_ok=True)
    return current


@settings(max_examples=150, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(head=st.sampled_from(HEADERS), script=actions)
def test_followed_log_under_any_changes_gives_only_usable_frames(
    scratch: Path, head: str, script: list[tuple[str, object]]
) -> None:
    folder = Path(tempfile.mkdtemp(dir=scratch))
    current = folder / "game_2024-01-02_03-04-05.csv"
    current.write_text(PREAMBLE + head)
    src = MangoHudSource(folder, rescan_s=0)
    returned = len(src.drain())
    for step, action in enumerate(script):
        current = _apply(folder, current, action, step)
        frames = src.drain()
        returned += len(frames)
        assert all(0 < f.gpu_time_ms <= MAX_FRAME_MS for f in frames)
    assert src.stats().get("accepted", 0) == returned
    src.close()


class Blocked(Exception):
    """Raised by the alarm: deliberately not an OSError, which the follower would swallow."""


def _alarm(signum: int, frame: object) -> None:
    raise Blocked("drain blocked")


def test_log_replaced_by_a_fifo_does_not_block_the_follower(tmp_path: Path) -> None:
    path = tmp_path / "game_2024-01-02_03-04-05.csv"
    path.write_text(PREAMBLE + NEW_HEADER)
    src = MangoHudSource(tmp_path, rescan_s=0)
    src.drain()
    path.unlink()
    os.mkfifo(path)  # opening a FIFO for reading waits for a writer: it must not be opened so
    previous = signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(5)
    errors: list[str] = []
    try:
        assert src.drain() == []  # the folder listing passes over what is not a regular file
        # and a log that became a FIFO between the listing and the read is not opened either
        assert MangoHudLog(path, 0, errors.append).read(1 << 16) == []
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
    assert any("not a regular file" in e for e in errors)
    src.close()


def test_folder_replaced_by_a_file_gives_no_frames(tmp_path: Path) -> None:
    folder = tmp_path / "logs"
    folder.mkdir()
    path = folder / "game_2024-01-02_03-04-05.csv"
    path.write_text(PREAMBLE + NEW_HEADER)
    src = MangoHudSource(folder, rescan_s=0)
    src.drain()
    path.unlink()
    folder.rmdir()
    folder.write_text("not a folder")
    assert src.drain() == []
    src.close()
