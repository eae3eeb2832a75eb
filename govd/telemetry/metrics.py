"""Optional Prometheus exporter: frame times, levels, predictions, power and energy per device,
with the model's estimate of the same work at the top clock and what the saving cost (deadline
misses, units over the slowdown limit, the slowdown itself).

prometheus-client is imported only when metrics are enabled (`pip install govd[metrics]`).
The metrics live in a private registry, so nothing else in the process (or a second `Metrics`
in the tests) shares or pollutes them. The HTTP endpoint binds to loopback unless the
configuration explicitly allows another address: the numbers say what runs on the GPU.
"""

from __future__ import annotations

import bisect
import ipaddress
import math
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from govd.telemetry.metrics_http import MetricsEndpoint
from govd.telemetry.tick import TickRecord

# Frame-time buckets (s) around the usual targets: 240, 144, 120, 90, 60, 45, 30, 20, 10 FPS.
FRAME_TIME_BUCKETS_S = (
    0.0042, 0.0069, 0.0083, 0.0111, 0.0167, 0.0222, 0.0333, 0.05, 0.1, 0.25, 1.0,
)


class MetricsUnavailable(RuntimeError):
    """Metrics were enabled but prometheus-client is not installed."""


class MetricsAddressRefused(ValueError):
    """The metrics address is not loopback and non-loopback was not allowed."""


def _prometheus() -> Any:
    try:
        import prometheus_client
    except ImportError as exc:
        raise MetricsUnavailable(
            "metrics are enabled but prometheus-client is not installed: "
            "install it with `pip install 'govd[metrics]'` or turn metrics off"
        ) from exc
    return prometheus_client


def check_available() -> None:
    """Raise `MetricsUnavailable` when prometheus-client is not installed."""
    _prometheus()


def check_listen_address(address: str, allow_non_loopback: bool = False) -> None:
    """Refuse a non-loopback `address` (IP literal or 'localhost') unless allowed."""
    if address == "localhost":
        return
    try:
        ip = ipaddress.ip_address(address)
    except ValueError as exc:
        raise MetricsAddressRefused(
            f"metrics address {address!r}: give an IP address such as 127.0.0.1 or ::1"
        ) from exc
    if not ip.is_loopback and not allow_non_loopback:
        raise MetricsAddressRefused(
            f"metrics address {address} is not loopback: the exporter would publish what runs "
            "on the GPU to the network; set metrics.allow_non_loopback to do that on purpose"
        )


class WeightedHistogram:
    """A histogram by device whose observations may each stand for several (a sampled MangoHud
    row: `TickRecord.frame_counts`), so that one row standing for a million frames costs one
    step, not a million. Registered in the private registry as a collector; the exposition is
    what a `prometheus_client.Histogram` of the same name and buckets gives (its ``_created``
    series aside)."""

    def __init__(self, prom: Any, name: str, documentation: str,
                 buckets_s: tuple[float, ...]) -> None:
        self._prom = prom
        self.name = name
        self.documentation = documentation
        self.bounds_s = buckets_s
        self._by_device: dict[str, list[float]] = {}
        """device → observations per bucket (the last: above every bound), then their sum."""
        self._lock = threading.Lock()

    def observe(self, device: str, times_ms: Sequence[float],
                counts: Sequence[int] | None = None) -> None:
        """Add each of ``times_ms`` (ms), ``counts`` times each (None: once each)."""
        if not times_ms:
            return
        bounds = self.bounds_s
        with self._lock:
            row = self._by_device.get(device)
            if row is None:
                row = self._by_device[device] = [0.0] * (len(bounds) + 2)
            for k, time_ms in enumerate(times_ms):
                n = 1 if counts is None else counts[k]
                if n <= 0:
                    continue
                time_s = time_ms / 1000.0
                row[bisect.bisect_left(bounds, time_s)] += n
                row[-1] += time_s * n

    def describe(self) -> list[Any]:
        """The family, for the registry's ``auto_describe``."""
        return [self._prom.metrics_core.HistogramMetricFamily(self.name, self.documentation,
                                                      labels=["device"])]

    def collect(self) -> list[Any]:
        """The histogram as a scrape sees it: cumulative buckets, count and sum per device."""
        family = self._prom.metrics_core.HistogramMetricFamily(self.name, self.documentation,
                                                       labels=["device"])
        with self._lock:
            rows = {device: list(row) for device, row in self._by_device.items()}
        for device, row in rows.items():
            cumulative, buckets = 0.0, []
            for bound, n in zip((*self.bounds_s, math.inf), row[:-1], strict=True):
                cumulative += n
                buckets.append(("+Inf" if bound == math.inf else repr(float(bound)), cumulative))
            family.add_metric([device], buckets, sum_value=row[-1])
        return [family]


