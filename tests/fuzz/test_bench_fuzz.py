"""The fuzz benchmark's quick mode: zero crashes, every rejection counted, and a crash, were
there one, would be seen."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest

from bench import bench_fuzz


@pytest.fixture(scope="module")
def quick(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    out = tmp_path_factory.mktemp("fuzz") / "fuzz.json"
    assert bench_fuzz.main(["--quick", "--seed", "3", "--out", str(out)]) == 0
    result: dict[str, Any] = json.loads(out.read_text())
    return result


def test_quick_run_has_zero_crashes_and_names_every_error(quick: dict[str, Any]) -> None:
    assert quick["totals"] == {"crashes": 0, "bad_messages": 0, "frames_out_of_limits": 0,
                               "unaccounted_lines": 0}
    assert all(s["tracebacks"] == [] for s in quick["sections"].values())
    assert {"python", "numpy", "machine"} <= quick["environment"].keys()
    assert quick["command"].startswith("python bench/bench_fuzz.py --quick")


def test_quick_run_sends_every_kind_and_counts_rejections_by_reason(quick: dict[str, Any]) -> None:
    datagrams = quick["sections"]["datagrams"]["counts"]
    assert datagrams["sent"] == datagrams["source_datagrams"] == bench_fuzz.QUICK["datagrams"]
    assert all(datagrams.get(f"sent_{kind}", 0) > 0 for kind in bench_fuzz.DATAGRAM_KINDS)
    assert sum(v for k, v in datagrams.items() if k.startswith("source_dropped_")) > 0
    assert datagrams["source_rate_limited"] > 0 and datagrams["source_accepted"] > 0
    configs = quick["sections"]["configs"]["counts"]
    assert configs["accepted"] + configs["rejected"] == bench_fuzz.QUICK["configs"]


def test_a_reader_that_raises_the_wrong_error_is_counted_as_a_crash(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    def broken(path: Path) -> None:
        raise KeyError("unit")

    monkeypatch.setattr(bench_fuzz, "read_trace", broken)
    result = bench_fuzz.fuzz_tables(4, random.Random(0), tmp_path)
    assert result["counts"]["crashes"] == 4
    assert "KeyError: 'unit'" in result["tracebacks"][0]


def test_quick_run_covers_state_files_status_files_and_the_command_line(
    quick: dict[str, Any],
) -> None:
    for name in ("state_files", "status_files", "cli"):
        counts = quick["sections"][name]["counts"]
        assert counts["crashes"] == 0
        assert sum(v for k, v in counts.items() if k.endswith(("_ok", "_refused"))) > 0
    specials = quick["sections"]["state_files"]["counts"]
    assert specials["special_fifo"] == specials["special_dev_zero"] == 2


@pytest.mark.parametrize(("ran", "key"), [
    ({"rc": 1, "output": "Traceback (most recent call last):\n", "rss_mb": 50, "hung": False},
     "crash_status_traceback"),
    ({"rc": 0, "output": "", "rss_mb": 5000, "hung": False}, "crash_status_memory"),
    ({"rc": -9, "output": "", "rss_mb": 50, "hung": True}, "crash_status_hang"),
    ({"rc": -11, "output": "", "rss_mb": 50, "hung": False}, "crash_status_exit"),
    ({"rc": 2, "output": "govd status: no status file\n", "rss_mb": 50, "hung": False},
     "status_refused"),
])
def test_a_command_that_hangs_eats_memory_or_prints_a_traceback_is_a_crash(
    ran: dict[str, Any], key: str
) -> None:
    from bench import fuzz_cli

    tally = fuzz_cli.Outcomes()
    fuzz_cli.judge(tally, "status", ["status"], ran)
    assert tally.counts[key] == 1
    assert tally.counts["crashes"] == (0 if key == "status_refused" else 1)
