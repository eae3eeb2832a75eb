"""The policy interface: a level from predictions and the device's status, and nothing else.

Like a devfreq governor, a policy is small: it never does I/O, never reads a clock, and never
sees registers. It sees one `Outlook` per tick and returns the index of the level to run next.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

from govd.model.base import Predictions
from govd.target import Target

FloatArray = npt.NDArray[np.float64]


@dataclass(slots=True, kw_only=True)
class Outlook:
    """What a policy sees at one tick.

    The arrays are views into the model's buffers, valid until the next `Governor.step`; a
    policy that wants to keep them must copy. Indices refer to ``levels_mhz`` (ascending).
    """

    levels_mhz: FloatArray
    """Every level of the device, ascending. Units: MHz."""
    lo: int
    """Lowest level index the bounds allow (inclusive)."""
    hi: int
    """Highest level index the bounds allow (inclusive)."""
    current: int
    """Index of the level actually running (the nearest level to the read-back frequency)."""
    predictions: Predictions
    """What the model in force predicts at every level (`govd.model.base.Predictions`: time,
    power, energy, their spread, readiness), whatever its form."""
    time_error: float
    """Recent relative error of the frame-time predictions at the level that then ran (an
    exponentially weighted RMS of actual/predicted − 1); NaN until known."""
    busy: float
    """Device utilisation over the last tick, 0..1 (NaN when the device does not say)."""
    interval_s: float
    """Length of the last tick. Units: s."""
    target: Target
    """The constraint in force for this tick."""
    tick: int
    """Number of steps taken before this one (0 on the first)."""
    late_share: float = float("nan")
    """Share of the frames completed in the tick that just ended, at ``current``, that took
    longer than the frame deadline, 0..1 (NaN: no frame, or no frame-rate target)."""
    frame_time_ms: float = float("nan")
    """Mean time per frame (or unit of work) over the tick that just ended, at ``current``
    (NaN when none finished). Units: ms."""
    power_w: float = float("nan")
    """Average power over the tick that just ended (NaN where the device does not say).
    Units: W."""
    mem_levels_mhz: FloatArray | None = None
    """With two clock domains, the memory clock of each level (levels are then (core, memory)
    pairs sorted by core then memory clock); None with one. Units: MHz."""


@runtime_checkable
class Policy(Protocol):
    """A frequency policy. Registered under the ``govd.policies`` entry-point group."""

    name: ClassVar[str]
    """The name users select it by (``policy: energy`` in the config, ``--policy energy``)."""
    uses_model: ClassVar[bool]
    """Whether its decisions depend on the model's predictions (the evaluator then scores them)."""

    def decide(self, view: Outlook) -> int:
        """Return the index of the level to run next, within ``[view.lo, view.hi]``."""
        ...

    def reset(self) -> None:
        """Forget any history (a new workload, a device taken back after hot-plug)."""
        ...


INERT_HOOK = "inert_parameters"
"""An optional static method of a policy class, ``inert_parameters(spread_from_pairs: bool,
frame_rate: bool) -> frozenset[str]``: the constructor parameters that change no decision for a
model form whose spread is (or is not) measured between levels, under a frame-rate (or a
slowdown) target. ``govd check-config`` refuses a parameter set away from its default where it
acts under none of the forms and targets the configuration can put in force."""
