"""The round-3 fuzz benchmark's quick mode: every section runs its cases, zero crashes, zero
wrong verdicts, and a crash, were there one, would be seen."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest

from bench import bench_fuzz_custody


@pytest.fixture(scope="module")
def quick(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    out = tmp_path_factory.mktemp("fuzz3") / "fuzz.json"
    assert bench_fuzz_custody.main(["--quick", "--seed", "5", "--out", str(out)]) == 0
    result: dict[str, Any] = json.loads(out.read_text())
    return result


def test_quick_run_has_nothing_bad_in_any_section(quick: dict[str, Any]) -> None:
    assert set(quick["totals"]) == set(bench_fuzz_custody.BAD)
    assert not any(quick["totals"].values())
    assert all(s["tracebacks"] == [] for s in quick["sections"].values())


def test_quick_run_reaches_both_sides_of_every_verdict(quick: dict[str, Any]) -> None:
    sections = {name: s["counts"] for name, s in quick["sections"].items()}
    assert sections["mangohud_rows"]["rows_as_frames"] > 0
    assert sections["mangohud_rows"]["tick_memory_peak_bytes"] > 0
    assert sections["state_files"].get("trusted_applied", 0) > 0
    assert sections["state_files"].get("untrusted_refused", 0) > 0
    assert sections["hotplug_identity"].get("same_gpu", 0) > 0
    assert sections["hotplug_identity"].get("other_gpu", 0) > 0
    assert sections["metrics_endpoint"]["scrapes_answered"] == bench_fuzz_custody.QUICK[
        "metrics_rounds"]


def test_a_restore_that_raised_would_be_counted_as_a_crash(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(path: Path) -> None:
        raise RuntimeError("a bug")

    monkeypatch.setattr(bench_fuzz_custody, "restore_custody", broken)
    section = bench_fuzz_custody.fuzz_hotplug(2, random.Random(1), tmp_path)
    assert section["counts"]["crashes"] == 2 and "a bug" in section["tracebacks"][0]
