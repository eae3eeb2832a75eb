"""bench/bench_start_stop.py at two moments: each run ends as the benchmark counts good, and the
verdict turns on each way a start-up stop can go wrong."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench import bench_start_stop


def test_two_moments_end_quietly_with_the_governor_as_found(tmp_path: Path) -> None:
    out = tmp_path / "start_stop.json"
    assert bench_start_stop.main(["--delays-ms", "0,150", "--repeats", "1", "--out",
                                  str(out)]) == 0
    measured = json.loads(out.read_text())["measured"]
    assert measured["runs"] == measured["good"] == 2
    assert measured["killed_by_sigint"] == measured["hung"] == measured["not_as_found"] == 0


GOOD = {"delay_ms": 0, "exit": 130, "hung": False, "traceback": False,
        "exception_ignored": False, "governor_as_found": True, "state_file_left": False,
        "last_line": ""}


@pytest.mark.parametrize("bad", [{"exit": -2}, {"exit": 1}, {"hung": True}, {"traceback": True},
                                 {"exception_ignored": True}, {"governor_as_found": False},
                                 {"state_file_left": True}])
def test_each_way_of_going_wrong_is_not_good(bad: dict[str, object]) -> None:
    assert bench_start_stop.good(GOOD)
    assert not bench_start_stop.good({**GOOD, **bad})
