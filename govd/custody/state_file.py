"""The state file: what each device looked like before govd's first write, so it can be put back.

Every govd process that writes a device keeps one (`govd.custody.custody.Custody`): the daemon
the configured ``state_file`` (`/run/govd/state.json`), `govd measure` one beside it named after
the device (`measure_state_file`). Each is written before the first write to a device (mode 0600,
replaced atomically: a reader, or a crash, never meets half a file). A clean stop restores the
devices and removes it; a file whose owner pid is dead is stale (a crash, a SIGKILL, a watchdog
kill), and `govd restore`, the next daemon and the next `govd measure` put its devices back.

What it says is written into devices as root, so it is read only when nobody but root and govd's
user could have written it or swapped it (`govd.conf.trust`, as for the configuration).

Format (version 1): ``{"version": 1, "pid": N, "sysfs_root": "/sys", "devices": [entry, ...]}``
where each entry is a `Device.save()` result with, optionally, ``"identity"``: the
`Device.identity` of the device it was saved from (a state without one is older than it).
"""

from __future__ import annotations

import contextlib
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from govd.conf.trust import trust_problems
from govd.device.discovery import check_saved
from govd.formats.regular_file import read_regular, write_atomically

VERSION = 1
STATE_MODE = 0o600
MAX_PID = (1 << 22) - 1
"""The largest pid Linux hands out (PID_MAX_LIMIT on 64-bit): a larger one is no process."""
MAX_STATE_BYTES = 1 << 20
"""A state file larger than this is not govd's (a few devices take a few KiB). Units: bytes."""
MAX_IDENTITY_KEYS = 16


class StateFileError(Exception):
    """The state file cannot be read, trusted or written; the message names the file."""


@dataclass(slots=True)
class SavedState:
    """The content of a state file."""

    devices: list[dict[str, Any]]
    """`Device.save()` of each device held, with its ``identity``."""
    sysfs_root: str = "/sys"
    pid: int = field(default_factory=os.getpid)
    """The process that wrote it."""

    def to_json(self) -> str:
        """The file's text."""
        return json.dumps(
            {"version": VERSION, "pid": self.pid, "sysfs_root": self.sysfs_root,
             "devices": self.devices},
            indent=1,
        ) + "\n"


def measure_state_file(state_file: Path, device_name: str) -> Path:
    """Where `govd measure` keeps the state of ``device_name``: beside the daemon's
    ``state_file``, so `govd restore` with the same configuration finds it."""
    safe = "".join(c if c.isalnum() or c in "_.:-" else "_" for c in device_name)[:200]
    return state_file.with_name(f"{state_file.stem}.measure-{safe}{state_file.suffix}")


def leftover_state_file(state_file: Path, pid: int) -> Path:
    """Where the devices a dead daemon ``pid`` left in ``state_file`` that could not be put back
    wait for the next try, so that the next daemon may write ``state_file`` itself."""
    return state_file.with_name(f"{state_file.stem}.leftover-{pid}{state_file.suffix}")


def custody_files(state_file: Path) -> list[Path]:
    """``state_file`` and the files of the same custody beside it (`measure_state_file`,
    `leftover_state_file`), in that order."""
    prefix, suffix = f"{state_file.stem}.", state_file.suffix
    try:
        names = sorted(n for n in os.listdir(state_file.parent)
                       if n.startswith(prefix) and n.endswith(suffix) and "-" in n
                       and n != state_file.name)
    except OSError:
        names = []
    return [state_file, *(state_file.parent / n for n in names)]


def check_trusted(path: Path) -> None:
    """Raise StateFileError unless only root and govd's user could have written ``path`` (when
    it exists) or could replace it: see `govd.conf.trust`."""
    problems = trust_problems(path, "state file")
    if problems:
        raise StateFileError(f"{path}: refusing an unsafe state file: {problems[0]}"
                             + (f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""))


def save_state(path: Path, state: SavedState) -> None:
    """Write the state file (mode 0600) in a folder only root and govd's user control. Raises
    StateFileError."""
    check_trusted(path)
    try:
        write_atomically(path, state.to_json(), STATE_MODE)
    except OSError as exc:
        raise StateFileError(f"{path}: cannot write the state file: {exc.strerror}") from exc


def load_state(path: Path) -> SavedState | None:
    """The state file's content, or None when there is none. Raises StateFileError when it exists
    but cannot be trusted, read or understood."""
    if not os.path.lexists(path):
        return None
    check_trusted(path)
    try:
        text = read_regular(path, MAX_STATE_BYTES)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise StateFileError(f"{path}: cannot read the state file: {exc.strerror}") from exc
    try:
        return _parse(json.loads(text))
    except (ValueError, RecursionError) as exc:
        raise StateFileError(f"{path}: not a govd state file: {_short(str(exc))}") from None


def _short(text: str, limit: int = 200) -> str:
    text = text if text.isprintable() else "".join(c if c.isprintable() else "?" for c in text)
    return text if len(text) <= limit else text[:limit - 1] + "…"


def _parse(data: object) -> SavedState:
    """The state file's JSON checked in full (ValueError, one line, on anything else): nothing
    of a malformed file is written back."""
    if not isinstance(data, dict):
        raise ValueError("not a JSON object")
    unknown = sorted(set(data) - {"version", "pid", "sysfs_root", "devices"})
    if unknown:
        raise ValueError(f"unknown keys {', '.join(map(repr, unknown))}")
    if data.get("version") != VERSION or isinstance(data.get("version"), bool):
        raise ValueError(f"version {data.get('version')!r}, expected {VERSION}")
    pid = data.get("pid")
    if not isinstance(pid, int) or isinstance(pid, bool) or not 0 < pid <= MAX_PID:
        raise ValueError(f"pid {pid!r} is not a process id")
    sysfs_root = data.get("sysfs_root", "/sys")
    if not isinstance(sysfs_root, str) or not Path(sysfs_root).is_absolute():
        raise ValueError(f"sysfs_root {sysfs_root!r} is not an absolute path")
    devices = data.get("devices")
    if not isinstance(devices, list):
        raise ValueError("devices must be a list")
    for saved in devices:
        check_saved(saved)
        identity = saved.get("identity", {})
        if not isinstance(identity, dict) or len(identity) > MAX_IDENTITY_KEYS or not all(
                isinstance(k, str) and isinstance(v, str) for k, v in identity.items()):
            raise ValueError(f"{saved['name']}: identity must map at most "
                             f"{MAX_IDENTITY_KEYS} names to strings")
    return SavedState(devices, sysfs_root, pid)


def remove_state(path: Path) -> None:
    """Delete the state file (done after every device was put back)."""
    with contextlib.suppress(FileNotFoundError):
        path.unlink()


def owner_alive(state: SavedState) -> bool:
    """Whether the process that wrote ``state`` still runs (then the file is not stale)."""
    return state.pid != os.getpid() and govd_running(state.pid)


def govd_running(pid: object) -> bool:
    """Whether ``pid`` is a running govd process (a recycled pid belongs to another program;
    one that cannot be examined, another user's, counts as running)."""
    if not isinstance(pid, int) or isinstance(pid, bool) or not 0 < pid <= MAX_PID:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # exists, belongs to someone else
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return True
    return b"govd" in cmdline
