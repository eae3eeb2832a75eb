"""One `DeviceRunner` per sysfs backend over a fixture tree, with the files faults are aimed at.

Each rig names the file every `read()` touches, the file `set_level`'s last write goes to, and the
knob files whose content is the state govd changes (so a test can tell whether it was restored).
The runner drives the real `fixed` policy, so the level it writes is known in advance.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from govd.daemon.device_runner import DeviceRunner, RunnerSettings
from govd.device.amdgpu import AmdgpuDevice
from govd.device.devfreq import DevfreqDevice
from govd.device.i915 import I915Device
from govd.device.sysfs import SysfsDevice, nearest_level
from govd.device.xe import XeDevice
from govd.governor import Governor
from govd.model.settings import ModelSettings
from govd.policy.static import Fixed
from govd.target import Target
from govd.telemetry.log import EpisodeLimiter
from tests.amdgpu_cards import hand_written
from tests.sysfs_fixtures import (
    KernelSysfs,
    amdgpu_navi21,
    amdgpu_polaris,
    i915_gen9,
    mali_panfrost,
    xe_lunarlake,
)

PERIOD_S = 0.05
LOGGER = "govd.test.faults"


@dataclass
class Rig:
    """A fixture device, its kernel double, and a runner governing it at ``level_mhz``."""

    device: SysfsDevice
    kernel: KernelSysfs
    read_file: Path
    """A file every `read()` reads."""
    write_file: Path
    """The file `set_level` writes last (the level itself)."""
    knobs: list[Path]
    """Files holding the state govd changes and `restore` puts back."""
    level_mhz: float
    """The level the runner's policy picks. Units: MHz."""
    runner: DeviceRunner

    def knob_state(self) -> dict[str, str | None]:
        """Each knob's content, None where the file does not exist."""
        return {self.kernel.rel(p): p.read_text().strip() if p.exists() else None
                for p in self.knobs}

    def tick(self, now_s: float, count: int = 1) -> None:
        """``count`` loop ticks from ``now_s`` (s), one period apart, without frames."""
        for k in range(count):
            self.runner.tick(now_s + k * PERIOD_S, PERIOD_S, [])


def _runner(device: SysfsDevice, wanted_mhz: float) -> tuple[DeviceRunner, float]:
    levels = device.levels_mhz
    level_mhz = nearest_level(levels, wanted_mhz)
    device.save()  # the daemon saves before its first write
    governor = Governor(levels, Fixed(level_mhz), Target(fps=60), ModelSettings())
    settings = RunnerSettings("fixed", Target(fps=60), {})
    limiter = EpisodeLimiter(logging.getLogger(LOGGER))
    return DeviceRunner(device, governor, settings, limiter), level_mhz


def _rig(
    root: Path, fixture: Callable[[Path], tuple[Path, KernelSysfs]], device_type: type[SysfsDevice],
    wanted_mhz: float, read_rel: str, write_rel: str, knob_rels: list[str],
) -> Rig:
    """A rig from a fixture tree; file names are relative to the device's directory."""
    path, kernel = fixture(root)
    device = device_type(path, root, kernel)
    runner, level = _runner(device, wanted_mhz)
    return Rig(device, kernel, path / read_rel, path / write_rel,
               [path / rel for rel in knob_rels], level, runner)


def devfreq_rig(root: Path) -> Rig:
    """A Mali under panfrost, found on simple_ondemand, governed at 400 MHz."""
    return _rig(root, lambda r: mali_panfrost(r, busy_percent=50, energy_uj=1_000_000),
                DevfreqDevice, 400, "cur_freq", "userspace/set_freq",
                ["governor", "min_freq", "max_freq", "userspace/set_freq"])


def i915_rig(root: Path) -> Rig:
    """A gen9 i915 GT found unpinned (300..1150), governed at 700 MHz (min written first)."""
    return _rig(root, lambda r: i915_gen9(r, hwmon=True), I915Device, 700, "gt_act_freq_mhz",
                "gt_max_freq_mhz", ["gt_min_freq_mhz", "gt_max_freq_mhz", "gt_boost_freq_mhz"])


XE_FREQ0 = "device/tile0/gt0/freq0"


def xe_rig(root: Path) -> Rig:
    """An xe GT found unpinned (400..2050), governed at 1200 MHz (min written first)."""
    return _rig(root, xe_lunarlake, XeDevice, 1200, f"{XE_FREQ0}/act_freq",
                f"{XE_FREQ0}/max_freq", [f"{XE_FREQ0}/min_freq", f"{XE_FREQ0}/max_freq"])


def amdgpu_rig(root: Path) -> Rig:
    """A Polaris found in auto, governed at its 900 MHz level (manual written first).
    pp_dpm_sclk is no knob: its star is the running clock, the driver's own again in auto."""
    return _rig(root, amdgpu_polaris, AmdgpuDevice, 900, "device/pp_dpm_sclk",
                "device/pp_dpm_sclk", ["device/power_dpm_force_performance_level"])


def amdgpu_od_rig(root: Path) -> Rig:
    """An RDNA2 with overdrive found in auto (OD_SCLK 500..2660), pinned at 1500 MHz through
    pp_od_clk_voltage (its last write is the commit, "c")."""
    return _rig(root, amdgpu_navi21, AmdgpuDevice, 1500, "device/pp_dpm_sclk",
                "device/pp_od_clk_voltage",
                ["device/power_dpm_force_performance_level", "device/pp_od_clk_voltage"])


def amdgpu_apu_rig(root: Path) -> Rig:
    """A Steam Deck before Linux 6.17 found in auto (pp_od_clk_voltage empty outside manual),
    pinned at 800 MHz."""
    return _rig(root, lambda r: hand_written(r, "deck")[:2], AmdgpuDevice, 800,
                "device/pp_dpm_sclk", "device/pp_od_clk_voltage",
                ["device/power_dpm_force_performance_level", "device/pp_od_clk_voltage"])


RIGS: dict[str, Callable[[Path], Rig]] = {
    "devfreq": devfreq_rig, "i915": i915_rig, "xe": xe_rig, "amdgpu": amdgpu_rig,
    "amdgpu_od": amdgpu_od_rig, "amdgpu_apu": amdgpu_apu_rig,
}
"""Every sysfs backend's rig by backend name."""
