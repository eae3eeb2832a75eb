"""What govd saves on one device: the energy it used against an estimate of the same work at
the top clock, and what that cost in missed deadlines or slowdown.

No twin runs beside a real GPU, so the top clock's energy is estimated tick by tick from the
model's own predictions for the work that just ran: the tick's measured energy times the
predicted energy per frame (or per unit of work) at the top allowed level over that at the
level that ran. The measurement anchors the scale and the model gives only a ratio between two
levels of the same work, and a tick run at the top level counts as exactly what it used, which
no correction below touches (on the H200 a correction of ~1.15 applied to ticks at the top had
the journal say "12.6 % less than the top clock" over 10 s run wholly at the top clock). Ticks
before the model is ready count as their own energy (the governor runs the top level then)
and are reported as not covered.

Both ends of the ratio are then checked against measurements, and the ratio corrected by what
the checks found: at the level that ran, each tick that runs the level of the tick before
measures the energy the model predicted there a tick earlier (`check_ran`); at the top level,
the ticks that run it right after ticks below it measure what the model predicted there from
below (`check_top`). Each is summed over its checks (`MIN_CHECKS` at least), so that the noise
of a 50 ms tick of 2 or 3 frames averages out and the model's bias shows: measured over
predicted at the top, over the same at the levels that ran, multiplies the model's estimate.
On the demo's game (`make demo`) the model's power curve put the top level's energy per frame
~6 % low, which took 5 points off the saving; corrected, the estimate is within a point of the
twin run at the top clock (bench/README.md, "What govd saves").

How sure: the standard error of the two corrections (their checks' spread over the root of
their number), carried through the ratio (a saving `s` with an error `e` on the top-clock
estimate is uncertain by ``(1 - s) * e``), and two conditions a number cannot say. A check
vouches for the ticks of the next `VERIFIED_S` only: the work changes, and a model right about
one kernel may be wrong about the next; where most of the energy was not vouched for, the
estimate is the model's extrapolation (``unverified``). Where the model predicts the top level
slower than the level that ran (no GPU's clock does that to the same work) it is ``poor``: a
model that wrongly believes the top clock no faster claims a large saving.

Performance is judged the way the target is: with a frame rate, frames over the deadline (the
frames of GPU busy time, which have no deadline, are not judged); with a slowdown limit, each
unit's measured time over the model's time for it at the top clock, and the units over the limit.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from govd.sources.base import Frame
from govd.target import Target

if TYPE_CHECKING:  # the savings module is light: `govd status` formats its reports
    from govd.policy.base import Outlook

VERIFIED_S = 10.0
"""How long a check of the top level's prediction vouches for the estimate. Units: s."""
SLOWER_AT_TOP = 1.02
"""A top level predicted this many times slower than the level that ran is implausible."""
MIN_CHECKS = 3
"""Checks needed before a correction is applied (fewer: the model's ratio as it is)."""


@dataclass(slots=True)
class TopClock:
    """The model's view of the work that just ran, against the top allowed level."""

    energy_ratio: float
    """Predicted energy per frame at the top level over that at the level that ran."""
    time_top_ms: float
    """Predicted time of a frame (unit) of this work at the top level. Units: ms."""
    energy_top_mj: float
    """Predicted energy per frame (unit) of this work at the top level. Units: mJ."""
    time_ran_ms: float
    """Predicted time of a frame (unit) of this work at the level that ran. Units: ms."""
    energy_ran_mj: float
    """Predicted energy per frame (unit) of this work at the level that ran. Units: mJ."""
    ran: int
    """Index of the level that ran."""
    ran_top: bool
    """Whether the level that ran is the top allowed level."""


def top_clock(outlook: Outlook) -> TopClock | None:
    """What the predictions say about the top allowed level against the one that ran, or None
    while the model is not ready or a prediction is not a positive number.

    The one place that reads the model's per-level predictions for reporting: ``time_ms``
    and ``energy_mj`` of `Outlook.predictions` and their ``ready``, the allowed top ``hi`` and
    the level that ran (``current``)."""
    predicted = outlook.predictions
    if not predicted.ready:
        return None
    hi, ran = outlook.hi, outlook.current
    energy_top, energy_ran = float(predicted.energy_mj[hi]), float(predicted.energy_mj[ran])
    time_top, time_ran = float(predicted.time_ms[hi]), float(predicted.time_ms[ran])
    if not (energy_top > 0 and energy_ran > 0 and time_top > 0 and time_ran > 0
            and math.isfinite(energy_top / energy_ran) and math.isfinite(time_top + time_ran)):
        return None
    return TopClock(energy_top / energy_ran, time_top, energy_top, time_ran, energy_ran, ran,
                    ran == hi)


