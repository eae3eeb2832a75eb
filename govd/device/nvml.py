"""NVIDIA GPUs through NVML (nvidia-ml-py, imported as ``pynvml``).

Levels are the graphics clocks NVML supports at the memory clock in use: the highest supported
memory clock (the driver's default) until `NvmlDevice.set_mem_level` locks another. A level is set
by locking the graphics clock to it, ``nvmlDeviceSetGpuLockedClocks(h, f, f)`` (Volta or newer,
root only); the memory clock by ``nvmlDeviceSetMemoryLockedClocks(h, m, m)`` (Ampere or newer).
A clock set costs 10-15 ms on a V100 (seed 002), so a set that would change nothing is skipped.

What `save` and `restore` can do: NVML has no call that reads a locked-clock range back, so govd
cannot tell whether another tool (``nvidia-smi -lgc``) had locked the clocks before it started,
nor to what. `save` records what NVML can read: the GPU's identity (UUID, PCI bus id, product)
and the clocks running when govd found it, with ``gpu_locked_before: null`` meaning "unknown".
`restore` puts back the driver default with ``nvmlDeviceResetGpuLockedClocks`` /
``nvmlDeviceResetMemoryLockedClocks`` for each clock domain govd locked; `restore_saved` (what
``govd restore`` runs after a crash) resets both, since it cannot know which were locked. A lock
someone else set before govd started is therefore lost, not restored. A driver reload drops every
lock by itself, and leaves NVML handles stale (NVML then answers UNINITIALIZED: `DeviceGone`).

NVML's return codes become the typed errors of `govd.device.base`: NOT_SUPPORTED → NotSupported;
NO_PERMISSION and INVALID_ARGUMENT → WriteRefused; GPU_IS_LOST, NOT_FOUND, UNINITIALIZED (a stale
session after a driver reload), DRIVER_NOT_LOADED and LIBRARY_NOT_FOUND → DeviceGone; anything
else → DeviceError.
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import threading
from collections.abc import Callable, Mapping
from typing import Any, ClassVar, TypeVar

import numpy as np
import numpy.typing as npt
import pynvml

from govd.device.base import (
    Controllability,
    Device,
    DeviceError,
    DeviceGone,
    NotSupported,
    Reading,
    WriteRefused,
)

log = logging.getLogger(__name__)

T = TypeVar("T")

_GONE = {
    pynvml.NVML_ERROR_GPU_IS_LOST,
    pynvml.NVML_ERROR_NOT_FOUND,
    pynvml.NVML_ERROR_GPU_NOT_FOUND,
    pynvml.NVML_ERROR_UNINITIALIZED,
    pynvml.NVML_ERROR_DRIVER_NOT_LOADED,
    pynvml.NVML_ERROR_LIBRARY_NOT_FOUND,
}
_REFUSED = {pynvml.NVML_ERROR_NO_PERMISSION, pynvml.NVML_ERROR_INVALID_ARGUMENT}
_ARCH_NAMES = {
    pynvml.NVML_DEVICE_ARCH_KEPLER: "Kepler",
    pynvml.NVML_DEVICE_ARCH_MAXWELL: "Maxwell",
    pynvml.NVML_DEVICE_ARCH_PASCAL: "Pascal",
    pynvml.NVML_DEVICE_ARCH_VOLTA: "Volta",
    pynvml.NVML_DEVICE_ARCH_TURING: "Turing",
    pynvml.NVML_DEVICE_ARCH_AMPERE: "Ampere",
    pynvml.NVML_DEVICE_ARCH_ADA: "Ada",
    pynvml.NVML_DEVICE_ARCH_HOPPER: "Hopper",
    pynvml.NVML_DEVICE_ARCH_BLACKWELL: "Blackwell",
}
# Memory first: resetting it changes which graphics clocks are supported.
_RESETS = {
    "memory": pynvml.nvmlDeviceResetMemoryLockedClocks,
    "graphics": pynvml.nvmlDeviceResetGpuLockedClocks,
}


def _typed(exc: pynvml.NVMLError, what: str) -> DeviceError:
    """The govd error for an NVML error; ``what`` says which call on which GPU failed."""
    code = exc.value
    message = f"{what}: NVML error {code} ({exc})"
    if code == pynvml.NVML_ERROR_NOT_SUPPORTED:
        return NotSupported(message)
    if code == pynvml.NVML_ERROR_NO_PERMISSION:
        return WriteRefused(f"{message}; NVML locks clocks only for root")
    if code in _REFUSED:
        return WriteRefused(message)
    if code in _GONE:
        return DeviceGone(message)
    return DeviceError(message)


def _nvml(what: str, call: Callable[..., T], *args: Any) -> T:
    """Run one pynvml call, turning its errors into govd's typed ones."""
    try:
        return call(*args)
    except pynvml.NVMLError as exc:
        raise _typed(exc, what) from exc


