"""What a SIGHUP may change in a running daemon, and what only a restart may.

A reload applies the whole new configuration or none of it (`govd.daemon.daemon.Daemon.reload`):
policy, model, targets, bounds, ``enabled``, period, dwell, logging, metrics and the socket's
limits take effect at once; the keys below name things the daemon opened at start (the state
file, the frame source, the socket file and its group), so a reload that changes them is
refused with their names rather than half applied.
"""

from __future__ import annotations

from typing import Any

from govd.conf.schema import Config

RESTART_KEYS = (
    "state_file",
    "frames.source",
    "frames.socket.path",
    "frames.socket.group",
    "frames.mangohud.dir",
    "frames.mangohud.rescan_s",
)
"""Configuration keys whose change needs a restart of govd."""


def _value(config: Config, key: str) -> Any:
    value: Any = config
    for part in key.split("."):
        value = getattr(value, part)
    return value


def restart_keys(old: Config, new: Config) -> list[str]:
    """The `RESTART_KEYS` whose value differs between ``old`` and ``new``."""
    return [key for key in RESTART_KEYS if _value(old, key) != _value(new, key)]


def governor_changed(old: Config, new: Config) -> bool:
    """True when the governors must be rebuilt (anything they were built from changed besides
    the target, which a running governor takes as it is)."""
    return (old.model, old.policy, old.devices, old.power) != (
        new.model, new.policy, new.devices, new.power)
