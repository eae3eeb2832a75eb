"""Settings of the frame-time and power models, with the seed's defaults.

Seed 000 (§IV-D, §V-B): a_init = 1 for every coefficient ("full scalability"), forgetting
λ = 1 (use all the past), P0 = I/μ with μ = 1e-14 (the geometric mean of the swept 1e-28 and
the knee at 1). DCD-RLS (Zakharov, White & Liu 2008) needs a step range H (a power of two at
least the largest expected |Δw| in one sample), Mb bits of step resolution and Nu coordinate
updates per sample.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Literal

from govd.model.forms import AUTO, UnknownFormError, form

Algorithm = Literal["rls", "dcd"]

MAX_LEVELS = 1024
"""Most levels a model (and so `govd eval`) takes: a sweep of every (core, memory) pair an
NVML GPU offers holds 400-500 of them. The daemon governs fewer (`govd.device.nvml`
thins to ``GOVERNED_LEVELS``): a tick's cost grows with the levels."""
MAX_COUNTERS = 32


@dataclass(frozen=True, slots=True)
class ModelSettings:
    """How the frame-time model learns (all fields documented in ``config/govd.yaml``)."""

    form: str = AUTO
    """A registered form (`govd.model.forms`): ``scaling`` (`govd.model.scaling`: log time
    ratios conditioned on the counters, a learned power shape), ``seed`` (seed 000's eq. 10),
    or ``auto``: each where it won on every table measured, resolved from the target in force
    at each tick (`govd.model.forms.resolve`)."""
    algorithm: Algorithm = "rls"
    """``rls`` (covariance form, eqs. 15-17) or ``dcd`` (DCD-RLS, cheaper for many features)."""
    forgetting: float = 1.0
    """Forgetting factor λ, 0 < λ <= 1; 1 keeps all the past (the seed's choice)."""
    mu: float = 1e-14
    """ℓ2 regularisation μ of eq. 18: P0 = I/μ (RLS), R0 = μ·I (DCD-RLS)."""
    a_init: float = 1.0
    """Initial value of every coefficient (1 = full scalability, the seed's prior)."""
    counters: tuple[str, ...] = ()
    """Frequency-independent counters fed to the model, in order (see `govd select-features`)."""
    counter_scales: tuple[float, ...] = ()
    """Starting divisor per counter so that its changes are of order 1 (empty = all 1); the
    model changes it by powers of two while it runs (`govd.model.rescale`)."""
    max_trace_factor: float = 1.0
    """Covariance wind-up bound: trace(P) is kept <= factor · trace(P0)."""
    dcd_h: float = 16.0
    """DCD-RLS step range H (a power of two >= the largest expected |Δw| per sample)."""
    dcd_mb: int = 16
    """DCD-RLS bits of step resolution Mb (the smallest step is H / 2**Mb)."""
    dcd_nu: int = 4
    """DCD-RLS coordinate updates per sample Nu."""
    power_forgetting: float = 0.995
    """Forgetting factor of the power model (power drifts with temperature: forget slowly)."""
    power_p0: float = 1e4
    """Initial covariance of the power model, P0 = power_p0 · I (coefficients in W)."""
    warmup: int = -1
    """Updates before predictions count as ready; -1 means the number of coefficients."""
    prior_share: float = 0.5
    """Scaling form: prior log-slope of time against the clock (0: none scales, 1: all of it
    scales as 1/f); the middle, so that the first moves between levels are not ruled out."""
    prior_sd: float = 1.0
    """Scaling form: prior standard deviation of each coefficient (ridge strength)."""
    noise_prior: float = 0.02
    """Assumed RMS error of a measured log time ratio until it is measured (the scaling form's
    pairs; the seed form's a-priori errors, `govd.model.spread`)."""
    gate: float = 0.15
    """Scaling form: slack (log units) beyond what any work could do at two clocks before a
    pair of ticks counts as a change of work rather than a measurement of scaling."""
    same_work: float = 0.25
    """Scaling form: relative change of any counter between two ticks that means other work
    (relative to the larger of its two values, and to no less than `COUNTER_FLOOR` of its
    scale: `govd.model.scaling`)."""
    work_slots: int = 32
    """Scaling form: pieces of work remembered with their own curve (a kernel seen again gets
    its curve back at once); 0: one counter-conditioned curve for all work."""
    work_sd: float = 0.5
    """Scaling form: how far (standard deviation of a coefficient) one piece of work may
    stray from the curve its counters suggest, at the prior noise of a ratio
    (``noise_prior``): it enters in units of that noise, so with a measured noise σ a new
    piece of work strays by work_sd · σ / noise_prior (made absolute, it was measured to
    lose rows: bench/README.md, "Fine grids, fifth pass")."""
    volts: tuple[float, ...] = field(default=())
    """Voltage per level (V), ascending with the levels; empty = V affine in f (0.7 to 1.0)."""

    def __post_init__(self) -> None:
        if self.form != AUTO:
            try:
                form(self.form)
            except UnknownFormError as exc:
                raise ValueError(str(exc)) from None
        if not (isinstance(self.work_slots, int) and 0 <= self.work_slots <= 1024):
            raise ValueError(f"work_slots must be an integer in 0..1024, got {self.work_slots!r}")
        for name in ("prior_sd", "noise_prior", "gate", "same_work", "work_sd"):
            v = getattr(self, name)
            if not (math.isfinite(v) and v > 0.0):
                raise ValueError(f"{name} must be a positive number, got {v!r}")
        if not (math.isfinite(self.prior_share) and 0.0 <= self.prior_share <= 2.0):
            raise ValueError(f"prior_share must be in [0, 2], got {self.prior_share!r}")
        if self.algorithm not in ("rls", "dcd"):
            raise ValueError(f"algorithm must be 'rls' or 'dcd', got {self.algorithm!r}")
        if not (0.0 < self.forgetting <= 1.0):
            raise ValueError(f"forgetting must be in (0, 1], got {self.forgetting}")
        if not (0.0 < self.power_forgetting <= 1.0):
            raise ValueError(f"power_forgetting must be in (0, 1], got {self.power_forgetting}")
        if not (math.isfinite(self.mu) and self.mu > 0.0):
            raise ValueError(f"mu must be a positive number, got {self.mu}")
        if not math.isfinite(self.a_init):
            raise ValueError("a_init must be finite")
        if len(self.counters) > MAX_COUNTERS:
            raise ValueError(f"at most {MAX_COUNTERS} counters, got {len(self.counters)}")
        if self.counter_scales and len(self.counter_scales) != len(self.counters):
            raise ValueError("counter_scales needs one scale per counter")
        if any(not (math.isfinite(s) and s > 0) for s in self.counter_scales):
            raise ValueError("counter scales must be positive numbers")
        if not (self.dcd_h > 0 and math.log2(self.dcd_h).is_integer()):
            raise ValueError(f"dcd_h must be a power of two, got {self.dcd_h}")
        if not (1 <= self.dcd_mb <= 52):
            raise ValueError(f"dcd_mb must be in 1..52, got {self.dcd_mb}")
        if not (1 <= self.dcd_nu <= 64):
            raise ValueError(f"dcd_nu must be in 1..64, got {self.dcd_nu}")
        if not (self.max_trace_factor >= 1.0):
            raise ValueError("max_trace_factor must be >= 1")
        if not (self.power_p0 > 0):
            raise ValueError("power_p0 must be positive")

    @property
    def n_features(self) -> int:
        """Coefficients of eq. 10: a0 (scalable time), a1 (Δf), one per counter."""
        return 2 + len(self.counters)
