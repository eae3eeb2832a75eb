"""govd's structured fields read back from a real systemd-journald (see tests/private_journal.py),
logged by a snippet that calls the logging helpers directly. The real daemon's journal is in
tests/test_journal_daemon.py."""

from __future__ import annotations

import os
import sys
import textwrap
from pathlib import Path

import pytest

from tests.private_journal import journal_of

REPO_ROOT = Path(__file__).resolve().parent.parent

SNIPPET = textwrap.dedent(
    """
    import logging
    from govd.telemetry.log import EpisodeLimiter, log_fields, setup_logging

    setup_logging("info", under_systemd=True)
    logger = logging.getLogger("govd.daemon")
    log_fields(logger, logging.DEBUG, "per-tick decision", device="card0")
    log_fields(
        logger, logging.INFO, "card0: 900 MHz, 16.2 ms/frame",
        device="card0", policy="energy", level_mhz=900, frame_ms=16.2,
        pred_frame_ms=16.0, power_w=41.5, energy_j=1234.5,
    )
    limiter = EpisodeLimiter(logger, report_every_s=60.0)
    for t in (0.0, 0.05, 0.1):
        limiter.warn(("card0", "overrun"), t, "tick overran")
    limiter.clear(("card0", "overrun"), 0.15)
    """
)


@pytest.fixture(scope="module")
def journal_entries() -> list[dict[str, str]]:
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    return journal_of([sys.executable, "-c", SNIPPET], env)


def test_info_summary_carries_govd_fields(journal_entries: list[dict[str, str]]) -> None:
    (summary,) = [e for e in journal_entries if e["MESSAGE"].startswith("card0: 900 MHz")]
    assert {k: v for k, v in summary.items() if k.startswith("GOVD_")} == {
        "GOVD_DEVICE": "card0",
        "GOVD_POLICY": "energy",
        "GOVD_LEVEL_MHZ": "900",
        "GOVD_FRAME_MS": "16.2",
        "GOVD_PRED_FRAME_MS": "16.0",
        "GOVD_POWER_W": "41.5",
        "GOVD_ENERGY_J": "1234.5",
    }
    assert summary["PRIORITY"] == "6"
    assert summary["SYSLOG_IDENTIFIER"] == "govd"
    assert summary["LOGGER"] == "govd.daemon"


def test_debug_decisions_stay_out_of_the_journal_at_info(
    journal_entries: list[dict[str, str]],
) -> None:
    assert not [e for e in journal_entries if e["MESSAGE"] == "per-tick decision"]


def test_warning_episode_is_two_entries(journal_entries: list[dict[str, str]]) -> None:
    warnings = [e for e in journal_entries if e.get("GOVD_WARNING_KIND") == "overrun"]
    assert [e["MESSAGE"] for e in warnings] == [
        "tick overran",
        "tick overran … repeated 2 times over 0.1 s (ended)",
    ]
    assert {e["PRIORITY"] for e in warnings} == {"4"}
    assert warnings[1]["GOVD_REPEATS"] == "2"
