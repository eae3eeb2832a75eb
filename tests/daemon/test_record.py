"""`govd run --record`: a trace that cannot be written never stops governing or the restore."""

from __future__ import annotations

import logging
import math

from govd.daemon.record import TraceRecorder


def test_trace_rows_are_written_in_the_seed_order(tmp_path):
    recorder = TraceRecorder(tmp_path / "t.csv", ["alu"])
    recorder.row(0.05, 8.0, 2, 600.0, math.nan, [0.5])
    recorder.close()
    assert (tmp_path / "t.csv").read_text().splitlines() == [
        "time_s,frame_time_ms,frame_count,freq_mhz,power_w,alu",
        "0.0500,8.0000,2,600.000,,0.500000",
    ]


def test_full_disk_at_the_final_flush_is_logged_once_and_raises_nothing(caplog):
    caplog.set_level(logging.ERROR, logger="govd.daemon")
    recorder = TraceRecorder("/dev/full")  # every row fits the buffer: ENOSPC only at close
    for k in range(10):
        recorder.row(k * 0.05, 8.0, 1, 600.0, 2.0)
    recorder.close()
    recorder.close()
    assert recorder.failed == "No space left on device"
    assert [r.getMessage() for r in caplog.records] == [
        "/dev/full: recording stopped (No space left on device); governing goes on"]


def test_rows_after_a_failed_write_are_dropped_without_another_error(caplog):
    caplog.set_level(logging.ERROR, logger="govd.daemon")
    recorder = TraceRecorder("/dev/full")
    for k in range(5000):  # well past the 64 KiB buffer
        recorder.row(k * 0.05, 8.0, 1, 600.0, 2.0)
    recorder.close()
    assert len(caplog.records) == 1
