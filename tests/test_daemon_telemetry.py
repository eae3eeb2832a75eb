"""A real `govd run` governing the live simulated GPU, seen from outside: its Prometheus exporter
scraped over HTTP and checked against the status file, and `govd status` run as an ordinary user
(uid 65534), as the unit runs it: umask 077, status beside the state file in a 0755 folder."""

from __future__ import annotations

import json
import os
import shutil
import socket
import stat
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("prometheus_client", reason="prometheus-client (govd[metrics]) not installed")

from prometheus_client.parser import text_string_to_metric_families

from tests.live_gpu import (
    DEVICE_NAME,
    WAIT_S,
    govd_env,
    next_status,
    start_daemon,
    start_sim,
    stop,
    tree_levels_mhz,
    wait_for,
)


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def scrape(port: int) -> dict[str, float]:
    """Every sample of the device as {sample name: value} (labels other than the device and
    the policy dropped)."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
        text = response.read().decode()
    samples = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.labels.get("device") == DEVICE_NAME and "le" not in sample.labels:
                samples[sample.name] = sample.value
    return samples


NOBODY = 65534


@pytest.fixture(scope="module")
def governed() -> Iterator[tuple[Path, Path, int]]:
    """(work folder, tree root, metrics port) of a daemon with metrics on, governing the sim
    with `performance` so the level read back cannot move between a scrape and a status."""
    # Not pytest's tmp_path: that is 0700, and uid 65534 must reach the status file as it
    # reaches /run/govd (RuntimeDirectoryMode=0755).
    work = Path(tempfile.mkdtemp(prefix="govd-telemetry-"))
    work.chmod(0o755)
    root = work / "gpu"
    sim = start_sim(root, work / "frames.sock")
    port = free_port()
    umask = os.umask(0o077)  # the unit's UMask=; the child inherits it
    try:
        daemon = start_daemon(work, root, (
            "policy: {name: performance}\n"
            f"metrics: {{enabled: true, listen: '127.0.0.1:{port}'}}\n"
        ))
    finally:
        os.umask(umask)
    try:
        next_status(work, 0.0, daemon)
        yield work, root, port
        assert stop(daemon) == 0, (work / "daemon.err").read_text()
    finally:
        stop(daemon)
        stop(sim)
        shutil.rmtree(work, ignore_errors=True)


def test_level_gauge_is_the_level_in_the_status_file(governed: tuple[Path, Path, int]) -> None:
    work, root, port = governed
    status = next_status(work, time.time())
    level_hz = scrape(port)["govd_level_hertz"]
    assert status["devices"][0]["level_mhz"] * 1e6 == level_hz
    assert level_hz / 1e6 == max(tree_levels_mhz(root))


def test_counters_lie_between_the_status_written_before_and_after_the_scrape(
    governed: tuple[Path, Path, int],
) -> None:
    """Decisions and energy are counted in the same tick the status counts them: a scrape
    taken between two status files lies between their numbers."""
    work, _root, port = governed
    before = next_status(work, time.time())["devices"][0]
    scraped_unix_s = time.time()
    samples = scrape(port)
    after = next_status(work, scraped_unix_s)["devices"][0]
    assert before["ticks"] <= samples["govd_decisions_total"] <= after["ticks"]
    assert before["energy_j"] - 1e-6 <= samples["govd_energy_joules_total"]
    assert samples["govd_energy_joules_total"] <= after["energy_j"] + 1e-6


def test_frame_histogram_and_energy_grow_while_governing(
    governed: tuple[Path, Path, int],
) -> None:
    _work, _root, port = governed
    first = scrape(port)
    assert first["govd_frame_time_seconds_count"] > 0  # the sim's frames reached the model
    later = wait_for(
        lambda: (s := scrape(port))["govd_decisions_total"] > first["govd_decisions_total"] + 20
        and s, "twenty more ticks")
    assert later["govd_frame_time_seconds_count"] > first["govd_frame_time_seconds_count"]
    assert later["govd_energy_joules_total"] > first["govd_energy_joules_total"]
    assert 0.0 < later["govd_frame_time_seconds_sum"] / later["govd_frame_time_seconds_count"] < 1.0


def govd_status_as_nobody(state_file: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        pytest.skip("needs root and setpriv to run a child as uid 65534")
    # setpriv rather than subprocess's user=: here the interpreter lives under /root (0700),
    # which Python's child cannot exec once it has dropped to 65534 (setpriv's child can).
    # HOME=/nonexistent, as nobody has: `govd status` loads no numba kernels, so it needs no
    # cache folder.
    return subprocess.run(
        ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups",
         sys.executable, "-m", "govd", "status", "--state-file", str(state_file), *extra],
        env=govd_env({"HOME": "/nonexistent"}), capture_output=True, text=True,
        timeout=WAIT_S, check=False,
    )


def test_status_file_is_world_readable_and_state_file_is_not(
    governed: tuple[Path, Path, int],
) -> None:
    work, _root, _port = governed
    assert stat.S_IMODE((work / "status.json").stat().st_mode) == 0o644
    assert stat.S_IMODE((work / "state.json").stat().st_mode) == 0o600


def test_govd_status_works_as_an_ordinary_user(governed: tuple[Path, Path, int]) -> None:
    work, _root, _port = governed
    shown = govd_status_as_nobody(work / "state.json")
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    assert lines[0].startswith("govd pid ")
    assert lines[1].startswith(f"  {DEVICE_NAME}: performance (60 FPS), ")
    as_json = govd_status_as_nobody(work / "state.json", "--json")
    assert as_json.returncode == 0, as_json.stderr
    assert json.loads(as_json.stdout)["devices"][0]["device"] == DEVICE_NAME


def test_govd_status_as_an_ordinary_user_without_a_daemon_says_so() -> None:
    shown = govd_status_as_nobody(Path(tempfile.gettempdir()) / "govd-none" / "state.json")
    assert shown.returncode == 2
    assert "no status file; is govd running?" in shown.stderr
