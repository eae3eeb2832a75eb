"""What the installed govd.service exchanges with the system under systemd 252: the activated
frame socket and its sysusers group, the journal, the compiled kernels and numba's cache under
the syscall filter, and the unit's exposure as systemd itself scores it."""

from __future__ import annotations

import json
import re
from pathlib import Path

import yaml

from tests.pid1.conftest import (
    CONFIG,
    SUMMARY_INTERVAL_S,
    config_text,
    journal,
    main_pid,
    show,
    wait_for,
)
from tests.pid1.container import Container
from tests.test_unit_files import analyze, exposure, units_with_stand_in

SOCKET = "/run/govd/frames.sock"
STATUS_FILE = "/run/govd/status.json"
NUMBA_CACHE = "/var/cache/govd/numba"
NOBODY = "65534"
SUMMARY_FIELDS = ("GOVD_DEVICE", "GOVD_POLICY", "GOVD_LEVEL_MHZ", "GOVD_FRAME_MS",
                  "GOVD_PRED_FRAME_MS", "GOVD_POWER_W", "GOVD_ENERGY_J")
"""The fields README.md ("Reading the journal") documents, all on every periodic summary."""

SEND = f"""
import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
for _ in range(int(sys.argv[1])):
    s.sendto(b"F 4000 app=probe\\n", "{SOCKET}")
"""


def status(box: Container) -> dict:
    """govd's status file (written every second; empty until the first one)."""
    text = box.sh(f"cat {STATUS_FILE} 2>/dev/null", check=False)
    return json.loads(text) if text else {"frames": {}, "devices": []}


def send_frames(box: Container, count: int, *groups: str) -> str:
    """Send `count` frame datagrams as user nobody with the given supplementary groups; the
    sender's stderr (empty when all went)."""
    setpriv = ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}",
               f"--groups={','.join(groups)}" if groups else "--clear-groups"]
    return box.run(*setpriv, "/opt/govd/bin/python", "-c", SEND, str(count),
                   check=False).stderr


def test_frames_sent_to_the_activated_socket_by_group_govd_reach_govd(govd: Container) -> None:
    # sysusers made the group at boot from /usr/lib/sysusers.d/govd.conf (the container's /etc
    # started empty), and govd.socket made the socket with it.
    gid = govd.run("getent", "group", "govd").stdout.split(":")[2]
    assert govd.sh(f"stat -c '%U:%G %a' {SOCKET}").strip() == "root:govd 660"
    # No frames from the simulator (root) below, and no govd: a fresh socket, systemd's alone.
    govd.run("systemctl", "stop", "govd-sim.service", "govd.socket", "govd.service")
    govd.run("systemctl", "start", "govd.socket")
    assert show(govd, "ActiveState", "govd.socket") == "active"
    assert "Permission denied" in send_frames(govd, 1)  # nobody, not in group govd: refused
    assert show(govd, "ActiveState") == "inactive"
    # A member's frames wait in the socket and start govd, which is handed the socket.
    assert send_frames(govd, 5, gid) == ""
    wait_for("govd started by its socket", lambda: show(govd, "ActiveState") == "active",
             timeout_s=30, box=govd)
    wait_for("govd to take the queued frames",
             lambda: status(govd)["frames"].get("accepted", 0) >= 5, timeout_s=10, box=govd)
    assert status(govd)["frames"].get("rejected_sender", 0) == 0


def test_install_made_the_mangohud_folder_the_service_can_read(govd: Container) -> None:
    # systemd-tmpfiles (make install-system) from /usr/lib/tmpfiles.d/govd.conf.
    folder = "/var/lib/govd/mangohud"
    assert govd.sh(f"stat -c '%a %U:%G' {folder}").strip() == "3770 root:govd"
    # Readable, not writable, from inside the unit's sandbox (ProtectSystem=strict).
    pid = main_pid(govd)
    inside = govd.run("nsenter", "-t", str(pid), "-m", "sh", "-c",
                      f"ls {folder} >/dev/null && touch {folder}/x", check=False)
    assert "Read-only file system" in inside.stderr


