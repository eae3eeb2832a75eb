"""NVIDIA GPUs through NVML (nvidia-ml-py, imported as ``pynvml``).

Where the GPU can lock its memory clock (Ampere or newer, with more than one memory clock) the
levels are the supported (core, memory) pairs: every memory clock of
``nvmlDeviceGetSupportedMemoryClocks`` with each graphics clock
``nvmlDeviceGetSupportedGraphicsClocks(h, mem)`` lists for it, sorted by core then memory clock
(`NvmlDevice.mem_levels_mhz` gives each level's memory clock). Otherwise the levels are the
graphics clocks at the highest memory clock (the driver's default), and `govd devices` says why.
A GPU that refuses the memory lock as NOT_SUPPORTED all the same falls back to that at once.

Datacenter GPUs list one memory clock and 38-190 graphics clocks 5-15 MHz apart: all of them are
levels. Only more than `GOVERNED_LEVELS` (a GeForce's (core, memory) pairs) are thinned, each
memory clock keeping its share of its own supported clocks. On Hopper and newer the GPM counters
(`govd.device.nvml_gpm`: SM activity, DRAM bandwidth) come with every reading.

`set_level` locks the graphics clock, ``nvmlDeviceSetGpuLockedClocks(h, f, f)`` (Volta or newer,
root only), at the memory clock in force; `set_pair` locks both, with
``nvmlDeviceSetMemoryLockedClocks(h, m, m)``. A lower memory clock supports fewer graphics clocks
(the top ones go), so when the memory clock falls the graphics clock is locked first and when it
rises the memory clock is: the pair in force is always one NVML supports. When the second lock is
refused the first is put back (as the i915 min/max pair). A clock set costs 10-15 ms on a V100
(seed 002), and locking every 50 ms delayed NCCL collectives in a reported NVIDIA issue, so a set
that would change nothing is skipped: a lock is written only when the decision changes.

What `save` and `restore` can do: NVML has no call that reads a locked-clock range back, so govd
cannot tell whether another tool (``nvidia-smi -lgc``) had locked the clocks before it started,
nor to what. `save` records what NVML can read: the GPU's identity (UUID, PCI bus id, product)
and both clocks running when govd found it, with ``gpu_locked_before: null`` meaning "unknown".
`restore` puts back the driver default with ``nvmlDeviceResetMemoryLockedClocks`` /
``nvmlDeviceResetGpuLockedClocks`` for each clock domain govd locked; `restore_saved` (what
``govd restore`` runs after a crash) resets both, since it cannot know which were locked. A lock
someone else set before govd started is therefore lost, not restored. A driver reload (or a GPU
falling off the bus) drops every lock by itself, so a device forgets the locks it applied
whenever NVML says the GPU is gone; a reload also leaves NVML handles stale (NVML then answers
UNINITIALIZED: `DeviceGone`). NVML's return codes become govd's typed errors as
`govd.device.nvml_calls` says.
"""

from __future__ import annotations

import logging
import math
import os
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
from govd.device.nvml_calls import SESSION, nvml_call, nvml_code
from govd.device.nvml_gpm import GpmReader

log = logging.getLogger(__name__)

T = TypeVar("T")

GOVERNED_LEVELS = 256
"""Most levels (or (core, memory) pairs) the daemon governs on one GPU: a cap on a tick's cost
(it predicts every level), not a design. A datacenter GPU's whole grid fits (one memory clock,
38-190 graphics clocks 5-15 MHz apart: an H100 SXM's 110, a V100's 187); only a GPU with
several memory clocks and more pairs than this (a GeForce's 400-odd) is thinned, each memory
clock keeping a share of the cap in proportion to its clocks, its lowest and highest included
(`spread`): every level kept is a supported clock. A model takes up to
`govd.model.settings.MAX_LEVELS`, what `govd eval` reads from a full sweep."""

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
_LOCKS = {
    "graphics": pynvml.nvmlDeviceSetGpuLockedClocks,
    "memory": pynvml.nvmlDeviceSetMemoryLockedClocks,
}
# Memory first: resetting it changes which graphics clocks are supported.
_RESETS = {
    "memory": pynvml.nvmlDeviceResetMemoryLockedClocks,
    "graphics": pynvml.nvmlDeviceResetGpuLockedClocks,
}
FloatArray = npt.NDArray[np.float64]


