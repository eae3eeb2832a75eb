"""The model interface: what every form of the model learns from and what it predicts.

A form (`govd.model.forms`) is a class that learns online from one tick at a time (`update`)
and fills one `Predictions` record per tick (`predictions`), the same record whatever the
form, with every field present. The governor and every policy read only that record; nothing
downstream asks which form made it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar, Protocol, runtime_checkable

import numpy as np

from govd.model.arrays import FloatArray
from govd.model.settings import ModelSettings


@dataclass(slots=True, kw_only=True)
class Predictions:
    """What the model in force predicts for the next tick, at every level (ascending).

    The arrays are read-only views into the model's buffers, and a form may refresh one record
    in place each tick: valid until the model's next `update`; copy what must outlive the
    tick, and never write into a record a model handed out (`dataclasses.replace` makes
    another). Before the model has seen a valid sample they hold NaN
    (and ``ready`` is False)."""

    time_ms: FloatArray
    """Predicted time per frame (or unit of work) at each level. Units: ms."""
    power_w: FloatArray
    """Predicted average power while busy at each level. Units: W."""
    energy_mj: FloatArray
    """Predicted energy per frame or unit at each level under the target (busy power times
    time, plus idle power until a frame deadline when there is one). Units: mJ."""
    time_sd_now: FloatArray
    """Standard deviation of the predicted log(t(level) / t(running level)): the model's own
    uncertainty about the ratio (0 at the running level), without the per-unit noise
    (``time_noise``)."""
    time_sd_top: FloatArray
    """Standard deviation of the predicted log(t(level) / t(fastest predicted level)), the
    model's own uncertainty as ``time_sd_now``."""
    time_noise: float
    """Standard deviation of one unit's log time about the model's mean: the per-unit noise
    (a ratio of two units carries sqrt(2) times it)."""
    ready: bool
    """False until the model has seen enough samples for its predictions to mean anything."""
    work_ticks: int
    """Ticks since the model last judged that the work changed (0 on the tick of a change;
    a form that never judges it counts from its last reset)."""
    sensitivity_ms_per_mhz: float
    """dt/df at the running level (three-point Lagrange). Units: ms/MHz."""
    fitted_time_ms: float
    """The model's a-priori estimate of the last tick's time, before it learned from that
    tick (the measure of prediction accuracy, seed 000 §V-C). Units: ms."""
    work_id: int = -1
    """The piece of work the model attributed the last tick to, the same number each time
    that work comes back for as long as the model remembers it (the scaling form's work slot,
    numbered anew when a slot is given to other work); -1 where the form does not tell pieces
    of work apart."""
    spread_from_pairs: bool = False
    """Whether ``time_sd_now`` and ``time_sd_top`` come from ratios measured between pairs of
    levels of the same work, level by level (the scaling form), rather than being derived
    from the recent a-priori error and the coefficients' covariance (the seed form). The
    `energy` policy sets per-level margins from the first kind only."""


def not_yet(levels: int) -> FloatArray:
    """A read-only array of ``levels`` NaN: a prediction not made yet."""
    nan: FloatArray = np.full(levels, math.nan)
    nan.flags.writeable = False
    return nan


@runtime_checkable
class Model(Protocol):
    """One form of the online model over one device's level table.

    Every form takes the same tick (`update`) and fills the same record (`predictions`); a
    form is registered by name in `govd.model.forms`."""

    form: ClassVar[str]
    """The name the form is registered under (``model.form`` in the configuration)."""
    settings: ModelSettings
    levels_mhz: FloatArray
    """Core clock of every level, ascending (with pairs: sorted by core then memory clock)."""
    mem_levels_mhz: FloatArray | None
    """Memory clock of every level with two clock domains, else None. Units: MHz."""
    P: FloatArray
    """The coefficients' covariance (RLS) or its inverse (DCD-RLS): the stress detector checks
    that it still factorises (`govd.model.stress`)."""

    def update(
        self,
        frame_time_ms: float,
        freq_mhz: float,
        counters: FloatArray,
        power_w: float,
        busy: float,
        mem_activity: float,
        deadline_ms: float,
        mem_freq_mhz: float,
    ) -> int:
        """Learn from one tick and predict for the next; returns `govd.model.tick` flags.

        ``frame_time_ms``: mean time per frame over the tick (NaN when none finished);
        ``freq_mhz``, ``mem_freq_mhz``: the clocks that ran (MHz; the memory clock NaN with
        one domain); ``counters``: the configured counters in order; ``power_w``: average
        power over the tick (W); ``busy``, ``mem_activity``: 0..1; ``deadline_ms``: the frame
        deadline (NaN for throughput work). Bad numbers are skipped and counted, never
        raised."""
        ...

    def predictions(self) -> Predictions:
        """The record of the last `update`. A form may hand out the same record every tick,
        refreshed: like its arrays, it is valid until the next `update` (copy, or
        `dataclasses.replace`, what must outlive the tick)."""
        ...

    @property
    def fitted_time_ms(self) -> float:
        """The a-priori estimate of the last tick's time (ms), as in `Predictions`."""
        ...

    def reset(self) -> None:
        """Forget everything learned."""
        ...

    def stats_dict(self) -> dict[str, int]:
        """Counters of what the model did (ticks, updates, skipped samples, resets...)."""
        ...


@runtime_checkable
class SeedableModel(Model, Protocol):
    """A form a prior (`govd.model.prior`) can seed: it holds eq. 10's a0 and a1."""

    def seed(self, a_ms: FloatArray, cov_block: FloatArray) -> None:
        """Start from a prior's (a0, a1 in ms/GHz) and their covariance block (2×2)."""
        ...
