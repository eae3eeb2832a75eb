"""The daemon's side of model stress: one warning per episode, and the status shows it."""

from __future__ import annotations

import logging

from govd.model.stress import JUMP
from tests.daemon.test_device_runner import PERIOD_S, make_runner, run_ticks


def test_model_stress_is_logged_once_per_episode_and_shown_in_status(tmp_path, caplog):
    caplog.set_level(logging.WARNING, logger="govd")
    runner, _, _ = make_runner(tmp_path, [0])
    governor = runner.governor
    governor.fallback_grace_s = 10 * PERIOD_S
    conditions = iter([JUMP])
    governor.stress.observe = lambda *args: next(conditions, None)  # type: ignore[method-assign]
    run_ticks(runner, 5)
    assert runner.status()["fallback"] == JUMP
    run_ticks(runner, 20, start_s=1.0)
    assert runner.status()["fallback"] is None
    lines = [r.getMessage() for r in caplog.records if "model reset (jump)" in r.getMessage()]
    assert len(lines) == 2, "one when it starts, one (with the count) when it ends"
    assert "repeated" not in lines[0] and "(ended)" in lines[1]