def _nearest(clocks_mhz: FloatArray, freq_mhz: float) -> int:
    """The clock of ``clocks_mhz`` nearest to ``freq_mhz`` (the lower one on a tie). Units: MHz."""
    if not math.isfinite(freq_mhz):
        raise ValueError(f"cannot set a clock of {freq_mhz} MHz")
    return int(clocks_mhz[np.argmin(np.abs(clocks_mhz - freq_mhz))])


def spread(clocks_mhz: FloatArray, count: int) -> FloatArray:
    """``count`` of the ascending ``clocks_mhz`` spread evenly by position, the lowest and the
    highest included (all of them when there are no more). Units: MHz."""
    if count >= clocks_mhz.size:
        return clocks_mhz
    picks = np.round(np.linspace(0, clocks_mhz.size - 1, max(count, 2))).astype(np.int64)
    return clocks_mhz[np.unique(picks)]


def shares(sizes: list[int], total: int) -> list[int]:
    """How many of ``total`` places each of groups of ``sizes`` items gets: in proportion to its
    size (largest remainders first), at least 2 (its ends) and at most its size."""
    if sum(sizes) <= total:
        return list(sizes)
    exact = [total * size / sum(sizes) for size in sizes]
    given = [min(size, max(2, math.floor(e))) for size, e in zip(sizes, exact, strict=True)]
    for i in sorted(range(len(sizes)), key=lambda i: math.floor(exact[i]) - exact[i]):
        if sum(given) >= total:
            break
        if given[i] < sizes[i]:
            given[i] += 1
    return given


