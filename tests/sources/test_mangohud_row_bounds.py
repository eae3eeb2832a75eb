"""A MangoHud row may say it stands for a million frames (issue 28 item 2): 1 000 appended rows of
``99999,0.0100001,<elapsed growing by 9.99e9 ns>`` took the daemon to 3.6 GB and a MemoryError.
Whatever rows say, a drain's frames are bounded by the time that passed, and a tick's work and
memory by the rows read, never by the frames they claim."""

from __future__ import annotations

import tracemalloc
from pathlib import Path

import pytest

from govd.sources.mangohud import SPAN_SLACK_S, MangoHudSource
from govd.sources.mangohud_log import MIN_FRAME_MS
from tests.sources.test_mangohud_hostile import following
from tests.sources.test_mangohud_source import PREAMBLE, append
from tests.sources.test_source_plugs import PERIOD_S, runner_on


def claiming_rows(count: int, start_ns: int = 0) -> str:
    """``count`` rows each claiming 9.99 s of frames at 99 999 fps (about a million frames)."""
    return "".join(f"99999,0.0100001,{start_ns + (k + 1) * 9_990_000_000}\n"
                   for k in range(count))


def test_rows_cannot_stand_for_frames_over_more_time_than_the_log_existed(
        tmp_path: Path) -> None:
    clock = {"s": 100.0}
    path = tmp_path / "game_2024-01-02_03-04-05.csv"
    path.write_text(PREAMBLE + "fps,frametime,elapsed\n60,16.6,0\n")
    src = MangoHudSource(tmp_path, rescan_s=0, clock=lambda: clock["s"])
    assert src.drain() == []
    clock["s"] += 1.0  # a second later, 1 000 rows claiming 9990 s appear
    append(path, claiming_rows(1000))
    frames = src.drain()
    assert len(frames) == 1000  # every row is a frame ...
    most = (1.0 + SPAN_SLACK_S) * 1000.0 / MIN_FRAME_MS  # ... standing for what fits the time
    assert sum(f.count for f in frames) <= most + len(frames)
    assert src.stats()["impossible_gaps"] >= 998


def test_a_tick_of_rows_claiming_millions_of_frames_costs_memory_by_the_row(
        tmp_path: Path) -> None:
    src, path = following(tmp_path)
    append(path, claiming_rows(30, start_ns=0))
    frames = src.drain()
    assert len(frames) == 30
    runner = runner_on(tmp_path / "dev", 50)
    tracemalloc.start()
    try:
        record = runner.tick(0.0, PERIOD_S, frames)
        _, peak_bytes = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert record is not None
    assert len(record.frame_times_ms) == 30 and record.frames == round(
        sum(f.count for f in frames))
    assert peak_bytes < 2 << 20  # a tick's bookkeeping, not one float per claimed frame


def test_metrics_count_every_claimed_frame_in_one_step_a_row(tmp_path: Path) -> None:
    from govd.telemetry.metrics import Metrics
    from govd.telemetry.tick import TickRecord

    metrics = Metrics()
    tick = TickRecord("card0", 500.0, [0.01, 16.0], None, None, None, "energy", False, None,
                      frame_counts=[1_000_000, 3])
    metrics.record_tick(tick)
    from prometheus_client.parser import text_string_to_metric_families

    samples = {(s.name, s.labels.get("le")): s.value for family in
               text_string_to_metric_families(metrics.exposition().decode())
               for s in family.samples if s.name.startswith("govd_frame_time_seconds")}
    assert samples[("govd_frame_time_seconds_count", None)] == 1_000_003
    assert samples[("govd_frame_time_seconds_bucket", "0.0042")] == 1_000_000
    assert samples[("govd_frame_time_seconds_sum", None)] == pytest.approx(10.048)
