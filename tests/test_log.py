"""Logging choices, structured fields and per-episode warning limits (no journald needed here)."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest

from govd.telemetry.log import (
    EpisodeLimiter,
    StderrFormatter,
    journal_field_name,
    log_fields,
    record_fields,
    running_under_systemd,
    setup_logging,
)

# A govd logger and pytest's capture of what it logged.
Captured = tuple[logging.Logger, pytest.LogCaptureFixture]


@pytest.fixture
def collected(caplog: pytest.LogCaptureFixture) -> Captured:
    caplog.set_level(logging.DEBUG, logger="govd.test_log")
    return logging.getLogger("govd.test_log"), caplog


@pytest.fixture
def restore_root_logging() -> Iterator[None]:
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    govd_level = logging.getLogger("govd").level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)
    logging.getLogger("govd").setLevel(govd_level)


@pytest.mark.parametrize(
    ("environ", "expected"),
    [
        ({"JOURNAL_STREAM": "8:1234"}, True),
        ({"INVOCATION_ID": "0123abcd"}, True),
        ({"JOURNAL_STREAM": ""}, False),
        ({}, False),
    ],
)
def test_systemd_detected_from_its_environment(environ: dict[str, str], expected: bool) -> None:
    assert running_under_systemd(environ) is expected


def test_field_names_get_prefix_and_upper_case() -> None:
    assert journal_field_name("level_mhz") == "GOVD_LEVEL_MHZ"
    assert journal_field_name("pred_frame_ms") == "GOVD_PRED_FRAME_MS"


@pytest.mark.parametrize("name", ["Level", "level-mhz", "_x", "1x", ""])
def test_field_names_the_journal_would_drop_are_refused(name: str) -> None:
    with pytest.raises(ValueError, match="lowercase"):
        journal_field_name(name)


def test_log_fields_attaches_journal_fields_and_skips_none(
    collected: Captured,
) -> None:
    logger, caplog = collected
    log_fields(logger, logging.INFO, "summary", device="card0", power_w=3.5, energy_j=None)
    (record,) = caplog.records
    assert record.getMessage() == "summary"
    assert record_fields(record) == {"GOVD_DEVICE": "card0", "GOVD_POWER_W": 3.5}
    assert record.funcName == "test_log_fields_attaches_journal_fields_and_skips_none"


def test_log_fields_below_level_builds_nothing(collected: Captured) -> None:
    logger, caplog = collected
    logger.setLevel(logging.INFO)
    log_fields(logger, logging.DEBUG, "tick", device="card0")
    assert caplog.records == []


def test_stderr_lines_carry_fields_as_key_value(
    collected: Captured,
) -> None:
    logger, caplog = collected
    log_fields(logger, logging.WARNING, "overrun", device="card0", frame_ms=17.5)
    line = StderrFormatter().format(caplog.records[0])
    assert line == "govd: WARNING govd.test_log: overrun [device=card0 frame_ms=17.5]"


def test_setup_logging_outside_systemd_writes_plain_stderr(
    restore_root_logging: None, capsys: pytest.CaptureFixture[str]
) -> None:
    handler = setup_logging("info", under_systemd=False)
    assert isinstance(handler, logging.StreamHandler)
    logger = logging.getLogger("govd.daemon")
    log_fields(logger, logging.DEBUG, "per-tick decision", device="card0")
    log_fields(logger, logging.INFO, "card0 summary", device="card0", level_mhz=900)
    logging.getLogger("numba.core").info("library chatter")
    assert capsys.readouterr().err == (
        "govd: INFO govd.daemon: card0 summary [device=card0 level_mhz=900]\n"
    )


def test_setup_logging_twice_keeps_one_handler(restore_root_logging: None) -> None:
    first = setup_logging(logging.INFO, under_systemd=False)
    second = setup_logging(logging.DEBUG, under_systemd=False)
    root_handlers = logging.getLogger().handlers
    assert second in root_handlers and first not in root_handlers
    assert logging.getLogger("govd").level == logging.DEBUG


def test_setup_logging_under_systemd_uses_journal_handler(restore_root_logging: None) -> None:
    journal = pytest.importorskip("systemd.journal")
    handler = setup_logging("info", under_systemd=True)
    assert isinstance(handler, journal.JournalHandler)


def test_unknown_level_name_is_refused() -> None:
    with pytest.raises(ValueError, match="log level 'loud'"):
        setup_logging("loud", under_systemd=False)


def messages(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records]


def test_episode_logs_first_then_count_when_it_ends(
    collected: Captured,
) -> None:
    logger, caplog = collected
    limiter = EpisodeLimiter(logger, report_every_s=60.0)
    key = ("card0", "overrun")
    assert limiter.warn(key, 10.0, "tick overran", tick_ms=80)
    assert not any(limiter.warn(key, 10.0 + i * 0.05, "tick overran") for i in range(1, 5))
    assert limiter.clear(key, 12.5)
    assert messages(caplog) == [
        "tick overran",
        "tick overran … repeated 4 times over 2.5 s (ended)",
    ]
    first, last = (record_fields(r) for r in caplog.records)
    assert first == {"GOVD_DEVICE": "card0", "GOVD_WARNING_KIND": "overrun", "GOVD_TICK_MS": 80}
    assert last["GOVD_REPEATS"] == 4 and last["GOVD_EPISODE_S"] == 2.5
    assert caplog.records[0].levelno == logging.WARNING
    # CODE_FUNC in the journal should name who warned, not the limiter.
    assert {r.funcName for r in caplog.records} == {
        "test_episode_logs_first_then_count_when_it_ends"
    }


def test_long_episode_reports_periodically(collected: Captured) -> None:
    logger, caplog = collected
    limiter = EpisodeLimiter(logger, report_every_s=30.0)
    key = ("gpu0", "read_failed")
    logged = [limiter.warn(key, t, "power read failed") for t in range(0, 71, 10)]
    assert logged == [True, False, False, True, False, False, True, False]
    assert messages(caplog)[1:] == [
        "power read failed … repeated 3 times over 30.0 s (still going)",
        "power read failed … repeated 3 times over 30.0 s (still going)",
    ]
    assert limiter.clear(key, 75.0)
    assert messages(caplog)[-1] == "power read failed … repeated 1 times over 15.0 s (ended)"
    assert not limiter.active(key)


def test_episode_with_no_repeats_ends_silently(collected: Captured) -> None:
    logger, caplog = collected
    limiter = EpisodeLimiter(logger)
    limiter.warn(("card0", "clamped"), 1.0, "level clamped")
    assert not limiter.clear(("card0", "clamped"), 2.0)
    assert not limiter.clear(("card0", "never"), 2.0)
    assert messages(caplog) == ["level clamped"]


def test_episodes_are_separate_per_device_and_kind(
    collected: Captured,
) -> None:
    logger, caplog = collected
    limiter = EpisodeLimiter(logger)
    for key in [("card0", "overrun"), ("card1", "overrun"), ("card0", "clamped")]:
        assert limiter.warn(key, 0.0, f"{key[1]} on {key[0]}")
        assert not limiter.warn(key, 0.1, f"{key[1]} on {key[0]}")
    assert len(caplog.records) == 3
    limiter.clear(("card0", "overrun"), 1.0)
    assert limiter.warn(("card0", "overrun"), 2.0, "overrun on card0")


def test_episode_report_period_must_be_positive(
    collected: Captured,
) -> None:
    with pytest.raises(ValueError, match="report_every_s"):
        EpisodeLimiter(collected[0], report_every_s=0)


def test_the_limiter_is_quiet_exactly_while_no_episode_is_open(collected: Captured) -> None:
    logger, _ = collected
    limiter = EpisodeLimiter(logger)
    assert limiter.quiet
    limiter.warn(("card0", "read"), 1.0, "cannot read")
    assert not limiter.quiet
    limiter.clear(("card0", "read"), 2.0)
    assert limiter.quiet