class NvmlDevice(Device):
    """One NVIDIA GPU whose graphics (and, Ampere+, memory) clock govd locks through NVML.

    Open one with `open_index` or `open_uuid` (or `discover_nvml`); `close` when done.
    """

    backend: ClassVar[str] = "nvml"
    handle_dies_with_device: ClassVar[bool] = True

    def __init__(self, handle: Any) -> None:
        """Wrap an NVML handle; the caller holds one session reference for this device."""
        self._handle = handle
        self.name = nvml_call("read UUID", pynvml.nvmlDeviceGetUUID, handle)
        """The GPU's NVML UUID (``GPU-…``), stable across reboots and PCI moves."""
        self.product: str = nvml_call(f"{self.name}: read name", pynvml.nvmlDeviceGetName, handle)
        """Marketing name, e.g. ``NVIDIA H100 80GB HBM3``."""
        pci = nvml_call(f"{self.name}: read PCI info", pynvml.nvmlDeviceGetPciInfo, handle)
        self.pci_bus_id: str = pci.busId.decode() if isinstance(pci.busId, bytes) else pci.busId
        """PCI address as NVML writes it (``00000000:17:00.0``)."""
        # NVML packs the ids as device << 16 | vendor (0x1db410de for 10de:1db4).
        self.pci_id = f"{pci.pciDeviceId & 0xFFFF:04x}:{pci.pciDeviceId >> 16 & 0xFFFF:04x}"
        try:
            self._arch: int | None = pynvml.nvmlDeviceGetArchitecture(handle)
        except pynvml.NVMLError:
            self._arch = None  # old drivers lack the call; the writes will tell instead
        mem = nvml_call(f"{self.name}: list memory clocks",
                        pynvml.nvmlDeviceGetSupportedMemoryClocks, handle)
        if not mem:
            raise NotSupported(f"{self.name}: NVML lists no supported memory clocks")
        self._mem_clocks = np.array(sorted(set(mem)), dtype=np.float64)
        self._gpm = GpmReader(self.name, handle, self._call)
        self._applied: dict[str, int | None] = dict.fromkeys(_LOCKS)
        self._written: set[str] = set()
        self._refused = ""
        self._saved: dict[str, Any] | None = None
        self._closed = False
        self._energy_supported = True
        self._power_supported = True
        self._mem_note = ""
        self._graphics: dict[int, FloatArray] = {}
        self._levels: FloatArray
        self._mem_levels: FloatArray | None = None
        if len(self._mem_clocks) == 1:
            self._one_domain("")
        elif self._arch is None or self._arch < pynvml.NVML_DEVICE_ARCH_AMPERE:
            arch = _ARCH_NAMES.get(self._arch or -1, "of an unknown architecture")
            self._one_domain(f"{self.product} is {arch}: memory clock locks need Ampere or newer")
        else:
            self._two_domains()

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
        nvml_call(f"{what}: start NVML", SESSION.acquire)
        try:
            return cls(nvml_call(f"{what}: open", get_handle, key))
        except BaseException:
            SESSION.release()
            raise

    def close(self) -> None:
        """Give this device's NVML session reference back (idempotent); does not restore."""
        if not self._closed:
            self._closed = True
            self._gpm.close()
            SESSION.release()

    def forget_applied(self) -> None:
        """Forget the locks govd applied: the next set writes them again (NVML cannot read a
        lock back to see whether the GPU still holds it)."""
        self._applied = dict.fromkeys(_LOCKS)

    def _call(self, what: str, call: Callable[..., T], *args: Any) -> T:
        try:
            return nvml_call(f"{self.name}: {what}", call, *args)
        except DeviceGone:
            # A lost GPU or a reloaded driver comes back with the driver-default clocks.
            self.forget_applied()
            raise

    def _graphics_levels(self, mem_mhz: int) -> FloatArray:
        clocks = self._call(f"list graphics clocks at memory {mem_mhz} MHz",
                            pynvml.nvmlDeviceGetSupportedGraphicsClocks, self._handle, mem_mhz)
        if not clocks:
            raise NotSupported(f"{self.name}: no graphics clocks at memory {mem_mhz} MHz")
        return np.array(sorted(set(clocks)), dtype=np.float64)

    def _two_domains(self) -> None:
        """Levels: every supported (core, memory) pair; where there are more than the daemon
        governs (`GOVERNED_LEVELS`), each memory clock keeps its share of graphics clocks."""
        graphics = {int(m): self._graphics_levels(int(m)) for m in self._mem_clocks}
        kept = shares([len(clocks) for clocks in graphics.values()], GOVERNED_LEVELS)
        self._graphics = {m: spread(clocks, count)
                          for (m, clocks), count in zip(graphics.items(), kept, strict=True)}
        pairs = sorted((core, m) for m, clocks in self._graphics.items() for core in clocks)
        self._levels = np.array([core for core, _ in pairs], dtype=np.float64)
        self._mem_levels = np.array([m for _, m in pairs], dtype=np.float64)

    def _one_domain(self, why: str) -> None:
        """Levels: the graphics clocks at the highest memory clock; ``why`` the memory clock is
        not governed ("" when there is only one)."""
        top = int(self._mem_clocks[-1])
        clocks = self._graphics[top] if top in self._graphics else self._graphics_levels(top)
        self._graphics = {top: spread(clocks, GOVERNED_LEVELS)}
        self._levels = self._graphics[top]
        self._mem_levels = None
        self._mem_note = f"{why}; graphics clock only, at memory {top} MHz" if why else ""

    @property
    def levels_mhz(self) -> FloatArray:
        """Core clock of every level, ascending: of every (core, memory) pair with two clock
        domains, else the supported graphics clocks at the highest memory clock. Units: MHz."""
        return self._levels.copy()

    @property
    def mem_levels_mhz(self) -> FloatArray | None:
        """Memory clock of every level with two clock domains, None with one. Units: MHz."""
        return None if self._mem_levels is None else self._mem_levels.copy()

    @property
    def bounds_mhz(self) -> tuple[float, float]:
        """Lowest and highest core clock of the levels. Units: MHz."""
        return float(self._levels[0]), float(self._levels[-1])

    def controllable(self) -> Controllability:
        """Not when govd is not root, the GPU predates Volta, or NVML refused the last lock;
        the reason says so too when only the graphics clock can be governed."""
        if self._refused:
            return Controllability(False, self._refused)
        if os.geteuid() != 0:
            return Controllability(False, f"not root (uid {os.geteuid()}): NVML locks clocks "
                                   "only for root (NO_PERMISSION)")
        if self._arch is not None and self._arch < pynvml.NVML_DEVICE_ARCH_VOLTA:
            arch = _ARCH_NAMES.get(self._arch, f"architecture {self._arch}")
            return Controllability(False, f"{self.product} is {arch}: locked clocks need Volta "
                                   "or newer (NOT_SUPPORTED)")
        return Controllability(True, self._mem_note)

    def read(self) -> Reading:
        """Graphics and memory clocks running, utilisation, energy counter and power.

        ``busy`` is NVML's GPU utilisation (share of its last sample period, 1/6 s to 1 s, with a
        kernel running), not exactly the time since the previous read. ``energy_mj`` is NaN before
        Volta (NOT_SUPPORTED); ``power_w`` is NVML's power reading (mW / 1000). ``counters``:
        ``mem_busy`` (NVML's memory utilisation), and on Hopper and newer the GPM counters
        ``sm_activity`` and ``dram_bw_util`` (`govd.device.nvml_gpm`), all fractions 0..1.
        """
        h = self._handle
        freq_mhz = self._clock_mhz("graphics", pynvml.NVML_CLOCK_GRAPHICS)
        mem_mhz = self._clock_mhz("memory", pynvml.NVML_CLOCK_MEM)
        util = self._call("read utilisation", pynvml.nvmlDeviceGetUtilizationRates, h)
        energy_mj = math.nan
        if self._energy_supported:
            try:
                energy_mj = float(self._call("read energy",
                                             pynvml.nvmlDeviceGetTotalEnergyConsumption, h))
            except NotSupported:
                self._energy_supported = False  # pre-Volta: ask once, not every tick
        power_w = math.nan
        if self._power_supported:
            try:
                power_w = self._call("read power", pynvml.nvmlDeviceGetPowerUsage, h) / 1000
            except NotSupported:
                self._power_supported = False
        counters = {"mem_busy": util.memory / 100}
        counters.update(self._gpm.metrics())
        return Reading(freq_mhz=float(freq_mhz), busy=util.gpu / 100, energy_mj=energy_mj,
                       power_w=power_w, mem_freq_mhz=float(mem_mhz), counters=counters)

    def _mem_in_force(self) -> int:
        """The memory clock govd locked, else the highest (what an unlocked GPU may run)."""
        return self._applied["memory"] or int(self._mem_clocks[-1])

    def set_level(self, freq_mhz: float) -> None:
        """Lock the graphics clock at the supported clock nearest ``freq_mhz`` at the memory
        clock in force (so clamped to bounds).

        Writes nothing when govd's last lock is already at that clock: NVML cannot read a lock
        back, so a lock changed behind govd's back shows only in `read`. Units: MHz.
        Raises WriteRefused (NO_PERMISSION, INVALID_ARGUMENT), NotSupported (pre-Volta), DeviceGone.
        """
        core_mhz = _nearest(self._graphics[self._mem_in_force()], freq_mhz)
        if core_mhz != self._applied["graphics"]:
            self._lock("graphics", core_mhz)

    def set_pair(self, freq_mhz: float, mem_freq_mhz: float) -> None:
        """Lock both clocks at the supported pair nearest (``freq_mhz``, ``mem_freq_mhz``):
        the memory clock nearest ``mem_freq_mhz``, then the graphics clock nearest ``freq_mhz``
        at it. The graphics clock is written first when the memory clock falls, the memory
        clock first when it rises; when the second write fails the first is put back.

        Where the memory clock is not governed (`mem_levels_mhz` is None) this is `set_level`;
        a memory lock NVML answers NOT_SUPPORTED makes it so from then on (logged once). Units:
        MHz. Raises WriteRefused, NotSupported (pre-Volta), DeviceGone.
        """
        if self._mem_levels is None:
            self.set_level(freq_mhz)
            return
        mem_mhz = _nearest(self._mem_clocks, mem_freq_mhz)
        writes = [("graphics", _nearest(self._graphics[mem_mhz], freq_mhz)), ("memory", mem_mhz)]
        if mem_mhz > self._mem_in_force():
            writes.reverse()  # the graphics lock in force is supported at a higher memory clock
        done: list[tuple[str, int | None]] = []
        for domain, clock_mhz in writes:
            before = self._applied[domain]
            if clock_mhz == before:
                continue
            try:
                self._lock(domain, clock_mhz)
            except NotSupported as exc:
                if domain != "memory":
                    self._roll_back(done)
                    raise
                self._lose_memory_domain(exc)
                self.set_level(freq_mhz)
                return
            except DeviceError:
                self._roll_back(done)
                raise
            done.append((domain, before))

    def settle_domains(self) -> str | None:
        """With two clock domains, lock the memory clock at its highest (what the driver runs
        unlocked): a GPU that lists several memory clocks and refuses the lock as NOT_SUPPORTED
        (the H200 of 27 Nov: 3201 and 2201 MHz listed) is governed by its graphics clock alone
        from the start, rather than over pairs whose memory clock nothing sets. Found only at
        the first `set_pair` instead, the pairs outlived the finding: a governor built on them
        chose among pairs that ran alike, and `govd measure` recorded the planned memory clock
        of each pair (2201 MHz) where the GPU ran 3201 MHz."""
        if self._mem_levels is None:
            return None
        try:
            self._lock("memory", int(self._mem_clocks[-1]))
        except NotSupported as exc:
            self._lose_memory_domain(exc)
            return self._mem_note
        return None

    def _roll_back(self, done: list[tuple[str, int | None]]) -> None:
        """Put back the locks of ``done`` (domain, lock before) after a later write failed."""
        for domain, before in reversed(done):
            try:
                if before is None:
                    self._reset(domain)
                else:
                    self._lock(domain, before)
            except DeviceError as exc:
                log.warning("%s: could not put the %s clock lock back: %s", self.name, domain,
                            exc)
                self.forget_applied()  # unknown now: write both next time
                return

    def _lose_memory_domain(self, exc: NotSupported) -> None:
        """NVML refused the memory lock as NOT_SUPPORTED: govern the graphics clock only."""
        log.warning("%s; governing the graphics clock only", exc)  # exc names the GPU
        if self._applied["memory"] is not None:
            try:
                self._reset("memory")
            except DeviceError as reset_exc:
                log.warning("%s: memory clock lock not reset: %s", self.name, reset_exc)
        self._applied["memory"] = None
        self._one_domain(f"memory clock lock NOT_SUPPORTED ({exc})")

    def _lock(self, domain: str, clock_mhz: int) -> None:
        self.save()
        self._written.add(domain)  # before the call: a lock that half-happened gets reset too
        try:
            self._call(f"lock {domain} clock at {clock_mhz} MHz", _LOCKS[domain], self._handle,
                       clock_mhz, clock_mhz)
        except (NotSupported, WriteRefused) as exc:
            # Lacking root or the feature will not change by retrying: stop offering the GPU
            # (a memory lock NOT_SUPPORTED only loses the memory clock: see set_pair).
            if (isinstance(exc, NotSupported) and domain == "graphics") or \
                    nvml_code(exc) == pynvml.NVML_ERROR_NO_PERMISSION:
                self._refused = str(exc)
            raise
        self._applied[domain] = clock_mhz
        self._refused = ""  # NVML takes locks again (root regained, a transient refusal over)

    def _clock_mhz(self, what: str, clock_type: int) -> int:
        return int(self._call(f"read {what} clock", pynvml.nvmlDeviceGetClockInfo,
                              self._handle, clock_type))

    def save(self) -> dict[str, Any]:
        """Identity and both clocks found before govd's first write (recorded once; see module
        doc: NVML cannot read a locked range, so ``gpu_locked_before`` is null, i.e. unknown)."""
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
        """Reset to the driver default each clock domain govd locked (idempotent). Every domain
        is tried even when one fails: a failed memory reset must not leave the graphics lock
        too. Raises the first failure after that (the failed domain is reset again next time)."""
        failure: DeviceError | None = None
        for domain in _RESETS:
            if domain in self._written:
                try:
                    self._reset(domain)
                except NotSupported:
                    # a device reopened by `from_saved` resets both domains without knowing
                    # whether this GPU has a memory lock at all
                    log.debug("%s: no %s clock lock to reset", self.name, domain)
                except DeviceError as exc:
                    failure = failure or exc
        if failure is not None:
            raise failure

    def _reset(self, domain: str) -> None:
        self._call(f"reset {domain} clock lock", _RESETS[domain], self._handle)
        self._written.discard(domain)
        self._applied[domain] = None


def discover_nvml() -> list[NvmlDevice]:
    """Every GPU NVML can open, in NVML's order; [] with a logged reason when there is no NVML
    library or driver. A GPU that fails to open is skipped with a logged reason."""
    try:
        SESSION.acquire()
    except pynvml.NVMLError_LibraryNotFound:
        log.info("no NVIDIA GPUs: libnvidia-ml.so.1 not found (no NVIDIA driver installed)")
        return []
    except pynvml.NVMLError as exc:
        log.warning("no NVIDIA GPUs: nvmlInit failed: %s", exc)
        return []
    try:
        count = nvml_call("count GPUs", pynvml.nvmlDeviceGetCount)
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
        SESSION.release()


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