def test_the_journal_carries_the_govd_fields_and_the_periodic_summary(govd: Container) -> None:
    pid = main_pid(govd)

    def summaries() -> list[dict[str, str]]:
        return [e for e in journal(govd, f"_PID={pid}") if "GOVD_INTERVAL_S" in e]

    found = wait_for("two periodic summaries", lambda: len(s := summaries()) >= 2 and s,
                     timeout_s=10 * SUMMARY_INTERVAL_S, box=govd)
    for entry in found:  # type: ignore[union-attr]
        assert entry["SYSLOG_IDENTIFIER"] == "govd" and entry["PRIORITY"] == "6"
        assert entry["_SYSTEMD_UNIT"] == "govd.service"
        missing = [f for f in SUMMARY_FIELDS if f not in entry]
        assert not missing, entry
        assert entry["GOVD_DEVICE"] == "govd-sim0" and entry["GOVD_POLICY"] == "energy"
        # the interval it covers, measured: the configured period give or take a tick
        assert abs(float(entry["GOVD_INTERVAL_S"]) - SUMMARY_INTERVAL_S) < 0.2
        assert float(entry["GOVD_ENERGY_J"]) > 0
    # The documented filter by field works on what journald stored.
    one = journal(govd, "GOVD_DEVICE=govd-sim0")
    assert one and all(e["GOVD_DEVICE"] == "govd-sim0" for e in one)


def numba_cache(box: Container) -> dict[str, str]:
    """name -> mtime (ns) of every file in govd's numba cache."""
    listing = box.sh(f"find {NUMBA_CACHE} -type f -printf '%P %T@\\n' 2>/dev/null", check=False)
    return dict(line.rsplit(" ", 1) for line in listing.splitlines())


def predicting(box: Container) -> bool:
    """The model has run (its compiled kernels): a predicted frame time in the status file."""
    devices = status(box)["devices"]
    return bool(devices) and devices[0].get("predicted_frame_ms") is not None


def sandbox_complaints(box: Container) -> list[str]:
    """Warnings and errors in the running govd's journal, less model-stress resets (their
    GOVD_CONDITION field): those are about the workload the simulator sends, not about the
    sandbox (the seed form's RLS can, rarely, reset in a steady game: seen once in CI)."""
    return [e["MESSAGE"] for e in journal(box, "-p", "warning", f"_PID={main_pid(box)}")
            if "GOVD_CONDITION" not in e]


def test_the_service_runs_the_compiled_kernels_without_numba(govd: Container) -> None:
    """`make install` compiled the per-tick kernels: the service logs so, maps neither numba's
    compiler (llvmlite) nor SciPy, and runs under the unit's seccomp filter (mode 2)."""
    govd.run("systemctl", "restart", "govd.service", timeout=120)
    wait_for("the model predicting", lambda: predicting(govd), box=govd)
    pid = main_pid(govd)
    said = [e["MESSAGE"] for e in journal(govd, f"_PID={pid}") if "kernels:" in e["MESSAGE"]]
    assert said and said[0].startswith("kernels: compiled ahead of time"), said
    maps = govd.sh(f"cat /proc/{pid}/maps")  # (numpy.libs/libscipy_openblas* is numpy's)
    assert "/llvmlite/" not in maps and "/scipy/" not in maps
    assert govd.sh(f"grep ^Seccomp: /proc/{pid}/status").split() == ["Seccomp:", "2"]
    assert not sandbox_complaints(govd)


def test_numba_compiles_and_loads_its_cache_under_the_syscall_filter(govd: Container) -> None:
    """Without the compiled kernels (a failed build at install), govd falls back to numba's
    JIT: it compiles and writes its cache once, then loads it, under the unit's filter."""
    assert show(govd, "SystemCallFilter")  # the unit's @system-service ~@privileged
    aside = "/var/tmp/govd-aot-aside"
    model = "/opt/govd/lib/python3*/site-packages/govd/model"
    govd.run("systemctl", "stop", "govd.service")
    govd.sh(f"mkdir -p {aside} && mv {model}/_aot_* {aside}/")
    try:
        govd.run("rm", "-rf", NUMBA_CACHE)
        govd.run("systemctl", "start", "govd.service", timeout=120)  # cold: compile and write
        wait_for("the model predicting", lambda: predicting(govd), box=govd)
        cold = numba_cache(govd)
        assert any(name.endswith(".nbi") for name in cold)
        assert any(name.endswith(".nbc") for name in cold)
        govd.run("systemctl", "restart", "govd.service", timeout=120)  # warm: load, write nothing
        wait_for("the model predicting", lambda: predicting(govd), box=govd)
        assert numba_cache(govd) == cold
        # ... and that process runs under the unit's seccomp filter (mode 2: filtered).
        seccomp = govd.sh(f"grep ^Seccomp: /proc/{main_pid(govd)}/status").split()
        assert seccomp == ["Seccomp:", "2"]
        assert not sandbox_complaints(govd)
    finally:
        govd.run("systemctl", "stop", "govd.service")
        govd.sh(f"mv {aside}/_aot_* $(echo {model})/ && rmdir {aside}")


