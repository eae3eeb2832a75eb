"""Custody of devices: the one way any govd process takes a GPU, keeps what it found, and gives it
back, used alike by the daemon, `govd measure` and `govd restore`.

Taking a device, in this order, before anything is written to it:

1. lock it (`govd.custody.lock`): a device another govd process holds is refused (`DeviceBusy`),
   so the daemon and `govd measure` can never hold one GPU at once, whatever their state files;
2. put back what a crashed govd process left (`restore_leftovers`: every state file of the custody
   folder whose owner is dead, the daemon's and `govd measure`'s alike), so what is saved next is
   the state the user set, not a dead process's level;
3. save the state found, with the device's identity, to this process's state file (`record`).

Giving back: `hand_back` (one device, e.g. disabled by a reload) and `end` (every device, on
every way out: the end of the run, an error, Ctrl-C, SIGTERM) restore each device and read it
back; a device that did not go back stays in the state file, and the file stays for
`govd restore` (after a SIGKILL, the whole file does). Nothing saved for one device is ever
written into another that took its name (`Device.identity`, checked at every restore and when a
device comes back after a hot-plug, `retake`).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from govd.custody.lock import DeviceBusy, DeviceLocks
from govd.custody.state_file import (
    SavedState,
    StateFileError,
    custody_files,
    leftover_state_file,
    load_state,
    owner_alive,
    remove_state,
    save_state,
)
from govd.device.base import Device, DeviceError
from govd.device.discovery import reopen

log = logging.getLogger("govd.custody")

RESERVED_FDS = 16
"""Descriptors held back while devices are held and given up just before they are put back:
whatever fills the open-files limit meanwhile (clients of the metrics endpoint, logs, a leak),
restoring them still opens the files it needs (issue 28 item 5)."""
STATUS_NAME = "status.json"
"""The daemon's status file, beside its state file (`govd.daemon.status`): removed with the
state of a dead daemon, so `govd status` does not show a dead daemon as running."""


def different_device(saved: dict[str, str], now: dict[str, str]) -> str | None:
    """How the device ``now`` differs from the one ``saved`` was taken from (`Device.identity`
    of each), None when nothing they both say differs."""
    differ = [f"{key} {now[key]}, was {saved[key]}" for key in sorted(saved.keys() & now.keys())
              if saved[key] != now[key]]
    return "; ".join(differ) or None


@dataclass(slots=True)
class Leftovers:
    """What `Custody.restore_leftovers` did: devices put back and lines for those that were not."""

    restored: list[str]
    failures: list[str]
    devices: int
    """Devices found in the state files of dead processes."""


class Custody:
    """The devices this process holds, their locks and its state file.

    ``state_file``: this process's own (the daemon's configured ``state_file``, or
    `govd.custody.state_file.measure_state_file`); ``base``: the configured ``state_file``, whose
    folder holds every state file and lock of the custody (default: ``state_file``);
    ``sysfs_root``: the tree the devices were found under."""

    def __init__(self, state_file: Path, sysfs_root: Path, base: Path | None = None) -> None:
        self.state_file = Path(state_file)
        self.base = Path(base) if base is not None else self.state_file
        self.sysfs_root = Path(sysfs_root).absolute()
        self.locks = DeviceLocks(self.base.parent)
        self._held: dict[str, tuple[Device, dict[str, Any]]] = {}
        self.wrote = False
        """Whether this process wrote its state file (then `end` owns it)."""
        self.caveats: list[str] = []
        """What the last `end` put back only as far as the drivers show it (one line per device,
        `Device.unrestorable`): said beside "restored", never as "every device restored"."""
        self._reserve: list[int] = []

    # -- taking --------------------------------------------------------------------------------
    def lock(self, device: Device) -> None:
        """Lock ``device`` for this process. Raises DeviceBusy (another govd process holds it) or
        DeviceGone (unplugged since it was found)."""
        self.locks.take(device)

    def restore_leftovers(self, in_place: bool = False) -> Leftovers:
        """Put back the devices of every state file in the custody folder whose owner died,
        each under its lock (one another process holds is left to it and said). A file whose
        devices all went back is removed; one with devices that did not keeps just those for
        the next try: under a name of its own beside the state file when it was this process's
        file (which this process is about to write), unless ``in_place`` (`govd restore`).
        Raises StateFileError when this process's own file is held by a running govd, or cannot
        be read or trusted."""
        done = Leftovers([], [], 0)
        for path in dict.fromkeys([self.state_file, *custody_files(self.base)]):
            own = path == self.state_file
            try:
                state = load_state(path)
            except StateFileError as exc:
                if own:
                    raise
                done.failures.append(str(exc))
                continue
            if state is None:
                continue
            if owner_alive(state):
                if own:
                    raise StateFileError(f"{path}: govd (pid {state.pid}) is running and holds "
                                         "these devices; stop it first")
                continue  # a `govd measure` running: its devices are locked by it
            log.warning("%s: left by a govd process that did not stop cleanly (pid %d); "
                        "restoring its devices", path, state.pid)
            done.devices += len(state.devices)
            kept = self._restore_entries(state, done)
            aside = own and not in_place
            if kept:
                keep_in = leftover_state_file(self.base, state.pid) if aside else path
                save_state(keep_in, SavedState(kept, state.sysfs_root, state.pid))
            if aside or not kept:
                remove_state(path)
            if path == self.base:
                _remove_status_of_dead(path.with_name(STATUS_NAME), state.pid)
        return done

    def _restore_entries(self, state: SavedState, done: Leftovers) -> list[dict[str, Any]]:
        """Restore each entry of a dead process's ``state``; returns those to keep trying."""
        kept = []
        for saved in state.devices:
            name = str(saved.get("name", "?"))
            try:
                device = reopen(saved, Path(state.sysfs_root))
                differs = different_device(saved.get("identity", {}), device.identity())
                if differs is not None:
                    # The device saved is gone for good; another took its name. Nothing of its
                    # state is written into this one, and it is not kept: it can never apply.
                    done.failures.append(f"{name}: now a different device ({differs}): its "
                                         "saved state was not written, and is dropped")
                    _close(device)
                    continue
                held = self.locks.holds(name)
                self.locks.take(device)
                try:
                    device.restore()
                finally:
                    if not held:
                        self.locks.release(name)
                    _close(device)
            except (DeviceBusy, DeviceError, KeyError, OSError, ValueError) as exc:
                done.failures.append(f"{name}: {exc}")
                kept.append(saved)
            except (TypeError, AttributeError) as exc:
                # A hand-edited or damaged entry: said in one line, kept for a later try.
                done.failures.append(f"{name}: malformed entry in the state file "
                                     f"({type(exc).__name__}: {exc})")
                kept.append(saved)
            else:
                log.info("%s: restored the state govd found", name)
                done.restored.append(name)
        return kept

    def record(self, devices: Iterable[Device]) -> None:
        """Save the state each of ``devices`` (locked) is in now, with its identity, to the
        state file beside those held already: before the first write to any of them. Raises
        StateFileError (nothing recorded then)."""
        added = {}
        for device in devices:
            if not self.locks.holds(device.name):
                raise StateFileError(f"{device.name}: not locked by this process")
            added[device.name] = (device, {**device.save(), "identity": device.identity()})
        before = dict(self._held)
        self._held.update(added)
        self._keep_reserve()
        try:
            self._write()
        except StateFileError:
            self._held = before
            raise

    def take(self, device: Device) -> None:
        """`lock` and `record` ``device``: raises as they do (the lock let go again when its
        state cannot be saved)."""
        held = self.locks.holds(device.name)
        self.lock(device)
        try:
            self.record([device])
        except StateFileError:
            if not held:
                self.locks.release(device.name)
            raise

    def holds(self, name: str) -> bool:
        """Whether the device called ``name`` is in this custody."""
        return name in self._held

    def replaced_by(self, device: Device) -> str | None:
        """How the device now under a held device's name differs from the one taken (hot-plug:
        another GPU plugged in as ``card0``), None when it is the same one."""
        entry = self._held.get(device.name)
        if entry is None:
            return "not held by this process"
        return different_device(entry[1].get("identity", {}), device.identity())

    def swap(self, old: Device, new: Device) -> None:
        """``new`` is a fresh handle on the held device ``old`` (NVML after a driver reload):
        it is held in its place (same saved state)."""
        entry = self._held.get(old.name)
        if entry is not None:
            self._held[new.name] = (new, entry[1])

    # -- giving back ---------------------------------------------------------------------------
    def hand_back(self, device: Device) -> str | None:
        """Put ``device`` back and let it go (its lock released, its entry removed from the state
        file). Returns None, or why it could not be put back: then it stays held and in the
        file, for `end` or `govd restore`."""
        self._free_reserve()
        try:
            device.restore()
        except (DeviceError, OSError) as exc:
            return str(exc)
        finally:
            self._keep_reserve()
        self.drop(device.name)
        return None

    def drop(self, name: str) -> None:
        """Let the device called ``name`` go without writing to it (put back already, or gone
        for good: another device took its name)."""
        if self._held.pop(name, None) is not None:
            self.locks.release(name)
            try:
                self._write()
            except StateFileError as exc:
                log.error("%s", exc)

    def end(self, leave: Iterable[str] = ()) -> list[str]:
        """Put every held device back (except those named in ``leave``: another tool set them
        and keeps them), read each back, then remove the state file, or keep in it those that
        did not go back, then let every device go. Returns one line per
        device not put back; every device is tried whatever the others do. What went back only
        as far as its driver shows is in `caveats`."""
        self._free_reserve()
        leave = set(leave)
        self.caveats = []
        failures = []
        kept = []
        for name, (device, entry) in self._held.items():
            if name in leave:
                continue
            try:
                device.restore()  # reads the state back: raises when it did not hold
                caveat = device.unrestorable()
                if caveat:
                    self.caveats.append(caveat)
            except Exception as exc:  # even a bug must not skip the next device
                what = str(exc) if isinstance(exc, DeviceError | OSError) else \
                    f"{type(exc).__name__}: {exc}"
                failures.append(f"{name}: {what}")
                kept.append(entry)
        self._held.clear()
        if self.wrote:
            try:
                if kept:
                    save_state(self.state_file, SavedState(kept, str(self.sysfs_root)))
                else:
                    remove_state(self.state_file)
            except StateFileError as exc:
                failures.append(str(exc))
        self.locks.release_all()  # after the state file: `govd restore` waits for both
        return failures

    def _keep_reserve(self) -> None:
        """Hold `RESERVED_FDS` descriptors (no more are taken once the limit is reached)."""
        while len(self._reserve) < RESERVED_FDS:
            try:
                self._reserve.append(os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC))
            except OSError:
                return

    def _free_reserve(self) -> None:
        reserve, self._reserve = self._reserve, []
        for fd in reserve:
            os.close(fd)

    def _write(self) -> None:
        entries = [entry for _, entry in self._held.values()]
        save_state(self.state_file, SavedState(entries, str(self.sysfs_root)))
        self.wrote = True


def restore_custody(state_file: Path) -> Leftovers:
    """`govd restore`: put back every device of ``state_file`` and of the files of its custody
    beside it (`govd.custody.state_file.custody_files`) whose owner is dead. Raises
    StateFileError when ``state_file`` cannot be read or trusted, or a running govd holds it."""
    return Custody(state_file, Path("/")).restore_leftovers(in_place=True)


def _remove_status_of_dead(status_file: Path, pid: int) -> None:
    """Remove the status file of the dead daemon ``pid`` (`govd status` would show it as
    running); one another process wrote since is left."""
    import json

    from govd.formats.regular_file import read_regular

    try:
        if json.loads(read_regular(status_file, 1 << 24)).get("pid") == pid:
            status_file.unlink()
    except (OSError, ValueError, AttributeError):
        pass


def _close(device: Device) -> None:
    close = getattr(device, "close", None)
    if close is not None:
        close()