class Metrics:
    """govd's Prometheus metrics in a private registry; one `record_tick` per device per tick."""

    def __init__(self) -> None:
        prom = _prometheus()
        self.registry = prom.CollectorRegistry(auto_describe=True)
        r = self.registry
        self._frame_time = WeightedHistogram(
            prom, "govd_frame_time_seconds", "GPU time per completed frame.",
            FRAME_TIME_BUCKETS_S)
        r.register(self._frame_time)
        self._level = prom.Gauge(
            "govd_level_hertz", "Clock level running, as read back from the device.", ["device"],
            registry=r,
        )
        self._mem_level = prom.Gauge(
            "govd_memory_level_hertz", "Memory clock running, as read back (two clock domains).",
            ["device"], registry=r,
        )
        self._busy = prom.Gauge(
            "govd_busy_ratio", "Share of the last tick the GPU was busy (0..1).", ["device"],
            registry=r,
        )
        self._waiting = prom.Gauge(
            "govd_left_to_own_governor",
            "1 while the device is left to its own governor for want of frames, else 0.",
            ["device"], registry=r,
        )
        self._predicted = prom.Gauge(
            "govd_predicted_frame_time_seconds",
            "Frame time the model predicts at the running level.", ["device"], registry=r,
        )
        self._power = prom.Gauge(
            "govd_power_watts", "GPU power over the last tick.", ["device"], registry=r,
        )
        self._energy = prom.Counter(
            "govd_energy_joules", "GPU energy used while governed.", ["device"], registry=r,
        )
        self._top_energy = prom.Counter(
            "govd_top_clock_energy_joules",
            "The model's estimate of the energy the work run below the top clock would have "
            "used at the top clock.", ["device"], registry=r,
        )
        self._top_measured = prom.Counter(
            "govd_top_clock_measured_joules",
            "Energy of the work run at the top clock while governed: measured, not estimated.",
            ["device"], registry=r,
        )
        self._top_correction = prom.Gauge(
            "govd_top_clock_correction", "Factor the measured checks found the model's "
            "top-clock estimates off by: govd status shows govd_top_clock_measured_joules plus "
            "govd_top_clock_energy_joules times this.", ["device"], registry=r,
        )
        self._frames = prom.Counter(
            "govd_frames", "Frames (units of work) completed while governed; busy time not "
            "counted.", ["device"], registry=r,
        )
        self._misses = prom.Counter(
            "govd_deadline_misses", "Frames that took longer than the frame-rate target's "
            "deadline.", ["device"], registry=r,
        )
        self._over_limit = prom.Counter(
            "govd_slowdown_over_limit", "Units of throughput work slower than the slowdown "
            "limit allows, against the model's time at the top clock.", ["device"], registry=r,
        )
        self._slowdown = prom.Gauge(
            "govd_slowdown_ratio", "Mean slowdown of the last tick's units against the model's "
            "time at the top clock (0.05: 5 % slower).", ["device"], registry=r,
        )
        self._decisions = prom.Counter(
            "govd_decisions", "Level decisions taken.", ["device", "policy"], registry=r,
        )
        self._switches = prom.Counter(
            "govd_level_switches", "Decisions that changed the level.", ["device"], registry=r,
        )
        self._overruns = prom.Counter(
            "govd_ticks_overrun", "Ticks that took longer than the tick period.", ["device"],
            registry=r,
        )
        self._dropped = prom.Counter(
            "govd_frames_dropped", "Frame reports dropped before reaching the model.",
            ["reason"], registry=r,
        )

    def record_tick(self, tick: TickRecord) -> None:
        """Record one tick of one device (see `TickRecord` for units)."""
        device = tick.device
        if not tick.pseudo:  # busy time per tick is no frame: it would count ticks as frames
            self._frame_time.observe(device, tick.frame_times_ms, tick.frame_counts)
            if tick.frame_times_ms:
                self._frames.labels(device).inc(tick.frames)
        self._level.labels(device).set(tick.level_mhz * 1e6)
        if tick.mem_level_mhz is not None:
            self._mem_level.labels(device).set(tick.mem_level_mhz * 1e6)
        if tick.busy is not None:
            self._busy.labels(device).set(tick.busy)
        if tick.top_energy_j is not None:
            # both counted every tick (one by 0), so that both series exist from the first
            measured = tick.top_energy_j if tick.ran_top else 0.0
            self._top_measured.labels(device).inc(measured)
            self._top_energy.labels(device).inc(tick.top_energy_j - measured)
            self._top_correction.labels(device).set(tick.top_correction)
        if tick.late_frames:
            self._misses.labels(device).inc(tick.late_frames)
        if tick.over_limit_units:
            self._over_limit.labels(device).inc(tick.over_limit_units)
        if tick.slowdown is not None:
            self._slowdown.labels(device).set(tick.slowdown)
        if tick.pred_ms is not None:
            self._predicted.labels(device).set(tick.pred_ms / 1000.0)
        if tick.power_w is not None:
            self._power.labels(device).set(tick.power_w)
        if tick.energy_j is not None:
            self._energy.labels(device).inc(tick.energy_j)
        self._decisions.labels(device, tick.policy).inc()
        if tick.switched:
            self._switches.labels(device).inc()

    def record_waiting(self, device: str, waiting: bool) -> None:
        """Whether ``device`` is left to its own governor for want of frames."""
        self._waiting.labels(device).set(1.0 if waiting else 0.0)

    def record_overrun(self, device: str) -> None:
        """Count a tick of `device` that overran its period."""
        self._overruns.labels(device).inc()

    def record_frames_dropped(self, reason: str, count: int = 1) -> None:
        """Count frame reports dropped for `reason` (e.g. 'parse', 'unknown_sender')."""
        self._dropped.labels(reason).inc(count)

    def exposition(self) -> bytes:
        """The metrics in Prometheus text format, as a scrape would return them."""
        return bytes(_prometheus().generate_latest(self.registry))


@dataclass
class MetricsServer:
    """A running exporter; `close()` stops it."""

    metrics: Metrics
    address: str
    port: int
    _server: MetricsEndpoint

    def close(self) -> None:
        """Stop serving and free the port (at once: no poll interval to wait out)."""
        self._server.close()


def start_metrics_server(
    metrics: Metrics, address: str = "127.0.0.1", port: int = 9464,
    allow_non_loopback: bool = False,
) -> MetricsServer:
    """Serve `metrics` at http://address:port/metrics from one thread with a bounded number of
    connections (`govd.telemetry.metrics_http`); port 0 picks a free port (see `.port`)."""
    check_listen_address(address, allow_non_loopback)
    _prometheus()  # MetricsUnavailable before anything listens
    if address == "localhost":
        address = "127.0.0.1"
    endpoint = MetricsEndpoint(metrics.exposition, address, port)
    return MetricsServer(metrics, address, endpoint.port, endpoint)
