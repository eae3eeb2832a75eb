"""Finding the GPUs govd can govern, reopening one from saved state, and watching for hot-plug.

Sysfs devices are enumerated by pyudev (``devfreq`` devices, and ``drm`` cards: ``cardN`` only, not
render nodes or connectors) and given a backend by subsystem (devfreq) or by the name of the driver
bound to the card's parent (amdgpu, i915, xe). libudev always reads the real ``/sys`` (umockdev's
preload redirects it in tests), so for any other root, such as a fixture tree, the same two
directories are walked instead.

Other kinds of device plug in through two registries: ``DISCOVERERS`` (callables returning the
devices they find) and ``BACKENDS`` (backend name → function reopening a device from its
``save()`` data). The NVML module adds its own entries to both when imported.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from govd.device.amdgpu import AmdgpuDevice
from govd.device.base import Device
from govd.device.devfreq import DevfreqDevice
from govd.device.i915 import I915Device
from govd.device.sysfs import SysfsDevice, SysfsIO
from govd.device.xe import XeDevice

SYS = Path("/sys")
_CARD = re.compile(r"^card\d+$")
log = logging.getLogger("govd.device")

Reopen = Callable[[dict[str, Any], Path], Device]
"""Rebuilds a device from its ``save()`` data; the path is the sysfs root (ignored by NVML)."""

Discoverer = Callable[[Path], list[Device]]
"""Returns every device of one kind found under a sysfs root."""

SYSFS_BACKENDS: dict[str, type[SysfsDevice]] = {
    "devfreq": DevfreqDevice,
    "i915": I915Device,
    "xe": XeDevice,
    "amdgpu": AmdgpuDevice,
}



def _reopener(cls: type[SysfsDevice]) -> Reopen:
    def reopen(saved: dict[str, Any], sysfs_root: Path) -> Device:
        cls.check_state(saved.get("state"))
        device = cls.from_saved(saved, sysfs_root)
        device.path = found_dir(saved.get("path"), cls.backend, sysfs_root)
        return device

    return reopen


def found_dir(rel: object, backend: str, sysfs_root: Path) -> Path:
    """The directory of the device a state file names by ``rel`` (relative to ``sysfs_root``),
    resolved, once it is shown to be one that discovery finds there with that backend: a state
    file naming an absolute path, ``..``, or a link leading out of the device directories is
    refused (ValueError, one line), so a restore never writes anywhere else."""
    if not isinstance(rel, str) or not rel:
        raise ValueError("saved device has no path")
    rel_path = Path(rel)
    if rel_path.is_absolute() or ".." in rel_path.parts:
        raise ValueError(f"path {rel!r} must be relative to the sysfs root, without '..'")
    root = Path(sysfs_root).resolve()
    real = (root / rel_path).resolve()
    for found in scan(Path(sysfs_root)):
        if found.backend == backend and found.sys_path.resolve() == real \
                and real.is_relative_to(root):
            return real
    raise ValueError(f"path {rel!r} is not a {backend} device found under {sysfs_root}")


BACKENDS: dict[str, Reopen] = {name: _reopener(cls) for name, cls in SYSFS_BACKENDS.items()}
"""Backend name → how to reopen its device from saved state (`govd restore` after a crash)."""


GPU_DRIVERS = frozenset({
    "panfrost", "panthor", "lima", "mali", "msm", "msm_gpu", "adreno", "kgsl-3d0", "etnaviv",
    "v3d", "powervr", "pvrsrvkm", "gk20a", "nvgpu", "nouveau", "amdgpu", "radeon", "i915", "xe",
})
"""Drivers that drive GPUs: a devfreq device whose parent one of them binds is a GPU."""
GPU_COMPATIBLE = ("mali", "adreno", "gpu", "vivante,gc", "powervr", "v3d", "img,")
"""Parts of a device tree ``compatible`` string that name a GPU (``arm,mali-bifrost``,
``qcom,adreno-618.0``, ``vivante,gc``, ``img,powervr-6xt``, ``brcm,2711-v3d``)."""
PCI_DISPLAY_CLASS = 0x03
"""The PCI base class of display controllers (VGA, 3D, other display: 0x03xxxx)."""


def gpu_evidence(sys_path: Path, driver: str | None) -> tuple[bool, str]:
    """Whether the kernel says the device at ``sys_path`` (a devfreq device or drm card) is a
    GPU, and what says so (or what it is instead): its parent's driver, a DRM card under the
    parent, the parent's device tree ``compatible`` string, or its PCI class."""
    parent = sys_path / "device"
    if driver in GPU_DRIVERS:
        return True, f"driver {driver}"
    drm = parent / "drm"
    cards = sorted(p.name for p in drm.iterdir() if _CARD.match(p.name)) if drm.is_dir() else []
    if cards:
        return True, f"DRM {cards[0]}"
    compatible = _read_words(parent / "of_node" / "compatible", b"\0")
    for word in compatible:
        if any(part in word for part in GPU_COMPATIBLE):
            return True, f"compatible {word}"
    pci_class = _read_words(parent / "class", None)
    try:
        if pci_class and int(pci_class[0], 16) >> 16 == PCI_DISPLAY_CLASS:
            return True, f"PCI class {pci_class[0]}"
    except ValueError:
        pass
    said = [f"driver {driver or 'none'}"]
    if compatible:
        said.append(f"compatible {compatible[0]}")
    if pci_class:
        said.append(f"PCI class {pci_class[0]}")
    return False, f"not a GPU ({', '.join(said)})"


