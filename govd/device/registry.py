"""Device backends by name, as policies are (`govd.policy.registry`): govd's own and third
parties' (an entry point in the ``govd.backends`` group naming a `Backend`).

A backend registers with one `Backend` line in its own module and one line here::

    BACKEND = Backend("amdgpu", sysfs_class=AmdgpuDevice)       # in govd/device/amdgpu.py
    "amdgpu": "govd.device.amdgpu:BACKEND",                     # in _BUILTIN below

A sysfs backend (``sysfs_class``) drives the drm cards whose bound driver has its name (the
backend ``devfreq`` drives every devfreq device); discovery finds them, and reopens them from
saved state. Any other backend (NVML) finds its own devices (``discover``) and reopens them
(``reopen``). The names are known without importing any backend (`available`: the
configuration checks ``devices[].backend`` against them).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from govd.plugins import Registry

if TYPE_CHECKING:  # the backends' modules import this one to declare themselves
    from govd.device.base import Device
    from govd.device.sysfs import SysfsDevice

GROUP = "govd.backends"

_BUILTIN = {
    "devfreq": "govd.device.devfreq:BACKEND",
    "i915": "govd.device.i915:BACKEND",
    "xe": "govd.device.xe:BACKEND",
    "amdgpu": "govd.device.amdgpu:BACKEND",
    "nvml": "govd.device.nvml_backend:BACKEND",
}
"""govd's own backends, so that a source checkout that is not pip-installed still finds them."""


@dataclass(frozen=True, slots=True)
class Backend:
    """A registered backend: its name and how its devices are found and reopened."""

    name: str
    sysfs_class: type[SysfsDevice] | None = None
    """The class of its devices when they live in sysfs (found by discovery's scan)."""
    discover: Callable[[Path], list[Device]] | None = None
    """For a backend outside sysfs: every device of it on this machine (the path is the sysfs
    root, which such a backend ignores)."""
    reopen: Callable[[dict[str, Any], Path], Device] | None = None
    """For a backend outside sysfs: the device a ``save()`` described (its sysfs root)."""


class UnknownBackendError(LookupError):
    """No backend of that name is built in or registered."""


_REGISTRY = Registry(GROUP, _BUILTIN, "backend", UnknownBackendError, kind=Backend)


def available() -> list[str]:
    """Names of every backend: govd's own in their order, then the registered ones."""
    return _REGISTRY.available()


def backend(name: str) -> Backend:
    """The backend registered under ``name``; a built-in cannot be shadowed by a plugin."""
    found: Backend = _REGISTRY.load(name)
    return found


def backends() -> list[Backend]:
    """Every registered backend, govd's own first."""
    return [backend(name) for name in available()]