@dataclass(slots=True)
class Checks:
    """Measured against predicted energy, summed over checks (`Savings.check_top`,
    `check_ran`). Units: mJ."""

    count: float = 0.0
    measured_mj: float = 0.0
    predicted_mj: float = 0.0
    ratio_sq: float = 0.0
    """Sum of each check's (measured / predicted)², for the spread."""

    def add(self, measured_mj: float, predicted_mj: float) -> None:
        """One check: ``measured_mj`` where the model predicted ``predicted_mj`` (mJ)."""
        if measured_mj > 0 and predicted_mj > 0 and math.isfinite(measured_mj + predicted_mj):
            self.count += 1
            self.measured_mj += measured_mj
            self.predicted_mj += predicted_mj
            self.ratio_sq += min(measured_mj / predicted_mj, 10.0) ** 2

    @property
    def factor(self) -> float:
        """Measured over predicted over the checks; 1 before `MIN_CHECKS`."""
        if self.count < MIN_CHECKS or not self.predicted_mj > 0:
            return 1.0
        return self.measured_mj / self.predicted_mj

    @property
    def spread(self) -> float:
        """Standard error of `factor` (relative): the checks' spread over the root of their
        number; NaN before `MIN_CHECKS`."""
        if self.count < MIN_CHECKS:
            return math.nan
        mean = self.factor
        variance = max(self.ratio_sq / self.count - mean * mean, 0.0)
        return math.sqrt(variance / self.count) / mean