def _read_words(path: Path, sep: bytes | None) -> list[str]:
    """The words of the first 4 KiB of ``path`` ([] when unreadable). One read(2), opened
    non-blocking: a tree given with --sysfs-root may hold a FIFO (an open that waits for a
    writer) or /dev/zero (no end to read to) where the kernel has an attribute."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        try:
            data = os.read(fd, 4096)
        finally:
            os.close(fd)
    except OSError:
        return []
    return [w.decode(errors="replace").strip() for w in data.split(sep) if w.strip()]


@dataclass(frozen=True, slots=True)
class Found:
    """A GPU-like sysfs device, whether or not govd has a backend for it."""

    subsystem: str
    """``devfreq`` or ``drm``."""
    name: str
    """sysfs name: ``card0``, ``fde60000.gpu``."""
    sys_path: Path
    driver: str | None
    """Driver bound to the parent device (``i915``, ``panfrost``), None if unbound."""

    @property
    def gpu(self) -> tuple[bool, str]:
        """Whether the kernel says it is a GPU, and what says so (`gpu_evidence`); a drm card
        is one by being a card."""
        if self.subsystem == "drm":
            return True, "DRM card"
        return gpu_evidence(self.sys_path, self.driver)

    @property
    def backend(self) -> str | None:
        """The govd backend that drives it, None when there is none."""
        if self.subsystem == "devfreq":
            return "devfreq"
        return self.driver if self.driver in SYSFS_BACKENDS else None


def _driver_of(device_dir: Path) -> str | None:
    link = device_dir / "device" / "driver"
    return os.path.basename(os.readlink(link)) if link.is_symlink() else None


def _walk(sysfs_root: Path) -> list[Found]:
    found = []
    for subsystem in ("devfreq", "drm"):
        class_dir = sysfs_root / "class" / subsystem
        for entry in sorted(class_dir.iterdir()) if class_dir.is_dir() else []:
            if subsystem == "drm" and not _CARD.match(entry.name):
                continue
            found.append(Found(subsystem, entry.name, entry, _driver_of(entry)))
    return found


def listed_names(sysfs_root: Path) -> list[str]:
    """The names `_walk` would look at under ``sysfs_root`` (devfreq entries, drm cards): one
    listing of each class folder, no file read, no device built."""
    names = []
    for subsystem in ("devfreq", "drm"):
        try:
            entries = os.listdir(sysfs_root / "class" / subsystem)
        except (FileNotFoundError, NotADirectoryError):
            continue  # as `_walk`: no such class, nothing there
        names += [n for n in entries if subsystem != "drm" or _CARD.match(n)]
    return names


def _udev(context: Any | None = None) -> list[Found]:
    import pyudev

    context = context or pyudev.Context()
    found = []
    for subsystem in ("devfreq", "drm"):
        for device in context.list_devices(subsystem=subsystem):
            if subsystem == "drm" and not _CARD.match(device.sys_name):
                continue
            parent = device.parent
            driver = parent.driver if parent is not None else None
            found.append(Found(subsystem, device.sys_name, Path(device.sys_path), driver))
    return sorted(found, key=lambda f: (f.subsystem, f.name))


def scan(sysfs_root: Path = SYS) -> list[Found]:
    """Every devfreq device and drm card under ``sysfs_root`` (through udev for the real /sys;
    where libudev cannot be loaded, by reading /sys as any other tree, said once)."""
    sysfs_root = Path(sysfs_root)
    if sysfs_root != SYS:
        return _walk(sysfs_root)
    try:
        return _udev()
    except (ImportError, OSError) as exc:
        # A traceback at every start (and a restart loop under systemd) helped nobody.
        if not _said_no_udev:
            _said_no_udev.append(True)
            log.warning("udev unavailable (%s; Debian: apt-get install libudev1): devices "
                        "found by reading %s directly", exc, SYS)
        return _walk(SYS)


_said_no_udev: list[bool] = []


def open_found(found: Found, sysfs_root: Path = SYS, io: SysfsIO | None = None) -> SysfsDevice:
    """The backend object for a found device. Raises KeyError when govd has no backend for it."""
    backend = found.backend
    if backend is None:
        raise KeyError(f"{found.name}: no govd backend for driver {found.driver}")
    device = SYSFS_BACKENDS[backend](found.sys_path, Path(sysfs_root), io)
    is_gpu, why = found.gpu
    device.not_gpu = None if is_gpu else why
    return device


def discover_sysfs(sysfs_root: Path = SYS) -> list[Device]:
    """The devfreq, i915, xe and amdgpu devices under ``sysfs_root``; those the kernel does not
    call a GPU carry why in ``not_gpu`` (governed only when the configuration names them)."""
    return [open_found(f, sysfs_root) for f in scan(sysfs_root) if f.backend is not None]


DISCOVERERS: list[Discoverer] = [discover_sysfs]
"""Every way of finding devices; other backends (NVML) append theirs."""


def discover(sysfs_root: Path = SYS) -> list[Device]:
    """All devices every registered discoverer finds."""
    return [device for discoverer in DISCOVERERS for device in discoverer(Path(sysfs_root))]


def check_saved(saved: object) -> None:
    """Raise ValueError (one line) unless ``saved`` has the shape a ``save()`` of its backend
    gives: a known backend, a name, and for sysfs backends a path and exactly their state."""
    if not isinstance(saved, dict):
        raise ValueError("each device must be an object")
    backend = saved.get("backend")
    if not isinstance(backend, str) or backend not in BACKENDS:
        raise ValueError(f"unknown backend {backend!r}")
    if not isinstance(saved.get("name"), str) or not saved["name"]:
        raise ValueError(f"a {backend} device without a name")
    if not isinstance(saved.get("state"), dict):
        raise ValueError(f"{saved['name']}: state must be an object")
    cls = SYSFS_BACKENDS.get(backend)
    if cls is not None:
        if not isinstance(saved.get("path"), str):
            raise ValueError(f"{saved['name']}: path must be a string")
        try:
            cls.check_state(saved["state"])
        except ValueError as exc:
            raise ValueError(f"{saved['name']}: {exc}") from None


def reopen(saved: dict[str, Any], sysfs_root: Path = SYS) -> Device:
    """The device a ``save()`` described, holding that state for ``restore()``. A sysfs
    device must be one discovery finds under ``sysfs_root`` (`found_dir`; ValueError)."""
    backend = saved.get("backend")
    if backend not in BACKENDS:
        raise KeyError(f"saved state names unknown backend {backend!r}")
    return BACKENDS[backend](saved, Path(sysfs_root))


def restore_saved(saved: dict[str, Any], sysfs_root: Path = SYS) -> Device:
    """Reopen a device from its ``save()`` data and put that state back; returns the device."""
    device = reopen(saved, sysfs_root)
    device.restore()
    return device


@dataclass(frozen=True, slots=True)
class HotplugEvent:
    """A GPU appearing or going away."""

    action: str
    """udev action: ``add``, ``remove``, ``change``, ``bind``, ``unbind``."""
    subsystem: str
    name: str
    sys_path: Path


class HotplugMonitor:
    """udev events for devfreq devices and drm cards (render nodes and connectors filtered out).

    ``fileno()`` lets the daemon wait on it beside its other sources."""

    def __init__(self, context: Any | None = None):
        import pyudev

        self._monitor = pyudev.Monitor.from_netlink(context or pyudev.Context())
        self._monitor.filter_by("drm")
        self._monitor.filter_by("devfreq")

    def start(self) -> None:
        """Begin receiving events (those before are not seen)."""
        self._monitor.start()

    def fileno(self) -> int:
        """The netlink socket, readable when an event is waiting."""
        return int(self._monitor.fileno())

    def poll(self, timeout_s: float | None = None) -> HotplugEvent | None:
        """The next relevant event, or None when none arrives within ``timeout_s`` of the last
        one received (None waits for ever). Units: s."""
        while True:
            device = self._monitor.poll(timeout=timeout_s)
            if device is None:
                return None
            if device.subsystem == "drm" and not _CARD.match(device.sys_name):
                continue
            return HotplugEvent(
                device.action or "", device.subsystem, device.sys_name, Path(device.sys_path)
            )

    def __iter__(self) -> Iterator[HotplugEvent]:
        """Events as they come, blocking."""
        while (event := self.poll()) is not None:
            yield event


def _discover_nvml(_sysfs_root: Path) -> list[Device]:
    from govd.device import nvml

    return list(nvml.discover_nvml())


def _reopen_nvml(saved: dict[str, Any], _sysfs_root: Path) -> Device:
    from govd.device import nvml

    return nvml.NvmlDevice.from_saved(saved)


# NVML is imported lazily: a machine without the NVIDIA driver pays nothing for it.
DISCOVERERS.append(_discover_nvml)
BACKENDS["nvml"] = _reopen_nvml