def test_systemd_analyze_security_in_the_container_matches_the_offline_figure(
        govd: Container, tmp_path: Path) -> None:
    service, _ = units_with_stand_in(tmp_path, with_metrics=False)
    offline = exposure(service)
    online = govd.run("systemd-analyze", "security", "--no-pager", "govd.service").stdout
    match = re.search(r"Overall exposure level for govd.service: (\d+(?:\.\d+)?)",
                      online.strip().splitlines()[-1])
    assert match, online[-500:]
    assert float(match.group(1)) == offline, (online, analyze_offline(service))


def analyze_offline(service: Path) -> str:
    return analyze("security", "--offline=yes", "--no-pager", str(service)).stdout


README = Path(__file__).resolve().parents[2] / "README.md"


def readme_blocks(section: str, kind: str) -> list[str]:
    """The ```kind blocks of one README section, as written."""
    text = README.read_text()
    start = text.index(section)
    body = text[start:text.index("\n## ", start + len(section))]
    return re.findall(rf"```{kind}\n(.*?)```", body, re.DOTALL)


def test_the_readme_metrics_section_serves_the_metrics(govd: Container) -> None:
    [config] = readme_blocks("## Metrics (Prometheus)", "yaml")
    [commands] = readme_blocks("## Metrics (Prometheus)", "sh")
    enabled = yaml.safe_load(config)
    govd.write(CONFIG, config_text_with(**enabled))
    *setup, scrape = commands.strip().splitlines()
    for line in setup:
        govd.sh(line, timeout=120)
    # the drop-in lets the unit open its port; the model needs a few ticks for the estimate
    wait_for("the model predicting", lambda: predicting(govd), box=govd)
    families = wait_for("the saving's metrics", lambda: "govd_top_clock_energy_joules_total"
                        in (text := govd.sh(scrape, check=False)) and text, box=govd)
    names = {line.split("{")[0].split(" ")[0] for line in str(families).splitlines()}
    for name in ("govd_level_hertz", "govd_energy_joules_total", "govd_frames_total",
                 "govd_top_clock_energy_joules_total", "govd_top_clock_measured_joules_total",
                 "govd_top_clock_correction",
                 "govd_busy_ratio", "govd_left_to_own_governor"):
        assert name in names, sorted(names)


def config_text_with(**sections: object) -> str:
    """The test configuration with ``sections`` merged over it."""
    document = yaml.safe_load(config_text())
    for key, value in sections.items():
        document[key] = {**document.get(key, {}), **value}  # type: ignore[dict-item]
    return yaml.safe_dump(document, sort_keys=False)


PLAYER_LOG = """
import os, sys, time
os.umask(0o007)  # the log is 0660: readable by its group (govd, from the folder) alone
path = "/var/lib/govd/mangohud/game_2026-01-02_03-04-05.csv"
with open(path, "w") as log:
    log.write("fps,frametime,elapsed\\n")
    for k in range(int(sys.argv[1])):
        log.write(f"80.0,12.5,{k * 12_500_000}\\n")
        log.flush()
        time.sleep(0.0125)
"""


def test_the_readme_mangohud_section_follows_a_players_0660_log(govd: Container) -> None:
    # README "Frames from games (MangoHud)": step 1 (install made the folder and the group; the
    # player is a member), step 3 (the configuration, then a restart), step 4 (govd status).
    [frames] = [block for block in readme_blocks("## Frames from games (MangoHud)", "yaml")
                if "source: mangohud" in block]
    govd.write(CONFIG, config_text_with(**yaml.safe_load(frames)))
    govd.run("systemctl", "restart", "govd.service", timeout=120)
    gid = govd.run("getent", "group", "govd").stdout.split(":")[2]
    player = govd.run("setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", f"--groups={gid}",
                      "/opt/govd/bin/python", "-c", PLAYER_LOG, "400", check=False, timeout=120)
    assert player.returncode == 0, player.stderr
    mode = govd.sh("stat -c '%a %G' /var/lib/govd/mangohud/game_2026-01-02_03-04-05.csv")
    assert mode.split() == ["660", "govd"]
    report = wait_for("the log's frames in the status", lambda: (
        status(govd).get("frame_source", {}).get("frames_by_app", {}).get("game", 0) > 100
        and status(govd)["frame_source"]), timeout_s=30, box=govd)
    assert not report.get("problems"), report  # type: ignore[union-attr]
    shown = govd.run("govd", "status").stdout
    assert "frames from MangoHud" in shown and "game " in shown
