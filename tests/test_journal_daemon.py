"""The real daemon's journal: `govd run` on the live simulated GPU, beside a private journald
(tests/private_journal.py), driven by tests/journal_daemon_driver.py; what
`journalctl -t govd -o json` shows is checked against the status files of the same run."""

from __future__ import annotations

import json
import sys
from typing import Any

import pytest

from tests.live_gpu import DEVICE_NAME, govd_env
from tests.private_journal import journal_of

SUMMARY_FIELDS = ("GOVD_DEVICE", "GOVD_POLICY", "GOVD_LEVEL_MHZ", "GOVD_FRAME_MS",
                  "GOVD_PRED_FRAME_MS", "GOVD_POWER_W", "GOVD_ENERGY_J")
INFO, DEBUG, WARNING = "6", "7", "4"

Run = tuple[list[dict[str, str]], list[dict[str, Any]], list[float]]


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Run:
    """(journal entries, status files seen in order, the tree's levels in MHz)."""
    work = tmp_path_factory.mktemp("journal-daemon")
    entries = journal_of([sys.executable, "-m", "tests.journal_daemon_driver", str(work)],
                         govd_env(), timeout_s=120)
    statuses = json.loads((work / "statuses.json").read_text())
    levels_hz = (work / "gpu/class/devfreq" / DEVICE_NAME / "available_frequencies").read_text()
    return entries, statuses, [int(hz) / 1e6 for hz in levels_hz.split()]


def summaries(entries: list[dict[str, str]]) -> list[dict[str, str]]:
    return [e for e in entries if "GOVD_INTERVAL_S" in e]


def device_ticks(statuses: list[dict[str, Any]]) -> int:
    return int(statuses[-1]["devices"][0]["ticks"])


def settled_summaries(entries: list[dict[str, str]]) -> list[dict[str, str]]:
    """The summaries of whole intervals of governing: before the fault episode, and after it
    from the first summary whose level held still. The summaries until then span the pause,
    the write that went through (a level switch) and the meter's and model's restart, so they
    may have no power, energy or prediction yet. The episode's last warning can come a summary
    or more before the write goes through (repeats are rate-limited): under load one such
    summary, 511 MHz then 200 MHz, had no prediction."""
    kinds = [e.get("GOVD_WARNING_KIND") for e in entries]
    start, end = kinds.index("write"), len(kinds) - 1 - kinds[::-1].index("write")
    after = [i for i, e in enumerate(entries) if i > end and "GOVD_INTERVAL_S" in e]
    still = [i for i in after[1:] if entries[i].get("GOVD_LEVEL_SWITCHES") == "0"]
    first = still[0] if still else len(entries)
    return [e for i, e in enumerate(entries)
            if "GOVD_INTERVAL_S" in e and (i < start or i >= first)]


def test_info_summaries_carry_the_fields_with_the_status_files_values(run: Run) -> None:
    entries, statuses, levels_mhz = run
    status_levels = {s["devices"][0]["level_mhz"] for s in statuses}
    for entry in summaries(entries):
        assert entry["PRIORITY"] == INFO
        assert entry["GOVD_DEVICE"] == DEVICE_NAME == statuses[-1]["devices"][0]["device"]
        assert entry["GOVD_POLICY"] in ("performance", "powersave")
        assert float(entry["GOVD_LEVEL_MHZ"]) in levels_mhz
    settled = settled_summaries(entries)
    assert [e["GOVD_POLICY"] for e in settled].count("performance") >= 2
    assert [e["GOVD_POLICY"] for e in settled].count("powersave") >= 1
    for entry in settled:
        assert set(SUMMARY_FIELDS) <= entry.keys(), entry["MESSAGE"]
        # while governed the level stays put between status files (the sim's own governor
        # moves it only during the pause)
        assert float(entry["GOVD_LEVEL_MHZ"]) in status_levels
        assert float(entry["GOVD_ENERGY_J"]) > 0 and float(entry["GOVD_POWER_W"]) > 0
        assert 0 < float(entry["GOVD_FRAME_MS"]) < 1000
    # Each summary's energy is its interval's: those logged before the last status file
    # together used no more than that file's running total.
    last = statuses[-1]
    before = [e for e in summaries(entries)
              if int(e["__REALTIME_TIMESTAMP"]) / 1e6 < last["written_unix_s"]]
    assert sum(float(e.get("GOVD_ENERGY_J", 0)) for e in before) <= (
        last["devices"][0]["energy_j"] + 1e-3)


def test_status_energy_only_grows(run: Run) -> None:
    _entries, statuses, _levels = run
    energy_j = [s["devices"][0]["energy_j"] for s in statuses]
    assert energy_j == sorted(energy_j) and energy_j[-1] > energy_j[0]


def test_info_has_no_per_tick_lines_and_debug_has_every_decision(run: Run) -> None:
    entries, statuses, _levels = run
    ticks = device_ticks(statuses)
    info = [e for e in entries if e["PRIORITY"] == INFO]
    decisions = [e for e in entries if e["PRIORITY"] == DEBUG and " chose " in e["MESSAGE"]]
    # A summary a second against 20 ticks a second, plus a few one-off events (start,
    # reload, the device answering again, stop).
    assert len(summaries(entries)) * 10 < ticks
    assert len(info) * 4 < ticks
    assert len(decisions) >= ticks  # the last status file is older than the last ticks
    assert {e["GOVD_DEVICE"] for e in decisions} == {DEVICE_NAME}
    assert {"GOVD_LEVEL_MHZ", "GOVD_POLICY", "GOVD_FRAMES"} <= decisions[-1].keys()


def test_a_refused_write_episode_is_one_warning_then_its_count(run: Run) -> None:
    entries, statuses, _levels = run
    refused = statuses[-1]["devices"][0]["paused_write"]
    episode = [e for e in entries if e.get("GOVD_WARNING_KIND") == "write"]
    assert [e["PRIORITY"] for e in episode] == [WARNING, WARNING]
    first, count = episode
    assert "the kernel refused a write" in first["MESSAGE"]
    assert "Read-only file system" in first["GOVD_ERROR"]
    assert count["MESSAGE"].endswith("(ended)")
    assert count["GOVD_REPEATS"] == str(refused - 1)
