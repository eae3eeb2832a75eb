"""The daemon: devices taken, one loop ticking them all, every device put back on every way out.

Start-up, in order: restore what a crashed run left (state file of a dead govd), find and select
the devices, build their governors, save the state found to the state file (before any write),
open the frame source, then READY=1. Each tick: drain the frames once, tick each device's runner,
ping the watchdog; every second the status file. SIGHUP reloads the configuration (all or
nothing); SIGTERM/SIGINT end the loop. Whatever ends it (signal, exception, a stop condition),
the ``finally`` puts every device back and removes the state file, or keeps in it the devices
that could not be put back, for `govd restore`.
"""

from __future__ import annotations

import dataclasses
import functools
import gc
import logging
import math
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from govd.conf.load import ConfigError, load_config
from govd.conf.schema import Config
from govd.custody.custody import Custody
from govd.custody.lock import DeviceBusy
from govd.custody.signals import SignalFlags
from govd.custody.state_file import StateFileError
from govd.daemon.device_runner import DeviceRunner, RunnerSettings, close_device
from govd.daemon.governed import SetupError, build_governor, entry_for, find_devices, select
from govd.daemon.hotplug import DeviceWatch
from govd.daemon.idle import IdleSettings, IdleWatch, busiest
from govd.daemon.loop import Clock, DeadlineScheduler, Tick, TickStats
from govd.daemon.record import TraceRecorder, trace_meta, trace_path
from govd.daemon.reload import governor_changed, restart_keys
from govd.daemon.status import write_status
from govd.daemon.validate import Built, ConfigRefused, check_applicable
from govd.device.base import Device, DeviceError, DeviceGone
from govd.device.discovery import SYS
from govd.device.discovery import reopen as discovery_reopen
from govd.from_config import warm_up
from govd.governor import Governor
from govd.sources.base import Frame, FrameSource, Opening, SourceSetupError
from govd.sources.busy import BusySource
from govd.sources.fdinfo import meter_for
from govd.sources.registry import opener as source_opener
from govd.telemetry.log import EpisodeLimiter, log_fields, setup_logging
from govd.telemetry.metrics import (
    Metrics,
    MetricsServer,
    MetricsUnavailable,
    start_metrics_server,
)
from govd.telemetry.notify import Notifier, WatchdogPinger, watchdog_interval_s
from govd.telemetry.summary import DeviceSummary

log = logging.getLogger("govd.daemon")

STATUS_EVERY_S = 5.0
"""How often the status file is written (wall clock), besides at once when govd starts or stops
idling. Units: s. Each write costs the loop a JSON dump and a rename: every 5 s is enough for
`govd status`."""
SUSPEND_GAP_S = 1.0
"""A jump of CLOCK_BOOTTIME over CLOCK_MONOTONIC larger than this means the machine slept."""
QLEN_PATH = "/proc/sys/net/unix/max_dgram_qlen"
DEFAULT_QLEN = 10
"""The kernel's default ``net.unix.max_dgram_qlen``, taken when the sysctl cannot be read."""
RECEIVE_BATCH = 32
"""Datagrams read between two looks at the deadline: with a long kernel queue
(net.unix.max_dgram_qlen raised) one unbounded read could parse past the next tick's deadline."""


class StartError(Exception):
    """govd cannot start (no device, another govd running, ...); one clear line."""


