"""Per-device summaries: one INFO line per interval, every tick at DEBUG."""

from __future__ import annotations

import logging

import pytest

from govd.telemetry.log import record_fields
from govd.telemetry.summary import DeviceSummary
from govd.telemetry.tick import TickRecord

# A govd logger and pytest's capture of what it logged.
Captured = tuple[logging.Logger, pytest.LogCaptureFixture]


@pytest.fixture
def collected(caplog: pytest.LogCaptureFixture) -> Captured:
    caplog.set_level(logging.DEBUG, logger="govd.test_summary")
    return logging.getLogger("govd.test_summary"), caplog


def tick(summary: DeviceSummary, now_s: float, switched: bool = False) -> bool:
    return summary.record_tick(now_s, TickRecord(
        "card0", level_mhz=900, frame_times_ms=[16.0, 18.0], pred_ms=17.0,
        power_w=40.0, energy_j=2.0, policy="energy", switched=switched,
    ))


def infos(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.levelno == logging.INFO]


def test_one_info_line_per_interval(collected: Captured) -> None:
    logger, caplog = collected
    summary = DeviceSummary(logger, "card0", interval_s=1.0)
    logged = [tick(summary, i * 0.25, switched=i == 2) for i in range(9)]
    assert logged == [False, False, False, False, True, False, False, False, True]
    assert len(infos(caplog)) == 2
    assert len([r for r in caplog.records if r.levelno == logging.DEBUG]) == 9


def test_summary_numbers_and_fields(collected: Captured) -> None:
    logger, caplog = collected
    summary = DeviceSummary(logger, "card0", interval_s=1.0)
    for i in range(5):
        tick(summary, i * 0.25, switched=i == 2)
    (record,) = infos(caplog)
    assert record.getMessage() == (
        "card0: energy, 900 MHz, 10.0 fps, 17.00 ms/frame, predicted 17.00 ms, 40.0 W, 10.0 J, "
        "levels 900 MHz 100 %, 1 level switches in 1.0 s"
    )
    assert record_fields(record) == {
        "GOVD_DEVICE": "card0",
        "GOVD_POLICY": "energy",
        "GOVD_LEVEL_MHZ": 900,
        "GOVD_FRAME_MS": 17.0,
        "GOVD_PRED_FRAME_MS": 17.0,
        "GOVD_POWER_W": 40.0,
        "GOVD_ENERGY_J": 10.0,
        "GOVD_FRAMES": 10,
        "GOVD_LEVEL_SWITCHES": 1,
        "GOVD_INTERVAL_S": 1.0,
        "GOVD_RESIDENCY": "900:1.000",
    }


def test_unmeasured_power_and_frames_are_left_out(
    collected: Captured,
) -> None:
    logger, caplog = collected
    summary = DeviceSummary(logger, "gpu0", interval_s=0.5)
    for now_s in (0.0, 0.5):
        summary.record_tick(now_s, TickRecord(
            "gpu0", level_mhz=1530, frame_times_ms=[], pred_ms=None,
            power_w=None, energy_j=None, policy="ondemand", switched=False,
        ))
    (record,) = infos(caplog)
    assert record.getMessage() == ("gpu0: ondemand, 1530 MHz, 0.0 fps, levels 1530 MHz 100 %, "
                                   "0 level switches in 0.5 s")
    assert set(record_fields(record)) == {
        "GOVD_DEVICE", "GOVD_POLICY", "GOVD_LEVEL_MHZ", "GOVD_FRAMES",
        "GOVD_LEVEL_SWITCHES", "GOVD_INTERVAL_S", "GOVD_RESIDENCY",
    }


def test_info_level_logger_sees_no_per_tick_lines(
    collected: Captured,
) -> None:
    logger, caplog = collected
    logger.setLevel(logging.INFO)
    summary = DeviceSummary(logger, "card0", interval_s=10.0)
    for i in range(100):
        tick(summary, i * 0.05)
    assert caplog.records == []


def test_summary_interval_must_be_positive(collected: Captured) -> None:
    with pytest.raises(ValueError, match="summary interval"):
        DeviceSummary(collected[0], "card0", interval_s=0)


def test_tick_of_another_device_is_refused(collected: Captured) -> None:
    summary = DeviceSummary(collected[0], "card1")
    with pytest.raises(ValueError, match="summary of card1 got a tick of card0"):
        tick(summary, 0.0)


def test_debug_line_tells_the_level_that_ran_from_the_one_chosen(collected: Captured) -> None:
    logger, caplog = collected
    summary = DeviceSummary(logger, "card0", interval_s=10.0)
    summary.record_tick(0.0, TickRecord(
        "card0", level_mhz=900, frame_times_ms=[16.0], pred_ms=17.0, power_w=40.0,
        energy_j=2.0, policy="energy", switched=True, chosen_mhz=600,
    ))
    [line] = [r for r in caplog.records if r.levelno == logging.DEBUG]
    assert line.getMessage() == "card0: ran at 900 MHz; energy chose 600 MHz"


