"""The Prometheus exporter, scraped over HTTP as Prometheus would."""

from __future__ import annotations

import builtins
import sys
import urllib.request
from collections.abc import Iterator

import pytest

pytest.importorskip("prometheus_client", reason="prometheus-client (govd[metrics]) not installed")

from prometheus_client.parser import text_string_to_metric_families

from govd.telemetry import metrics as metrics_module
from govd.telemetry.metrics import (
    Metrics,
    MetricsAddressRefused,
    MetricsServer,
    MetricsUnavailable,
    check_listen_address,
    start_metrics_server,
)
from govd.telemetry.tick import TickRecord


@pytest.fixture
def server() -> Iterator[MetricsServer]:
    running = start_metrics_server(Metrics(), "127.0.0.1", port=0)
    yield running
    running.close()


Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def scrape(server: MetricsServer) -> dict[str, tuple[str, Samples]]:
    """Metric families by name: (type, {(sample name, sorted labels): value}). The `_created`
    timestamps prometheus-client adds to counters and histograms are left out."""
    url = f"http://127.0.0.1:{server.port}/metrics"
    with urllib.request.urlopen(url, timeout=5) as response:
        text = response.read().decode()
    families = {}
    for family in text_string_to_metric_families(text):
        if family.name.endswith("_created"):
            continue
        samples = {(s.name, tuple(sorted(s.labels.items()))): s.value for s in family.samples}
        families[family.name] = (family.type, samples)
    return families


def record_two_ticks(metrics: Metrics) -> None:
    metrics.record_tick(TickRecord(
        "card0", level_mhz=900, frame_times_ms=[16.0, 20.0], pred_ms=17.0,
        power_w=40.0, energy_j=2.0, policy="energy", switched=False,
    ))
    metrics.record_tick(TickRecord(
        "card0", level_mhz=1200, frame_times_ms=[12.0], pred_ms=12.5,
        power_w=55.0, energy_j=2.75, policy="energy", switched=True,
    ))


def test_scrape_has_conventional_names_types_and_units(server: MetricsServer) -> None:
    record_two_ticks(server.metrics)
    server.metrics.record_overrun("card0")
    server.metrics.record_frames_dropped("parse", 3)
    families = scrape(server)
    assert {name: kind for name, (kind, _) in families.items()} == {
        "govd_frame_time_seconds": "histogram",
        "govd_level_hertz": "gauge",
        "govd_predicted_frame_time_seconds": "gauge",
        "govd_power_watts": "gauge",
        "govd_energy_joules": "counter",
        "govd_decisions": "counter",
        "govd_level_switches": "counter",
        "govd_ticks_overrun": "counter",
        "govd_frames_dropped": "counter",
        "govd_memory_level_hertz": "gauge",
        "govd_busy_ratio": "gauge",
        "govd_left_to_own_governor": "gauge",
        "govd_top_clock_energy_joules": "counter",
        "govd_top_clock_measured_joules": "counter",
        "govd_top_clock_correction": "gauge",
        "govd_frames": "counter",
        "govd_deadline_misses": "counter",
        "govd_slowdown_over_limit": "counter",
        "govd_slowdown_ratio": "gauge",
    }
    dev = (("device", "card0"),)
    assert families["govd_level_hertz"][1] == {("govd_level_hertz", dev): 1.2e9}
    assert families["govd_predicted_frame_time_seconds"][1][
        ("govd_predicted_frame_time_seconds", dev)
    ] == pytest.approx(0.0125)
    assert families["govd_power_watts"][1] == {("govd_power_watts", dev): 55.0}
    assert families["govd_energy_joules"][1][("govd_energy_joules_total", dev)] == 4.75
    assert families["govd_decisions"][1][
        ("govd_decisions_total", (("device", "card0"), ("policy", "energy")))
    ] == 2
    assert families["govd_level_switches"][1][("govd_level_switches_total", dev)] == 1
    assert families["govd_ticks_overrun"][1][("govd_ticks_overrun_total", dev)] == 1
    assert families["govd_frames_dropped"][1][
        ("govd_frames_dropped_total", (("reason", "parse"),))
    ] == 3


