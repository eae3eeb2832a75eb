"""What every sysfs backend shares: one narrow I/O seam, errno → typed errors, ordered bound writes.

Plain files cannot refuse a write the way the kernel does, so every backend reads and writes only
through a `SysfsIO`; tests substitute one that enforces the kernel's rules and records each write.
"""

from __future__ import annotations

import errno
import math
import os
from abc import abstractmethod
from pathlib import Path
from typing import Any, ClassVar

from govd.device.base import Device, DeviceError, DeviceGone, WriteRefused

_SYS = Path("/sys")
_GONE = {errno.ENODEV, errno.ENOENT, errno.ENXIO}
_REFUSED = {errno.EINVAL, errno.EACCES, errno.EPERM, errno.EBUSY, errno.EROFS, errno.ERANGE}


_IDENTITY_FILES = {
    "pci_id": ("device/vendor", "device/device"),
    "subsystem_id": ("device/subsystem_vendor", "device/subsystem_device"),
    "serial": ("device/unique_id",),
    "compatible": ("device/of_node/compatible",),
}
"""What `SysfsDevice.identity` reads, where the driver has it (key → files joined by ``:``)."""
MAX_IDENTITY_CHARS = 80
"""Longest identity value kept: whoever builds a tree given with --sysfs-root chooses them."""


def one_printable_line(text: str, max_chars: int = MAX_IDENTITY_CHARS) -> str:
    """``text`` cut to ``max_chars``, every unprintable character (a line break, an escape) as
    ``?``."""
    text = text[:max_chars]
    return text if text.isprintable() else "".join(c if c.isprintable() else "?" for c in text)


def _id_word(text: str) -> str:
    """An identity file's first word: a hex id as ``lspci -n`` shows it (``8086``)."""
    word = text.split("\0")[0].strip()
    if word.startswith("0x"):
        try:
            return f"{int(word, 16):04x}"
        except ValueError:
            pass
    return word


_READ_BYTES = 8192
"""A sysfs attribute holds at most a page: one read(2) of this size takes it whole, and a
shorter answer is the end of the file (no second read(2) to find the end)."""
MAX_ATTRIBUTE_BYTES = 1 << 16
"""The most read from one file: a page on kernels with 64 KiB pages. A file longer than that is
no sysfs attribute (/dev/zero linked in, a huge file in a tree given with --sysfs-root) and is
refused rather than read whole every tick. Units: bytes."""
# Reads block, as a hung driver's do: the loop's watchdog pings stop and systemd restarts govd,
# which restores the device (tests/test_notify.py hangs a tick on a FIFO in a tree to check it).
_O_READ = os.O_RDONLY | os.O_CLOEXEC
# open(path, "w"), not inherited; O_NOFOLLOW: a sysfs attribute is never a link, and in a tree
# given with --sysfs-root a knob linked elsewhere would have govd (root) truncate that file;
# O_NONBLOCK: a FIFO there refuses (ENXIO) instead of blocking the loop until a reader comes.
_O_WRITE = (os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC | os.O_NOFOLLOW
            | os.O_NONBLOCK)


def attribute_text(data: bytes) -> str:
    """A sysfs attribute's bytes as text: every NUL dropped (some kernels pad a page with NULs,
    at the end or between sections of ``pp_od_clk_voltage``, and NUL is no white space to
    ``str.strip``), surrounding white space stripped. Raises UnicodeDecodeError."""
    if b"\0" in data:
        data = data.replace(b"\0", b"")
    return data.decode().strip()


def excerpt(text: str, limit: int = 60) -> str:
    """``text`` quoted for a message: one line, printable (``repr`` escapes line breaks, NULs and
    terminal escapes), cut to ``limit`` characters with the length said, so a file of 64 KiB of
    junk never lands whole in the journal."""
    if len(text) <= limit:
        return repr(text)
    return f"{text[:limit]!r}... ({len(text)} characters)"


