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

Measured with it (issue #11, v100-sim at a 10 % slowdown, bench/results/decisions.json):
`energy` runs 1.049x the oracle with the model's curves and about as much with the true ones,
so the remaining gap to the hedged reference (1.015x) is the policy's. With the true time
alone, the work-conditioned power prior measured and left out (bench/README.md) ran 1.053x at
10 % and 0.36 % of units missed at 25 %, as main's power shape did (1.053x, 0.31 %): its
regressions with the model's own time came from the time model, not from the power it predicted.
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
                 idle_power_w: float, part: str = "both") -> None:
        """``sweep``: the table the replay runs over; ``idle_power_w`` (W): as scored;
        ``part``: one of `PARTS`. Raises ValueError for another ``part``."""
        if part not in PARTS:
            raise ValueError(f"part must be one of {', '.join(PARTS)}, got {part!r}")
        self.policy = policy
        self.part = part
        self._target = target
        self._idle_w = idle_power_w
        self._phase_of, means = phase_means(sweep)
        self._time_ms = means.time_ms
        self._power_w = means.power_w

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
