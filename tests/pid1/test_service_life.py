"""The installed govd.service as systemd 252 runs it: readiness, reload, stop, crash, watchdog.

Every test gets govd active on the simulated GPU (conftest.py). "As found" is a device state
the test sets before govd takes the device, different from the simulator's defaults.
"""

from __future__ import annotations

from tests.pid1.conftest import (
    CONFIG,
    DROPINS,
    SIM_DEVICE,
    config_text,
    journal,
    main_pid,
    show,
    sim_files,
    wait_for,
)
from tests.pid1.container import Container

GOVERNED = "userspace"
"""The devfreq governor govd sets on a device it governs."""


def governed(box: Container) -> bool:
    return sim_files(box)["governor"] == GOVERNED


def take_over_from(box: Container) -> dict[str, str]:
    """Stop govd, put the device in a state of its own (performance governor, a raised lower
    bound), start govd and wait until it governs; returns that state."""
    box.run("systemctl", "stop", "govd.service", timeout=60)
    levels = box.sh(f"cat {SIM_DEVICE}/available_frequencies").split()
    box.sh(f"echo performance > {SIM_DEVICE}/governor && echo {levels[1]} > {SIM_DEVICE}/min_freq")
    found = sim_files(box)
    assert found["governor"] == "performance" and found["min_freq"] == levels[1]
    box.run("systemctl", "start", "govd.service", timeout=120)
    wait_for("govd to govern the device", lambda: governed(box), box=box)
    return found


def restore_messages(box: Container) -> list[str]:
    """What the unit's ExecStopPost (`govd restore`) printed, oldest first."""
    return [e["MESSAGE"] for e in journal(box) if "govd restore:" in str(e.get("MESSAGE"))]


def test_start_reaches_active_with_the_status_line(govd: Container) -> None:
    govd.run("systemctl", "restart", "govd.service", timeout=120)
    # Type=notify: systemctl returns once govd sent READY=1, so it is active right away.
    assert show(govd, "ActiveState") == "active"
    # READY=1 carries "governing ...", which the first tick's status line replaces at once (a
    # loaded machine may show either by now; tests/test_notify.py pins READY's own text).
    assert show(govd, "StatusText").startswith(("governing govd-sim0 (energy)",
                                                "govd-sim0: energy ("))
    # The periodic STATUS= line then shows the device, its policy and its frame rate.
    line = wait_for("a status line with a frame rate",
                    lambda: "fps" in (text := show(govd, "StatusText")) and text, box=govd)
    assert str(line).startswith("govd-sim0: energy (")
    assert governed(govd)


def test_reload_applies_a_changed_configuration(govd: Container) -> None:
    pid = main_pid(govd)
    govd.write(CONFIG, config_text().replace("name: energy", "name: performance", 1))
    govd.run("systemctl", "reload", "govd.service", timeout=120)  # exits 0: applied
    wait_for("the performance policy in the status line",
             lambda: "govd-sim0: performance (" in show(govd, "StatusText"), box=govd)
    assert main_pid(govd) == pid  # reloaded in place, not restarted
    messages = [e["MESSAGE"] for e in journal(govd, f"_PID={pid}")]
    assert "configuration reloaded from /etc/govd/govd.yaml" in messages


def test_a_broken_configuration_on_reload_is_refused_logged_and_govd_keeps_running(
        govd: Container) -> None:
    pid = main_pid(govd)
    govd.write(CONFIG, config_text().replace("period_ms: 50", "period_ms: fast", 1))
    # ExecReload waits for govd's verdict: the refusal fails the reload (it exited 0 before)
    done = govd.run("systemctl", "reload", "govd.service", check=False, timeout=120)
    assert done.returncode != 0
    assert "Job for govd.service failed" in done.stderr
    refused = wait_for("the refusal in the journal", lambda: [
        e for e in journal(govd, f"_PID={pid}", "-p", "err")
        if str(e["MESSAGE"]).startswith("reload refused, old configuration kept")], box=govd)
    assert "period_ms" in refused[0]["MESSAGE"]  # type: ignore[index]
    # what `systemctl status govd` shows: the reload command's own line, with the reason
    said = [str(e["MESSAGE"]) for e in journal(govd)
            if str(e.get("MESSAGE")).startswith("govd reload: refused")]
    assert said and "period_ms" in said[-1]
    assert show(govd, "ActiveState") == "active" and main_pid(govd) == pid
    wait_for("the energy policy still in force",
             lambda: "govd-sim0: energy (" in show(govd, "StatusText"), box=govd)


def test_stop_restores_the_device_as_found(govd: Container) -> None:
    found = take_over_from(govd)
    assert sim_files(govd) != found
    govd.run("systemctl", "stop", "govd.service", timeout=60)
    assert sim_files(govd) == found
    # govd put it back itself on SIGTERM, so ExecStopPost found nothing left to do.
    assert restore_messages(govd)[-1].endswith("nothing to restore")


SLOW_RESTART = "[Service]\nRestartSec=4s\n"
"""A drop-in widening the window between ExecStopPost and the restart (shipped: 2 s), so that a
loaded test machine still reads the device in it."""


def test_kill_9_is_restored_by_exec_stop_post_and_restarted(govd: Container) -> None:
    govd.write(f"{DROPINS}/restart.conf", SLOW_RESTART)
    govd.run("systemctl", "daemon-reload")
    found = take_over_from(govd)
    pid, restarts = main_pid(govd), int(show(govd, "NRestarts"))
    govd.run("kill", "-9", str(pid))
    # Between the crash and the restart (RestartSec), ExecStopPost has put the device back.
    wait_for("the auto-restart wait", lambda: show(govd, "SubState") == "auto-restart",
             timeout_s=15, box=govd)
    assert sim_files(govd) == found
    assert show(govd, "Result") == "signal"
    assert restore_messages(govd)[-1].startswith("govd restore: 1 device(s) restored")
    wait_for("govd back", lambda: show(govd, "ActiveState") == "active", box=govd)
    assert main_pid(govd) != pid and int(show(govd, "NRestarts")) == restarts + 1
    wait_for("govd to govern the device again", lambda: governed(govd), box=govd)


def test_a_hung_loop_is_killed_by_the_watchdog_and_restored(govd: Container) -> None:
    # A short watchdog keeps the test quick; the shipped 10 s behaves the same, only slower.
    govd.write(f"{DROPINS}/watchdog.conf", "[Service]\nWatchdogSec=2s\n")
    govd.write(f"{DROPINS}/restart.conf", SLOW_RESTART)
    govd.run("systemctl", "daemon-reload")
    found = take_over_from(govd)
    pid = main_pid(govd)
    govd.run("kill", "-STOP", str(pid))  # the loop stops pinging, as if stuck in a driver call
    wait_for("the watchdog kill", lambda: show(govd, "SubState") == "auto-restart",
             timeout_s=30, box=govd)
    assert show(govd, "Result") == "watchdog"
    assert sim_files(govd) == found
    wait_for("govd back", lambda: show(govd, "ActiveState") == "active", box=govd)
    assert main_pid(govd) != pid
    wait_for("govd to govern the device again", lambda: governed(govd), box=govd)
