"""One governed device, one tick at a time: read → Sample → Governor.step → set_level → telemetry.

A device that faults is dealt with alone, the other devices and the loop go on:

- it vanished (`DeviceGone`: unplugged, driver unbound): the runner pauses; nothing can be
  written to it, and its saved state stays in the state file for when it comes back (a write
  refused as gone is followed by an attempt to hand the device back: the read before it worked);
- the kernel refused a write, or a read failed otherwise: the runner hands the device back (puts
  the state it found back) and pauses.

A paused runner probes the device again after a back-off (1 s, doubling up to 30 s; a hot-plug
``add`` event probes at once) and takes it back when it answers: model and policy start afresh,
and the level is written again. Each fault is one warning per episode (`EpisodeLimiter`), closed
when the device works again; failed probes are counted in it.

Another tool may change the clock behind govd's back: `govd.daemon.override` decides when the
runner writes its level again and when it steps back (paused as ``contested``, the device left
as that tool set it).

Without frames a model-driven policy has nothing to judge frame times by, and would hold the
top clock. So a runner given ``silent_after_s`` writes nothing until the first frame for its
device arrives, and once frames stop for that long (or twice the longest frame of the last tick
that had any, for long training steps), hands the device back to its own governor as govd found
it (`hand_back`) until frames come again: never worse than the kernel's governor. It says so
once in the journal, with what the user can do, and `status` shows it.
"""

from __future__ import annotations

import dataclasses
import logging
import math
from collections import Counter, deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from govd.daemon.override import OverrideWatch, Verdict
from govd.daemon.record import TraceRecorder
from govd.device.base import Device, DeviceError, DeviceGone, Reading
from govd.device.energy import EnergyMeter
from govd.governor import Governor
from govd.model.tick import STRESS_RESET
from govd.sample import count_frames, counter_values, target_for, tick_sample
from govd.sources.base import Frame, one_line
from govd.sources.busy import BusySource
from govd.target import Target
from govd.telemetry.log import EpisodeLimiter, log_fields
from govd.telemetry.metrics import Metrics
from govd.telemetry.savings import VERIFIED_S, Savings, TopClock, top_clock
from govd.telemetry.summary import DeviceSummary
from govd.telemetry.tick import TickRecord

if TYPE_CHECKING:
    from govd.custody.custody import Custody

log = logging.getLogger("govd.daemon")
T = TypeVar("T")

FIRST_RETRY_S = 1.0
MAX_RETRY_S = 30.0
_UNSET = object()
RECENT_S = 1.0
"""How far back the status file's recent FPS and frame time look. Units: s."""
TOP_CHECK_TICKS = 10
"""Ticks at the top level, after a tick below it, that check the model's prediction there
(the work changes: later ones would check the prediction for other work)."""


@dataclass(frozen=True, slots=True)
class RunnerSettings:
    """What the configuration says about driving one device."""

    policy: str
    """The policy's name (for telemetry)."""
    target: Target
    """The device's target when no application asks for its own."""
    apps: Mapping[str, Target]
    """Per-application targets by process name."""
    counters: Sequence[str] = ()
    """The model's counters, in the model's order."""


