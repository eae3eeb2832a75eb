"""Which devices govd governs, and the governor each one gets from the configuration."""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np

from govd.conf.schema import Config, DeviceConfig
from govd.custody.lock import held_by_a_govd
from govd.daemon.device_runner import RunnerSettings
from govd.device.base import Device, DeviceError
from govd.device.discovery import SYS, discover, discover_sysfs
from govd.formats.prior import read_prior
from govd.from_config import governor_from_config, model_settings
from govd.governor import Governor
from govd.model.prior import Prior

log = logging.getLogger("govd.daemon")


class SetupError(Exception):
    """The configuration cannot be applied to the devices found (one clear line)."""


def find_devices(sysfs_root: Path) -> list[Device]:
    """Every device under ``sysfs_root``; other kinds (NVML) only for the real /sys, so that a
    fixture or simulated tree never brings the machine's own GPU along."""
    return discover() if Path(sysfs_root) == SYS else discover_sysfs(Path(sysfs_root))


def entry_for(config: Config, device: Device) -> DeviceConfig | None:
    """The first ``devices`` entry whose matchers all match ``device``, None when none does."""
    for entry in config.devices:
        pci_id = getattr(device, "pci_id", None)
        if entry.name is not None and entry.name != device.name:
            continue
        if entry.backend is not None and entry.backend != device.backend:
            continue
        if entry.pci_id is not None and (pci_id is None or entry.pci_id.lower() != pci_id):
            continue
        return entry
    return None


def select(config: Config, devices: list[Device]) -> list[Device]:
    """The devices to govern: enabled by the configuration and controllable (the others are
    logged with the reason and left alone)."""
    chosen = []
    for device in devices:
        entry = entry_for(config, device)
        if entry is not None and not entry.enabled:
            log.info("%s: disabled in the configuration; left alone", device.name)
            continue
        if device.not_gpu is not None and (entry is None or entry.name != device.name):
            log.info("%s: %s; left alone (a `devices:` entry with its name takes it)",
                     device.name, device.not_gpu)
            continue
        try:
            verdict = device.controllable()
        except DeviceError as exc:  # a read failing: the device cannot be governed either
            log.warning("%s: cannot be governed: %s", device.name, exc)
            continue
        if not verdict.ok:
            log.warning("%s: cannot be governed: %s", device.name, verdict.reason)
            continue
        if verdict.reason:
            held = held_by_a_govd(device, Path(config.state_file).parent)
            # a running govd's own setting is no other tool's (`check-config` beside it)
            log.log(logging.INFO if held else logging.WARNING, "%s: %s", device.name,
                    "governed by a running govd now" if held else verdict.reason)
        chosen.append(device)
    return chosen


def device_volts(config: Config, device: Device, levels_mhz: np.ndarray) -> tuple[float, ...]:
    """The device's voltage table interpolated at ``levels_mhz`` (its distinct core clocks,
    MHz): the one the driver publishes (`Device.volts_by_level`: amdgpu's
    ``pp_od_clk_voltage``), else ``power.voltage`` from the configuration, else empty (the
    model takes V affine in f), in DESIGN.md's order. A published table that cannot be read,
    or that holds no positive voltage per level, is passed over with a warning. Units: V."""
    points = config.power.voltage.get(device.name)
    own = _published_volts(device)
    if own is not None:
        clocks, volts = own
        if points:
            log.info("%s: the driver publishes a voltage table; power.voltage's is not used",
                     device.name)
        return tuple(np.interp(levels_mhz, clocks, volts).tolist())
    if not points:
        return ()
    return tuple(np.interp(levels_mhz, [p.freq_mhz for p in points],
                           [p.voltage_v for p in points]).tolist())


def _published_volts(device: Device) -> tuple[np.ndarray, np.ndarray] | None:
    """(distinct core clocks, their voltages) from the driver's table, None where it has
    none or one govd cannot use (with a warning)."""
    try:
        volts = device.volts_by_level()
        if volts is None:
            return None
        clocks = np.asarray(device.levels_mhz, dtype=np.float64)
        volts = np.asarray(volts, dtype=np.float64)
    except (DeviceError, OSError, ValueError, TypeError) as exc:
        log.warning("%s: voltage table not read (%s); voltage taken from power.voltage or as "
                    "affine in frequency", device.name, exc)
        return None
    if volts.shape != clocks.shape or not np.all(np.isfinite(volts) & (volts > 0.0)):
        log.warning("%s: the driver's voltage table has no positive voltage per level; voltage "
                    "taken from power.voltage or as affine in frequency", device.name)
        return None
    distinct, first = np.unique(clocks, return_index=True)  # pairs repeat a core clock
    return distinct, volts[first]


def clock_levels(config: Config, device: Device) -> tuple[np.ndarray, np.ndarray | None]:
    """The levels the governor of ``device`` chooses from: (core clocks, memory clocks) of the
    device's (core, memory) pairs, or (core clocks, None) for a device with one clock domain and
    for one whose entry says ``memory_clock: off`` (its levels at the highest memory clock, where
    the memory clock stays unlocked). Units: MHz."""
    levels_mhz = np.asarray(device.levels_mhz, dtype=np.float64)
    mem_levels_mhz = device.mem_levels_mhz
    if mem_levels_mhz is None:
        return levels_mhz, None
    entry = entry_for(config, device)
    if entry is not None and entry.memory_clock == "off":
        return levels_mhz[mem_levels_mhz == mem_levels_mhz.max()], None
    return levels_mhz, np.asarray(mem_levels_mhz, dtype=np.float64)


def _prior_for(config: Config, device: Device, mem_levels_mhz: object) -> Prior | None:
    """The configured prior, if any and if it fits the device: a prior holds core-clock scaling
    curves, so a device governed over (core, memory) pairs starts without it (said once)."""
    if not config.model.prior:
        return None
    if mem_levels_mhz is not None:
        log.warning("%s: model.prior %s ignored: it is for one clock domain and this device "
                    "is governed over (core, memory) pairs", device.name, config.model.prior)
        return None
    return read_prior(config.model.prior)


def build_governor(config: Config, device: Device) -> tuple[Governor, RunnerSettings]:
    """A fresh governor for ``device`` and how its runner drives it. Raises SetupError."""
    entry = entry_for(config, device)
    policy_config = entry.policy if entry is not None and entry.policy else config.policy
    try:
        levels_mhz, mem_levels_mhz = clock_levels(config, device)
        low_mhz, high_mhz = device.bounds_mhz
    except DeviceError as exc:
        raise SetupError(f"{device.name}: {exc}") from None
    if entry is not None:
        low_mhz = max(low_mhz, entry.bounds.min_mhz or low_mhz)
        high_mhz = min(high_mhz, entry.bounds.max_mhz or high_mhz)
    target = config.target.to_target()
    try:
        governor = governor_from_config(
            # the voltage table has one voltage per distinct core clock, pairs or not
            config, levels_mhz, mem_levels_mhz, policy_config=policy_config,
            settings=model_settings(config, device_volts(config, device, np.unique(levels_mhz))),
            bounds_mhz=(low_mhz, high_mhz), prior=_prior_for(config, device, mem_levels_mhz),
        )
    except (ValueError, TypeError, LookupError, OSError) as exc:
        raise SetupError(f"{device.name}: cannot set up policy {policy_config.name!r}: {exc}") \
            from exc
    settings = RunnerSettings(
        policy=policy_config.name,
        target=target,
        apps={app: t.to_target() for app, t in config.apps.items()},
        counters=tuple(config.model.counters),
    )
    return governor, settings
