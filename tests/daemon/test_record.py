"""`govd run --record`: a trace that cannot be written never stops governing or the restore."""

from __future__ import annotations

import logging

import numpy as np

from govd.daemon.record import TraceRecorder
from govd.formats.trace import read_trace
from govd.sample import Sample
from govd.target import Target

SAMPLE = Sample(freq_mhz=600.0, frame_time_ms=8.0, frame_count=1, power_w=2.0)
TARGET = Target(fps=60)


def test_trace_rows_are_written_in_the_seed_order_then_the_tick_then_the_counters(tmp_path):
    recorder = TraceRecorder(tmp_path / "t.csv", ["alu"], {"levels_mhz": "300.0,600.0"})
    recorder.row(0.05, Sample(freq_mhz=600.0, frame_time_ms=1 / 3, frame_count=2.5,
                              counters=np.array([0.5])), Target(max_slowdown=0.1), 300.0)
    recorder.close()
    assert (tmp_path / "t.csv").read_text().splitlines() == [
        "# govd run trace: 2",
        "# levels_mhz: 300.0,600.0",
        "time_s,frame_time_ms,frame_count,freq_mhz,power_w,interval_s,busy,mem_freq_mhz,"
        "late_share,target_fps,max_slowdown,level_mhz,mem_level_mhz,alu",
        "0.05,0.3333333333333333,2.5,600.0,,0.05,,,,,0.1,300.0,,0.5",
    ]


def test_every_number_reads_back_to_the_bit(tmp_path):
    """A replay must feed the governor what the live run fed it: no rounding on the way."""
    rng = np.random.default_rng(5)
    values = rng.lognormal(0, 3, size=(50, 4))
    recorder = TraceRecorder(tmp_path / "t.csv", ["c"])
    for k, (t, p, c, i) in enumerate(values):
        recorder.row(k * 0.05, Sample(freq_mhz=600.0, frame_time_ms=t, frame_count=3,
                                      interval_s=i, power_w=p, counters=np.array([c])),
                     TARGET, 600.0)
    recorder.close()
    trace = read_trace(tmp_path / "t.csv")
    assert np.array_equal(trace.frame_time_ms, values[:, 0])
    assert np.array_equal(trace.power_w, values[:, 1])
    assert np.array_equal(trace.counters["c"], values[:, 2])
    assert np.array_equal(trace.column("interval_s"), values[:, 3])
    assert np.all(trace.column("target_fps") == 60.0)
    assert np.all(np.isnan(trace.column("max_slowdown")))


def test_full_disk_at_the_final_flush_is_logged_once_and_raises_nothing(caplog):
    caplog.set_level(logging.ERROR, logger="govd.daemon")
    recorder = TraceRecorder("/dev/full")  # every row fits the buffer: ENOSPC only at close
    for k in range(10):
        recorder.row(k * 0.05, SAMPLE, TARGET, 600.0)
    recorder.close()
    recorder.close()
    assert recorder.failed == "No space left on device"
    assert [r.getMessage() for r in caplog.records] == [
        "/dev/full: recording stopped (No space left on device); governing goes on"]


def test_rows_after_a_failed_write_are_dropped_without_another_error(caplog):
    caplog.set_level(logging.ERROR, logger="govd.daemon")
    recorder = TraceRecorder("/dev/full")
    for k in range(5000):  # well past the 64 KiB buffer
        recorder.row(k * 0.05, SAMPLE, TARGET, 600.0)
    recorder.close()
    assert len(caplog.records) == 1
