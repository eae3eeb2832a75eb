"""Devices coming and going while the daemon runs.

On the real /sys a udev monitor reports them: a governed device that goes away (``remove``,
``unbind``) pauses its runner, one that comes back is probed at once and keeps its runner; an
``add`` of a device that is not governed asks for a rescan, which takes the devices that match the
configuration and were not there at start. Where no udev events come (a fixture or simulated tree
under another root, a container without netlink) the tree is rescanned every `RESCAN_S` instead;
paused runners probe their device by back-off on their own either way.

A rescan looks only at devices not seen before, so a device the configuration leaves alone, or
one that cannot be governed, is logged once, not at every rescan (a udev ``add`` of it makes it
new again). So a periodic rescan of a tree under another root first lists its class folders:
when every name there was seen already, no device can be new and the full scan, which builds
every device (~0.45 ms of a cold tick every 2 s on the simulated tree), is skipped.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from govd.conf.schema import Config
from govd.daemon.device_runner import DeviceRunner, close_device
from govd.daemon.governed import find_devices, select
from govd.device.base import Device
from govd.device.discovery import SYS, HotplugEvent, listed_names

log = logging.getLogger("govd.daemon")

RESCAN_S = 2.0
"""How often a tree without udev events is rescanned for new devices. Units: s (loop time)."""
_GOING = ("remove", "unbind")


class DeviceWatch:
    """Hot-plug for one daemon: `events` each tick, then `new_devices` when `rescan_due`."""

    def __init__(self, sysfs_root: Path, rescan_s: float | None = None) -> None:
        """``rescan_s``: seconds between rescans; None: `RESCAN_S` unless udev events come
        (the real /sys with a working netlink socket), 0: never."""
        self.sysfs_root = Path(sysfs_root)
        self._rescan_s = rescan_s
        self._monitor: Any = None
        self._seen: set[str] = set()
        self._wanted = False
        self._next_rescan_s: float | None = None

    def start(self, seen: Sequence[str]) -> None:
        """Listen for udev events (real /sys only); ``seen``: the names found at start."""
        self._seen.update(seen)
        if self.sysfs_root == SYS:
            try:
                from govd.device.discovery import HotplugMonitor

                self._monitor = HotplugMonitor()
                self._monitor.start()
            except Exception as exc:  # no netlink (containers): rescans and probes instead
                log.warning("no udev hot-plug events (%s); rescanning every %.0f s instead",
                            exc, RESCAN_S)
                self._monitor = None
        if self._rescan_s is None:
            self._rescan_s = 0.0 if self._monitor is not None else RESCAN_S

    def events(self, now_s: float, runners: Sequence[DeviceRunner]) -> None:
        """Hand every waiting udev event to the runner of its device; note the new devices."""
        while self._monitor is not None and (event := self._monitor.poll(0)) is not None:
            self.on_event(event, now_s, runners)

    def on_event(self, event: HotplugEvent, now_s: float, runners: Sequence[DeviceRunner]) -> None:
        """One hot-plug event: pause or probe the governed device it names, or, for a device not
        governed that appears, ask for a rescan."""
        for runner in runners:
            own = runner.device.lock_dir()
            if event.name == runner.name or (own is not None and event.sys_path == Path(own)):
                if event.action in _GOING:
                    runner.gone(now_s)
                elif own is not None and runner.paused is not None and \
                        os.path.realpath(event.sys_path) != os.path.realpath(own):
                    # Its name, another directory: not the device govd took (that one's
                    # directory is gone), which a probe of the old path would never see.
                    runner.replaced(now_s, f"appeared at {event.sys_path}, not {own}")
                else:
                    runner.probe_soon()
                return
        if event.action not in _GOING:
            self._seen.discard(event.name)  # looked at again, even if refused before
            self._wanted = True

    def rescan_due(self, now_s: float) -> bool:
        """Whether `new_devices` should run now (an ``add`` event, or the periodic rescan)."""
        if self._wanted:
            return True
        if not self._rescan_s:
            return False
        if self._next_rescan_s is None:
            self._next_rescan_s = now_s + self._rescan_s
        return now_s >= self._next_rescan_s

    def new_devices(self, config: Config, now_s: float) -> list[Device]:
        """The devices found now that were not seen before and that the configuration selects
        (the others are logged once by `select` and closed)."""
        wanted, self._wanted = self._wanted, False
        if self._rescan_s:
            self._next_rescan_s = now_s + self._rescan_s
        if not wanted and self._nothing_new():
            return []
        try:
            found = find_devices(self.sysfs_root)
        except Exception as exc:  # a tree changing under the scan: the next one will see it
            log.warning("rescan for new devices failed: %s", exc)
            return []
        fresh = [d for d in found if d.name not in self._seen]
        self._seen.update(d.name for d in fresh)
        chosen = select(config, fresh)
        for device in found:
            if device not in chosen:
                close_device(device)
        return chosen

    def _nothing_new(self) -> bool:
        """Whether a scan could find no device it has not seen: every name in the class
        folders was seen. Only for a tree under another root: the real /sys is also scanned
        through udev and NVML, which no folder lists."""
        if self.sysfs_root == SYS:
            return False
        try:
            return self._seen.issuperset(listed_names(self.sysfs_root))
        except OSError:
            return False  # unreadable now: let the scan say what is there

    def forget(self, name: str) -> None:
        """Look at the device called ``name`` afresh at the next rescan (another device took
        the name of the one governed), and rescan at the next tick."""
        self._seen.discard(name)
        self._wanted = True

    def look_again(self, governed: Sequence[str]) -> None:
        """Forget every device but ``governed``, and rescan at the next tick: after a reload a
        device the configuration left alone before may now be wanted."""
        self._seen = set(governed)
        self._wanted = True

    def close(self) -> None:
        """Stop listening."""
        self._monitor = None