def _nvml_code(exc: BaseException) -> int | None:
    """The NVML return code behind a typed error raised by `_nvml`, if any."""
    cause = exc.__cause__
    return cause.value if isinstance(cause, pynvml.NVMLError) else None


class _NvmlSession:
    """nvmlInit once per process however many GPUs are open; nvmlShutdown when the last closes."""

    def __init__(self) -> None:
        self._users = 0
        self._lock = threading.Lock()

    def acquire(self) -> None:
        """Take a reference, initialising NVML on the first. Raises pynvml.NVMLError."""
        with self._lock:
            if self._users == 0:
                pynvml.nvmlInit()
            self._users += 1

    def release(self) -> None:
        """Give a reference back, shutting NVML down with the last."""
        with self._lock:
            if self._users == 0:
                return
            self._users -= 1
            if self._users == 0:
                # A driver that went away cannot be shut down any further.
                with contextlib.suppress(pynvml.NVMLError):
                    pynvml.nvmlShutdown()


_SESSION = _NvmlSession()


class NvmlDevice(Device):
    """One NVIDIA GPU whose graphics (and, Ampere+, memory) clock govd locks through NVML.

    Open one with `open_index` or `open_uuid` (or `discover_nvml`); `close` when done.
    """

    backend: ClassVar[str] = "nvml"

    def __init__(self, handle: Any) -> None:
        """Wrap an NVML handle; the caller holds one session reference for this device."""
        self._handle = handle
        self.name = _nvml("read UUID", pynvml.nvmlDeviceGetUUID, handle)
        """The GPU's NVML UUID (``GPU-…``), stable across reboots and PCI moves."""
        self.product: str = _nvml(f"{self.name}: read name", pynvml.nvmlDeviceGetName, handle)
        """Marketing name, e.g. ``NVIDIA H100 80GB HBM3``."""
        pci = _nvml(f"{self.name}: read PCI info", pynvml.nvmlDeviceGetPciInfo, handle)
        self.pci_bus_id: str = pci.busId.decode() if isinstance(pci.busId, bytes) else pci.busId
        """PCI address as NVML writes it (``00000000:17:00.0``)."""
        try:
            self._arch: int | None = pynvml.nvmlDeviceGetArchitecture(handle)
        except pynvml.NVMLError:
            self._arch = None  # old drivers lack the call; the writes will tell instead
        mem = _nvml(f"{self.name}: list memory clocks", pynvml.nvmlDeviceGetSupportedMemoryClocks,
                    handle)
        if not mem:
            raise NotSupported(f"{self.name}: NVML lists no supported memory clocks")
        self._mem_levels = np.array(sorted(mem), dtype=np.float64)
        self._levels = self._graphics_levels(int(self._mem_levels[-1]))
        self._locked_mhz: int | None = None
        self._mem_locked_mhz: int | None = None
        self._written: set[str] = set()
        self._refused = ""
        self._saved: dict[str, Any] | None = None
        self._closed = False
        self._energy_supported = True
        self._power_supported = True

    @classmethod
    def open_index(cls, index: int) -> NvmlDevice:
        """Open the GPU at NVML index ``index``. Raises DeviceGone/DeviceError."""
        return cls._open(f"GPU {index}", pynvml.nvmlDeviceGetHandleByIndex, index)

    @classmethod
    def open_uuid(cls, uuid: str) -> NvmlDevice:
        """Open the GPU whose NVML UUID is ``uuid``. Raises DeviceGone when none has it."""
        return cls._open(uuid, pynvml.nvmlDeviceGetHandleByUUID, uuid)

    @classmethod
    def _open(cls, what: str, get_handle: Callable[[Any], Any], key: Any) -> NvmlDevice:
        _nvml(f"{what}: start NVML", _SESSION.acquire)
        try:
            return cls(_nvml(f"{what}: open", get_handle, key))
        except BaseException:
            _SESSION.release()
            raise

    def close(self) -> None:
        """Give this device's NVML session reference back (idempotent); does not restore."""
        if not self._closed:
            self._closed = True
            _SESSION.release()

    def _graphics_levels(self, mem_mhz: int) -> npt.NDArray[np.float64]:
        clocks = _nvml(f"{self.name}: list graphics clocks at memory {mem_mhz} MHz",
                       pynvml.nvmlDeviceGetSupportedGraphicsClocks, self._handle, mem_mhz)
        if not clocks:
            raise NotSupported(f"{self.name}: no graphics clocks at memory {mem_mhz} MHz")
        return np.array(sorted(set(clocks)), dtype=np.float64)

    @property
    def levels_mhz(self) -> npt.NDArray[np.float64]:
        """Supported graphics clocks at the memory clock in use, ascending. Units: MHz."""
        return self._levels.copy()

    @property
    def mem_levels_mhz(self) -> npt.NDArray[np.float64]:
        """Supported memory clocks, ascending: the second knob of `set_mem_level`. Units: MHz."""
        return self._mem_levels.copy()

    @property
    def bounds_mhz(self) -> tuple[float, float]:
        """Lowest and highest supported graphics clock at the memory clock in use. Units: MHz."""
        return float(self._levels[0]), float(self._levels[-1])

    def controllable(self) -> Controllability:
        """Not when govd is not root, the GPU predates Volta, or NVML refused a lock already."""
        if self._refused:
            return Controllability(False, self._refused)
        if os.geteuid() != 0:
            return Controllability(False, f"not root (uid {os.geteuid()}): NVML locks clocks "
                                   "only for root (NO_PERMISSION)")
        if self._arch is not None and self._arch < pynvml.NVML_DEVICE_ARCH_VOLTA:
            arch = _ARCH_NAMES.get(self._arch, f"architecture {self._arch}")
            return Controllability(False, f"{self.product} is {arch}: locked clocks need Volta "
                                   "or newer (NOT_SUPPORTED)")
        return Controllability(True)

    def read(self) -> Reading:
        """Graphics and memory clocks running, utilisation, energy counter and power.

        ``busy`` is NVML's GPU utilisation (share of its last sample period, 1/6 s to 1 s, with a
        kernel running), not exactly the time since the previous read. ``energy_mj`` is NaN before
        Volta (NOT_SUPPORTED); ``power_w`` is NVML's power reading (mW / 1000).
        """
        h = self._handle
        freq_mhz = self._clock_mhz("graphics", pynvml.NVML_CLOCK_GRAPHICS)
        mem_mhz = self._clock_mhz("memory", pynvml.NVML_CLOCK_MEM)
        util = _nvml(f"{self.name}: read utilisation", pynvml.nvmlDeviceGetUtilizationRates, h)
        energy_mj = math.nan
        if self._energy_supported:
            try:
                energy_mj = float(_nvml(f"{self.name}: read energy",
                                        pynvml.nvmlDeviceGetTotalEnergyConsumption, h))
            except NotSupported:
                self._energy_supported = False  # pre-Volta: ask once, not every tick
        power_w = math.nan
        if self._power_supported:
            try:
                power_mw = _nvml(f"{self.name}: read power", pynvml.nvmlDeviceGetPowerUsage, h)
                power_w = power_mw / 1000
            except NotSupported:
                self._power_supported = False
        return Reading(freq_mhz=float(freq_mhz), busy=util.gpu / 100, energy_mj=energy_mj,
                       power_w=power_w, mem_freq_mhz=float(mem_mhz),
                       counters={"mem_busy": util.memory / 100})

    def set_level(self, freq_mhz: float) -> None:
        """Lock the graphics clock at the supported level nearest ``freq_mhz`` (clamped to bounds).

        Writes nothing when govd's last lock is already at that level: NVML cannot read a lock
        back, so a lock changed behind govd's back shows only in `read`. Units: MHz.
        Raises WriteRefused (NO_PERMISSION, INVALID_ARGUMENT), NotSupported (pre-Volta), DeviceGone.
        """
        target_mhz = self._nearest_level(freq_mhz)
        if target_mhz != self._locked_mhz:
            self._lock("graphics", pynvml.nvmlDeviceSetGpuLockedClocks, target_mhz)
            self._locked_mhz = target_mhz

    def set_mem_level(self, mem_mhz: float) -> None:
        """Lock the memory clock at ``mem_mhz`` (one of `mem_levels_mhz`); the graphics levels
        become those NVML supports at that memory clock. Units: MHz.
        Raises NotSupported before Ampere, WriteRefused for a clock NVML rejects or without root.
        """
        target_mhz = round(mem_mhz)
        if target_mhz == self._mem_locked_mhz:
            return
        self._lock("memory", pynvml.nvmlDeviceSetMemoryLockedClocks, target_mhz)
        self._mem_locked_mhz = target_mhz
        if target_mhz in self._mem_levels:
            self._levels = self._graphics_levels(target_mhz)
            if self._locked_mhz is not None and self._locked_mhz not in self._levels:
                self._locked_mhz = None  # the next set_level must write again

    def _nearest_level(self, freq_mhz: float) -> int:
        if not math.isfinite(freq_mhz):
            raise ValueError(f"{self.name}: cannot set a level of {freq_mhz} MHz")
        return int(self._levels[np.argmin(np.abs(self._levels - freq_mhz))])

    def _lock(self, domain: str, call: Callable[[Any, int, int], None], clock_mhz: int) -> None:
        self.save()
        self._written.add(domain)  # before the call: a lock that half-happened gets reset too
        try:
            _nvml(f"{self.name}: lock {domain} clock at {clock_mhz} MHz", call, self._handle,
                  clock_mhz, clock_mhz)
        except (NotSupported, WriteRefused) as exc:
            # Lacking root or the feature will not change by retrying: stop offering the GPU.
            if isinstance(exc, NotSupported) or _nvml_code(exc) == pynvml.NVML_ERROR_NO_PERMISSION:
                self._refused = str(exc)
            raise

    def _clock_mhz(self, what: str, clock_type: int) -> int:
        return int(_nvml(f"{self.name}: read {what} clock", pynvml.nvmlDeviceGetClockInfo,
                         self._handle, clock_type))

    def save(self) -> dict[str, Any]:
        """Identity and clocks found before govd's first write (recorded once; see module doc:
        NVML cannot read a locked range, so ``gpu_locked_before`` is null, i.e. unknown)."""
        if self._saved is None:
            self._saved = {
                "backend": self.backend,
                "uuid": self.name,
                "pci_bus_id": self.pci_bus_id,
                "product": self.product,
                "graphics_clock_mhz": self._clock_mhz("graphics", pynvml.NVML_CLOCK_GRAPHICS),
                "mem_clock_mhz": self._clock_mhz("memory", pynvml.NVML_CLOCK_MEM),
                "gpu_locked_before": None,
                "restore": "reset locked clocks to the driver default",
            }
        return dict(self._saved)

    @classmethod
    def from_saved(cls, saved: Mapping[str, Any]) -> NvmlDevice:
        """Reopen the GPU a `save` described (by UUID), in a process that did not lock it
        (``govd restore`` after a crash): its `restore` then resets both clock domains."""
        uuid = saved.get("uuid")
        if saved.get("backend") != cls.backend or not isinstance(uuid, str):
            raise ValueError(f"not a saved NVML device state: {dict(saved)!r}")
        device = cls.open_uuid(uuid)
        device._saved = dict(saved)
        device._written.update(_RESETS)
        return device

    def restore(self) -> None:
        """Reset to the driver default each clock domain govd locked (idempotent)."""
        for domain in _RESETS:
            if domain in self._written:
                try:
                    self._reset(domain)
                except NotSupported:
                    # only reachable for a device reopened by `from_saved`, which resets both
                    # domains without knowing whether this GPU has a memory lock at all
                    log.debug("%s: no %s clock lock to reset", self.name, domain)

    def _reset(self, domain: str) -> None:
        _nvml(f"{self.name}: reset {domain} clock lock", _RESETS[domain], self._handle)
        self._written.discard(domain)
        if domain == "memory":
            self._mem_locked_mhz = None
            self._levels = self._graphics_levels(int(self._mem_levels[-1]))
        else:
            self._locked_mhz = None


