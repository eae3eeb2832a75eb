"""The Prometheus exporter wired into a real `govd run`: scraped over HTTP while it governs the
live simulated GPU, and checked against the status file the same daemon writes."""

from __future__ import annotations

import socket
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("prometheus_client", reason="prometheus-client (govd[metrics]) not installed")

from prometheus_client.parser import text_string_to_metric_families

from tests.live_gpu import (
    DEVICE_NAME,
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


@pytest.fixture(scope="module")
def governed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, Path, int]]:
    """(work folder, tree root, metrics port) of a daemon with metrics on, governing the sim
    with `performance` so the level read back cannot move between a scrape and a status."""
    work = tmp_path_factory.mktemp("metrics")
    root = work / "gpu"
    sim = start_sim(root, work / "frames.sock")
    port = free_port()
    daemon = start_daemon(work, root, (
        "policy: {name: performance}\n"
        f"metrics: {{enabled: true, listen: '127.0.0.1:{port}'}}\n"
    ))
    try:
        next_status(work, 0.0, daemon)
        yield work, root, port
        assert stop(daemon) == 0, (work / "daemon.err").read_text()
    finally:
        stop(daemon)
        stop(sim)


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
