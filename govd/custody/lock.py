"""One holder per device: an exclusive ``flock`` held on each device while a govd process has it.

A sysfs device is locked on its own sysfs directory (`Device.lock_dir`): ``flock`` works on any
inode, and the directory is the same whatever path led to it, so the daemon, `govd measure` and
`govd restore`, with whatever state files, sockets or configurations, meet there. A device
without one (NVML) is locked on a file named after it in the custody folder (the configured
state file's folder, which every govd command reads from the same configuration). The lock is
taken before the device's state is saved or anything is written, and dies with the process:
after a crash, `govd restore` and the next daemon find it free.

A device unplugged and plugged in again has a new directory, a new inode: `DeviceLocks.renew`
moves the lock there before the device is governed again, so a second govd cannot take it
meanwhile through the new inode.
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
    """Another govd process holds the device (one line naming it)."""


def lock_target(device: Device, lock_folder: Path) -> Path:
    """What is locked for ``device``: its `Device.lock_dir`, else
    ``<lock_folder>/govd-<name>.lock``."""
    own = device.lock_dir()
    if own is not None:
        return Path(own)
    safe = re.sub(r"[^A-Za-z0-9_.:-]", "_", device.name)[:200]
    return lock_folder / f"govd-{safe}.lock"


class DeviceLocks:
    """The locks this process holds, by device name."""

    def __init__(self, lock_folder: Path) -> None:
        self.lock_folder = Path(lock_folder)
        self._fds: dict[str, int] = {}

    def take(self, device: Device) -> None:
        """Hold ``device`` for this process (a no-op when already held). Raises DeviceBusy when
        another process holds it, or when it cannot be locked at all; DeviceGone when a sysfs
        device's directory is gone (unplugged since it was found)."""
        if device.name not in self._fds:
            self._fds[device.name] = self._lock(device)

    def renew(self, device: Device) -> None:
        """Move the lock of a held ``device`` to its directory as it is now, when that is a new
        inode (the device was plugged in again); take it when not held. Raises as `take`; the
        old lock is kept when the new one cannot be taken."""
        fd = self._fds.get(device.name)
        if fd is None:
            self.take(device)
            return
        target = lock_target(device, self.lock_folder)
        try:
            now = os.stat(target)
        except OSError as exc:
            raise DeviceGone(f"{device.name}: gone ({target}: {exc.strerror})") from exc
        held = os.fstat(fd)
        if (now.st_dev, now.st_ino) == (held.st_dev, held.st_ino):
            return
        self._fds[device.name] = self._lock(device)
        os.close(fd)

    def _lock(self, device: Device) -> int:
        target = lock_target(device, self.lock_folder)
        directory = device.lock_dir() is not None
        try:
            if directory:
                # Its sysfs directory, never a file made in its place: a device unplugged
                # since it was found has none any more.
                fd = os.open(target, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
            else:
                target.parent.mkdir(parents=True, exist_ok=True)
                fd = os.open(target, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW,
                             0o600)
        except OSError as exc:
            if directory and exc.errno in _GONE:
                raise DeviceGone(f"{device.name}: gone before it could be locked "
                                 f"({target}: {exc.strerror})") from exc
            raise DeviceBusy(f"{device.name}: cannot lock {target}: {exc.strerror}") from exc
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            os.close(fd)
            if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN):
                raise DeviceBusy(f"{device.name}: held by another govd process (the daemon or "
                                 f"`govd measure`; it holds the lock on {target})") from exc
            raise DeviceBusy(f"{device.name}: cannot lock {target}: {exc.strerror}") from exc
        return fd

    def holds(self, name: str) -> bool:
        """Whether this process holds the device called ``name``."""
        return name in self._fds

    def release(self, name: str) -> None:
        """Let the device called ``name`` go (after it was put back); nothing when not held."""
        fd = self._fds.pop(name, None)
        if fd is not None:
            os.close(fd)

    def release_all(self) -> None:
        """Let every device go (after they were put back)."""
        fds, self._fds = self._fds, {}
        for fd in fds.values():
            os.close(fd)


def held_by_a_govd(device: Device, lock_folder: Path) -> bool:
    """Whether a govd process holds ``device`` now (its lock taken by another open file: a
    running daemon, or `govd measure`). A device setting that looks like another tool's
    (devfreq's governor already ``userspace``) is then govd's own."""
    target = lock_target(device, lock_folder)
    directory = device.lock_dir() is not None
    flags = os.O_RDONLY | os.O_CLOEXEC | (os.O_DIRECTORY if directory else os.O_NOFOLLOW)
    try:
        fd = os.open(target, flags)
    except OSError:
        return False  # nothing to lock: nobody took it
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except OSError as exc:
        return exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN)
    finally:
        os.close(fd)  # (a shared lock taken here goes with it)
    return False