def discover_nvml() -> list[NvmlDevice]:
    """Every GPU NVML can open, in NVML's order; [] with a logged reason when there is no NVML
    library or driver. A GPU that fails to open is skipped with a logged reason."""
    try:
        _SESSION.acquire()
    except pynvml.NVMLError_LibraryNotFound:
        log.info("no NVIDIA GPUs: libnvidia-ml.so.1 not found (no NVIDIA driver installed)")
        return []
    except pynvml.NVMLError as exc:
        log.warning("no NVIDIA GPUs: nvmlInit failed: %s", exc)
        return []
    try:
        count = _nvml("count GPUs", pynvml.nvmlDeviceGetCount)
        devices = []
        for index in range(count):
            try:
                devices.append(NvmlDevice.open_index(index))
            except DeviceError as exc:
                log.warning("NVML GPU %d skipped: %s", index, exc)
        return devices
    except DeviceError as exc:
        log.warning("no NVIDIA GPUs: %s", exc)
        return []
    finally:
        _SESSION.release()


def restore_saved(saved: Mapping[str, Any]) -> None:
    """Put back a GPU from what `NvmlDevice.save` recorded, in a process that did not write it
    (``govd restore`` after a crash): find the GPU by UUID and reset both clock locks.
    Raises ValueError for a record that is not NVML's, DeviceGone when the GPU is not there."""
    device = NvmlDevice.from_saved(saved)
    try:
        if saved.get("pci_bus_id") not in (None, device.pci_bus_id):
            log.warning("%s moved from PCI %s to %s; restoring it by UUID", saved["uuid"],
                        saved.get("pci_bus_id"), device.pci_bus_id)
        device.restore()
    finally:
        device.close()