def test_savings_misses_and_slowdown_are_counted(server: MetricsServer) -> None:
    metrics = server.metrics
    metrics.record_tick(TickRecord(
        "card0", level_mhz=900, frame_times_ms=[16.0, 20.0], pred_ms=17.0, power_w=40.0,
        energy_j=2.0, policy="energy", switched=False, top_energy_j=2.5, top_correction=1.1,
        late_frames=1, mem_level_mhz=5000.0, busy=0.7,
    ))
    metrics.record_tick(TickRecord(
        "card0", level_mhz=900, frame_times_ms=[30.0], pred_ms=28.0, power_w=40.0,
        energy_j=2.0, policy="energy", switched=False, top_energy_j=2.25,
        over_limit_units=1, slowdown=0.12,
    ))
    metrics.record_tick(TickRecord(  # at the top: measured, apart from what is corrected
        "card0", level_mhz=1500, frame_times_ms=[10.0], pred_ms=10.0, power_w=60.0,
        energy_j=3.0, policy="energy", switched=True, top_energy_j=3.0, ran_top=True,
        top_correction=1.2, slowdown=0.0,
    ))
    metrics.record_waiting("card0", True)
    families = scrape(server)
    dev = (("device", "card0"),)
    assert families["govd_top_clock_energy_joules"][1][
        ("govd_top_clock_energy_joules_total", dev)] == 4.75
    assert families["govd_top_clock_measured_joules"][1][
        ("govd_top_clock_measured_joules_total", dev)] == 3.0
    assert families["govd_top_clock_correction"][1] == {("govd_top_clock_correction", dev): 1.2}
    assert families["govd_frames"][1][("govd_frames_total", dev)] == 4
    assert families["govd_deadline_misses"][1][("govd_deadline_misses_total", dev)] == 1
    assert families["govd_slowdown_over_limit"][1][("govd_slowdown_over_limit_total", dev)] == 1
    assert families["govd_slowdown_ratio"][1] == {("govd_slowdown_ratio", dev): 0.0}
    assert families["govd_memory_level_hertz"][1] == {("govd_memory_level_hertz", dev): 5e9}
    assert families["govd_busy_ratio"][1] == {("govd_busy_ratio", dev): 0.7}
    assert families["govd_left_to_own_governor"][1] == {("govd_left_to_own_governor", dev): 1}


def test_busy_time_is_not_counted_as_frames(server: MetricsServer) -> None:
    for _ in range(20):  # a second of 50 ms ticks, each one pseudo-frame of busy time
        server.metrics.record_tick(TickRecord(
            "card0", level_mhz=900, frame_times_ms=[25.0], pred_ms=25.0, power_w=40.0,
            energy_j=2.0, policy="energy", switched=False, busy=0.5, pseudo=True,
        ))
    families = scrape(server)
    assert families["govd_frame_time_seconds"][1] == {}
    assert families["govd_frames"][1] == {}
    assert families["govd_busy_ratio"][1] == {("govd_busy_ratio", (("device", "card0"),)): 0.5}


def test_frame_times_land_in_histogram_in_seconds(server: MetricsServer) -> None:
    record_two_ticks(server.metrics)
    _, samples = scrape(server)["govd_frame_time_seconds"]
    dev = (("device", "card0"),)
    assert samples[("govd_frame_time_seconds_count", dev)] == 3
    assert samples[("govd_frame_time_seconds_sum", dev)] == pytest.approx(0.048)
    bucket = "govd_frame_time_seconds_bucket"
    assert samples[(bucket, (("device", "card0"), ("le", "0.0111")))] == 0
    assert samples[(bucket, (("device", "card0"), ("le", "0.0167")))] == 2
    assert samples[(bucket, (("device", "card0"), ("le", "0.0222")))] == 3


def test_unmeasured_values_leave_gauges_and_energy_alone(server: MetricsServer) -> None:
    server.metrics.record_tick(TickRecord(
        "gpu1", level_mhz=600, frame_times_ms=[], pred_ms=None,
        power_w=None, energy_j=None, policy="ondemand", switched=False,
    ))
    families = scrape(server)
    assert families["govd_power_watts"][1] == {}
    assert families["govd_energy_joules"][1] == {}
    assert families["govd_level_hertz"][1] == {("govd_level_hertz", (("device", "gpu1"),)): 6e8}


def test_each_metrics_object_has_its_own_registry() -> None:
    first, second = Metrics(), Metrics()
    record_two_ticks(first)
    assert b"govd_decisions_total" in first.exposition()
    assert b'govd_decisions_total{device="card0"' not in second.exposition()


@pytest.mark.parametrize("address", ["127.0.0.1", "::1", "localhost", "127.0.0.53"])
def test_loopback_addresses_are_accepted(address: str) -> None:
    check_listen_address(address)


@pytest.mark.parametrize("address", ["0.0.0.0", "192.168.1.10", "::"])
def test_non_loopback_refused_unless_allowed(address: str) -> None:
    with pytest.raises(MetricsAddressRefused, match="not loopback"):
        check_listen_address(address)
    check_listen_address(address, allow_non_loopback=True)


def test_host_names_other_than_localhost_are_refused() -> None:
    with pytest.raises(MetricsAddressRefused, match="give an IP address"):
        check_listen_address("metrics.example.org", allow_non_loopback=True)


def test_missing_prometheus_client_gives_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    real_import = builtins.__import__

    def no_prometheus(name: str, *args: object, **kwargs: object) -> object:
        if name.startswith("prometheus_client"):
            raise ImportError(f"No module named {name!r}")
        return real_import(name, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.delitem(sys.modules, "prometheus_client")
    monkeypatch.setattr(builtins, "__import__", no_prometheus)
    with pytest.raises(MetricsUnavailable, match=r"pip install 'govd\[metrics\]'"):
        metrics_module.Metrics()


def test_an_address_other_hosts_reach_is_refused_unless_the_config_allows_it() -> None:
    from govd.conf.schema import Config
    from govd.daemon.validate import _metrics_problems

    published = {"enabled": True, "listen": "0.0.0.0:9586"}
    [problem] = _metrics_problems(Config.model_validate({"metrics": published}))
    assert "set metrics.allow_non_loopback" in problem
    allowed = Config.model_validate({"metrics": {**published, "allow_non_loopback": True}})
    assert _metrics_problems(allowed) == []
