"""The sweep table (DESIGN §5): the same stream of work measured at every level.

CSV: optional ``# key: value`` metadata lines, then the header
``unit,freq_mhz,time_ms,power_w[,mem_freq_mhz][,busy][,<counter>...]``, one row per (unit, level);
every unit has a row for every level. This module holds the in-memory form; reading and writing
live in `read_sweep` / `write_sweep`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]


class SweepFormatError(ValueError):
    """A sweep table that cannot be used; the message names the file and line."""


@dataclass
class SweepTable:
    """A sweep table in memory: arrays indexed [unit, level], levels ascending.

    A level is a core clock (``levels_mhz[l]``), or with two clock domains a (core, memory) pair
    (``levels_mhz[l]``, ``mem_levels_mhz[l]``), pairs sorted by core then memory clock.
    """

    levels_mhz: FloatArray
    """Core clock of each level, shape [L]. Units: MHz."""
    time_ms: FloatArray
    """GPU time of each unit at each level, shape [U, L]. Units: ms."""
    power_w: FloatArray
    """Average GPU power while processing each unit at each level, shape [U, L]. Units: W."""
    mem_levels_mhz: FloatArray | None = None
    """Memory clock of each level, shape [L], or None for one clock domain. Units: MHz."""
    busy: FloatArray | None = None
    """Device utilisation during each unit at each level (0..1), shape [U, L], or None."""
    counters: dict[str, FloatArray] = field(default_factory=dict)
    """Counters by name, each shape [U, L], as measured at that level."""
    meta: dict[str, str] = field(default_factory=dict)
    """``# key: value`` metadata (``idle_power_w``, ``source``, ``scenario``...)."""
    path: str = ""
    """Where it was read from (for messages), empty for tables built in memory."""

    @property
    def units(self) -> int:
        """Number of units of work."""
        return int(self.time_ms.shape[0])

    @property
    def idle_power_w(self) -> float:
        """Idle power from the metadata, NaN when absent. Units: W."""
        value = self.meta.get("idle_power_w")
        return float(value) if value is not None else math.nan
