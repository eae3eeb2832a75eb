"""The device interface: levels, bounds, reading what runs, setting a level, putting things back.

One module per backend (devfreq, i915, xe, amdgpu, nvml, sim) implements `Device`; the kernel's
and drivers' quirks stay inside that module. Units are in every name: MHz, W, mJ.

Two clock domains (NVML's graphics and memory clocks) are an addition a backend may make: its
`Device.mem_levels_mhz` gives the memory clock of each level, the levels then being (core, memory)
pairs sorted by core then memory clock, and `Device.set_pair` sets both clocks. A device with one
domain keeps the defaults (None; `set_pair` refused), so every one-domain backend stays as it is.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import numpy.typing as npt


class DeviceError(Exception):
    """A backend failed in a way the daemon must handle (pause, hand back, retry)."""


class DeviceGone(DeviceError):
    """The device disappeared (ENODEV/ENOENT on sysfs, NVML_ERROR_GPU_IS_LOST, unplug)."""


class WriteRefused(DeviceError):
    """The kernel or driver refused a write (EINVAL, EACCES, EBUSY, NVML NO_PERMISSION...)."""


class NotSupported(DeviceError):
    """The device or driver does not offer this operation."""


# Not frozen: a frozen dataclass's __init__ sets each field through a Python-level
# object.__setattr__ call, 4x the cost of a plain one (~2.5 µs an object in a cold 50 ms
# tick, bench/README.md "Daemon cost"); built at every read, and read-only by convention.
@dataclass(slots=True)
class Reading:
    """What a device says at one instant."""

    freq_mhz: float
    """Frequency actually running (read back, never the one asked for). Units: MHz."""
    busy: float = math.nan
    """Utilisation since the previous read, 0..1; NaN when the device does not report it."""
    energy_mj: float = math.nan
    """Cumulative energy counter, NaN when there is none. Units: mJ."""
    power_w: float = math.nan
    """Power sample (average or instantaneous as the backend documents), NaN if none. Units: W."""
    mem_freq_mhz: float = math.nan
    """Memory clock running, NaN for single-domain devices. Units: MHz."""
    counters: dict[str, float] = field(default_factory=dict)
    """Backend-specific activity counters by name (frequency-independent ones feed the model)."""


@dataclass(frozen=True, slots=True)
class Controllability:
    """Whether govd can drive a device, and if not, why (shown by `govd devices`)."""

    ok: bool
    reason: str = ""


def levels_problem(levels_mhz: npt.ArrayLike) -> str | None:
    """Why no governor can choose among ``levels_mhz`` (MHz), None when one can: a single
    operating point leaves nothing to choose, and the model takes at most
    `govd.model.settings.MAX_LEVELS` levels. A backend's `Device.controllable` says it, so such
    a device is listed as not controllable instead of failing the governor built for it."""
    from govd.model.settings import MAX_LEVELS

    count = np.size(levels_mhz)
    if count < 2:
        return f"{count} clock level: nothing to choose"
    if count > MAX_LEVELS:
        return f"{count} clock levels, more than the model takes ({MAX_LEVELS})"
    return None


class Device(ABC):
    """A GPU (or devfreq device) whose clock govd governs."""

    backend: ClassVar[str]
    """Backend name, as registered in `govd.device.registry`: ``devfreq``, ``i915``, ``xe``,
    ``amdgpu``, ``nvml``, or a third party's."""

    handle_dies_with_device: ClassVar[bool] = False
    """Whether the object stops working when the device goes away, even once it is back (an
    NVML handle after GPU_IS_LOST or a driver reload): the daemon then reopens it from its
    saved state. A sysfs device keeps its path and needs nothing of the kind."""

    name: str
    """Stable, human-readable identity (sysfs device name, PCI address or NVML UUID)."""

    pci_id: str | None = None
    """PCI ``vendor:device`` id in lower-case hex as ``lspci -n`` shows it (``8086:1912``), None
    for a device not on PCI (most devfreq devices): what a ``devices:`` entry's ``pci_id``
    matches."""

    not_gpu: str | None = None
    """Why the kernel does not call this device a GPU (a memory controller's devfreq, a bus),
    None for a GPU: such a device is governed only when a configuration entry names it."""

    @property
    @abstractmethod
    def levels_mhz(self) -> npt.NDArray[np.float64]:
        """Every settable level, ascending. Units: MHz."""

    @property
    def mem_levels_mhz(self) -> npt.NDArray[np.float64] | None:
        """With two clock domains, the memory clock of each level, parallel to `levels_mhz`
        (which then holds the core clock of each (core, memory) pair, sorted by core then memory
        clock, so a core clock repeats); None for a device with one clock domain (the default).
        Units: MHz."""
        return None

    def volts_by_level(self) -> npt.NDArray[np.float64] | None:
        """Core voltage at each level (parallel to `levels_mhz`) where the driver publishes a
        voltage table, None where it does not (the default; amdgpu reads
        ``pp_od_clk_voltage``). The power model's g(f) = f·V(f)² comes from it, before a table
        in the configuration. Units: V. Raises DeviceError."""
        return None

    @property
    @abstractmethod
    def bounds_mhz(self) -> tuple[float, float]:
        """(min, max) the hardware/driver allows right now. Units: MHz."""

    @abstractmethod
    def controllable(self) -> Controllability:
        """Whether govd may write this device (permissions, driver, another governor in charge)."""

    @abstractmethod
    def read(self) -> Reading:
        """Read the running level, busy time and power/energy. Raises DeviceGone/DeviceError."""

    @abstractmethod
    def set_level(self, freq_mhz: float) -> None:
        """Run at ``freq_mhz`` (clamped to bounds; writes ordered so no transient state is
        refused). Writes nothing when the device already runs there. Raises WriteRefused."""

    def set_pair(self, freq_mhz: float, mem_freq_mhz: float) -> None:
        """Run at the (core ``freq_mhz``, memory ``mem_freq_mhz``) pair nearest to the one asked
        for, writing the two clocks in the order that never passes through a pair the driver
        refuses, and putting the first back when the second is refused. Writes nothing that
        already holds. Units: MHz. Raises WriteRefused (the device as it was), NotSupported on
        a device with one clock domain (the default)."""
        raise NotSupported(f"{self.name}: one clock domain; no memory clock to set")

    def settle_domains(self) -> str | None:
        """Find out, by writing, whether every clock domain the device lists can be set, where
        only a write tells (NVML lists memory clocks it may then refuse to lock). Called once the
        device is in custody (its state saved, so `restore` puts the write back) and before a
        governor or a sweep is planned on its levels: `levels_mhz` and `mem_levels_mhz` are
        final afterwards. Returns why a domain cannot be set (its levels then drop it), None
        when nothing changed (the default: a backend whose listing is what it can set). Raises
        DeviceError when the write fails otherwise."""
        return None

    def forget_applied(self) -> None:
        """Forget the setting govd last wrote, so that the next `set_level` / `set_pair` writes
        even when it asks for the same level: the device may have lost the setting (a driver
        reload, a resume from suspend). Backends that skip writes by reading their setting back
        have nothing to forget (the default)."""
        return None

    def override(self) -> str | None:
        """What another tool changed in the clock setting of govd's last `set_level` (a short
        description such as ``governor is performance``), None while the setting holds, before
        any `set_level`, or where the backend cannot read its setting back. Reads the device;
        raises DeviceGone/DeviceError like `read`."""
        return None

    def unrestorable(self) -> str | None:
        """What `restore` cannot put back as found because the driver does not show it (one
        line naming the device, e.g. an amdgpu ``pp_dpm_sclk`` mask another tool forced), None
        when the found state can be put back whole (the default). A restore puts back what it
        can and logs this; whoever reports "every device restored" should say it too."""
        return None

    def identity(self) -> dict[str, str]:
        """What tells this device from another one that later takes its name (hot-plug: a
        different GPU plugged in as ``card0``): strings a backend can read without writing, such
        as the PCI slot, the PCI ids and a serial number. The state file keeps it beside the
        saved state, and nothing saved for one device is written into a device whose identity
        differs. The default (backend, name, PCI id) suits backends whose name is already unique
        (an NVML UUID)."""
        return {"backend": self.backend, "name": self.name, "pci_id": self.pci_id or ""}

    def sysfs_path(self) -> Path | None:
        """The device's sysfs directory (where DRM fdinfo busy time is looked up for it), None
        for a device without one (NVML)."""
        return None

    def lock_dir(self) -> str | None:
        """The folder whose inode stands for this device while it is plugged in (a sysfs
        device's own directory), locked by whoever governs it; None for a device without one
        (then a lock file named after the device is used, see `govd.custody.lock`)."""
        return None

    @abstractmethod
    def save(self) -> dict[str, Any]:
        """The state found before govd's first write, as JSON-able data that `restore_saved`
        takes back, with ``backend`` and enough identity to find the device again."""

    @abstractmethod
    def restore(self) -> None:
        """Put back the state `save` recorded. Idempotent; safe to call after a failure."""