def _read_to_end(fd: int, offset: int | None) -> bytes:
    """Everything from ``offset`` (None: the fd's position) to the end of the file, the first
    `_READ_BYTES` having been read. Raises OSError (EFBIG) past `MAX_ATTRIBUTE_BYTES`."""
    chunks = []
    total = _READ_BYTES  # what the caller read before
    while True:
        chunk = os.read(fd, _READ_BYTES) if offset is None else os.pread(fd, _READ_BYTES, offset)
        chunks.append(chunk)
        total += len(chunk)
        if len(chunk) < _READ_BYTES:
            return b"".join(chunks)
        if total > MAX_ATTRIBUTE_BYTES:
            raise OSError(errno.EFBIG, f"longer than {MAX_ATTRIBUTE_BYTES} bytes: no sysfs "
                          "attribute")
        if offset is not None:
            offset += len(chunk)


class SysfsIO:
    """The only door to sysfs files. Raises OSError; `SysfsDevice` turns that into typed errors.

    Each read opens the file by path, so a tree whose files are replaced (the simulated GPU
    renames new versions in) or moved away (fixtures unplugging a device) is read as it is now.
    Reads go through ``os`` calls, not pathlib: a tick reads several files and pathlib's
    path handling was most of a tick's cost."""

    def read_text(self, path: str | Path) -> str:
        """The file's content as `attribute_text` makes it (NULs dropped, surrounding white
        space stripped). `SysfsDevice` passes a str: os.open converts a Path through two
        Python-level calls each time."""
        fd = os.open(path, _O_READ)
        try:
            data = os.read(fd, _READ_BYTES)  # a whole attribute, nearly always
            if len(data) == _READ_BYTES:
                data += _read_to_end(fd, None)
            return attribute_text(data)
        finally:
            os.close(fd)

    def write_text(self, path: str | Path, value: str) -> None:
        """Write ``value`` in one write(2), as sysfs expects (a partial write is a refused one).
        Through ``os`` calls, with the flags of ``open(path, "w")``: a Python file object
        (text and buffer layers, an isatty ioctl, two lseeks) cost a level write ~0.1 ms more
        in a cold tick."""
        data = value.encode()
        fd = os.open(path, _O_WRITE, 0o666)
        try:
            while data:  # as a flush of the file object: the rest after a short write
                data = data[os.write(fd, data):]
        finally:
            os.close(fd)

    def writable(self, path: Path) -> bool:
        """Whether this process may write ``path``."""
        return os.access(path, os.W_OK)

    def close(self) -> None:
        """Release what is held open (nothing here)."""


class KeptOpenSysfsIO(SysfsIO):
    """Reads for the kernel's own /sys: each file is opened once and re-read with ``pread`` at
    offset 0, which makes sysfs produce the value afresh. The kernel never replaces an
    attribute file; when its device goes away the open file answers ENODEV, and then (on any
    error) the fd is dropped, so the next read opens the path again and sees what is there."""

    def __init__(self) -> None:
        self._fds: dict[str | Path, int] = {}

    def read_text(self, path: str | Path) -> str:
        """The file's content now, as `attribute_text` makes it."""
        fd = self._fds.get(path)
        if fd is None:
            fd = self._fds[path] = os.open(path, _O_READ)
        try:
            data = os.pread(fd, _READ_BYTES, 0)  # a whole attribute, nearly always
            if len(data) == _READ_BYTES:
                data += _read_to_end(fd, _READ_BYTES)
            return attribute_text(data)
        except OSError:
            del self._fds[path]
            os.close(fd)
            raise

    def close(self) -> None:
        """Close every file held open."""
        fds, self._fds = self._fds, {}
        for fd in fds.values():
            os.close(fd)


def typed_error(exc: OSError, path: str | Path, action: str) -> DeviceError:
    """Map an OSError from sysfs to the typed error the daemon acts on."""
    what = f"{action} {path}: {exc.strerror or exc}"
    if exc.errno in _GONE:
        return DeviceGone(what)
    if exc.errno in _REFUSED:
        return WriteRefused(what)
    return DeviceError(what)