@dataclass
class Options:
    """How `govd run` was asked to run (the configuration plus what the command line says)."""

    config: Config
    config_path: Path | None = None
    """Reread on SIGHUP; None: nothing to reload."""
    insecure_config: bool = False
    sysfs_root: Path = SYS
    record: Path | None = None
    """Run-trace CSV (`govd run --record`)."""
    speed: float = 1.0
    """Loop time runs this many times faster than the wall clock (the simulated GPU)."""
    on_status: Callable[[dict[str, Any]], None] | None = None
    """Called with the status every second (the demo prints it)."""
    should_stop: Callable[[], bool] | None = None
    """Polled every tick; True ends the run as a signal would."""
    status_file: Path | None = None
    rescan_s: float | None = None
    """Seconds between rescans for new devices; None: only on udev events on the real /sys,
    every `RESCAN_S` elsewhere; 0: never."""
    suspend_offset_s: Callable[[], float] = field(default_factory=lambda: suspend_offset_s)
    """CLOCK_BOOTTIME minus CLOCK_MONOTONIC (s): grows by the time the machine slept."""
    clock: Clock | None = None
    """Loop time; None: ``Clock(speed)``. Benchmarks pass a simulated clock."""
    status_every_s: float = STATUS_EVERY_S
    """How often the status file is written (and ``on_status`` called). Units: s."""
    overrides: Callable[[Config], Config] = lambda config: config
    """What the command line sets over the file (`govd.commands.options.with_overrides`): applied to
    the configuration reread on SIGHUP too."""


def _enabled(config: Config, device: Device) -> bool:
    entry = entry_for(config, device)
    return entry is None or entry.enabled


def frames_for(frames: list[Frame], device_name: str) -> list[Frame]:
    """The frames that belong to ``device_name``: those sent with its ``device=`` key, and those
    sent without one (they belong to every device)."""
    mine = [f for f in frames if f.device is None or f.device == device_name]
    return frames if len(mine) == len(frames) else mine


def silent_after_s(config: Config, governor: Governor) -> float | None:
    """How long a device may go without frames before it is left to its own governor; None
    where it is governed without frames: its policy reads no model (ondemand, performance...),
    or its frames are busy time."""
    if config.frames.source == "busy" or not governor.policy.uses_model:
        return None
    return config.frames.silent_after_s


def datagram_queue_len(path: str = QLEN_PATH) -> int:
    """How many datagrams the kernel queues on a Unix datagram socket (``max_dgram_qlen``)."""
    try:
        with open(path) as f:
            return max(1, int(f.read()))
    except (OSError, ValueError):
        return DEFAULT_QLEN


def suspend_offset_s() -> float:
    """How long the machine has been suspended since boot (CLOCK_BOOTTIME counts suspend,
    CLOCK_MONOTONIC does not). Units: s."""
    return time.clock_gettime(time.CLOCK_BOOTTIME) - time.clock_gettime(time.CLOCK_MONOTONIC)


