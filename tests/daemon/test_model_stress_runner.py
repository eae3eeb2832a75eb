"""The daemon's side of model stress: one warning per reset (resets in a row are one episode),
and the status shows it."""

from __future__ import annotations

import logging

from govd.model.stress import JUMP
from tests.daemon.test_device_runner import PERIOD_S, make_runner, run_ticks


def _stress_lines(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if "model reset (jump)" in r.getMessage()]


def test_one_model_reset_is_one_line_not_one_per_fallback_tick(tmp_path, caplog):
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
    assert len(_stress_lines(caplog)) == 1


def test_resets_in_a_row_are_one_episode_with_their_count(tmp_path, caplog):
    caplog.set_level(logging.WARNING, logger="govd")
    runner, _, _ = make_runner(tmp_path, [0])
    governor = runner.governor
    governor.fallback_grace_s = 10 * PERIOD_S
    conditions = iter([JUMP, None, JUMP, None, JUMP])
    governor.stress.observe = lambda *args: next(conditions, None)  # type: ignore[method-assign]
    run_ticks(runner, 5)
    assert runner.status()["fallback"] == JUMP
    run_ticks(runner, 20, start_s=1.0)
    lines = _stress_lines(caplog)
    assert len(lines) == 2, "one when it starts, one (with the count) when it ends"
    assert "repeated" not in lines[0]
    assert "repeated 2 times" in lines[1] and "(ended)" in lines[1]


def test_stress_thresholds_come_from_the_model_stress_section(tmp_path):
    from govd.conf.schema import Config
    from govd.daemon.governed import build_governor
    from govd.device.devfreq import DevfreqDevice
    from tests.sysfs_fixtures import mali_panfrost

    path, _ = mali_panfrost(tmp_path / "sys", governor="userspace")
    config = Config.model_validate(
        {"model": {"stress": {"jump_ratio": 0, "jump_run": 3, "stuck_ticks": 50}}})
    governor, _ = build_governor(config, DevfreqDevice(path))
    settings = governor.stress.settings
    assert (settings.jump_ratio, settings.jump_run, settings.stuck_ticks) == (0, 3, 50)