class SysfsDevice(Device):
    """A `Device` backed by one sysfs directory; subclasses add the driver's files and rules.

    The state found is captured once, just before govd's first write, by `_capture_state`, and
    put back by `_restore_state`; `save()` wraps it with enough identity for `restore_saved`.
    """

    STATE_FIELDS: ClassVar[dict[str, tuple[type, ...]]] = {}
    """The saved state's keys and their JSON types, each required unless in `OPTIONAL_STATE`:
    a state file is checked against them before anything in it is written back."""
    OPTIONAL_STATE: ClassVar[frozenset[str]] = frozenset()

    @classmethod
    def check_state(cls, state: object) -> None:
        """Raise ValueError (one line) unless ``state`` is exactly what `_capture_state` of this
        backend returns: the known keys, the required ones present, each of its type."""
        if not isinstance(state, dict):
            raise ValueError(f"{cls.backend} state must be an object")
        unknown = sorted(set(state) - set(cls.STATE_FIELDS))
        if unknown:
            raise ValueError(f"{cls.backend} state has unknown keys {', '.join(map(str, unknown))}")
        for key, types in cls.STATE_FIELDS.items():
            if key not in state:
                if key in cls.OPTIONAL_STATE:
                    continue
                raise ValueError(f"{cls.backend} state lacks {key!r}")
            value = state[key]
            if isinstance(value, bool) or not isinstance(value, types) or (
                    isinstance(value, float) and not math.isfinite(value)):
                raise ValueError(f"{cls.backend} state {key!r} is {value!r}")

    def __init__(self, path: Path, sysfs_root: Path = Path("/sys"), io: SysfsIO | None = None):
        self.path = Path(path)
        self.sysfs_root = Path(sysfs_root)
        self.io = io or (KeptOpenSysfsIO() if self.sysfs_root == _SYS else SysfsIO())
        # Printable: it starts journal lines, status lines and `govd devices` rows, and a tree
        # given with --sysfs-root may name a device "card0\ngovd: ..." (a forged line).
        self.name = one_printable_line(self.path.name, 255)
        self._saved_state: dict[str, Any] | None = None
        # what the last set_level chose, in the backend's own terms (Hz, MHz, level index), so
        # `override` can tell when someone else changed it; None before any set_level
        self._chosen: int | float | None = None
        # rel_dir → (file, "energy" | "power") or None: globbing hwmon every tick was most of
        # a tick's cost; the cache is dropped when a read fails (hwmon renumbered on reload)
        self._hwmon_files: dict[str, tuple[str, str] | None] = {}
        self._paths: dict[str, str] = {}
        # rel → whether the driver has that optional file (looked up once, not stat'ed per tick)
        self._present: dict[str, bool] = {}
        self._pci_id: str | None = None

    @property
    def pci_id(self) -> str | None:  # type: ignore[override]
        """PCI ``vendor:device`` of the device behind this one (``device/vendor`` and
        ``device/device``), lower-case hex; None off PCI or when the ids cannot be read."""
        if self._pci_id is None:
            try:
                vendor = int(self._read("device/vendor"), 16)
                device = int(self._read("device/device"), 16)
            except (DeviceError, ValueError):
                return None
            self._pci_id = f"{vendor:04x}:{device:04x}"
        return self._pci_id

    def identity(self) -> dict[str, str]:
        """The device behind this directory, read afresh (never cached: a different GPU may
        have taken the name since): the name of its parent device (the PCI slot such as
        ``0000:03:00.0``, or a platform device's name), its PCI vendor:device and subsystem ids
        and its serial (``unique_id``, amdgpu) where the files exist, and a platform device's
        device tree ``compatible``."""
        found = {"backend": self.backend, "name": self.name}
        found["parent"] = os.path.basename(os.path.realpath(self.path / "device"))
        for key, rels in _IDENTITY_FILES.items():
            try:
                found[key] = ":".join(_id_word(self._read(rel)) for rel in rels)
            except DeviceError:
                continue
        return {key: one_printable_line(value) for key, value in found.items()}

    def lock_dir(self) -> str:
        """The device's own sysfs directory (a new one, a new inode, when it is plugged in
        again)."""
        return str(self.path)

    # -- file access, the only place OSError is caught -------------------------------------
    def _file(self, rel: str) -> str:
        # Joined once per file, kept as a str: pathlib's joining costs more than the read
        # itself, and each use of a Path as a file name (os.open, a dict key) is a Python call.
        path = self._paths.get(rel)
        if path is None:
            path = self._paths[rel] = str(self.path / rel)
        return path

    def _read(self, rel: str) -> str:
        path = self._paths.get(rel) or self._file(rel)  # `_file` only the first time: per tick
        try:
            return self.io.read_text(path)
        except OSError as exc:
            raise typed_error(exc, path, "read") from exc
        except UnicodeDecodeError as exc:  # a ValueError: it would pass every DeviceError handler
            raise DeviceError(f"read {path}: not text (byte {exc.start})") from exc

    def _read_optional_float(self, rel: str) -> float:
        """The number in the optional file ``rel``, NaN where the driver has none. Whether it
        has one is looked up once, and again after a failed read: a stat every tick cost as
        much as the read itself."""
        present = self._present.get(rel)
        if present is None:
            present = self._present[rel] = self._has(rel)
        if not present:
            return math.nan
        try:
            return self._read_float(rel)
        except DeviceError:
            del self._present[rel]
            raise

    def _read_float(self, rel: str) -> float:
        """The finite number in ``rel``: float() also takes "nan", "inf" and "1e400", which no
        driver prints and which would reach the bounds and level arithmetic as NaN/inf."""
        text = self._read(rel)
        try:
            value = float(text)
        except ValueError as exc:
            raise DeviceError(f"{self.path / rel}: expected a number, got {excerpt(text)}"
                              ) from exc
        if not math.isfinite(value):
            raise DeviceError(f"{self.path / rel}: expected a finite number, got "
                              f"{excerpt(text)}")
        return value

    def _write(self, rel: str, value: str | int) -> None:
        path = self._file(rel)
        try:
            self.io.write_text(path, str(value))
        except OSError as exc:
            raise typed_error(exc, path, f"write {value!r} to") from exc

    def _has(self, rel: str) -> bool:
        return os.path.exists(self._file(rel))

    def _writable(self, *rels: str) -> list[str]:
        """The files among ``rels`` this process may not write."""
        return [rel for rel in rels if not self.io.writable(self.path / rel)]

    def _write_bounds(
        self, min_rel: str, max_rel: str, new: tuple[float, float], old: tuple[float, float]
    ) -> None:
        """Write a (min, max) pair so no intermediate state has min > max: raising moves max
        first, lowering moves min first. If the second write fails the first is put back, so
        the pair is never left half-written. Values are written as integers."""
        (new_min, new_max), (old_min, old_max) = new, old
        if new_min > old_max:
            steps = [(max_rel, new_max, old_max), (min_rel, new_min, old_min)]
        else:
            steps = [(min_rel, new_min, old_min), (max_rel, new_max, old_max)]
        (first_rel, first_new, first_old), (second_rel, second_new, second_old) = steps
        if first_new != first_old:
            self._write(first_rel, round(first_new))
        if second_new == second_old:
            return
        try:
            self._write(second_rel, round(second_new))
        except DeviceError:
            if first_new != first_old:
                self._write(first_rel, round(first_old))
            raise

    def _hwmon_energy_power(self, rel_dir: str) -> tuple[float, float]:
        """(energy_mj, power_w) from the first hwmon under ``rel_dir``: the cumulative
        ``energy1_input`` (µJ) when the driver has one, else ``power1_average`` or
        ``power1_input`` (µW); NaN for what is missing."""
        if rel_dir not in self._hwmon_files:
            self._hwmon_files[rel_dir] = self._find_hwmon_file(rel_dir)
        found = self._hwmon_files[rel_dir]
        if found is None:
            return math.nan, math.nan
        rel, kind = found
        try:
            value = self._read_float(rel)
        except DeviceError:
            del self._hwmon_files[rel_dir]
            raise
        return (value / 1000.0, math.nan) if kind == "energy" else (math.nan, value / 1e6)

    def _find_hwmon_file(self, rel_dir: str) -> tuple[str, str] | None:
        hwmons = sorted((self.path / rel_dir).glob("hwmon/hwmon*"))
        if not hwmons:
            return None
        hwmon = hwmons[0].relative_to(self.path)
        if self._has(f"{hwmon}/energy1_input"):
            return f"{hwmon}/energy1_input", "energy"
        for name in ("power1_average", "power1_input"):
            if self._has(f"{hwmon}/{name}"):
                return f"{hwmon}/{name}", "power"
        return None

    # -- another tool's hand ---------------------------------------------------------------
    def override(self) -> str | None:
        """What another tool changed in the setting of govd's last `set_level`, None while it
        holds or before any `set_level`."""
        return None if self._chosen is None else self._changed_setting(self._chosen)

    def _changed_setting(self, chosen: int | float) -> str | None:
        """How the driver's files now differ from ``chosen`` (see ``_chosen``), None if not."""
        return None

    # -- saved state -----------------------------------------------------------------------
    @abstractmethod
    def _capture_state(self) -> dict[str, Any]:
        """The driver state govd's writes change, as JSON-able data."""

    @abstractmethod
    def _restore_state(self, state: dict[str, Any]) -> None:
        """Write ``state`` back, in an order the driver accepts, skipping what already matches."""

    def _ensure_saved(self) -> None:
        if self._saved_state is None:
            self._saved_state = self._capture_state()

    def save(self) -> dict[str, Any]:
        """The state found before govd's first write (or now, if none yet) with its identity."""
        self._ensure_saved()
        try:
            rel_path = str(self.path.relative_to(self.sysfs_root))
        except ValueError:
            rel_path = str(self.path)
        return {
            "backend": self.backend,
            "name": self.name,
            "path": rel_path,
            "state": dict(self._saved_state or {}),
        }

    def close(self) -> None:
        """Release the files held open (does not restore)."""
        self.io.close()

    def restore(self) -> None:
        """Put back the saved state, then read it back: raises DeviceError naming what did not
        hold (a driver that ignored a write, a tool that wrote in between), so nobody reports a
        device restored that is not. Does nothing when govd never wrote. Idempotent."""
        if self._saved_state is None:
            return
        self._restore_state(self._saved_state)
        differ = self._not_held(self._saved_state, self._capture_state())
        if differ:
            raise DeviceError(f"{self.path}: restore did not hold: {'; '.join(differ)}")

    def _not_held(self, saved: dict[str, Any], now: dict[str, Any]) -> list[str]:
        """What of ``saved`` the state read back after a restore (``now``) does not hold, one
        ``key is X, not Y`` each."""
        return [f"{key} is {now.get(key)!r}, not {value!r}"
                for key, value in saved.items() if now.get(key) != value]

    @classmethod
    def from_saved(
        cls, saved: dict[str, Any], sysfs_root: Path = Path("/sys"), io: SysfsIO | None = None
    ) -> SysfsDevice:
        """Reopen the device a `save()` described, holding that saved state for `restore`."""
        device = cls(Path(sysfs_root) / saved["path"], sysfs_root, io)
        device._saved_state = dict(saved["state"])
        return device


def nearest_level(levels_mhz: Any, freq_mhz: float) -> float:
    """The level closest to ``freq_mhz`` (ties go to the faster one, so a deadline is kept)."""
    distances = [abs(level - freq_mhz) for level in levels_mhz]
    best = min(distances)
    return float(max(lv for lv, d in zip(levels_mhz, distances, strict=True) if d == best))
