"""One governor per device: an exclusive ``flock`` held on each device while govd governs it.

A sysfs device is locked on its own sysfs directory (``flock`` works on any inode, and the
directory is the same whatever path led to it, so two daemons with different state files,
sockets or configurations still meet there). A device without one (NVML) is locked on a file
named after it in the state file's folder. The lock is taken before its state is saved or
anything is written, and dies with the process: after a crash, `govd restore` and the next
daemon find it free.
"""

from __future__ import annotations

import errno
import fcntl
import os
import re
from pathlib import Path

from govd.device.base import Device, DeviceGone

_GONE = {errno.ENOENT, errno.ENOTDIR, errno.ELOOP, errno.ENODEV}
"""How opening a sysfs device's directory fails once the device is unplugged (ELOOP: the class
folder's link left dangling, as a fixture tree leaves it)."""


class DeviceBusy(Exception):
    """Another govd holds the device (one line naming it)."""


def lock_target(device: Device, lock_dir: Path) -> Path:
    """What is locked for ``device``: its sysfs directory, else ``<lock_dir>/<name>.lock``."""
    path = getattr(device, "path", None)
    if isinstance(path, Path):
        return path
    safe = re.sub(r"[^A-Za-z0-9_.:-]", "_", device.name)
    return lock_dir / f"govd-{safe}.lock"


def held_by_a_govd(device: Device, lock_dir: Path) -> bool:
    """Whether a govd holds ``device`` now (its lock taken by another open file: a running
    daemon, or `govd measure`). A device setting that looks like another tool's (devfreq's
    governor already ``userspace``) is then govd's own."""
    sysfs = isinstance(getattr(device, "path", None), Path)
    flags = os.O_RDONLY | os.O_CLOEXEC | (os.O_DIRECTORY if sysfs else os.O_NOFOLLOW)
    try:
        fd = os.open(lock_target(device, lock_dir), flags)
    except OSError:
        return False  # no lock file: nobody took it
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except OSError as exc:
        return exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN)
    finally:
        os.close(fd)  # (a shared lock taken here goes with it)
    return False


class DeviceLocks:
    """The locks this daemon holds, by device name."""

    def __init__(self, lock_dir: Path) -> None:
        self.lock_dir = Path(lock_dir)
        self._fds: dict[str, int] = {}

    def take(self, device: Device) -> None:
        """Hold ``device`` for this process (a no-op when already held). Raises DeviceBusy when
        another govd holds it, or when it cannot be locked at all; DeviceGone when a sysfs
        device's directory is gone (unplugged since it was found)."""
        if device.name in self._fds:
            return
        target = lock_target(device, self.lock_dir)
        sysfs = isinstance(getattr(device, "path", None), Path)
        try:
            if sysfs:
                # Its sysfs directory, never a file made in its place: a device unplugged
                # since it was found has none any more.
                fd = os.open(target, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
            else:
                target.parent.mkdir(parents=True, exist_ok=True)
                fd = os.open(target, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW,
                             0o600)
        except OSError as exc:
            if sysfs and exc.errno in _GONE:
                raise DeviceGone(f"{device.name}: gone before it could be locked "
                                 f"({target}: {exc.strerror})") from exc
            raise DeviceBusy(f"{device.name}: cannot lock {target}: {exc.strerror}") from exc
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            os.close(fd)
            if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN):
                raise DeviceBusy(f"{device.name}: already governed by another govd "
                                 f"(it holds the lock on {target})") from exc
            raise DeviceBusy(f"{device.name}: cannot lock {target}: {exc.strerror}") from exc
        self._fds[device.name] = fd

    def holds(self, name: str) -> bool:
        """Whether this process holds the device called ``name``."""
        return name in self._fds

    def release_all(self) -> None:
        """Let every device go (after they were put back)."""
        fds, self._fds = self._fds, {}
        for fd in fds.values():
            os.close(fd)
