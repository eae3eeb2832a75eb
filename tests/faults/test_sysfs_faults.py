"""Every sysfs backend × errno × (read, write), driven through a real `DeviceRunner`.

What is pinned for each: the runner pauses (ENODEV on a read: the device is gone, nothing is
written to it) or hands the device back (the knob files hold what was found), one warning per
episode, nothing written while it backs off, and the device governed again once the fault clears.
"""

from __future__ import annotations

import errno
import logging

import pytest

from tests.faults.rigs import LOGGER, RIGS, Rig

ERRNOS = {"EINVAL": errno.EINVAL, "EBUSY": errno.EBUSY, "EACCES": errno.EACCES,
          "EIO": errno.EIO, "ENODEV": errno.ENODEV}


def warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records
            if r.name == LOGGER and r.levelno == logging.WARNING]


def governed_at_level(rig: Rig) -> bool:
    return rig.runner.paused is None and rig.device.read().freq_mhz == rig.level_mhz


@pytest.fixture
def caplog_warnings(caplog: pytest.LogCaptureFixture) -> pytest.LogCaptureFixture:
    caplog.set_level(logging.WARNING, logger=LOGGER)
    return caplog


@pytest.mark.parametrize("code_name", list(ERRNOS))
@pytest.mark.parametrize("backend", list(RIGS))
def test_failed_read_pauses_restores_and_recovers(tmp_path, backend, code_name, caplog_warnings):
    rig = RIGS[backend](tmp_path)
    found = rig.knob_state()
    rig.tick(0.0)
    assert governed_at_level(rig)
    rig.kernel.fail(rig.read_file, "read", ERRNOS[code_name], times=1)
    rig.kernel.forget_writes()
    rig.tick(1.0)
    gone = code_name == "ENODEV"
    assert rig.runner.paused == ("gone" if gone else "read")
    if gone:
        assert rig.kernel.attempts == []  # nothing is written to a device that went away
    else:
        assert rig.knob_state() == found  # handed back
    rig.kernel.forget_writes()
    rig.tick(1.5)  # backing off (1 s): not even probed
    assert rig.kernel.attempts == [] and rig.runner.paused is not None
    rig.tick(2.1)
    assert governed_at_level(rig)
    assert rig.runner.counts["resumed"] == 1
    assert len(warnings(caplog_warnings)) == 1


@pytest.mark.parametrize("code_name", list(ERRNOS))
@pytest.mark.parametrize("backend", list(RIGS))
def test_failed_level_write_hands_back_and_recovers(tmp_path, backend, code_name,
                                                    caplog_warnings):
    rig = RIGS[backend](tmp_path)
    found = rig.knob_state()
    rig.kernel.fail(rig.write_file, "write", ERRNOS[code_name], times=1)
    rig.tick(0.0)
    assert rig.runner.paused == ("gone" if code_name == "ENODEV" else "write")
    assert rig.knob_state() == found  # handed back, even after ENODEV: the read had worked
    assert [code for *_, code in rig.kernel.attempts].count(ERRNOS[code_name]) == 1
    rig.tick(1.1)
    assert governed_at_level(rig)
    assert rig.runner.counts["resumed"] == 1
    assert len(warnings(caplog_warnings)) == 1


@pytest.mark.parametrize("backend", list(RIGS))
def test_lasting_write_fault_is_one_warning_then_a_count_when_it_clears(tmp_path, backend,
                                                                      caplog_warnings):
    rig = RIGS[backend](tmp_path)
    found = rig.knob_state()
    rig.kernel.fail(rig.write_file, "write", errno.EBUSY)
    for second in range(50):  # under the limiter's 60 s "still going" report
        rig.tick(float(second))
        assert rig.knob_state() == found  # handed back after every failed take-back
    refused = rig.runner.counts["paused_write"]
    assert refused >= 4  # probes backed off 1, 2, 4 … 30 s: a handful, not one per tick
    assert len(warnings(caplog_warnings)) == 1
    rig.kernel.heal()
    rig.tick(200.0)
    assert governed_at_level(rig)
    lines = warnings(caplog_warnings)
    assert len(lines) == 2 and "ended" in lines[1] and f"repeated {refused - 1} times" in lines[1]


@pytest.mark.parametrize("backend", list(RIGS))
def test_lasting_read_fault_counts_failed_probes_in_its_episode(tmp_path, backend,
                                                               caplog_warnings):
    rig = RIGS[backend](tmp_path)
    rig.tick(0.0)
    rig.kernel.fail(rig.read_file, "read", errno.EIO)
    for second in range(1, 50):
        rig.tick(float(second))
    assert rig.runner.paused == "read"
    assert len(warnings(caplog_warnings)) == 1
    probes = rig.kernel.faults[(rig.read_file, "read")].fired
    rig.kernel.heal()
    rig.tick(200.0)
    assert governed_at_level(rig)
    lines = warnings(caplog_warnings)
    assert len(lines) == 2 and f"repeated {probes - 1} times" in lines[1]


@pytest.mark.parametrize("backend", list(RIGS))
def test_file_vanishing_mid_run_pauses_and_its_return_is_governed(tmp_path, backend,
                                                                caplog_warnings):
    rig = RIGS[backend](tmp_path)
    rig.tick(0.0)
    rig.kernel.vanish(rig.read_file)
    rig.kernel.forget_writes()
    rig.tick(1.0, count=5)
    assert rig.runner.paused == "gone"
    assert rig.kernel.attempts == []
    rig.kernel.reappear(rig.read_file)
    rig.tick(3.0)
    assert governed_at_level(rig)
    assert len(warnings(caplog_warnings)) == 1
