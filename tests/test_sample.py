"""A tick's frames become a `Sample` through pure functions (`govd.sample`), the daemon's and
the trace replay's alike."""

from __future__ import annotations

import math

import numpy as np

from govd.sample import FrameTally, count_frames, counter_values, target_for, tick_sample
from govd.sources.base import Frame
from govd.target import Target

FPS60 = Target(fps=60.0)  # deadline 16.67 ms


def test_a_sampled_row_counts_for_the_frames_it_stands_for() -> None:
    tally = count_frames([Frame(10.0), Frame(20.0, count=3.0)], FPS60)
    assert tally.count == 4.0
    assert tally.mean_ms == (10.0 + 3 * 20.0) / 4
    assert tally.late_share == 0.75  # the row of three frames at 20 ms missed


def test_lateness_is_judged_only_under_a_frame_rate_and_for_real_frames() -> None:
    frames = [Frame(30.0), Frame(5.0)]
    assert count_frames(frames, FPS60).late_share == 0.5
    assert math.isnan(count_frames(frames, FPS60, pseudo=True).late_share)
    assert math.isnan(count_frames(frames, Target(max_slowdown=0.1)).late_share)


def test_a_tick_without_frames_has_no_time_and_no_lateness() -> None:
    tally = count_frames([], FPS60)
    assert tally.count == 0 and math.isnan(tally.mean_ms) and math.isnan(tally.late_share)


def test_the_sample_holds_the_tally_and_the_reading_as_given() -> None:
    counters = np.array([3.0, 4.0])
    sample = tick_sample(FrameTally(2.5, 7.0, 0.2), 600.0, 0.05, 0.4, 12.0, counters, 900.0)
    assert (sample.frame_count, sample.frame_time_ms, sample.late_share) == (2.5, 7.0, 0.2)
    assert (sample.freq_mhz, sample.interval_s, sample.busy, sample.power_w,
            sample.mem_freq_mhz) == (600.0, 0.05, 0.4, 12.0, 900.0)
    assert sample.counters is counters


def test_counters_come_in_the_models_order_with_nan_for_one_not_reported() -> None:
    values = counter_values({"b": 2.0, "a": 1.0}, ("a", "b", "c"))
    np.testing.assert_array_equal(values[:2], [1.0, 2.0])
    assert math.isnan(values[2])
    assert counter_values({"a": 1.0}, ()).size == 0


def test_the_busiest_application_sets_the_target_and_no_frame_keeps_it() -> None:
    apps = {"game": Target(fps=144.0), "render": Target(max_slowdown=0.2)}
    default = Target(fps=60.0)
    in_force = Target(max_slowdown=0.3)
    assert target_for([], apps, default, in_force) is in_force
    assert target_for([Frame(5.0, app="game")] * 3, apps, default, in_force) is apps["game"]
    mixed = [Frame(5.0, app="game"), Frame(9.0, app="render", count=4.0)]
    assert target_for(mixed, apps, default, in_force) is apps["render"]
    assert target_for([Frame(5.0, app="other")], apps, default, in_force) is default