def test_restart_begins_a_fresh_interval_without_the_paused_time(collected: Captured) -> None:
    logger, caplog = collected
    summary = DeviceSummary(logger, "card0", interval_s=1.0)
    tick(summary, 0.0)
    summary.restart()  # paused from 0.05 s to 30 s, then taken back
    tick(summary, 30.0)
    assert not infos(caplog)
    assert tick(summary, 31.0)
    [line] = infos(caplog)
    assert "4.0 fps" in line.getMessage() and "in 1.0 s" in line.getMessage()


def test_the_summary_says_what_the_interval_saved_and_what_it_cost(collected: Captured) -> None:
    from govd.sources.base import Frame
    from govd.target import Target
    from govd.telemetry.savings import Savings

    logger, caplog = collected
    summary = DeviceSummary(logger, "card0", interval_s=1.0)
    savings = Savings()
    for i in range(5):
        frames = [Frame(16.0), Frame(18.0)]
        savings.add_tick(2.0, None, Target(fps=60), frames, pseudo=False)
        savings.model_top_j += 0.5 * i  # as if the model had priced the work at the top
        summary.record_tick(i * 0.25, TickRecord(
            "card0", level_mhz=900, frame_times_ms=[16.0, 18.0], pred_ms=17.0, power_w=40.0,
            energy_j=2.0, policy="energy", switched=False, late_frames=1), savings)
    (record,) = infos(caplog)
    fields = record_fields(record)
    # the interval's own ticks: four after the first (which opened it), 8 frames, 4 late
    assert fields["GOVD_MISSED_PCT"] == 50.0
    assert fields["GOVD_TOP_ENERGY_J"] == pytest.approx(8.0 + 0.5 * (1 + 2 + 3 + 4))
    assert fields["GOVD_SAVED_PCT"] == pytest.approx(100 * (1 - 8.0 / 13.0), abs=1e-3)
    assert "% less than the top clock's 13.0 J, missed 50.0 %" in record.getMessage()


def test_an_interval_without_checks_of_its_own_takes_the_runs_corrections(
        collected: Captured) -> None:
    """Ten seconds seldom hold three checks of the top clock: a summary's estimate is corrected
    by what every check of the run found, as `govd status`'s is."""
    from govd.sources.base import Frame
    from govd.target import Target
    from govd.telemetry.savings import Savings, TopClock

    logger, caplog = collected
    summary = DeviceSummary(logger, "card0", interval_s=1.0)
    savings = Savings()
    for _ in range(4):  # before the interval: the top costs half of what the model says
        savings.check_top(25.0, 50.0)
        savings.check_ran(30.0, 30.0)
    below = TopClock(energy_ratio=1.5, time_top_ms=10.0, energy_top_mj=15.0,
                     time_ran_ms=12.0, energy_ran_mj=10.0, ran=1, ran_top=False)
    for i in range(5):
        savings.add_tick(2.0, below, Target(fps=60), [Frame(16.0)], pseudo=False)
        summary.record_tick(i * 0.25, TickRecord(
            "card0", level_mhz=900, frame_times_ms=[16.0], pred_ms=17.0, power_w=40.0,
            energy_j=2.0, policy="energy", switched=False), savings)
    (record,) = infos(caplog)
    fields = record_fields(record)
    assert fields["GOVD_TOP_ENERGY_J"] == pytest.approx(0.5 * 4 * 3.0)
    assert fields["GOVD_SAVED_PCT"] == pytest.approx(100 * (1 - 8.0 / 6.0), abs=1e-3)


def test_busy_time_is_summarised_as_how_busy_not_as_a_frame_rate(collected: Captured) -> None:
    logger, caplog = collected
    summary = DeviceSummary(logger, "card0", interval_s=1.0)
    for i in range(21):  # each 50 ms tick one pseudo-frame of 20 ms busy time
        summary.record_tick(i * 0.05, TickRecord(
            "card0", level_mhz=900, frame_times_ms=[20.0], pred_ms=20.0, power_w=40.0,
            energy_j=2.0, policy="energy", switched=False, pseudo=True))
    (record,) = infos(caplog)
    assert "GPU busy 42 % (no frames: busy time)" in record.getMessage()
    assert "fps" not in record.getMessage()
    assert record_fields(record)["GOVD_BUSY"] == pytest.approx(0.42)
    assert "GOVD_FRAMES" not in record_fields(record)