class DeviceRunner:
    """Drives one device with its own governor; `tick` once per loop tick."""

    def __init__(
        self,
        device: Device,
        governor: Governor,
        settings: RunnerSettings,
        limiter: EpisodeLimiter,
        summary: DeviceSummary | None = None,
        metrics: Metrics | None = None,
        recorder: TraceRecorder | None = None,
        busy_source: BusySource | None = None,
        reopen: Callable[[dict[str, Any]], Device] | None = None,
        busy_meter: Callable[[], float] | None = None,
        silent_after_s: float | None = None,
        no_frames_hint: str = "",
        custody: Custody | None = None,
        on_replaced: Callable[[DeviceRunner], None] | None = None,
    ) -> None:
        """``reopen`` rebuilds the device from its `Device.save` data when a paused device's
        handle cannot come back by itself (NVML after a driver reload); None: probe it as is.
        ``busy_meter`` gives the busy fraction (0..1) since its last call where the device
        reports none (DRM fdinfo). ``busy_source`` makes pseudo-frames of busy time every tick.
        ``silent_after_s`` (s): the device is governed only while frames arrive for it, and left
        to its own governor after this long without any; None: governed without frames (a policy
        that needs none, or busy time). ``no_frames_hint`` says in the journal what the user
        can do about missing frames (where to send them).
        ``custody`` holds the device: a device that answers again after a pause is governed
        again only once it is shown to be the same device, its lock moved to its new directory;
        a different device under its name pauses the runner for good (``replaced``) and calls
        ``on_replaced``, so the daemon takes the new device afresh."""
        self.device = device
        self.governor = governor
        self.settings = settings
        self.limiter = limiter
        self.summary = summary
        self.metrics = metrics
        self.recorder = recorder
        self.busy_source = busy_source
        self.reopen = reopen
        self.busy_meter = busy_meter
        self.silent_after_s = silent_after_s
        self.no_frames_hint = no_frames_hint
        self.custody = custody
        self.on_replaced = on_replaced
        self.paused: str | None = None
        """Why the device is not governed now (None while it is)."""
        self.energy_j = 0.0
        """Energy the device used while governed. Units: J."""
        self.savings = Savings()
        """Energy used against the model's estimate at the top clock, misses, slowdown."""
        self.waiting_since_s: float | None = None
        """Loop time since which the device is left to its own governor for want of frames
        (None while govd governs it). Units: s."""
        self._last_frame_s = -math.inf
        self._frame_gap_s = 0.0
        self._said_waiting = False
        self._said_taken = False
        self._top_predicted_mj: float | None = None
        self._ticks_at_top = 0
        self._top_checked_s = -math.inf
        self._ran_predicted: tuple[int, int, float] | None = None
        self.counts: Counter[str] = Counter()
        self._meter = EnergyMeter()
        self._applied_mhz: float | None = None
        self._applied_mem_mhz: float | None = None
        self._last_write_s = -math.inf
        self._retry_s = FIRST_RETRY_S
        self._next_probe_s = -math.inf
        self._override = OverrideWatch()
        self._started_s: float | None = None
        self._predicted_ms = math.nan
        self._recent: deque[tuple[float, float, float, float]] = deque()
        # The last tick's figures for `status`, kept as they came (a dict built every tick was
        # read every 5 s); `_fallback` is `_UNSET` after a tick that decided nothing.
        self._last: tuple[Reading, float, float] | None = None
        self._fallback: object = _UNSET
        self._model_warned = False
        """Whether a model-stress episode may be open in the limiter (cleared when it ends)."""
        self.last_busy = math.nan
        """The device's busy fraction at the last read (0..1; NaN where it reports none)."""

    @property
    def name(self) -> str:
        """The device's name."""
        return self.device.name

    # -- one tick ------------------------------------------------------------------------------
    def tick(self, now_s: float, interval_s: float, frames: Sequence[Frame]) -> TickRecord | None:
        """Govern one tick at loop time ``now_s`` (s) that lasted ``interval_s`` (s), with the
        frames completed in it. Returns what telemetry records, None while paused or left to
        its own governor."""
        if self._started_s is None:
            self._started_s = self._last_frame_s = now_s
            if self.silent_after_s is not None:
                self.waiting_since_s = now_s  # nothing written until the first frame
                self._waiting_changed()
        if self.paused is not None and not self._probe(now_s):
            return None
        if (self.silent_after_s is not None or self.waiting_since_s is not None) \
                and not self._frames_flow(now_s, interval_s, frames):
            return None
        reading = self._guarded(now_s, "read", self.device.read)
        if reading is None or self._stepped_back(now_s):
            return None
        if self.busy_meter is not None and not math.isfinite(reading.busy):
            reading = dataclasses.replace(reading, busy=self.busy_meter())
        self.last_busy = reading.busy
        pseudo = False  # pseudo-frames of busy time have no deadline: none of them is late
        if self.busy_source is not None:
            self.busy_source.observe(reading.busy, interval_s)
            frames = self.busy_source.drain()
            pseudo = True
        governor = self.governor
        target = governor.target = target_for(frames, self.settings.apps, self.settings.target,
                                              governor.target)
        power_w = self._meter.update(now_s, reading.energy_mj, reading.power_w)
        tick_energy_j = self._tick_energy_j(power_w, interval_s)
        counters = counter_values(reading.counters, self.settings.counters)
        tally = count_frames(frames, target, pseudo)
        sample = tick_sample(tally, reading.freq_mhz, interval_s, reading.busy, power_w,
                             counters, reading.mem_freq_mhz)
        frame_count, frame_time_ms = tally.count, tally.mean_ms
        actual_vs_predicted = (frame_time_ms, self._predicted_ms)
        decision = governor.step(sample)
        if decision.held:
            self.counts["held_by_dwell"] += 1
        self._predicted_ms = float(decision.outlook.predictions.time_ms[decision.level])
        savings = self.savings
        late_before, over_before = savings.late, savings.over_limit
        slowdown_before, slowed_before = savings.slowdown_sum, savings.slowed
        top = top_clock(decision.outlook)
        # The checks judge the meter's power over the tick, not the counter's raw step: a
        # counter that steps every other tick (NVML's, 100 ms) gives 0 and twice the energy.
        self._check_top(now_s, top, frame_count, power_w * interval_s)
        top_j = savings.add_tick(tick_energy_j, top, target, frames, pseudo,
                                 verified=now_s - self._top_checked_s <= VERIFIED_S)
        name = self.device.name
        fallback = decision.fallback
        if decision.model_flags & STRESS_RESET:
            # One line per reset (a reset during the grace counts as a repeat); not one per
            # tick of the fallback that follows it.
            self.limiter.warn((name, "model"), now_s, f"{name}: model reset "
                              f"({fallback}); the fallback policy decides while it "
                              "relearns", condition=fallback)
            self._model_warned = True
        elif fallback is None and self._model_warned:  # only this runner opens that episode
            self.limiter.clear((name, "model"), now_s)
            self._model_warned = False
        switched = self._apply(now_s, decision.freq_mhz, decision.mem_freq_mhz)
        self.counts["ticks"] += 1
        if self.recorder is not None:
            self.recorder.row(now_s - self._started_s, sample, target, decision.freq_mhz,
                              decision.mem_freq_mhz)
        self._remember(now_s, reading, frame_count, frame_time_ms, power_w, actual_vs_predicted)
        self._fallback = fallback
        isfinite = math.isfinite
        predicted_ms = actual_vs_predicted[1]
        slowed = savings.slowed - slowed_before
        record = TickRecord(
            name, reading.freq_mhz, [f.gpu_time_ms for f in frames],
            predicted_ms if isfinite(predicted_ms) else None,
            power_w if isfinite(power_w) else None,
            tick_energy_j if isfinite(tick_energy_j) else None,
            self.settings.policy, switched, decision.freq_mhz,
            top_energy_j=top_j if isfinite(top_j) else None,
            ran_top=top is not None and top.ran_top,
            top_correction=savings.correction,
            late_frames=savings.late - late_before,
            over_limit_units=savings.over_limit - over_before,
            slowdown=(savings.slowdown_sum - slowdown_before) / slowed if slowed else None,
            mem_level_mhz=reading.mem_freq_mhz if isfinite(reading.mem_freq_mhz) else None,
            busy=reading.busy if isfinite(reading.busy) else None,
            pseudo=pseudo,
            frame_counts=_frame_counts(frames),
        )
        if self.summary is not None:
            self.summary.record_tick(now_s, record, savings)
        if self.metrics is not None:
            self.metrics.record_tick(record)
        return record

    def _check_top(self, now_s: float, top: TopClock | None, frame_count: float,
                   energy_j: float) -> None:
        """Check the model's energy per frame at both ends of its top-clock estimate
        (`govd.telemetry.savings`): at the level that ran, the prediction of the tick before
        when it ran the same level; at the top level, the prediction of the last tick below
        it, against the following `TOP_CHECK_TICKS` at the top. The first tick after a change
        of level is left out: its frames began at the level before."""
        if top is None or frame_count <= 0:
            self._ran_predicted = None
            return
        measured_mj = 1000.0 * energy_j
        before = self._ran_predicted
        if before is not None and before[0] == top.ran and before[1] == top.ran:
            self.savings.check_ran(measured_mj, frame_count * before[2])
        # (level of the tick before that, of this tick, the prediction at this tick's level)
        self._ran_predicted = (before[1] if before else -1, top.ran, top.energy_ran_mj)
        if not top.ran_top:
            self._top_predicted_mj = top.energy_top_mj
            self._ticks_at_top = 0
            return
        self._ticks_at_top += 1
        if self._top_predicted_mj is not None and 2 <= self._ticks_at_top <= TOP_CHECK_TICKS:
            self.savings.check_top(measured_mj, frame_count * self._top_predicted_mj)
            self._top_checked_s = now_s

    def idle_tick(self, now_s: float, interval_s: float) -> None:
        """A slow tick while the daemon idles: read the device (its busy fraction says whether
        to wake; its energy is still counted), watch for another tool, and hold the lowest
        level. No decision is taken: the model learns nothing from an idle GPU."""
        if self._started_s is None:
            self._started_s = self._last_frame_s = now_s
            if self.silent_after_s is not None:
                self.waiting_since_s = now_s
                self._waiting_changed()
        if self.paused is not None and not self._probe(now_s):
            return
        if self.waiting_since_s is not None:  # its own governor keeps it; nothing to hold
            self._watch(now_s, interval_s)
            return
        reading = self._guarded(now_s, "read", self.device.read)
        if reading is None or self._stepped_back(now_s):
            return
        self.last_busy = reading.busy
        power_w = self._meter.update(now_s, reading.energy_mj, reading.power_w)
        self._tick_energy_j(power_w, interval_s)
        self._remember(now_s, reading, 0.0, math.nan, power_w, (math.nan, math.nan))
        self.counts["idle_ticks"] += 1
        governor = self.governor
        low = governor.lo
        mem_levels = governor.mem_levels_mhz
        self._apply(now_s, float(governor.levels_mhz[low]),
                    None if mem_levels is None else float(mem_levels[low]))

    # -- without frames ------------------------------------------------------------------------
    def _frames_flow(self, now_s: float, interval_s: float, frames: Sequence[Frame]) -> bool:
        """Whether to govern this tick: frames came for the device, or came recently enough,
        or it is governed without frames. Otherwise the device is (or is now) left to its own
        governor, and this tick only watches it."""
        if frames:
            self._last_frame_s = now_s
            longest_ms = 0.0
            for f in frames:
                longest_ms = max(longest_ms, f.gpu_time_ms)
            # A training step of 10 minutes is reported at its end: wait for the next one.
            self._frame_gap_s = 2.0 * longest_ms / 1000.0
            if self.waiting_since_s is not None:
                self._take(now_s, "frames arrive")
            return True
        after_s = self.silent_after_s
        if after_s is None:  # a policy that needs no frames (after a reload)
            if self.waiting_since_s is not None:
                self._take(now_s, f"{self.settings.policy} needs no frames")
            return True
        if self.waiting_since_s is None:
            if now_s - self._last_frame_s < max(after_s, self._frame_gap_s):
                return True
            if self._guarded(now_s, "write", lambda: hand_back(self.device)) is None:
                return False  # paused: the fault path handed it back and says why
            self._applied_mhz = self._applied_mem_mhz = None
            self.waiting_since_s = now_s
            self.counts["handed_back"] += 1
            self._waiting_changed()
        self._watch(now_s, interval_s)
        return False

    def _watch(self, now_s: float, interval_s: float) -> None:
        """A tick of a device left to its own governor: read it (busy time for the idle
        back-off, the level and power for `status`), write nothing, and say once why."""
        after_s = self.silent_after_s or 0.0
        if not self._said_waiting and now_s - self._last_frame_s >= after_s:
            self._said_waiting = True
            log_fields(log, logging.INFO,
                       f"{self.name}: no frames for {now_s - self._last_frame_s:.0f} s: left to "
                       f"its own governor, as govd found it, until frames arrive. "
                       f"{self.no_frames_hint}".rstrip(), device=self.name, waiting=1)
        reading = self._guarded(now_s, "read", self.device.read)
        if reading is None:
            return
        self.last_busy = reading.busy
        power_w = self._meter.update(now_s, reading.energy_mj, reading.power_w)
        self._remember(now_s, reading, 0.0, math.nan, power_w, (math.nan, math.nan))
        self.counts["waiting_ticks"] += 1

    def _take(self, now_s: float, why: str) -> None:
        """Govern the device again from this tick (said in the journal the first time)."""
        waited_s = now_s - (self.waiting_since_s or now_s)
        self.waiting_since_s = None
        self._waiting_changed()
        self.device.forget_applied()
        if self.summary is not None:
            self.summary.restart()  # its frame rate must not spread over the time left alone
        level = logging.DEBUG if self._said_taken else logging.INFO
        self._said_taken = True
        log_fields(log, level, f"{self.name}: {why}: governing it (left to its own governor "
                   f"for {waited_s:.1f} s)", device=self.name, waiting=0)

    def _waiting_changed(self) -> None:
        if self.metrics is not None:
            self.metrics.record_waiting(self.name, self.waiting_since_s is not None)

    def _tick_energy_j(self, power_w: float, interval_s: float) -> float:
        """Energy used this tick (J): the counter's step as the meter vetted it (wraps undone;
        resets, jumps and stalls refused), else the power sample over the tick, else NaN."""
        used_mj = self._meter.tick_energy_mj
        used_j = used_mj / 1000.0 if math.isfinite(used_mj) else power_w * interval_s
        if math.isfinite(used_j):
            self.energy_j += used_j
        return used_j

    def _apply(self, now_s: float, freq_mhz: float, mem_freq_mhz: float | None) -> bool:
        """Write the chosen level (a (core, memory) pair when ``mem_freq_mhz`` is not None)
        when it changed (the governor's dwell has decided whether it may)."""
        if freq_mhz == self._applied_mhz and mem_freq_mhz == self._applied_mem_mhz:
            return False
        if self._guarded(now_s, "write", lambda: self._write(freq_mhz, mem_freq_mhz)) is None:
            return False
        self._applied_mhz = freq_mhz
        self._applied_mem_mhz = mem_freq_mhz
        self._last_write_s = now_s
        self.counts["writes"] += 1
        if not self.limiter.quiet:  # as a rule nothing is open: no three calls a write
            for kind in ("gone", "read", "write"):
                self.limiter.clear((self.name, kind), now_s)
        self._retry_s = FIRST_RETRY_S
        return True

    def _write(self, freq_mhz: float, mem_freq_mhz: float | None) -> bool:
        if mem_freq_mhz is None:
            self.device.set_level(freq_mhz)
        else:
            self.device.set_pair(freq_mhz, mem_freq_mhz)
        return True

    def _guarded(self, now_s: float, kind: str, action: Callable[[], T]) -> T | None:
        """``action()``, or None after pausing on its fault: a device gone is only paused,
        any other fault of ``kind`` (read, write) hands the device back as well."""
        try:
            return action()
        except DeviceGone as exc:
            # A write refused as gone right after a read that worked: the device may well still
            # hold govd's setting (a driver refusing with ENODEV), so try to put things back.
            self._pause(now_s, "gone", exc, hand_back=kind == "write")
        except DeviceError as exc:
            self._pause(now_s, kind, exc, hand_back=True)
        return None

    def _stepped_back(self, now_s: float) -> bool:
        """Watch for another tool changing govd's setting (`govd.daemon.override`): re-apply,
        or step back. True when the device is no longer governed."""
        if self._applied_mhz is None or now_s <= self._last_write_s:
            return False
        changed = self._guarded(now_s, "read", self.device.override)
        if self.paused is not None:
            return True
        verdict = self._override.observe(now_s, changed)
        if verdict is Verdict.QUIET:
            for kind in ("override", "contested"):
                self.limiter.clear((self.name, kind), now_s)
        elif verdict is Verdict.REAPPLY:
            self.counts["overridden"] += 1
            self.limiter.warn((self.name, "override"), now_s,
                              f"{self.name}: another tool changed the clock ({changed}); "
                              "re-applying", error=changed)
            self._applied_mhz = None  # written again this tick, whatever the dwell
        elif verdict is Verdict.STEP_BACK:
            self.counts["overridden"] += 1
            self._pause(now_s, "contested", DeviceError(str(changed)), hand_back=False)
            self._next_probe_s = now_s + self._override.back_off_s()
            return True
        return False

    def reapply(self) -> None:
        """Write the chosen level again at the next tick (after suspend/resume the driver may
        have put its own back)."""
        self._applied_mhz = None
        self.device.forget_applied()

    # -- faults --------------------------------------------------------------------------------
    def _pause(self, now_s: float, kind: str, exc: Exception, hand_back: bool) -> None:
        self.paused = kind
        self.counts[f"paused_{kind}"] += 1
        what = {"gone": "device went away", "read": "cannot read the device",
                "write": "the kernel refused a write",
                "contested": "another tool keeps changing the clock"}[kind]
        action = ("handed back, paused" if hand_back else
                  "left as that tool set it, paused" if kind == "contested" else "paused")
        self.limiter.warn((self.name, kind), now_s, f"{self.name}: {what} ({exc}); {action}",
                          error=str(exc))
        if hand_back:
            try:
                self.device.restore()
            except DeviceGone:
                pass  # nothing left to put back; its saved state waits for its return
            except DeviceError as restore_exc:
                self.limiter.warn((self.name, "restore"), now_s,
                                  f"{self.name}: restoring failed too ({restore_exc})")
        self._applied_mhz = None
        self.device.forget_applied()  # what it holds when taken back is unknown
        self._override_ticks = 0
        self._next_probe_s = now_s + self._retry_s
        self._retry_s = min(self._retry_s * 2, MAX_RETRY_S)

    def gone(self, now_s: float) -> None:
        """The device was unplugged (a hot-plug ``remove``): pause without writing to it."""
        if self.paused is None:
            self._pause(now_s, "gone", DeviceGone("removed"), hand_back=False)

    def probe_soon(self) -> None:
        """Try to take the device back at the next tick (a hot-plug ``add``)."""
        self._next_probe_s = -math.inf
        self._retry_s = FIRST_RETRY_S

    def _probe(self, now_s: float) -> bool:
        """Whether a paused device answers again; if so it is taken back afresh."""
        if now_s < self._next_probe_s:
            return False
        try:
            self.device.read()
        except DeviceGone as exc:
            if not self._reopened():
                self._still_not_answering(now_s, exc)
                return False
        except DeviceError as exc:
            self._still_not_answering(now_s, exc)
            return False
        if self.custody is not None and not self._same_device(now_s):
            return False
        log_fields(log, logging.INFO, f"{self.name}: answers again; governing it afresh",
                   device=self.name, was=self.paused)
        self.paused = None
        self.counts["resumed"] += 1
        self.governor.reset()
        if self.summary is not None:
            self.summary.restart()
        self._meter.reset()
        self._applied_mhz = None
        return True

    def _same_device(self, now_s: float) -> bool:
        """Whether the device that answers is the one govd took, its lock now on its directory
        as it is (a new inode after a re-plug). A different device under its name is never
        written with what govd chose or saved for the old one: paused for good instead."""
        assert self.custody is not None
        differs = self.custody.replaced_by(self.device)
        if differs is not None:
            self.replaced(now_s, differs)
            return False
        try:
            self.custody.locks.renew(self.device)
        except Exception as exc:  # DeviceBusy, DeviceGone: not taken back now
            self._still_not_answering(now_s, DeviceError(str(exc)))
            return False
        return True

    def replaced(self, now_s: float, differs: str) -> None:
        """Another device took this one's name (``differs``: how it differs): stop governing it
        for good, and let the daemon take the new one afresh (``on_replaced``)."""
        if self.paused == "replaced":
            return
        self.paused = "replaced"
        self.counts["replaced"] += 1
        self._next_probe_s = math.inf
        self.limiter.warn((self.name, "replaced"), now_s, one_line(
            f"{self.name}: a different device took its name ({differs}); the one govd governed "
            "is gone, its saved state dropped; the new one is taken afresh"), error=differs)
        if self.on_replaced is not None:
            self.on_replaced(self)

    def _still_not_answering(self, now_s: float, exc: DeviceError) -> None:
        """A probe failed: counted in the open episode (reported with it when it ends), and
        the next probe backs off further."""
        self.limiter.warn((self.name, self.paused or "gone"), now_s,
                          f"{self.name}: still not answering ({exc})", error=str(exc))
        self._next_probe_s = now_s + self._retry_s
        self._retry_s = min(self._retry_s * 2, MAX_RETRY_S)

    def _reopened(self) -> bool:
        """Swap in a fresh handle on the device (``reopen``) if it answers. The saved state
        moves across, so the device is still put back as found."""
        if self.reopen is None:
            return False
        saved = self.device.save()
        # The stale handle goes first: NVML starts a fresh session only once the last
        # reference to the dead one is given back (closing twice is harmless).
        close_device(self.device)
        try:
            device = self.reopen(saved)
        except (DeviceError, OSError, KeyError, ValueError):
            return False
        try:
            device.read()
        except DeviceError:
            close_device(device)
            return False
        if self.custody is not None:
            self.custody.swap(self.device, device)  # restored at the stop through the new handle
        self.device = device
        self.counts["reopened"] += 1
        return True

    # -- status --------------------------------------------------------------------------------
    def _remember(
        self, now_s: float, reading: Reading, frame_count: float, frame_time_ms: float,
        power_w: float, actual_vs_predicted: tuple[float, float],
    ) -> None:
        recent = self._recent
        frames_ms = frame_count * frame_time_ms if frame_count > 0 else 0.0
        recent.append((now_s, frame_count, frames_ms, power_w))
        while recent and recent[0][0] < now_s - RECENT_S:
            recent.popleft()
        self._last = (reading, *actual_vs_predicted)
        self._fallback = _UNSET

    def status(self) -> dict[str, Any]:
        """The device's state for the status file and the status line (JSON-able; NaN → None)."""
        frames = sum(r[1] for r in self._recent)
        span_s = (self._recent[-1][0] - self._recent[0][0]) if len(self._recent) > 1 else 0.0
        powers = [r[3] for r in self._recent if math.isfinite(r[3])]
        status: dict[str, Any] = {
            "device": self.name,
            "backend": self.device.backend,
            "state": ("paused" if self.paused else "waiting" if self.waiting_since_s is not None
                      else "governed"),
            "paused_reason": self.paused,
            "waiting_since_s": self.waiting_since_s,
            "no_frames_hint": self.no_frames_hint,
            "policy": self.settings.policy,
            "target": self.governor.target.describe(),
            # The first tick's frames were presented before the span began.
            "fps": (frames - self._recent[0][1]) / span_s if span_s > 0 else None,
            "frame_ms": sum(r[2] for r in self._recent) / frames if frames else None,
            "power_w": sum(powers) / len(powers) if powers else None,
            "energy_j": self.energy_j,
            "savings": self.savings.report(),
            "chosen_mhz": self._applied_mhz,
            "chosen_mem_mhz": self._applied_mem_mhz,
            **self._last_status(),
            **{f"{k}": v for k, v in self.counts.items()},
        }
        return {k: _finite_or_none(v) if isinstance(v, float) else v for k, v in status.items()}

    def _last_status(self) -> dict[str, Any]:
        """The last tick's reading, frame times and fallback, as `status` shows them."""
        if self._last is None:
            return {}
        reading, actual_ms, predicted_ms = self._last
        last: dict[str, Any] = {
            "level_mhz": reading.freq_mhz, "mem_level_mhz": reading.mem_freq_mhz,
            "busy": reading.busy, "actual_frame_ms": actual_ms, "predicted_frame_ms": predicted_ms,
        }
        if self._fallback is not _UNSET:
            last["fallback"] = self._fallback
        return last

    def close(self) -> None:
        """Close the trace file and release the device's handle (the daemon restores the
        device first)."""
        if self.recorder is not None:
            self.recorder.close()
        close_device(self.device)