class Daemon:
    """One run of `govd run`: call `run()` once."""

    def __init__(self, options: Options) -> None:
        # Absolute: the state file names the root, and `govd restore` after a crash (from
        # another folder) refuses a relative one, so `--sysfs-root sys` left it unrestorable.
        self.options = options = dataclasses.replace(
            options, sysfs_root=Path(options.sysfs_root).absolute())
        self.config = options.config
        self.clock = options.clock or Clock(options.speed)
        self.notifier = Notifier()
        self.watchdog = WatchdogPinger(self.notifier, watchdog_interval_s())
        self.limiter = EpisodeLimiter(log)
        self.runners: list[DeviceRunner] = []
        self.source: FrameSource | None = None
        self.metrics: Metrics | None = None
        self.stats = TickStats()
        self.ready_s: float | None = None
        """Wall-clock seconds from `run()` to READY (the bench's start-to-ready)."""
        self._metrics_server: MetricsServer | None = None
        self._watch = DeviceWatch(options.sysfs_root, options.rescan_s)
        self._state_file = Path(self.config.state_file)
        self.custody = Custody(self._state_file, options.sysfs_root)
        self._retiring: list[DeviceRunner] = []
        """Runners whose device another took the name of (hot-plug): dropped at the next tick."""
        self._scheduler: DeadlineScheduler | None = None
        self.idle = IdleWatch(IdleSettings.from_config(self.config.idle))
        self._woken = False
        self._status_now = False
        self._reloads: dict[str, Any] = {"seq": 0}
        """The last reload's verdict for the status file (`govd reload` waits for it)."""
        self._frames_last_tick = 0
        # Below this many frames a tick the kernel's queue holds a whole tick's datagrams with
        # room to spare (a rate that doubles still fits): the loop then sleeps to its deadline
        # instead of waking for each datagram.
        self._poll_from_frames = datagram_queue_len() // 2

    # -- the whole run -------------------------------------------------------------------------
    def run(self) -> int:
        """Start, loop until stopped, restore. Returns the exit status (0: stopped cleanly)."""
        begun = time.monotonic()
        signals = SignalFlags()
        try:
            if signals.stop is not None:  # held while govd started: no device is taken yet
                log.info("signal %d during start-up: stopping before any device is taken",
                         signals.stop)
                return 0
            self._start()
            # Start-up leaves ~120 000 objects (numba, pydantic) that a full collection scans
            # in ~40 ms, most of a tick: the cause of the loop's rare lost ticks. None of them
            # is garbage, so the collector stops looking at them.
            gc.freeze()
            self.ready_s = time.monotonic() - begun
            self._loop(signals)
        finally:
            restored = self._shutdown()
            signals.close()
        return 0 if restored else 1

    def _start(self) -> None:
        devices = select(self.config, find_devices(self.options.sysfs_root))
        if not devices:
            raise StartError(
                f"no device to govern under {self.options.sysfs_root} "
                "(see `govd devices` for what was found and why)"
            )
        # One governor per device: every lock before anything is restored, saved or written,
        # so a second daemon leaves the devices, and the first one's state file, untouched.
        taken = []
        for device in devices:
            try:
                self.custody.lock(device)
            except DeviceBusy as exc:
                raise StartError(str(exc)) from exc
            except DeviceGone as exc:  # unplugged since found: hot-plug takes it if it returns
                log.warning("%s; left to hot-plug", exc)
                close_device(device)
                continue
            taken.append(device)
        if not taken:
            raise StartError(f"every device found under {self.options.sysfs_root} went away "
                             "during start-up")
        devices = taken
        self._restore_leftovers()
        built = check_applicable(self.config, devices)
        # Before the first write: the state found goes to disk, so a crash loses nothing.
        self.custody.record(devices)
        try:
            built = [self._settled(b) for b in built]
        except SetupError as exc:
            raise StartError(str(exc)) from exc
        self.source = self._open_source()
        if self.config.metrics.enabled:
            self._start_metrics()
        for b in built:
            self.runners.append(self._runner(b.device, b.governor, b.settings, len(built)))
        self._watch.start([d.name for d in devices])
        self._tell_source_the_devices()
        self._warn_busy_time_under_a_frame_rate()
        names = ", ".join(f"{r.name} ({r.settings.policy})" for r in self.runners)
        for b in built:  # a first JIT compile is paid here, inside TimeoutStartSec
            warm_up(b.governor, [b.settings.target, *b.settings.apps.values()])
        log.info("governing %s every %d ms", names, self.config.period_ms)
        self.notifier.ready(f"governing {names}")

    def _settled(self, built: Built) -> Built:
        """``built`` once its device's clock domains are known (`Device.settle_domains`, a write:
        the device's state is saved first): its governor rebuilt on the levels left where the
        device cannot set a domain it lists, rather than deciding among levels that run alike.
        A settling write that fails is left to the runner's first write, which meets it
        again. Raises SetupError where the rebuilt governor fails."""
        device = built.device
        try:
            why = device.settle_domains()
        except DeviceError as exc:
            log.warning("%s: could not find out which clocks it lets govd set: %s", device.name,
                        exc)
            return built
        if why is None:
            return built
        governor, settings = build_governor(self.config, device)
        log.info("%s: governing %d levels: %s", device.name, governor.levels_mhz.size, why)
        return Built(device, governor, settings)

    def _tell_source_the_devices(self) -> None:
        """The socket drops (and counts, and says) frames naming a device not governed."""
        if self.source is not None:
            self.source.set_devices(r.name for r in self.runners)

    def _warn_busy_time_under_a_frame_rate(self) -> None:
        """With ``frames.source: busy`` a tick's "frame" is the GPU's busy time in that tick,
        which has no deadline: a model-driven policy under a frame rate would hold busy time
        under 1000/fps ms a tick, seldom what was meant. Said once per device at start; the
        configuration stays valid (a user may want exactly that)."""
        if self.config.frames.source != "busy":
            return
        for runner in self.runners:
            fps = runner.settings.target.fps
            if fps is not None and runner.governor.policy.uses_model:
                log.warning("%s: frames.source busy gives GPU busy time per tick, which has no "
                            "frame deadline: the %g FPS target keeps busy time under %.1f ms a "
                            "tick; for compute work set target: max_slowdown",
                            runner.name, fps, 1000.0 / fps)

    def _runner(self, device: Device, governor: Governor, settings: RunnerSettings,
                devices: int) -> DeviceRunner:
        recorder = None
        if self.options.record is not None:
            path = trace_path(self.options.record, device.name, devices)
            try:
                recorder = TraceRecorder(path, settings.counters, trace_meta(governor))
            except OSError as exc:  # governed all the same; said in one line
                log.error("%s: cannot record its trace to %s (%s); not recorded", device.name,
                          path, exc.strerror or exc)
        interval_s = self.config.logging.summary_interval_s
        summary = DeviceSummary(log, device.name, interval_s) if interval_s > 0 else None
        busy = self.config.frames.source == "busy"
        reopen = None
        if device.handle_dies_with_device:  # a paused runner reopens it from its saved state
            reopen = functools.partial(discovery_reopen, sysfs_root=self.options.sysfs_root)
        # With busy time or a source that says nothing of idle time (MangoHud), busy time from
        # DRM fdinfo where the device reports none (i915, xe): the idle back-off and busy-time
        # policies read it.
        metered = busy or (self.source is not None and self.source.meter_busy_time)
        sysfs_path = device.sysfs_path()
        meter = meter_for(sysfs_path) if metered and sysfs_path is not None else None
        return DeviceRunner(
            device, governor, settings, self.limiter, summary, self.metrics, recorder,
            BusySource(app=device.name) if busy else None, reopen,
            busy_meter=meter.sample if meter is not None else None,
            silent_after_s=silent_after_s(self.config, governor),
            no_frames_hint=self.source.no_frames_hint() if self.source is not None else "",
            custody=self.custody, on_replaced=self._retiring.append,
        )

    def _take_new(self, now_s: float) -> None:
        """Govern the devices that appeared since start: each one's state goes to the state
        file (with every other's) before its runner may write to it."""
        for device in self._watch.new_devices(self.config, now_s):
            try:
                self.custody.lock(device)
                governor, settings = build_governor(self.config, device)
                self.custody.record([device])
                settled = self._settled(Built(device, governor, settings))
                governor, settings = settled.governor, settled.settings
            except (DeviceBusy, SetupError, StateFileError, DeviceError, OSError) as exc:
                log.error("%s: appeared but cannot be governed: %s", device.name, exc)
                if self.custody.holds(device.name):  # recorded, and maybe written by settling
                    problem = self.custody.hand_back(device)
                    if problem is not None:  # still held: the stop puts it back through it
                        log.error("%s: could not be put back: %s; kept for `govd restore`",
                                  device.name, problem)
                        continue
                else:
                    self.custody.locks.release(device.name)
                close_device(device)
                continue
            # Several devices now: the new one's trace goes beside the others, named after it.
            self.runners.append(self._runner(device, governor, settings, 2))
            self._tell_source_the_devices()
            log.info("%s: appeared; governing it (%s)", device.name, settings.policy)

    def _retire(self) -> None:
        """Stop governing the devices another device replaced under their name: the old one is
        gone (nothing is written, its saved state is dropped, its lock let go), and the next
        rescan takes the new one afresh, with its own state saved and its own levels."""
        for runner in self._retiring:
            if runner in self.runners:
                self.runners.remove(runner)
                self.custody.drop(runner.name)
                _close(runner)
                self._watch.forget(runner.name)
        self._retiring.clear()

    def _restore_leftovers(self) -> None:
        """Put back what a govd process that did not stop cleanly left (this daemon's last run,
        a `govd measure` killed): before the state found is saved, so it is the user's."""
        done = self.custody.restore_leftovers()  # StateFileError: govd run says it, one line
        for line in done.failures:
            log.error("could not restore %s; kept for `govd restore`", line)

    def _open_source(self) -> FrameSource | None:
        """The configured frame source (`govd.sources.registry`); None for ``busy``."""
        try:
            opening = Opening(now_s=self._now_s(), paces_the_work=self.clock.paces_the_work)
            return source_opener(self.config.frames.source)(self.config.frames, opening)
        except SourceSetupError as exc:
            raise StartError(str(exc)) from None

    def _start_metrics(self) -> None:
        host, _, port = self.config.metrics.listen.rpartition(":")
        self.metrics = Metrics()
        try:
            self._metrics_server = start_metrics_server(
                self.metrics, host.strip("[]"), int(port),
                allow_non_loopback=self.config.metrics.allow_non_loopback)
        except (OSError, ValueError, MetricsUnavailable) as exc:
            raise StartError(f"metrics: cannot serve on {self.config.metrics.listen}: {exc}") \
                from None
        log.info("metrics on http://%s/metrics", self.config.metrics.listen)

    # -- the loop ------------------------------------------------------------------------------
    def _now_s(self) -> Callable[[], float]:
        """What reads loop time (s): at real time the monotonic clock itself, no Python call
        around each reading (the loop reads it four times a tick, the frame source twice)."""
        clock = self.clock
        return time.monotonic if type(clock) is Clock and clock.speed == 1.0 else clock.now_s

    def _loop(self, signals: SignalFlags) -> None:
        clock = self.clock
        now_s = self._now_s()
        if now_s is time.monotonic:  # nothing to convert: wait the loop time itself
            wait_s: Callable[[float], None] = functools.partial(self._wait, signals)
        else:
            def wait_wall_s(wall_s: float, wake_fd: int | None = None) -> None:
                self._wait(signals, wall_s, wake_fd)

            def wait_s(loop_s: float) -> None:
                clock.wait(loop_s, wait_wall_s)
        self._scheduler = scheduler = DeadlineScheduler(
            self.config.period_ms / 1000.0, now_s, wait_s)
        speed = clock.speed
        next_status_s = time.monotonic()
        offset_now_s = self.options.suspend_offset_s
        suspend_offset_s = offset_now_s()
        should_stop = self.options.should_stop
        while signals.stop is None and not (should_stop is not None and should_stop()):
            if signals.reload:
                signals.reload = False
                self.reload()
                self._status_now = True  # `govd reload` waits for the verdict there
            tick = scheduler.next_tick()
            if tick is None:
                if self._woken:  # a frame datagram ended an idle wait: tick at once
                    self._woken = False
                    woke_s = now_s()
                    self._leave_idle(woke_s, woke_s, "a frame arrived")
                continue
            cpu_start_s = time.thread_time()
            offset_s = offset_now_s()
            if offset_s - suspend_offset_s > SUSPEND_GAP_S:
                log.info("resumed from suspend: writing the chosen levels again")
                for runner in self.runners:
                    runner.reapply()
            suspend_offset_s = offset_s
            self._tick(tick)
            wall_s = time.monotonic()
            self.watchdog.tick(wall_s)
            if wall_s >= next_status_s or self._status_now:
                next_status_s = wall_s + self.options.status_every_s
                self._status_now = False
                self._publish_status()
            self.stats.ticks += 1
            self.stats.jitter_s.append((tick.started_s - tick.due_s) / speed)  # wall s
            self.stats.cpu_s.append(time.thread_time() - cpu_start_s)
        if signals.stop is not None:
            log.info("signal %d: stopping", signals.stop)

    def _wait(self, signals: SignalFlags, wall_s: float, clock_fd: int | None = None) -> None:
        """Wait ``wall_s`` for the next deadline (less on a signal, or once ``clock_fd``, the
        simulated clock's, says loop time moved), moving frames from the socket into the
        source's queue as they arrive: the kernel holds only ~10 datagrams."""
        source = self.source
        if not self.idle.idle and 0 < self._frames_last_tick < self._poll_from_frames:
            source = None  # frames flow, and a tick's worth fits the kernel's queue: no wake-ups
        deadline_s = time.monotonic() + wall_s
        while True:
            fd = source.wake_fd() if source is not None else None
            readable = signals.wait(wall_s, fd, clock_fd)
            if fd is not None and fd in readable:
                assert source is not None
                if source.receive(RECEIVE_BATCH, until_s=deadline_s) and self.idle.idle:
                    self._woken = True
                    return
            wall_s = deadline_s - time.monotonic()
            if (fd is None or wall_s <= 0 or signals.stop is not None or signals.reload
                    or (clock_fd is not None and clock_fd in readable)):
                return

    def _tick(self, tick: Tick) -> None:
        now_s = tick.started_s
        self._watch.events(now_s, self.runners)
        if self._retiring:
            self._retire()
        if self._watch.rescan_due(now_s):
            self._take_new(now_s)
        frames = self.source.drain() if self.source is not None else []
        self._frames_last_tick = len(frames)
        interval_s = tick.interval_s
        if self.idle.idle:
            for runner in self.runners:
                runner.idle_tick(now_s, interval_s)
            busy = busiest([runner.last_busy for runner in self.runners])
            if self.idle.quiet(len(frames), busy):
                return
            why = f"{len(frames)} frames" if frames else f"GPU busy {busy:.0%}"
            self._leave_idle(now_s, now_s + self.config.period_ms / 1000.0, why)
        for runner in self.runners:
            runner.tick(now_s, interval_s, frames_for(frames, runner.name))
            if tick.overruns and self.metrics is not None:
                self.metrics.record_overrun(runner.name)
        idle = self.idle
        idle.decided(now_s)
        # With frames the GPU is not quiet whatever its busy fraction: look that up only
        # without frames (a list and a call less every tick while a game runs).
        busy = math.nan if frames else busiest([r.last_busy for r in self.runners])
        if idle.due(now_s, len(frames), busy):
            self._enter_idle(now_s)

    def _enter_idle(self, now_s: float) -> None:
        """The GPU has been quiet for ``idle.after_s``: tick every idle period from now on (each
        idle tick holds the devices at their lowest level)."""
        assert self._scheduler is not None
        settings = self.idle.settings
        self.idle.enter(now_s)
        self._scheduler.restart(settings.period_s, now_s + settings.period_s)
        self._status_now = True
        log_fields(log, logging.INFO,
                   f"idle: no frames and the GPU not busy for {settings.after_s:g} s; lowest "
                   f"level, ticking every {settings.period_s * 1000:.0f} ms", idle=1)

    def _leave_idle(self, now_s: float, first_due_s: float, why: str) -> None:
        """Stop idling at ``now_s`` (``why``: what woke it): normal ticks from ``first_due_s``."""
        assert self._scheduler is not None
        idled_s = now_s - (self.idle.since_s or now_s)
        self.idle.leave(now_s)
        self._scheduler.restart(self.config.period_ms / 1000.0, first_due_s)
        self._status_now = True
        log_fields(log, logging.INFO, f"awake after {idled_s:.1f} s idle ({why}); ticking every "
                   f"{self.config.period_ms} ms", idle=0)

    def status(self) -> dict[str, Any]:
        """Everything the status file holds."""
        assert self._scheduler is not None
        return {
            "pid": os.getpid(), "written_unix_s": time.time(),
            "loop_time_s": self.clock.now_s(), "period_ms": self.config.period_ms,
            "loop": {**self.stats.summary(), "overruns": self._scheduler.overruns,
                     "process_cpu_s": time.process_time()},
            "idle": self.idle.status(),
            "reload": self._reloads,
            "frames": self.source.stats() if self.source is not None else {},
            "frame_source": self.source.report() if self.source is not None else {},
            "devices": [runner.status() for runner in self.runners],
        }

    def _publish_status(self) -> None:
        status = self.status()
        if self.options.status_file is not None:
            try:
                write_status(self.options.status_file, status)
            except OSError as exc:
                self.limiter.warn(("daemon", "status"), self.clock.now_s(),
                                  f"cannot write the status file: {exc}")
        from govd.daemon.status import device_line

        self.notifier.status("; ".join(device_line(d) for d in status["devices"]))
        if self.options.on_status is not None:
            self.options.on_status(status)

    # -- SIGHUP --------------------------------------------------------------------------------
    def reload(self) -> bool:
        """Reread the configuration and apply it all, or keep the old one all (returns whether
        the new one is in force). Everything but the `RESTART_KEYS` applies: a device newly
        ``enabled: false`` is handed back restored, a newly enabled one is taken at the next
        tick, the socket's limits, metrics, logging and period change at once."""
        path = self.options.config_path
        if path is None:
            log.info("SIGHUP: no configuration file to reload")
            self._verdict(False, ["no configuration file to reload (govd runs on its defaults)"])
            return False
        self.notifier.reloading()
        try:
            config = self.options.overrides(load_config(path, self.options.insecure_config))
            changed = restart_keys(self.config, config)
            if changed:
                raise ConfigRefused([f"{key}: changed, which needs a restart of govd"
                                     for key in changed])
            kept = [r for r in self.runners if _enabled(config, r.device)]
            built = check_applicable(config, [r.device for r in kept])
            metrics = self._metrics_for(config)  # last: it may open a port
        except (ConfigError, SetupError) as exc:
            lines = exc.errors if isinstance(exc, ConfigError | ConfigRefused) else [str(exc)]
            for line in lines:
                log.error("reload refused, old configuration kept: %s", line)
            self.notifier.ready("reload refused; old configuration kept")
            self._verdict(False, lines)
            return False
        self._apply(config, kept, built, metrics)
        log.info("configuration reloaded from %s", path)
        self.notifier.ready("configuration reloaded")
        self._verdict(True, [])
        return True

    def _verdict(self, applied: bool, errors: list[str]) -> None:
        """Record a reload's outcome for the status file (`govd.commands.reload`)."""
        self._reloads = {"seq": self._reloads["seq"] + 1, "applied": applied,
                         "errors": errors[:20], "unix_s": time.time()}

    def _metrics_for(self, config: Config) -> tuple[Metrics | None, MetricsServer | None]:
        """The metrics and exporter ``config`` asks for: the running ones when unchanged, else
        a new exporter already listening. Raises ConfigRefused when it cannot listen."""
        old, new = self.config.metrics, config.metrics
        if (old.enabled, old.listen, old.allow_non_loopback) == (
                new.enabled, new.listen, new.allow_non_loopback) or not new.enabled:
            server = self._metrics_server if new.enabled else None
            return (self.metrics if new.enabled else None), server
        metrics = self.metrics or Metrics()
        host, _, port = new.listen.rpartition(":")
        try:
            return metrics, start_metrics_server(metrics, host.strip("[]"), int(port),
                                                 allow_non_loopback=new.allow_non_loopback)
        except (OSError, ValueError, MetricsUnavailable) as exc:
            raise ConfigRefused([f"metrics.listen: cannot serve on {new.listen}: {exc}"]) \
                from None

    def _apply(self, config: Config, kept: list[DeviceRunner], built: list[Built],
               metrics: tuple[Metrics | None, MetricsServer | None]) -> None:
        """Put ``config`` in force: nothing here may refuse any more."""
        old = self.config
        for runner in self.runners:
            if runner not in kept:
                self._hand_back(runner)
        new_governors = governor_changed(old, config)
        interval_s = config.logging.summary_interval_s
        self.metrics, server = metrics
        if server is not self._metrics_server and self._metrics_server is not None:
            self._metrics_server.close()
        self._metrics_server = server
        for runner, b in zip(kept, built, strict=True):
            runner.settings = b.settings
            runner.metrics = self.metrics
            runner.silent_after_s = silent_after_s(config, b.governor if new_governors
                                                   else runner.governor)
            if interval_s != old.logging.summary_interval_s:
                runner.summary = (DeviceSummary(log, runner.name, interval_s)
                                  if interval_s > 0 else None)
            if new_governors:
                runner.governor = b.governor
                runner.reapply()
            else:
                runner.governor.target = b.settings.target
        if len(kept) != len(self.runners):
            self.runners = kept
            self._tell_source_the_devices()
        if self.source is not None:
            self.source.reconfigure(config.frames)
        self.config = config
        assert self._scheduler is not None
        self.idle.settings = IdleSettings.from_config(config.idle)
        if self.idle.idle:  # decide afresh under the new configuration
            now_s = self.clock.now_s()
            self._leave_idle(now_s, now_s, "configuration reloaded")
        self._scheduler.set_period(config.period_ms / 1000.0)
        setup_logging(config.logging.level)
        self._watch.look_again([r.name for r in kept])  # a newly enabled device is taken

    def _hand_back(self, runner: DeviceRunner) -> None:
        """Restore a device the new configuration disables, let it go (its lock too) and stop
        governing it (kept, locked, in the state file when it cannot be put back: the stop
        tries again, then `govd restore`)."""
        why = self.custody.hand_back(runner.device)
        if why is None:
            log.info("%s: disabled by the reloaded configuration; restored and left alone",
                     runner.name)
        else:
            log.error("%s: disabled by the reloaded configuration but could not be restored "
                      "(%s); kept in %s for `govd restore`", runner.name, why, self._state_file)
        runner.close()

    # -- every way out -------------------------------------------------------------------------
    def _shutdown(self) -> bool:
        """Put every device back; returns True when all went back (state file removed)."""
        self.notifier.stopping("restoring the clocks govd found")
        # govd stepped back from a device another tool kept setting: restoring what govd found
        # would undo that tool's choice.
        left = [r.name for r in self.runners if r.paused == "contested"]
        for name in left:
            log.info("%s: left as the tool that took it set it", name)
        self._watch.close()
        for closing in (self.source, self._metrics_server):  # their descriptors go first
            if closing is not None:
                try:
                    closing.close()
                except OSError as exc:  # never allowed to skip the restore below
                    log.error("closing the %s failed (%s)", type(closing).__name__, exc)
        failures = self.custody.end(leave=left)
        for line in failures:
            log.error("could not restore %s; kept in %s for `govd restore`", line,
                      self._state_file)
        for runner in self.runners:
            _close(runner)
        if failures:
            return False
        restored = [r.name for r in self.runners if r.name not in left]
        if left:
            log.info("restored %s; left to the tool that took it: %s",
                     ", ".join(restored) or "none", ", ".join(left))
        elif self.custody.caveats:
            log.warning("restored as far as the drivers show: %s", "; ".join(self.custody.caveats))
        elif self.runners:
            log.info("every device restored")
        if self.options.status_file is not None and self.custody.wrote:
            self.options.status_file.unlink(missing_ok=True)
        return True


def _close(runner: DeviceRunner) -> None:
    """Close a runner at stop; a failure is logged, never allowed to skip the next device's
    restore."""
    try:
        runner.close()
    except (DeviceError, OSError) as exc:
        log.error("%s: closing failed (%s)", runner.name, exc)