@dataclass(slots=True)
class Savings:
    """Running totals for one device while governed (a `DeviceRunner` keeps one; the journal
    summary reports what each interval added). Energies in J."""

    energy_j: float = 0.0
    """Energy measured over the governed ticks. Units: J."""
    model_top_j: float = 0.0
    """The model's estimate of the covered ticks' work at the top clock, uncorrected. Units: J."""
    at_top_j: float = 0.0
    """Energy of the covered ticks that ran the top level: part of `model_top_j` as measured,
    never corrected. Units: J."""
    uncovered_j: float = 0.0
    """Energy of the ticks without an estimate (counted as at the top). Units: J."""
    verified_j: float = 0.0
    """Energy of the covered ticks a recent check of the top level vouches for. Units: J."""
    implausible_j: float = 0.0
    """Energy of the covered ticks where the model predicts the top level slower. Units: J."""
    frames: float = 0.0
    """Frames (units of work) completed, busy-time pseudo-frames included."""
    judged: float = 0.0
    """Frames judged against a deadline (real frames under a frame-rate target)."""
    late: float = 0.0
    """Judged frames that took longer than the deadline."""
    slowed: float = 0.0
    """Units judged against the top clock (under a slowdown limit, with a ready model)."""
    slowdown_sum: float = 0.0
    """Sum over those units of measured time / the model's top-clock time − 1."""
    over_limit: float = 0.0
    """Those units slower than the limit allows."""
    top: Checks = dataclasses.field(default_factory=Checks)
    """Checks of the model's energy at the top level."""
    ran: Checks = dataclasses.field(default_factory=Checks)
    """Checks of the model's energy at the levels that ran."""

    def add_tick(self, energy_j: float, top: TopClock | None, target: Target,
                 frames: Sequence[Frame], pseudo: bool, verified: bool = False) -> float:
        """Add one governed tick: its measured ``energy_j`` (J, NaN when unmeasured), the
        model's view ``top`` (`top_clock`), the ``target`` in force and its frames
        (``pseudo``: frames of busy time, which have no deadline); ``verified``: a check of the
        top level's prediction (`check_top`) came within the last `VERIFIED_S`. Returns the
        model's estimate of the tick's energy at the top clock, uncorrected (J; NaN when
        unmeasured)."""
        top_j = math.nan
        if math.isfinite(energy_j):
            self.energy_j += energy_j
            if top is None:
                top_j = energy_j
                self.uncovered_j += energy_j
            else:
                top_j = energy_j * top.energy_ratio
                self.model_top_j += top_j
                if top.ran_top:  # at the top the estimate is the measurement
                    self.at_top_j += energy_j
                if verified or top.ran_top:
                    self.verified_j += energy_j
                if top.time_top_ms > SLOWER_AT_TOP * top.time_ran_ms:
                    self.implausible_j += energy_j
        if not frames:
            return top_j
        for f in frames:
            self.frames += f.count
        if target.fps is not None and not pseudo:
            deadline_ms = target.deadline_ms
            for f in frames:
                self.judged += f.count
                if f.gpu_time_ms > deadline_ms:
                    self.late += f.count
        elif target.max_slowdown is not None and top is not None:
            top_ms = top.time_top_ms
            limit_ms = (1.0 + target.max_slowdown) * top_ms
            for f in frames:
                self.slowed += f.count
                self.slowdown_sum += f.count * (f.gpu_time_ms / top_ms - 1.0)
                if f.gpu_time_ms > limit_ms:
                    self.over_limit += f.count
        return top_j

    def check_top(self, measured_mj: float, predicted_mj: float) -> None:
        """A tick ran the top level right after the model, at a lower level, predicted
        ``predicted_mj`` (mJ) there for this tick's frames; the tick measured ``measured_mj``."""
        self.top.add(measured_mj, predicted_mj)

    def check_ran(self, measured_mj: float, predicted_mj: float) -> None:
        """A tick ran the level of the tick before, where the model had predicted
        ``predicted_mj`` (mJ) for this tick's frames; the tick measured ``measured_mj``."""
        self.ran.add(measured_mj, predicted_mj)

    def since(self, earlier: Savings) -> Savings:
        """What was added to these totals after ``earlier`` (a `copy` taken before)."""
        def minus(now: Any, then: Any) -> Any:
            if isinstance(now, Checks):
                return Checks(*(minus(getattr(now, f.name), getattr(then, f.name))
                                for f in dataclasses.fields(now)))
            return now - then

        return Savings(*(minus(getattr(self, f.name), getattr(earlier, f.name))
                         for f in dataclasses.fields(self)))

    def interval(self, earlier: Savings) -> Savings:
        """What was added after ``earlier`` (a `copy` taken before), its top-clock estimate
        corrected by every check so far, not only by the interval's own: a journal summary's
        10 s seldom holds `MIN_CHECKS` of the top level, and left uncorrected the H200's
        summaries said 7.6-9.3 % less than the top clock where the run used 4 % less. The
        model's bias outlives an interval; the run's checks are the best word on it."""
        spent = self.since(earlier)
        spent.top, spent.ran = dataclasses.replace(self.top), dataclasses.replace(self.ran)
        return spent

    def copy(self) -> Savings:
        """A copy of the totals as they are now."""
        return dataclasses.replace(self, top=dataclasses.replace(self.top),
                                   ran=dataclasses.replace(self.ran))

    @property
    def correction(self) -> float:
        """What the checks found the model's top-to-ran energy ratio off by (a factor)."""
        return self.top.factor / self.ran.factor

    @property
    def top_energy_j(self) -> float:
        """The estimate of the governed ticks' work at the top clock, corrected where it is the
        model's (the ticks below the top). Units: J."""
        return self.uncovered_j + self.at_top_j + self._below_top_j * self.correction

    @property
    def _below_top_j(self) -> float:
        """The model's uncorrected estimate, at the top clock, of the ticks run below it (J)."""
        return max(self.model_top_j - self.at_top_j, 0.0)

    @property
    def saved_share(self) -> float:
        """Share of the top-clock estimate not used (0.25: a quarter less); NaN before any."""
        top_j = self.top_energy_j
        return 1.0 - self.energy_j / top_j if top_j > 0 else math.nan

    @property
    def covered_share(self) -> float:
        """Share of the energy whose top-clock estimate comes from a ready model."""
        return 1.0 - self.uncovered_j / self.energy_j if self.energy_j > 0 else math.nan

    @property
    def verified_share(self) -> float:
        """Share of the covered energy a recent check of the top level vouches for."""
        covered_j = self.energy_j - self.uncovered_j
        return self.verified_j / covered_j if covered_j > 0 else math.nan

    @property
    def implausible_share(self) -> float:
        """Share of the covered energy where the model predicts the top level slower."""
        covered_j = self.energy_j - self.uncovered_j
        return self.implausible_j / covered_j if covered_j > 0 else math.nan

    @property
    def saved_uncertainty(self) -> float:
        """How far the saved share may be off (a share, ±): the standard errors of the two
        corrections, added, carried through the ratio; NaN before `MIN_CHECKS` of each."""
        top_j = self.top_energy_j
        if not top_j > 0:
            return math.nan
        corrected = self._below_top_j * self.correction / top_j
        if corrected == 0.0:  # every covered tick ran the top: measured, not estimated
            return 0.0
        error = self.top.spread + self.ran.spread
        return error * corrected * self.energy_j / top_j

    @property
    def missed_share(self) -> float:
        """Share of the judged frames that missed their deadline; NaN when none was judged."""
        return self.late / self.judged if self.judged else math.nan

    @property
    def mean_slowdown(self) -> float:
        """Mean slowdown of the units against the model's top-clock time (0.05: 5 % slower)."""
        return self.slowdown_sum / self.slowed if self.slowed else math.nan

    @property
    def over_limit_share(self) -> float:
        """Share of the judged units slower than the slowdown limit."""
        return self.over_limit / self.slowed if self.slowed else math.nan

    def sureness(self) -> str:
        """In words, how far to trust the saving: ``good`` (most of the energy covered, the
        corrections' errors move the saving by at most 2 points), ``rough`` (by at most 10),
        ``poor`` (more, or the model predicts the top level slower for a tenth of the energy),
        ``unverified`` (the top level's prediction checked for less than half of the energy:
        the model's extrapolation), ``unknown`` (no ready model for half of the energy, or too
        few checks to say)."""
        covered = self.covered_share
        if not covered >= 0.5:
            return "unknown"
        if self.implausible_share > 0.1:
            return "poor"
        if not self.verified_share >= 0.5:
            return "unverified"
        pm = self.saved_uncertainty
        if not math.isfinite(pm):
            return "unknown"
        return "good" if pm <= 0.02 and covered >= 0.9 else "rough" if pm <= 0.10 else "poor"

    def report(self) -> dict[str, Any]:
        """The totals and the shares derived from them (JSON-able; NaN as None)."""
        report: dict[str, Any] = {
            "energy_j": self.energy_j, "top_clock_energy_j": self.top_energy_j,
            "model_top_clock_energy_j": self.model_top_j + self.uncovered_j,
            "at_top_clock_energy_j": self.at_top_j,
            "correction": self.correction,
            "saved_share": self.saved_share, "saved_uncertainty": self.saved_uncertainty,
            "sure": self.sureness(),
            "covered_share": self.covered_share, "verified_share": self.verified_share,
            "implausible_share": self.implausible_share,
            "top_checks": self.top.count, "top_factor": self.top.factor,
            "ran_checks": self.ran.count, "ran_factor": self.ran.factor,
            "frames": self.frames, "judged_frames": self.judged, "late_frames": self.late,
            "missed_share": self.missed_share,
            "slowdown_units": self.slowed, "over_limit_units": self.over_limit,
            "mean_slowdown": self.mean_slowdown, "over_limit_share": self.over_limit_share,
        }
        return {k: (None if isinstance(v, float) and not math.isfinite(v) else v)
                for k, v in report.items()}


