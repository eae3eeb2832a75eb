"""What telemetry learns from one control-loop tick of one device."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import KW_ONLY, dataclass


# Not frozen: a frozen dataclass's __init__ sets each field through a Python-level
# object.__setattr__ call, 4x the cost of a plain one (~2.5 µs an object in a cold 50 ms
# tick, bench/README.md "Daemon cost"); built every tick, and read-only by convention.
@dataclass(slots=True)
class TickRecord:
    """One device's tick as the journal summary and the metrics exporter see it.

    `level_mhz`: the level running, as read back (MHz). `frame_times_ms`: GPU time of each frame
    completed during the tick (ms), or of each record of frames: `frame_counts` then says how
    many frames each stands for (a sampled MangoHud row; None: one each), so that a row standing
    for a million frames costs one entry, not a million. `pred_ms`: the frame time the model
    predicted, a tick earlier, for this tick (ms): what `frame_times_ms` is to be compared
    with. `chosen_mhz`: the level the policy chose for the next tick (MHz).
    `power_w`: power over the tick (W). `energy_j`: energy used during this tick (J), not a
    running total. None: not measured this tick. `switched`: the decision changed the level.
    `top_energy_j`: the model's estimate of this tick's work at the top clock (J,
    `govd.telemetry.savings`), uncorrected; `ran_top`: the tick ran the top clock, so that
    estimate is the tick's measured energy, which no correction moves; `top_correction`: the
    factor the device's checks found the model's estimates below the top off by so far
    (`Savings.correction`). `late_frames`: frames
    over the deadline; `over_limit_units`: units slower than the slowdown limit allows;
    `slowdown`: the tick's mean slowdown against the model's top-clock time (0.05: 5 % slower;
    None: not judged). `mem_level_mhz`: the memory
    clock running (MHz, two clock domains). `busy`: the device's busy fraction (0..1).
    `pseudo`: `frame_times_ms` are busy time per tick, not frames.
    """

    device: str
    level_mhz: float
    frame_times_ms: Sequence[float]
    pred_ms: float | None
    power_w: float | None
    energy_j: float | None
    policy: str
    switched: bool
    chosen_mhz: float | None = None
    _: KW_ONLY  # what follows is named at every call: a count list cannot land in a joule field
    top_energy_j: float | None = None
    ran_top: bool = False
    top_correction: float = 1.0
    late_frames: float = 0.0
    over_limit_units: float = 0.0
    slowdown: float | None = None
    mem_level_mhz: float | None = None
    busy: float | None = None
    pseudo: bool = False
    frame_counts: Sequence[int] | None = None

    @property
    def frames(self) -> int:
        """Frames completed during the tick."""
        return len(self.frame_times_ms) if self.frame_counts is None else sum(self.frame_counts)

    def frame_time_sum_ms(self) -> float:
        """GPU time of every frame completed during the tick, added up (ms)."""
        if self.frame_counts is None:
            return sum(self.frame_times_ms)
        return sum(t * n for t, n in zip(self.frame_times_ms, self.frame_counts, strict=True))
