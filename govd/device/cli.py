"""`govd devices`: every GPU found, its levels, the level running, and whether govd may drive it.

devfreq devices that the kernel does not call a GPU (a memory controller, a bus) are listed too,
with ``"gpu": false`` and why they are skipped unless the configuration names them.

A device with two clock domains (NVML, Ampere+) also shows its memory clocks and the one running;
its levels are then (core, memory) pairs. Why a GPU's memory clock is not governed shows in the
reason of a controllable device."""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path
from typing import Any

from govd.cli import UsageError
from govd.custody.lock import held_by_a_govd
from govd.device.base import Device, DeviceError
from govd.device.discovery import DISCOVERERS, SYS, discover_sysfs, open_found, scan

DEFAULT_LOCK_DIR = Path("/run/govd")
"""Where the shipped state file's folder keeps the locks of devices without a sysfs folder."""
_NO_BACKEND = {
    "nvidia": "governed through NVML, not sysfs",
    "nouveau": "nouveau offers no clock control govd can use",
}


def describe(device: Device) -> dict[str, Any]:
    """What `govd devices` shows for one device; a failing read becomes the reason, not a crash."""
    row: dict[str, Any] = {"name": device.name, "backend": device.backend}
    # Each part on its own: a clock that cannot be read must not hide why the device is (not)
    # governed, nor the verdict hide the levels it has.
    try:
        verdict = device.controllable()
        row["controllable"], row["reason"] = verdict.ok, verdict.reason
        if verdict.reason and held_by_a_govd(device, DEFAULT_LOCK_DIR):
            row["reason"] = "governed by a running govd now"  # its own setting, no other tool's
    except DeviceError as exc:
        row.update(controllable=False, reason=str(exc))
    try:
        levels = device.levels_mhz
        if len(levels):
            row["levels"] = len(levels)
            row["min_mhz"], row["max_mhz"] = float(levels[0]), float(levels[-1])
        reading = device.read()
        row["current_mhz"] = None if math.isnan(reading.freq_mhz) else reading.freq_mhz
        mem_levels = device.mem_levels_mhz
        if mem_levels is not None:
            row["mem_levels_mhz"] = sorted({float(m) for m in mem_levels})
            mem_mhz = reading.mem_freq_mhz
            row["current_mem_mhz"] = None if math.isnan(mem_mhz) else mem_mhz
    except DeviceError as exc:
        if row["controllable"]:  # a device that cannot be read cannot be governed either
            row.update(controllable=False, reason=str(exc))
    row["gpu"] = device.not_gpu is None
    if device.not_gpu is not None:
        row["skipped"] = f"{device.not_gpu}: governed only when a `devices:` entry names it"
    return row


def list_devices(sysfs_root: Path) -> list[dict[str, Any]]:
    """One row per device: sysfs devices (including those govd has no backend for), then, for
    the real /sys only (what `govd run` governs), the devices of every other registered
    discoverer (NVML)."""
    rows = []
    for found in scan(sysfs_root):
        if found.backend is None:
            default = f"no govd backend for driver {found.driver}"
            reason = _NO_BACKEND.get(found.driver or "", default)
            rows.append({"name": found.name, "backend": None, "driver": found.driver,
                         "controllable": False, "reason": reason, "gpu": found.gpu[0]})
        else:
            rows.append(describe(open_found(found, sysfs_root)))
    if Path(sysfs_root) != SYS:
        return rows  # as `govd run` (`find_devices`): NVML GPUs are the machine's, not the tree's
    for discoverer in DISCOVERERS:
        if discoverer is not discover_sysfs:
            rows.extend(describe(device) for device in discoverer(sysfs_root))
    return rows


def _text(row: dict[str, Any]) -> str:
    levels = "-"
    if "mem_levels_mhz" in row:
        mems = ", ".join(f"{m:g}" for m in row["mem_levels_mhz"])
        levels = f"{row['levels']} pairs {row['min_mhz']:g}–{row['max_mhz']:g} × mem {mems} MHz"
    elif "levels" in row:
        levels = f"{row['levels']} levels {row['min_mhz']:g}–{row['max_mhz']:g} MHz"
    current = row.get("current_mhz")
    running = "-" if current is None else f"{current:g} MHz"
    if current is not None and row.get("current_mem_mhz") is not None:
        running = f"{current:g}/{row['current_mem_mhz']:g} MHz"
    verdict = "controllable" if row["controllable"] else "not controllable"
    if row["reason"]:
        verdict += f" ({row['reason']})"
    if row.get("skipped"):
        verdict = f"skipped: {row['skipped']}"
    return f"{row['name']:<14} {row['backend'] or '-':<8} {levels:<28} {running:<10} {verdict}"


def run(args: argparse.Namespace) -> int:
    """Print the device list as text or JSON."""
    root = Path(args.sysfs_root)
    if not root.is_dir():
        raise UsageError(f"--sysfs-root {root}: not a directory")
    rows = list_devices(root)
    if args.json:
        print(json.dumps(rows, indent=2))
    elif not rows:
        print("no GPU found (no devfreq device, no drm card)")
    else:
        print(f"{'NAME':<14} {'BACKEND':<8} {'LEVELS':<28} {'RUNNING':<10} CONTROL")
        for row in rows:
            print(_text(row))
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Add `govd devices`."""
    parser = subparsers.add_parser(
        "devices", help="list GPUs, their levels, and whether govd can drive them"
    )
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    parser.add_argument("--sysfs-root", default=str(SYS), metavar="DIR",
                        help="sysfs tree to read (default /sys; tests point it at fixtures)")
    parser.set_defaults(func=run)