def saving_words(report: dict[str, Any]) -> str:
    """One phrase for a `Savings.report`: the saving against the top clock with how sure it is,
    and what it cost (missed deadlines or slowdown). Empty before any energy was measured."""
    share = report.get("saved_share")
    if share is None:
        return ""
    pm = report.get("saved_uncertainty")
    covered = report.get("covered_share")
    sure = report.get("sure", "unknown")
    how = f"±{100 * pm:.1f} pts, {sure}" if pm is not None else sure
    if sure == "unverified":
        how += (": the top clock's prediction checked for "
                f"{100 * (report.get('verified_share') or 0.0):.0f} % of the energy")
    elif sure == "poor" and (report.get("implausible_share") or 0.0) > 0.1:
        how += (": the model has the top clock slower for "
                f"{100 * report['implausible_share']:.0f} % of the energy")
    if covered is not None and covered < 0.995:
        how += f", {100 * covered:.0f} % covered by the model"
    # in words: a signed "-5 %" read as a saving
    parts = [f"{100 * abs(share):.1f} % {'less' if share >= 0 else 'more'} energy than at the "
             f"top clock ({how})"]
    if report.get("missed_share") is not None:
        parts.append(f"missed deadlines {100 * report['missed_share']:.1f} %")
    if report.get("mean_slowdown") is not None:
        parts.append(f"slowdown {100 * report['mean_slowdown']:.1f} % against the top clock "
                     f"({100 * (report.get('over_limit_share') or 0.0):.1f} % of units over the "
                     "limit)")
    return ", ".join(parts)
