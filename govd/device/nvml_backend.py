"""The ``nvml`` backend's registration (`govd.device.registry`), apart from `govd.device.nvml`
so that naming the backend imports no pynvml: a machine without the NVIDIA driver pays nothing
for it until devices are looked for."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from govd.device.base import Device
from govd.device.registry import Backend


def _discover(_sysfs_root: Path) -> list[Device]:
    from govd.device import nvml

    return list(nvml.discover_nvml())


def _reopen(saved: dict[str, Any], _sysfs_root: Path) -> Device:
    from govd.device import nvml

    return nvml.NvmlDevice.from_saved(saved)


BACKEND = Backend("nvml", discover=_discover, reopen=_reopen)
