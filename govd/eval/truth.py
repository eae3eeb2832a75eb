"""Replay with one input replaced by the truth: is a gap the model's or the policy's?

`TrueCurves` wraps a policy and hands it, in place of the model's predicted times and energies,
the mean curves of the phase of work of the unit just measured (`govd.eval.reference`): what a
model that knew every phase's curve exactly, but learned of a change of work only from the unit
that ran it, would predict. Everything else the policy sees (the model's spread, readiness, the
running level) stays the model's. A policy that is still far from the hedged reference with true
curves loses its energy in its own rules (margins, hedge, probes), not in the model.

Measured with it (issue #11, v100-sim at a 10 % slowdown, bench/results/decisions.json):
`energy` runs 1.049x the oracle with the model's curves and about as much with the true ones,
so the remaining gap to the hedged reference (1.015x) is the policy's.
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from govd.eval.reference import phase_means
from govd.eval.score import unit_energy_mj
from govd.formats.sweep import SweepTable
from govd.policy.base import Outlook, Policy
from govd.target import Target


class TrueCurves:
    """``policy`` deciding on each phase's true mean time (ms) and energy (mJ) curves, learned
    one unit late (the unit a tick measured is ``view.tick``, as in `govd.eval.replay`)."""

    name: ClassVar[str] = "true-curves"
    uses_model: ClassVar[bool] = True

    def __init__(self, policy: Policy, sweep: SweepTable, target: Target,
                 idle_power_w: float) -> None:
        """``sweep``: the table the replay runs over; ``idle_power_w`` (W): as scored."""
        self.policy = policy
        self._phase_of, means = phase_means(sweep)
        self._time_ms = means.time_ms
        self._energy_mj = unit_energy_mj(means, target, idle_power_w)

    def decide(self, view: Outlook) -> int:
        """The wrapped policy's choice on the true curves of the unit just measured."""
        if view.model_ready and 0 <= view.tick < self._phase_of.size:
            phase = self._phase_of[view.tick]
            view.time_ms = np.array(self._time_ms[phase])
            view.energy_mj = np.array(self._energy_mj[phase])
        return int(self.policy.decide(view))

    def reset(self) -> None:
        """Reset the wrapped policy."""
        self.policy.reset()
