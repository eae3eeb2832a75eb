"""The state file: what each device looked like before govd's first write, so it can be put back.

govd writes it before touching any device (`/run/govd/state.json`, mode 0600, replaced atomically:
a reader, or a crash, never meets half a file). `govd restore` and a daemon that starts after a
crash read it and put every device back. A clean stop restores and removes it; a file whose owner
pid is dead is stale (a crash, a SIGKILL, a watchdog kill).

Format (version 1): ``{"version": 1, "pid": N, "sysfs_root": "/sys", "devices": [save(), ...]}``
where each entry is a `Device.save()` result.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from govd.daemon.lock import DeviceBusy, DeviceLocks
from govd.device.base import Device, DeviceError
from govd.device.discovery import check_saved, reopen
from govd.formats.regular_file import read_regular

log = logging.getLogger("govd.daemon.state")

VERSION = 1
STATE_MODE = 0o600


class StateFileError(Exception):
    """The state file cannot be read or written; the message names the file."""


@dataclass(slots=True)
class SavedState:
    """The content of a state file."""

    devices: list[dict[str, Any]]
    """`Device.save()` of each device govd took."""
    sysfs_root: str = "/sys"
    pid: int = field(default_factory=os.getpid)
    """The daemon that wrote it."""

    def to_json(self) -> str:
        """The file's text."""
        return json.dumps(
            {"version": VERSION, "pid": self.pid, "sysfs_root": self.sysfs_root,
             "devices": self.devices},
            indent=1,
        ) + "\n"


def write_atomically(path: Path, text: str, mode: int, durable: bool = True) -> None:
    """Replace ``path`` by ``text`` with permissions ``mode``: written to a temporary file in the
    same folder (created with ``mode``, never wider), flushed to disk (``durable``: fsync of the
    file and its folder, so a power cut keeps it), then renamed over."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC | os.O_NOFOLLOW, mode)
    try:
        os.fchmod(fd, mode)  # the umask may have narrowed it; never widened beyond `mode`
        with os.fdopen(fd, "w") as f:
            f.write(text)
            f.flush()
            if durable:
                os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
        raise
    if not durable:
        return
    with contextlib.suppress(OSError):
        dir_fd = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)


def save_state(path: Path, state: SavedState) -> None:
    """Write the state file (mode 0600). Raises StateFileError."""
    try:
        write_atomically(path, state.to_json(), STATE_MODE)
    except OSError as exc:
        raise StateFileError(f"{path}: cannot write the state file: {exc.strerror}") from exc


MAX_STATE_BYTES = 1 << 20
"""A state file larger than this is not govd's (a few devices take a few KiB). Units: bytes."""


def load_state(path: Path) -> SavedState | None:
    """The state file's content, or None when there is none. Raises StateFileError when it exists
    but cannot be read or understood."""
    try:
        text = read_regular(path, MAX_STATE_BYTES)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise StateFileError(f"{path}: cannot read the state file: {exc.strerror}") from exc
    try:
        return _parse(json.loads(text))
    except (ValueError, RecursionError) as exc:
        raise StateFileError(f"{path}: not a govd state file: {exc}") from None


def _parse(data: object) -> SavedState:
    """The state file's JSON checked in full (ValueError, one line, on anything else): nothing
    of a malformed file is written back."""
    if not isinstance(data, dict):
        raise ValueError("not a JSON object")
    unknown = sorted(set(data) - {"version", "pid", "sysfs_root", "devices"})
    if unknown:
        raise ValueError(f"unknown keys {', '.join(unknown)}")
    if data.get("version") != VERSION or isinstance(data.get("version"), bool):
        raise ValueError(f"version {data.get('version')!r}, expected {VERSION}")
    pid = data.get("pid")
    if not isinstance(pid, int) or isinstance(pid, bool) or pid <= 0:
        raise ValueError(f"pid {pid!r} is not a process id")
    sysfs_root = data.get("sysfs_root", "/sys")
    if not isinstance(sysfs_root, str) or not Path(sysfs_root).is_absolute():
        raise ValueError(f"sysfs_root {sysfs_root!r} is not an absolute path")
    devices = data.get("devices")
    if not isinstance(devices, list):
        raise ValueError("devices must be a list")
    for saved in devices:
        check_saved(saved)
    return SavedState(devices, sysfs_root, pid)


def remove_state(path: Path) -> None:
    """Delete the state file (done after every device was put back)."""
    with contextlib.suppress(FileNotFoundError):
        path.unlink()


def owner_alive(state: SavedState) -> bool:
    """Whether the daemon that wrote ``state`` still runs (then the file is not stale)."""
    if state.pid == os.getpid():
        return False
    try:
        os.kill(state.pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # exists, belongs to someone else
    return _is_govd(state.pid)


def _is_govd(pid: int) -> bool:
    # A recycled pid belongs to some other program; only a govd process holds the devices.
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return True
    return b"govd" in cmdline


def restore_all(state: SavedState, hold: Callable[[Device], None] | None = None) -> list[str]:
    """Put every device in ``state`` back; returns one line per device that could not be
    (the others are done even when one fails). ``hold`` is called with each reopened device
    before anything is written to it (the daemon takes its lock there; raising refuses it)."""
    failures = []
    for saved in state.devices:
        name = saved.get("name", "?")
        try:
            device = reopen(saved, Path(state.sysfs_root))
            if hold is not None:
                hold(device)
            device.restore()
        except (DeviceBusy, DeviceError, KeyError, OSError, ValueError) as exc:
            failures.append(f"{name}: {exc}")
        except (TypeError, AttributeError) as exc:
            # A hand-edited or damaged entry: said in one line, kept for a later `govd restore`.
            failures.append(f"{name}: malformed entry in the state file "
                            f"({type(exc).__name__}: {exc})")
        else:
            log.info("%s: restored the state govd found", name)
    return failures


def restore_devices(devices: list[Device]) -> list[str]:
    """Restore each open device; returns one line per failure (the rest are still done)."""
    failures = []
    for device in devices:
        try:
            device.restore()
        except (DeviceError, OSError) as exc:
            failures.append(f"{device.name}: {exc}")
    return failures


def restore_from_file(path: Path) -> tuple[int, list[str]]:
    """`govd restore`: put back every device of the state file, remove the file when all went
    back. Returns (devices in the file, failure lines); (0, []) when there is no file.
    Raises StateFileError when the file is unreadable, or owned by a running govd."""
    state = load_state(path)
    if state is None:
        return 0, []
    if owner_alive(state):
        raise StateFileError(
            f"{path}: govd (pid {state.pid}) is running and holds these devices; stop it instead"
        )
    # A device another govd governs now (with another state file) is not written under it.
    locks = DeviceLocks(path.parent)
    try:
        failures = restore_all(state, hold=locks.take)
    finally:
        locks.release_all()
    if not failures:
        remove_state(path)
    return len(state.devices), failures

