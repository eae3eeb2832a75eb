"""``govd restore``: put every GPU back as govd found it."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from govd.commands.options import add_common, state_file_of


def restore(args: argparse.Namespace) -> int:
    """Put every device govd holds no more back as govd found it: those of the state file, and
    of the `govd measure` state files beside it, whose govd process is dead; remove the files."""
    from govd.custody.custody import restore_custody
    from govd.custody.state_file import StateFileError

    path = state_file_of(args)
    try:
        done = restore_custody(path)
    except StateFileError as exc:
        print(f"govd restore: {exc}", file=sys.stderr)
        return 1
    if not done.devices and not done.failures:
        print(f"govd restore: {path}: nothing to restore")
        return 0
    for line in done.failures:
        print(f"govd restore: could not restore {line}", file=sys.stderr)
    if done.failures:
        print(f"govd restore: what could not be put back is kept beside {path}; run again once "
              "the device is back", file=sys.stderr)
        return 1
    print(f"govd restore: {len(done.restored)} device(s) restored from {path}")
    return 0


def register(subparsers: Any) -> None:
    """Add ``restore`` to the `govd` command line."""
    back = subparsers.add_parser("restore", help="put every GPU back as govd found it",
                                 description=restore.__doc__)
    add_common(back)
    back.set_defaults(func=restore)
