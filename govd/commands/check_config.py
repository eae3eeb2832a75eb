"""``govd check-config FILE``: run the checks `govd run` runs on a configuration file."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from govd.conf.load import ConfigError, load_config


def check_config(args: argparse.Namespace) -> int:
    """Run the checks `govd run` runs at start and on SIGHUP (the schema, then each policy
    built, the prior read, the metrics address, a governor for each device found under
    ``--sysfs-root``); print ``FILE: ok``, or each problem as one line; 1 when there are any."""
    # The daemon's layer, imported here only: `govd config schema` needs none of it.
    from govd.daemon.device_runner import close_device
    from govd.daemon.governed import find_devices, select
    from govd.daemon.validate import ConfigRefused, check_applicable

    try:
        config = load_config(args.file, allow_insecure=args.insecure_config)
    except ConfigError as exc:
        return _problems(exc.errors)
    found = find_devices(args.sysfs_root)
    try:
        check_applicable(config, select(config, found))
    except ConfigRefused as exc:
        return _problems([f"{args.file}: {line}" for line in exc.errors])
    finally:
        for device in found:
            close_device(device)  # an NVML handle; nothing was written
    print(f"{args.file}: ok")
    return 0


def _problems(lines: list[str]) -> int:
    for line in lines:
        print(line, file=sys.stderr)
    return 1


def register(subparsers: Any) -> None:
    """Add ``check-config`` to the `govd` command line."""
    check = subparsers.add_parser(
        "check-config", help="validate a configuration file", description=check_config.__doc__
    )
    check.add_argument("file", help="the YAML configuration file")
    check.add_argument(
        "--insecure-config",
        action="store_true",
        help="accept a file or folder writable by others than root and the user",
    )
    check.add_argument("--sysfs-root", type=Path, default=Path("/sys"),
                       help="check against the devices found under this sysfs root")
    check.set_defaults(func=check_config)
