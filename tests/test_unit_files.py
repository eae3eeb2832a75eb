"""govd's systemd units, checked by systemd's own tools and against what the daemon relies on.

`systemd-analyze verify` fails a unit whose ExecStart binary does not exist, and govd is not
installed where the unit expects it here, so the verify tests copy the units to a temporary
folder with every /usr/local/bin/govd replaced by a small executable stand-in. verify exits 0
on warnings, so any stderr at all fails the test.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

SYSTEMD_DIR = Path(__file__).resolve().parent.parent / "systemd"
SERVICE = SYSTEMD_DIR / "govd.service"
SOCKET = SYSTEMD_DIR / "govd.socket"
METRICS_DROPIN = SYSTEMD_DIR / "metrics.conf.example"
SYSUSERS = SYSTEMD_DIR / "govd.sysusers"
INSTALLED_GOVD = "/usr/local/bin/govd"
MAX_EXPOSURE = 4.0

needs_systemd_analyze = pytest.mark.skipif(
    shutil.which("systemd-analyze") is None, reason="systemd-analyze is not installed"
)


def directives(path: Path) -> dict[str, list[str]]:
    """`Key` → every value it is given, in order (systemd keys repeat), comments left out."""
    found: dict[str, list[str]] = {}
    for line in path.read_text().splitlines():
        line = line.strip()
        if not line or line[0] in "#;[":
            continue
        key, _, value = line.partition("=")
        found.setdefault(key.strip(), []).append(value.strip())
    return found


def the(path: Path, key: str) -> str:
    values = directives(path).get(key, [])
    assert len(values) == 1, f"{path.name}: expected one {key}=, found {values}"
    return values[0]


def units_with_stand_in(tmp_path: Path, with_metrics: bool = False) -> tuple[Path, Path]:
    stand_in = tmp_path / "bin" / "govd"
    stand_in.parent.mkdir()
    stand_in.write_text("#!/bin/sh\nexit 0\n")
    stand_in.chmod(0o755)
    units = tmp_path / "units"
    units.mkdir()
    service = units / SERVICE.name
    service.write_text(SERVICE.read_text().replace(INSTALLED_GOVD, str(stand_in)))
    socket = units / SOCKET.name
    shutil.copy(SOCKET, socket)
    if with_metrics:
        (units / "govd.service.d").mkdir()
        shutil.copy(METRICS_DROPIN, units / "govd.service.d" / "metrics.conf")
    return service, socket


def analyze(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["systemd-analyze", *args], capture_output=True, text=True, timeout=60, check=False
    )


def exposure(service: Path) -> float:
    result = analyze("security", "--offline=yes", "--no-pager", str(service))
    last = result.stdout.strip().splitlines()[-1]
    match = re.search(r"Overall exposure level for \S+: (\d+(?:\.\d+)?)", last)
    assert match, f"unexpected last line from systemd-analyze security: {last!r}\n{result.stderr}"
    return float(match.group(1))


@needs_systemd_analyze
@pytest.mark.parametrize("with_metrics", [False, True], ids=["plain", "metrics-drop-in"])
def test_units_verify_without_any_warning(tmp_path: Path, with_metrics: bool) -> None:
    service, socket = units_with_stand_in(tmp_path, with_metrics)
    result = analyze("verify", str(service), str(socket))
    assert result.returncode == 0 and result.stderr == "", result.stderr


@needs_systemd_analyze
def test_verify_really_reports_a_missing_binary() -> None:
    # Guards the stand-in: if verify stopped checking ExecStart, the tests above would prove less.
    result = analyze("verify", str(SERVICE), str(SOCKET))
    assert f"{INSTALLED_GOVD} is not executable" in result.stderr or shutil.which(INSTALLED_GOVD)


@needs_systemd_analyze
@pytest.mark.parametrize("with_metrics", [False, True], ids=["plain", "metrics-drop-in"])
def test_security_exposure_is_low(tmp_path: Path, with_metrics: bool) -> None:
    service, _ = units_with_stand_in(tmp_path, with_metrics)
    assert exposure(service) <= MAX_EXPOSURE


def test_service_is_notify_with_watchdog_and_restart() -> None:
    assert the(SERVICE, "Type") == "notify"
    assert re.fullmatch(r"\d+s", the(SERVICE, "WatchdogSec"))
    assert the(SERVICE, "Restart") == "on-failure"



def test_reload_waits_for_govds_verdict_on_the_daemon_systemd_started() -> None:
    # not `kill -HUP`: a signal cannot fail, so a refused file looked like a reload
    start = the(SERVICE, "ExecStart").split()
    reload = the(SERVICE, "ExecReload").split()
    assert reload[:2] == [INSTALLED_GOVD, "reload"]
    assert reload[2:4] == start[2:4] == ["--config", "/etc/govd/govd.yaml"]
    assert reload[4:] == ["--pid", "$MAINPID"]


def test_clocks_restored_after_every_stop_with_the_same_binary_and_config() -> None:
    start = the(SERVICE, "ExecStart").split()
    stop_post = the(SERVICE, "ExecStopPost").split()
    assert start[:2] == [INSTALLED_GOVD, "run"]
    assert stop_post[:2] == [INSTALLED_GOVD, "restore"]
    assert start[2:] == stop_post[2:] == ["--config", "/etc/govd/govd.yaml"]


def test_numba_cache_lives_in_the_cache_directory() -> None:
    cache = the(SERVICE, "CacheDirectory")
    environment = dict(v.split("=", 1) for v in directives(SERVICE)["Environment"])
    assert environment["NUMBA_CACHE_DIR"].startswith(f"/var/cache/{cache}/")


def test_numpy_starts_no_blas_thread_per_cpu_in_the_daemon() -> None:
    environment = dict(v.split("=", 1) for v in directives(SERVICE)["Environment"])
    assert environment["OPENBLAS_NUM_THREADS"] == "1"


def test_memory_deny_write_execute_is_not_set_and_says_why() -> None:
    assert "MemoryDenyWriteExecute" not in directives(SERVICE)
    comment = next(
        line for line in SERVICE.read_text().splitlines() if "MemoryDenyWriteExecute" in line
    )
    assert comment.lstrip().startswith("#") and "numba" in comment


def test_base_unit_denies_ip_and_drop_in_adds_it() -> None:
    base = directives(SERVICE)
    assert base["RestrictAddressFamilies"] == ["AF_UNIX AF_NETLINK"]
    assert base["IPAddressDeny"] == ["any"]
    dropin = directives(METRICS_DROPIN)
    assert dropin["RestrictAddressFamilies"] == ["AF_INET AF_INET6"]
    assert dropin["IPAddressAllow"] == ["localhost"]


def test_sysfs_writes_allowed_only_under_device_trees() -> None:
    writable = the(SERVICE, "ReadWritePaths").split()
    assert {p.lstrip("-") for p in writable} == {
        "/sys/class/devfreq", "/sys/class/drm", "/sys/devices"
    }
    assert the(SERVICE, "ProtectSystem") == "strict"


def test_capabilities_are_only_what_nvml_needs() -> None:
    assert the(SERVICE, "CapabilityBoundingSet") == "CAP_SYS_ADMIN"
    assert the(SERVICE, "NoNewPrivileges") == "yes"


def test_frame_socket_matches_the_design() -> None:
    assert the(SOCKET, "ListenDatagram") == "/run/govd/frames.sock"
    assert the(SOCKET, "SocketMode") == "0660"
    assert the(SOCKET, "PassCredentials") == "yes"
    assert the(SOCKET, "FileDescriptorName") == "frames"
    assert the(SOCKET, "Service") == SERVICE.name


def test_socket_group_is_created_by_sysusers() -> None:
    group = the(SOCKET, "SocketGroup")
    entries = [line.split() for line in SYSUSERS.read_text().splitlines() if line.strip()]
    assert ["g", group, "-"] in [e for e in entries if not e[0].startswith("#")]


def test_runtime_directory_survives_service_stop_for_the_socket() -> None:
    assert the(SOCKET, "ListenDatagram").startswith(f"/run/{the(SERVICE, 'RuntimeDirectory')}/")
    assert the(SERVICE, "RuntimeDirectoryPreserve") == "yes"


def test_frames_sysctl_example_names_a_real_kernel_setting() -> None:
    lines = [line for line in (SYSTEMD_DIR / "frames-sysctl.conf.example").read_text()
             .splitlines() if line.strip() and not line.startswith("#")]
    assert len(lines) == 1
    key, _, value = (part.strip() for part in lines[0].partition("="))
    proc = Path("/proc/sys") / key.replace(".", "/")
    if not Path("/proc/sys/net").exists():
        pytest.skip("no /proc/sys/net here")
    assert proc.exists(), key
    assert int(value) > 10  # the kernel's default
