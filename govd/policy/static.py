"""The fixed-frequency policies: devfreq's performance, powersave and userspace governors."""

from __future__ import annotations

import math
from typing import ClassVar

import numpy as np

from govd.policy.base import Outlook


class _Static:
    """A policy without history: nothing to forget on reset."""

    uses_model: ClassVar[bool] = False

    def reset(self) -> None:
        """Nothing to forget."""


class Performance(_Static):
    """Always the highest level the bounds allow."""

    name: ClassVar[str] = "performance"

    def decide(self, view: Outlook) -> int:
        """The highest allowed level."""
        return view.hi


class Powersave(_Static):
    """Always the lowest level the bounds allow."""

    name: ClassVar[str] = "powersave"

    def decide(self, view: Outlook) -> int:
        """The lowest allowed level."""
        return view.lo


class Fixed(_Static):
    """The allowed level nearest to a chosen frequency (devfreq's userspace governor).

    ``freq_mhz``: the wanted frequency, Units: MHz. Halfway between two levels it takes the lower.
    """

    name: ClassVar[str] = "fixed"

    def __init__(self, freq_mhz: float) -> None:
        freq = float(freq_mhz)
        if not (math.isfinite(freq) and freq > 0):
            raise ValueError(f"fixed policy needs a positive freq_mhz, got {freq_mhz!r}")
        self.freq_mhz = freq

    def decide(self, view: Outlook) -> int:
        """The allowed level nearest to ``freq_mhz``."""
        allowed = view.levels_mhz[view.lo : view.hi + 1]
        return view.lo + int(np.argmin(np.abs(allowed - self.freq_mhz)))