def hand_back(device: Device) -> bool:
    """Give ``device`` back to its own governor as govd found it, until govd takes it again:
    the saved state written back (`Device.restore`, read back to check it held), and govd's last
    setting forgotten so that taking it again writes its level afresh. Returns True (for
    `DeviceRunner._guarded`); raises DeviceError like `Device.restore`."""
    device.restore()
    device.forget_applied()
    return True


def close_device(device: Device) -> None:
    """Release a device's handle where it holds one (an NVML session reference); no restore."""
    close = getattr(device, "close", None)
    if close is not None:
        close()


def _frame_counts(frames: Sequence[Frame]) -> list[int] | None:
    """How many frames each record stands for (`Frame.count`, rounded so that the fractions add
    up over the tick), None when each is one frame (nearly always). One entry per record: a
    sampled MangoHud row may say it stands for a million frames, and telemetry counts them
    without one entry each (memory and work per tick stay bounded by the records read)."""
    for f in frames:  # a loop, not all(generator): one object less every tick
        if f.count != 1.0:
            break
    else:
        return None
    counts = []
    total = 0.0
    for frame in frames:
        before = round(total)
        total += frame.count
        counts.append(round(total) - before)
    return counts


def _finite_or_none(value: float) -> float | None:
    return value if math.isfinite(value) else None
