"""One INFO line per device every few seconds; each tick's decision at DEBUG.

A governor ticking every 50 ms would write 20 lines a second per device at INFO, drowning the
journal; the summary says what a person wants to know once per interval, with the same numbers
as GOVD_* fields: the level (and how long each level ran), the frame rate (or, for frames of GPU
busy time, how busy the GPU was), power and energy, what the same work would have cost at the
top clock by the model's estimate (`govd.telemetry.savings`), and the missed deadlines or the
slowdown that saving cost.
"""

from __future__ import annotations

import logging
import math
from collections import Counter

from govd.telemetry.log import log_fields
from govd.telemetry.savings import Savings
from govd.telemetry.tick import TickRecord

RESIDENCY_SHOWN = 3
"""Levels named in the summary's message (the field carries them all)."""


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
        self._base: Savings | None = None
        self._reset()

    def restart(self) -> None:
        """Begin a new interval at the next tick, dropping what the current one holds (a device
        taken back after a pause: its summary must not spread the paused time over its fps)."""
        self._start_s = None
        self._base = None
        self._reset()

    def _reset(self) -> None:
        self._frames = 0
        self._frame_time_sum_ms = 0.0
        self._energy_j: float | None = None
        self._power_sum_w = 0.0
        self._power_ticks = 0
        self._switches = 0
        self._pseudo_ticks = 0
        self._residency: Counter[float] = Counter()

    def record_tick(self, now_s: float, tick: TickRecord, savings: Savings | None = None) -> bool:
        """Log `tick` at DEBUG and add it to the summary at loop time `now_s` (s); ``savings``:
        the device's running totals (`DeviceRunner.savings`), of which the summary reports
        what its interval added. Returns True when the interval was complete and the INFO
        summary was logged."""
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
            # After this tick: the savings of an interval's first tick after a (re)start are
            # left out, each later interval takes over where the one before ended.
            self._base = None if savings is None else savings.copy()
        self._frames += tick.frames
        self._frame_time_sum_ms += tick.frame_time_sum_ms()
        if tick.power_w is not None:
            self._power_sum_w += tick.power_w
            self._power_ticks += 1
        if tick.energy_j is not None:
            self._energy_j = (self._energy_j or 0.0) + tick.energy_j
        self._switches += int(tick.switched)
        self._pseudo_ticks += int(tick.pseudo)
        self._residency[tick.level_mhz] += 1
        span_s = now_s - self._start_s
        if span_s < self.interval_s:
            return False
        spent = None
        if savings is not None and self._base is not None:
            spent = savings.interval(self._base)
        self._log_summary(span_s, tick.level_mhz, tick.pred_ms, tick.policy, spent)
        self._start_s = now_s
        self._base = None if savings is None else savings.copy()
        self._reset()
        return True

    def _log_summary(
        self, span_s: float, level_mhz: float, pred_ms: float | None, policy: str,
        spent: Savings | None,
    ) -> None:
        frame_ms = self._frame_time_sum_ms / self._frames if self._frames else None
        power_w = self._power_sum_w / self._power_ticks if self._power_ticks else None
        ticks = sum(self._residency.values())
        # Frames of busy time: one a tick, whatever the work; their "frame rate" is the tick
        # rate, so the summary gives how busy the GPU was instead.
        pseudo = self._pseudo_ticks * 2 > ticks
        parts = [f"{self.device}: {policy}, {level_mhz:g} MHz"]
        fields: dict[str, object] = {}
        if pseudo:
            busy = self._frame_time_sum_ms / (span_s * 1000.0) if span_s > 0 else None
            if busy is not None:
                parts.append(f"GPU busy {100 * busy:.0f} % (no frames: busy time)")
                fields["busy"] = round(busy, 4)
        else:
            parts.append(f"{self._frames / span_s:.1f} fps")
            if frame_ms is not None:
                parts.append(f"{frame_ms:.2f} ms/frame")
        if pred_ms is not None:
            parts.append(f"predicted {pred_ms:.2f} ms")
        if power_w is not None:
            parts.append(f"{power_w:.1f} W")
        if self._energy_j is not None:
            parts.append(f"{self._energy_j:.1f} J")
        if spent is not None:
            fields.update(_spent_fields(spent))
            parts += _spent_words(spent)
        residency = sorted(self._residency.items(), key=lambda kv: -kv[1])
        shown = ", ".join(f"{mhz:g} MHz {100 * n / ticks:.0f} %"
                          for mhz, n in residency[:RESIDENCY_SHOWN])
        parts.append(f"levels {shown}")
        parts.append(f"{self._switches} level switches in {span_s:.1f} s")
        log_fields(
            self._logger, logging.INFO, ", ".join(parts),
            device=self.device, policy=policy, level_mhz=level_mhz,
            frame_ms=None if frame_ms is None or pseudo else round(frame_ms, 3),
            pred_frame_ms=None if pred_ms is None else round(pred_ms, 3),
            power_w=None if power_w is None else round(power_w, 3),
            energy_j=None if self._energy_j is None else round(self._energy_j, 3),
            frames=None if pseudo else self._frames, level_switches=self._switches,
            interval_s=round(span_s, 3),
            residency=" ".join(f"{mhz:g}:{n / ticks:.3f}" for mhz, n in sorted(residency)),
            **fields,
        )


def _spent_fields(spent: Savings) -> dict[str, object]:
    """The journal fields of an interval's savings (documented in README "Reading the
    journal"): NaN shares are left out."""
    values = {
        "top_energy_j": spent.top_energy_j if spent.energy_j > 0 else math.nan,
        "saved_pct": 100 * spent.saved_share,
        "saved_pm_pct": 100 * spent.saved_uncertainty,
        "missed_pct": 100 * spent.missed_share,
        "late_frames": spent.late if spent.judged else math.nan,
        "slowdown_pct": 100 * spent.mean_slowdown,
        "over_limit_pct": 100 * spent.over_limit_share,
    }
    return {k: round(v, 3) for k, v in values.items() if math.isfinite(v)}


def _spent_words(spent: Savings) -> list[str]:
    words = []
    if math.isfinite(spent.saved_share):
        share = spent.saved_share
        pm = spent.saved_uncertainty
        sure = f" ±{100 * pm:.1f}" if math.isfinite(pm) else ""
        words.append(f"{100 * abs(share):.1f}{sure} % {'less' if share >= 0 else 'more'} than "
                     f"the top clock's {spent.top_energy_j:.1f} J")
    if math.isfinite(spent.missed_share):
        words.append(f"missed {100 * spent.missed_share:.1f} %")
    if math.isfinite(spent.mean_slowdown):
        words.append(f"slowdown {100 * spent.mean_slowdown:.1f} % "
                     f"({100 * spent.over_limit_share:.1f} % over the limit)")
    return words
