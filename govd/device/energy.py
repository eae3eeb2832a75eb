"""Average power per tick from what a device reports: a cumulative energy counter or power samples.

Energy counters beat power samples (they integrate what happens between reads), but they have
three habits: they wrap at a fixed value, they reset (driver reload, device reset), and they
update less often than govd ticks (NVML every 20–100 ms against a 50 ms tick). A tick in which the
counter did not move gets NaN rather than a false 0 W, and the next movement is spread over the
whole time since the previous one, so no energy is lost or counted twice.
"""

from __future__ import annotations

import math


class EnergyMeter:
    """Turns successive (time s, energy mJ or power W) readings into average power per tick."""

    def __init__(self, wrap_mj: float | None = None):
        """``wrap_mj``: the value at which the counter wraps to zero, None if it never does
        (64-bit counters in practice). Units: mJ."""
        if wrap_mj is not None and not wrap_mj > 0:
            raise ValueError(f"wrap_mj must be positive, got {wrap_mj}")
        self.wrap_mj = wrap_mj
        self._last_change_s = math.nan
        self._last_energy_mj = math.nan

    def reset(self) -> None:
        """Forget the counter's history (the next energy reading starts afresh)."""
        self._last_change_s = math.nan
        self._last_energy_mj = math.nan

    def update(
        self, time_s: float, energy_mj: float = math.nan, power_w: float = math.nan
    ) -> float:
        """Average power since the previous movement of the energy counter, or the power sample
        when there is no counter (or it has just started or reset); NaN when neither says
        anything this tick. ``time_s`` is monotonic time. Units: s, mJ, W → W."""
        if math.isnan(energy_mj):
            return power_w
        if math.isnan(self._last_energy_mj):
            self._mark(time_s, energy_mj)
            return power_w
        delta_mj = energy_mj - self._last_energy_mj
        if delta_mj < 0:
            if self.wrap_mj is not None and -delta_mj > self.wrap_mj / 2:
                delta_mj += self.wrap_mj
            else:
                # Went backwards by less than a wrap could explain: the counter was reset.
                self._mark(time_s, energy_mj)
                return power_w
        elapsed_s = time_s - self._last_change_s
        if delta_mj == 0 or elapsed_s <= 0:
            return math.nan
        self._mark(time_s, energy_mj)
        return delta_mj / elapsed_s / 1000.0

    def _mark(self, time_s: float, energy_mj: float) -> None:
        self._last_change_s = time_s
        self._last_energy_mj = energy_mj
