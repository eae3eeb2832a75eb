"""Average power per tick from what a device reports: a cumulative energy counter or power samples.

Energy counters beat power samples (they integrate what happens between reads), but they have
four habits, each handled here so no negative, huge or NaN-poisoned energy reaches the model:

- they wrap: NVML's is 64-bit mJ, hwmon ``energy1_input`` is µJ in whatever width the driver keeps
  (32-bit on some). A counter that goes backwards is taken to have wrapped at the first of the
  usual widths (2^32 µJ, 2^32 mJ, 2^64 µJ, 2^64 mJ, or the one given) that yields a plausible power;
- they reset (driver reload, device reset): backwards with no plausible wrap; the tick falls back
  to the power sample and the counter starts afresh;
- they update less often than govd ticks (NVML every 20–100 ms against a 50 ms tick): a tick in
  which the counter did not move gets the power sample (NaN without one) rather than a false 0 W,
  and the next movement is spread over the whole time since the previous one, so no energy is lost
  or counted twice;
- they stall (firmware stops updating): not moving for `STALL_S` is a stall; power falls back to
  the samples and, when the counter moves again, it starts afresh instead of spreading a stale
  delta;
- their updates jitter: a counter that steps every ~100 ms is sometimes seen to move at two
  ticks in a row, and the second step, ~100 ms of energy, spread over the 50 ms since the first,
  reads as twice the power (1337 W on a 700 W H200, enough to double the model's energy at the
  top clock). A step is spread over at least the counter's usual update period (the median
  spacing of its last `PERIOD_MOVES` movements); the energy counted is the step itself.

A jump implying more than ``max_power_w`` is treated like a reset.
"""

from __future__ import annotations

import math
import statistics
from collections import deque

STALL_S = 1.0
"""A counter that has not moved for this long is stalled: at least ten of NVML's slowest update
periods (100 ms), and a busy or idle GPU moves even a mJ counter every tick. Units: s."""
MAX_POWER_W = 5000.0
"""No GPU board draws this much (the largest draw about 1.4 kW): a counter step implying more is a
glitch or a reset, not energy. Units: W."""
WRAPS_MJ = (2**32 / 1000, 2**32, 2**64 / 1000, 2**64)
"""Where counters wrap: 32 or 64 bits of µJ (hwmon) or mJ (NVML). Units: mJ."""
PERIOD_MOVES = 8
"""Movements of the counter whose spacing gives its usual update period (their median: one
late or early update moves it not at all)."""


class EnergyMeter:
    """Turns successive (time s, energy mJ or power W) readings into average power per tick."""

    def __init__(self, wrap_mj: float | None = None, max_power_w: float = MAX_POWER_W):
        """``wrap_mj``: the value at which the counter wraps to zero, None to try the usual
        widths (`WRAPS_MJ`). ``max_power_w``: the most a counter step may imply. Units: mJ, W."""
        if wrap_mj is not None and not wrap_mj > 0:
            raise ValueError(f"wrap_mj must be positive, got {wrap_mj}")
        if not max_power_w > 0:
            raise ValueError(f"max_power_w must be positive, got {max_power_w}")
        self.wrap_mj = wrap_mj
        self.max_power_w = max_power_w
        self.tick_energy_mj = math.nan
        """Energy the counter accounted for in the last `update`: 0 when it did not move (the
        movement comes later), NaN when the counter said nothing usable. Units: mJ."""
        self.resets = 0
        """How many times the counter went backwards without a plausible wrap, or jumped."""
        self.stalls = 0
        """How many times the counter stopped moving for `STALL_S`."""
        self._last_change_s = math.nan
        self._last_energy_mj = math.nan
        self._stalled = False
        self._spacings: deque[float] = deque(maxlen=PERIOD_MOVES)

    def reset(self) -> None:
        """Forget the counter's history (the next energy reading starts afresh)."""
        self._last_change_s = math.nan
        self._last_energy_mj = math.nan
        self._stalled = False
        self._spacings.clear()
        self.tick_energy_mj = math.nan

    @property
    def update_period_s(self) -> float:
        """The counter's usual update period: the median spacing of its recent movements (0
        before three). Units: s."""
        if len(self._spacings) < 3:
            return 0.0
        return float(statistics.median(self._spacings))

    def update(
        self, time_s: float, energy_mj: float = math.nan, power_w: float = math.nan
    ) -> float:
        """Average power since the previous movement of the energy counter, or the power sample
        when there is no counter (or it has just started, reset, stalled, or not moved this
        tick); NaN when neither says anything. ``time_s`` is monotonic time. Units: s, mJ, W → W."""
        power_w = power_w if 0 <= power_w <= self.max_power_w else math.nan
        self.tick_energy_mj = math.nan
        if not math.isfinite(energy_mj):
            return power_w
        if math.isnan(self._last_energy_mj):
            self._mark(time_s, energy_mj)
            return power_w
        elapsed_s = time_s - self._last_change_s
        delta_mj = energy_mj - self._last_energy_mj
        if delta_mj == 0:
            if elapsed_s >= STALL_S and not self._stalled:
                self._stalled = True
                self.stalls += 1
            if not self._stalled:
                self.tick_energy_mj = 0.0
            return power_w
        if elapsed_s <= 0:
            self._mark(time_s, energy_mj)
            return power_w
        if delta_mj < 0:
            delta_mj = self._unwrapped(delta_mj, elapsed_s)
        if self._stalled or not 0 < delta_mj <= self.max_power_w * elapsed_s * 1000.0:
            # Moving again after a stall, reset, or jumped: start afresh from this reading.
            self.resets += not self._stalled
            self._mark(time_s, energy_mj)
            return power_w
        self._mark(time_s, energy_mj)
        self.tick_energy_mj = delta_mj
        spread_s = max(elapsed_s, self.update_period_s)
        self._spacings.append(elapsed_s)
        return delta_mj / spread_s / 1000.0

    def _unwrapped(self, delta_mj: float, elapsed_s: float) -> float:
        """The step of a counter that went backwards by ``-delta_mj``, assuming the first wrap
        that gives a plausible power; NaN when none does (a reset)."""
        limit_mj = self.max_power_w * elapsed_s * 1000.0
        for wrap_mj in (self.wrap_mj,) if self.wrap_mj is not None else WRAPS_MJ:
            if 0 < delta_mj + wrap_mj <= limit_mj:
                return delta_mj + wrap_mj
        return math.nan

    def _mark(self, time_s: float, energy_mj: float) -> None:
        self._last_change_s = time_s
        self._last_energy_mj = energy_mj
        self._stalled = False
