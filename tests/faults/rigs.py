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
from tests.sysfs_fixtures import KernelSysfs, amdgpu_polaris, i915_gen9, mali_panfrost, xe_lunarlake

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
    settings = RunnerSettings("fixed", Target(fps=60), {}, 0.0)
    limiter = EpisodeLimiter(logging.getLogger(LOGGER))
    return DeviceRunner(device, governor, settings, limiter), level_mhz


def devfreq_rig(root: Path) -> Rig:
    """A Mali under panfrost, found on simple_ondemand, governed at 400 MHz."""
    path, kernel = mali_panfrost(root, busy_percent=50, energy_uj=1_000_000)
    device = DevfreqDevice(path, root, kernel)
    runner, level = _runner(device, 400)
    knobs = [path / "governor", path / "min_freq", path / "max_freq", path / "userspace/set_freq"]
    return Rig(device, kernel, path / "cur_freq", path / "userspace/set_freq", knobs, level,
               runner)


def i915_rig(root: Path) -> Rig:
    """A gen9 i915 GT found unpinned (300..1150), governed at 700 MHz (min written first)."""
    path, kernel = i915_gen9(root, hwmon=True)
    device = I915Device(path, root, kernel)
    runner, level = _runner(device, 700)
    knobs = [path / "gt_min_freq_mhz", path / "gt_max_freq_mhz", path / "gt_boost_freq_mhz"]
    return Rig(device, kernel, path / "gt_act_freq_mhz", path / "gt_max_freq_mhz", knobs, level,
               runner)


def xe_rig(root: Path) -> Rig:
    """An xe GT found unpinned (400..2050), governed at 1200 MHz (min written first)."""
    path, kernel = xe_lunarlake(root)
    device = XeDevice(path, root, kernel)
    runner, level = _runner(device, 1200)
    freq0 = path / "device/tile0/gt0/freq0"
    return Rig(device, kernel, freq0 / "act_freq", freq0 / "max_freq",
               [freq0 / "min_freq", freq0 / "max_freq"], level, runner)


def amdgpu_rig(root: Path) -> Rig:
    """A Polaris found in auto, governed at its 900 MHz level (manual written first)."""
    path, kernel = amdgpu_polaris(root)
    device = AmdgpuDevice(path, root, kernel)
    runner, level = _runner(device, 900)
    dev = path / "device"
    # pp_dpm_sclk's star is the running clock, the driver's own again once back in auto
    return Rig(device, kernel, dev / "pp_dpm_sclk", dev / "pp_dpm_sclk",
               [dev / "power_dpm_force_performance_level"], level, runner)


RIGS: dict[str, Callable[[Path], Rig]] = {
    "devfreq": devfreq_rig, "i915": i915_rig, "xe": xe_rig, "amdgpu": amdgpu_rig,
}
"""Every sysfs backend's rig by backend name."""
