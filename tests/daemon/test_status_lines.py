"""What `govd status` prints: the saving against the top clock, a device left to its own
governor for want of frames (and what to do), frames for devices govd does not govern."""

from __future__ import annotations

import logging
import time
from pathlib import Path

import pytest

from govd.daemon.status import _status_lines, device_line, frame_source_lines
from govd.sources.base import Frame
from tests.daemon.test_device_runner import PERIOD_S
from tests.sources.test_source_plugs import runner_on

GOVERNED = {"device": "card0", "state": "governed", "policy": "energy", "target": "60 FPS",
            "level_mhz": 600.0, "fps": 60.0, "frame_ms": 12.0, "predicted_frame_ms": 12.1,
            "power_w": 5.0, "energy_j": 100.0}


def test_a_governed_device_says_what_it_saved_against_the_top_clock_and_how_sure() -> None:
    savings = {"saved_share": 0.229, "saved_uncertainty": 0.017, "sure": "good",
               "covered_share": 1.0, "missed_share": 0.008}
    line = device_line({**GOVERNED, "savings": savings})
    assert line.endswith("100.0 J; 22.9 % less energy than at the top clock (±1.7 pts, good), "
                         "missed deadlines 0.8 %")
    assert device_line(GOVERNED).endswith("100.0 J")  # nothing measured yet: nothing claimed


def test_a_device_without_frames_says_it_is_left_to_its_own_governor_and_what_to_do() -> None:
    waiting = {"device": "card0", "state": "waiting", "policy": "energy", "level_mhz": 200.0,
               "power_w": 0.6, "waiting_since_s": 100.0,
               "no_frames_hint": "Programs send frame or step times to /run/govd/frames.sock."}
    lines = _status_lines({"pid": 7, "written_unix_s": time.time(), "loop_time_s": 130.0,
                           "devices": [waiting]})
    assert lines[1] == ("  card0: left to its own governor until frames come (energy needs "
                        "them), 200 MHz, 0.60 W")
    assert lines[2] == ("    no frames for 30 s. Programs send frame or step times to "
                        "/run/govd/frames.sock.")


def test_frames_for_devices_govd_does_not_govern_are_a_problem_line() -> None:
    [line] = frame_source_lines({"unknown_devices": {"nvidia0": 12}, "devices": ["card0"]})
    assert line == ("problem: frames for devices govd does not govern, dropped: nvidia0 (12); "
                    "device= must name one it governs (card0), or be left out")


def test_no_frames_is_said_once_in_the_journal_whatever_the_hand_backs(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="govd.daemon")
    runner = runner_on(tmp_path, 40, silent_after_s=0.5, no_frames_hint="Send frames.")
    game = [Frame(gpu_time_ms=12.5, app="game")]
    for k in range(200):  # frames for 1 s, none for 1.5 s, again and again
        runner.tick(k * PERIOD_S, PERIOD_S, game if k % 50 < 20 else [])
    said = [r.getMessage() for r in caplog.records if r.levelno == logging.INFO]
    assert runner.counts["handed_back"] == 4
    waiting = [m for m in said if "left to its own governor, as govd found it" in m]
    assert waiting == ["fde60000.gpu: no frames for 1 s: left to its own governor, as govd found "
                       "it, until frames arrive. Send frames."]
