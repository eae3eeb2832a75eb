"""Replay with one input replaced by the truth: is a gap the model's or the policy's?

`TrueCurves` wraps a policy and hands it, in place of the model's predicted times and energies,
the mean curves of the phase of work of the unit just measured (`govd.eval.reference`): what a
model that knew every phase's curve exactly, but learned of a change of work only from the unit
that ran it, would predict. Everything else the policy sees (the model's spread, readiness, the
running level) stays the model's. A policy that is still far from the hedged reference with true
curves loses its energy in its own rules (margins, hedge, probes), not in the model.
``part="time"`` replaces only the time curve (the energy then is the model's busy power over the
true time), ``part="power"`` only the busy power (over the model's time): the issue's method of
replacing one input at a time, applied to the decisions.

``smooth_span`` replaces each phase's curves by the best *smooth* curves instead: their least
squares fit, quadratic in log clock (the scaling form's family, `govd.model.scaling`), over the
levels within that ratio of the top clock (the levels below keep the phase's means). What a
model of that family could at best know of each work: a gap between the two replays is what
a table's clock-by-clock detail (a clock slow for a kernel, a kink between measured levels) is
worth, which no smooth curve represents and only a measurement at that clock finds.

`ScaledSpread` replays the policy with the model's spread of time multiplied by a factor (the
per-unit noise kept). On the model's own curves it asks whether the spread is merely too wide
or guards a curve that is wrong; at 0 around `TrueCurves` (``ScaledSpread(TrueCurves(...),
0.0)``) it is a model that knows each phase's curve and knows that it knows, and beside the
plain replay it says what the model's uncertainty costs a policy whose margins come from it.

What it showed on the benchmark tables (the policy's own rules, not the model, hold most of
the remaining gap to the hedged reference) is in bench/README.md ("Energy policy: designs
measured and left out"), beside bench/results/decisions.json.
"""

from __future__ import annotations

from dataclasses import replace
from typing import ClassVar

import numpy as np

from govd.eval.reference import phase_means
from govd.eval.score import energy_mj
from govd.formats.sweep import SweepTable
from govd.policy.base import Outlook, Policy
from govd.target import Target

PARTS = ("both", "time", "power")
"""What `TrueCurves` replaces by the truth."""


class TrueCurves:
    """``policy`` deciding on each phase's true mean time (ms) and busy power (W) curves, or
    one of them (``part``), learned one unit late (the unit a tick measured is ``view.tick``,
    as in `govd.eval.replay`)."""

    name: ClassVar[str] = "true-curves"
    uses_model: ClassVar[bool] = True

    def __init__(self, policy: Policy, sweep: SweepTable, target: Target,
                 idle_power_w: float, part: str = "both",
                 smooth_span: float | None = None) -> None:
        """``sweep``: the table the replay runs over; ``idle_power_w`` (W): as scored;
        ``part``: one of `PARTS`; ``smooth_span``: None for the phases' means, else a ratio
        > 1 of clocks (see the module's notes). Raises ValueError for another ``part`` or a
        span that leaves fewer than three levels to fit."""
        if part not in PARTS:
            raise ValueError(f"part must be one of {', '.join(PARTS)}, got {part!r}")
        self.policy = policy
        self.part = part
        self._target = target
        self._idle_w = idle_power_w
        self._phase_of, means = phase_means(sweep)
        self._time_ms = means.time_ms
        self._power_w = means.power_w
        if smooth_span is not None:
            self._time_ms = smooth_curves(sweep.levels_mhz, self._time_ms, smooth_span)
            self._power_w = smooth_curves(sweep.levels_mhz, self._power_w, smooth_span)

    def decide(self, view: Outlook) -> int:
        """The wrapped policy's choice on the true curves of the unit just measured."""
        p = view.predictions
        if p.ready and 0 <= view.tick < self._phase_of.size:
            phase = self._phase_of[view.tick]
            time_ms = np.array(self._time_ms[phase] if self.part != "power" else p.time_ms)
            power_w = np.array(self._power_w[phase] if self.part != "time" else p.power_w)
            view.predictions = replace(
                p, time_ms=time_ms, power_w=power_w,
                energy_mj=energy_mj(power_w, time_ms, self._target, self._idle_w))
        return int(self.policy.decide(view))

    def reset(self) -> None:
        """Reset the wrapped policy."""
        self.policy.reset()


class ScaledSpread:
    """``policy`` deciding on the model's own predictions with its spread of time
    (``time_sd_now``, ``time_sd_top``) multiplied by ``scale`` (``time_noise`` kept)."""

    name: ClassVar[str] = "scaled-spread"
    uses_model: ClassVar[bool] = True

    def __init__(self, policy: Policy, scale: float) -> None:
        """``scale``: a finite factor >= 0. Raises ValueError for another."""
        if not (np.isfinite(scale) and scale >= 0.0):
            raise ValueError(f"scale must be a finite number >= 0, got {scale!r}")
        self.policy = policy
        self.scale = float(scale)

    def decide(self, view: Outlook) -> int:
        """The wrapped policy's choice with the spread scaled."""
        p = view.predictions
        view.predictions = replace(p, time_sd_now=p.time_sd_now * self.scale,
                                   time_sd_top=p.time_sd_top * self.scale)
        return int(self.policy.decide(view))

    def reset(self) -> None:
        """Reset the wrapped policy."""
        self.policy.reset()


def smooth_curves(levels_mhz: np.ndarray, curves: np.ndarray, span: float) -> np.ndarray:
    """``curves`` (one row per phase, positive values at ``levels_mhz``, ascending) with the
    levels within ``span`` of the top clock (f >= f_top / span) replaced by each row's least
    squares fit of log value quadratic in log clock there. Raises ValueError where fewer than
    three levels are within the span."""
    u = np.log(levels_mhz[-1] / levels_mhz)
    near = u <= np.log(span) if np.isfinite(span) and span > 1.0 else np.zeros(u.size, bool)
    if int(near.sum()) < 3:
        raise ValueError(f"smooth_span {span!r} leaves fewer than three levels to fit")
    basis = np.stack([np.ones(int(near.sum())), u[near], u[near] ** 2], axis=1)
    coef, *_ = np.linalg.lstsq(basis, np.log(curves[:, near]).T, rcond=None)
    out = np.array(curves, dtype=float)
    out[:, near] = np.exp(basis @ coef).T
    return out
