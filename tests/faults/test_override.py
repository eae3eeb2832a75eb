"""Another tool changing the clock behind govd's back: re-applied, and stepped back from if it
keeps happening, so two tools do not fight."""

from __future__ import annotations

import logging
from collections.abc import Callable

import pytest

from govd.daemon.override import (
    CONTESTED_RETRY_S,
    OVERRIDE_QUIET_S,
    OVERRIDE_REAPPLIES,
    OVERRIDE_TICKS,
)
from tests.faults.rigs import LOGGER, PERIOD_S, RIGS, Rig


def other_tool(rig: Rig, backend: str) -> Callable[[], None]:
    """What a second tool writes to take the clock (through the kernel's own rules)."""
    knob, value = {
        "devfreq": (0, "performance"),  # another governor
        "i915": (1, "1000"),  # max raised above govd's pin
        "xe": (1, "1500"),
        "amdgpu": (0, "auto"),  # out of manual
        "amdgpu_od": (1, "s 1 2000"),  # another maximum edited (and committed below)
        "amdgpu_apu": (0, "auto"),  # out of manual: an APU's default clocks again
    }[backend]
    if backend == "amdgpu_od":
        return lambda: [rig.kernel.write_text(rig.knobs[1], v) for v in (value, "c")] and None
    return lambda: rig.kernel.write_text(rig.knobs[knob], value)


def warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records
            if r.name == LOGGER and r.levelno == logging.WARNING]


@pytest.fixture
def caplog_warnings(caplog: pytest.LogCaptureFixture) -> pytest.LogCaptureFixture:
    caplog.set_level(logging.WARNING, logger=LOGGER)
    return caplog


@pytest.mark.parametrize("backend", list(RIGS))
def test_one_override_is_reapplied_after_a_few_ticks_with_one_warning(tmp_path, backend,
                                                                     caplog_warnings):
    rig = RIGS[backend](tmp_path)
    rig.tick(0.0)
    governed = rig.knob_state()
    other_tool(rig, backend)()
    rig.tick(1.0, count=OVERRIDE_TICKS - 1)
    assert rig.knob_state() != governed  # a transient is given time to settle
    rig.tick(1.0 + (OVERRIDE_TICKS - 1) * PERIOD_S)
    assert rig.knob_state() == governed
    assert rig.device.read().freq_mhz == rig.level_mhz
    assert rig.runner.counts["overridden"] == 1 and rig.runner.paused is None
    lines = warnings(caplog_warnings)
    assert len(lines) == 1 and "another tool changed the clock" in lines[0]


@pytest.mark.parametrize("backend", list(RIGS))
def test_change_undone_within_a_tick_is_not_an_override(tmp_path, backend, caplog_warnings):
    rig = RIGS[backend](tmp_path)
    rig.tick(0.0)
    governed = rig.knob_state()
    other_tool(rig, backend)()
    rig.tick(1.0)
    rig.runner.device.set_level(rig.level_mhz)  # e.g. the tool's own two-step write settles
    rig.kernel.forget_writes()
    rig.tick(1.05, count=2 * OVERRIDE_TICKS)
    assert rig.kernel.attempts == [] and rig.knob_state() == governed
    assert rig.runner.counts["overridden"] == 0 and warnings(caplog_warnings) == []


@pytest.mark.parametrize("backend", list(RIGS))
def test_tool_that_keeps_taking_the_clock_wins_and_is_left_alone(tmp_path, backend,
                                                               caplog_warnings):
    rig = RIGS[backend](tmp_path)
    take = other_tool(rig, backend)
    rig.tick(0.0)
    now_s = 1.0
    for _ in range((OVERRIDE_REAPPLIES + 1) * OVERRIDE_TICKS):
        take()
        rig.tick(now_s)
        now_s += PERIOD_S
    assert rig.runner.paused == "contested"
    assert rig.runner.counts["overridden"] == OVERRIDE_REAPPLIES + 1
    take()
    taken = rig.knob_state()
    rig.kernel.forget_writes()
    rig.tick(now_s, count=10)
    rig.tick(now_s + CONTESTED_RETRY_S - 1)
    assert rig.kernel.attempts == [] and rig.knob_state() == taken  # left as the tool set it
    lines = warnings(caplog_warnings)
    assert len(lines) == 2 and "keeps changing the clock" in lines[1]
    # The tool went away: govd takes the device back after the back-off, and keeps it.
    rig.tick(now_s + CONTESTED_RETRY_S + 0.1)
    assert rig.runner.paused is None and rig.device.read().freq_mhz == rig.level_mhz
    rig.tick(now_s + CONTESTED_RETRY_S + OVERRIDE_QUIET_S + 1, count=OVERRIDE_TICKS)
    assert rig.runner.counts["overridden"] == OVERRIDE_REAPPLIES + 1
