"""One INFO line per device every few seconds; each tick's decision at DEBUG.

A governor ticking every 50 ms would write 20 lines a second per device at INFO, drowning the
journal; the summary says what a person wants to know (level, frame rate, power, energy, how often
the level moved) once per interval, with the same numbers as GOVD_* fields.
"""

from __future__ import annotations

import logging

from govd.telemetry.log import log_fields
from govd.telemetry.tick import TickRecord


class DeviceSummary:
    """Aggregates one device's ticks and logs a summary every `interval_s` seconds of loop time.

    Times come from the caller (`now_s`, the loop's monotonic clock in seconds).
    """

    def __init__(
        self, logger: logging.Logger, device: str, interval_s: float = 10.0
    ) -> None:
        if interval_s <= 0:
            raise ValueError(f"summary interval must be > 0 s, got {interval_s}")
        self._logger = logger
        self.device = device
        self.interval_s = interval_s
        self._start_s: float | None = None
        self._reset()

    def restart(self) -> None:
        """Begin a new interval at the next tick, dropping what the current one holds (a device
        taken back after a pause: its summary must not spread the paused time over its fps)."""
        self._start_s = None
        self._reset()

    def _reset(self) -> None:
        self._frames = 0
        self._frame_time_sum_ms = 0.0
        self._energy_j: float | None = None
        self._power_sum_w = 0.0
        self._power_ticks = 0
        self._switches = 0

    def record_tick(self, now_s: float, tick: TickRecord) -> bool:
        """Log `tick` at DEBUG and add it to the summary at loop time `now_s` (s). Returns True
        when the interval was complete and the INFO summary was logged."""
        if tick.device != self.device:
            raise ValueError(f"summary of {self.device} got a tick of {tick.device}")
        # Checked here so a 20 Hz loop at INFO does not even format the per-tick line.
        if self._logger.isEnabledFor(logging.DEBUG):
            log_fields(
                self._logger, logging.DEBUG,
                f"{self.device}: ran at {tick.level_mhz:g} MHz; {tick.policy} chose "
                f"{tick.chosen_mhz if tick.chosen_mhz is not None else tick.level_mhz:g} MHz",
                device=self.device, policy=tick.policy, level_mhz=tick.level_mhz,
                chosen_mhz=tick.chosen_mhz,
                frames=tick.frames, pred_frame_ms=tick.pred_ms,
                power_w=tick.power_w, energy_j=tick.energy_j, switched=int(tick.switched),
            )
        if self._start_s is None:
            self._start_s = now_s
        self._frames += tick.frames
        self._frame_time_sum_ms += tick.frame_time_sum_ms()
        if tick.power_w is not None:
            self._power_sum_w += tick.power_w
            self._power_ticks += 1
        if tick.energy_j is not None:
            self._energy_j = (self._energy_j or 0.0) + tick.energy_j
        self._switches += int(tick.switched)
        span_s = now_s - self._start_s
        if span_s < self.interval_s:
            return False
        self._log_summary(span_s, tick.level_mhz, tick.pred_ms, tick.policy)
        self._start_s = now_s
        self._reset()
        return True

    def _log_summary(
        self, span_s: float, level_mhz: float, pred_ms: float | None, policy: str
    ) -> None:
        frame_ms = self._frame_time_sum_ms / self._frames if self._frames else None
        power_w = self._power_sum_w / self._power_ticks if self._power_ticks else None
        fps = self._frames / span_s
        parts = [f"{self.device}: {policy}, {level_mhz:g} MHz, {fps:.1f} fps"]
        if frame_ms is not None:
            parts.append(f"{frame_ms:.2f} ms/frame")
        if pred_ms is not None:
            parts.append(f"predicted {pred_ms:.2f} ms")
        if power_w is not None:
            parts.append(f"{power_w:.1f} W")
        if self._energy_j is not None:
            parts.append(f"{self._energy_j:.1f} J")
        parts.append(f"{self._switches} level switches in {span_s:.1f} s")
        log_fields(
            self._logger, logging.INFO, ", ".join(parts),
            device=self.device, policy=policy, level_mhz=level_mhz,
            frame_ms=None if frame_ms is None else round(frame_ms, 3),
            pred_frame_ms=None if pred_ms is None else round(pred_ms, 3),
            power_w=None if power_w is None else round(power_w, 3),
            energy_j=None if self._energy_j is None else round(self._energy_j, 3),
            frames=self._frames, level_switches=self._switches, interval_s=round(span_s, 3),
        )
