"""``govd status``: what the running govd is doing, read from its status file."""

from __future__ import annotations

import argparse
import json
from typing import Any

from govd.commands.options import add_common, state_file_of
from govd.daemon.status import MAX_STATUS_BYTES, status_lines, status_path
from govd.errors import UsageError
from govd.formats.regular_file import read_regular_text


def show_status(args: argparse.Namespace) -> int:
    """Print the running daemon's status (``--json``: the file as it is)."""
    path = status_path(state_file_of(args))
    try:
        text = read_regular_text(path, MAX_STATUS_BYTES)
        status = json.loads(text)
    except FileNotFoundError:
        raise UsageError(f"{path}: no status file; is govd running?") from None
    except OSError as exc:
        raise UsageError(f"{path}: cannot read the status: {exc.strerror}") from None
    except ValueError as exc:
        raise UsageError(f"{path}: cannot read the status: {exc}") from None
    if args.json:
        print(text, end="")
        return 0
    try:
        lines = status_lines(status)
    except (AttributeError, KeyError, TypeError, ValueError) as exc:
        raise UsageError(f"{path}: not a govd status file ({type(exc).__name__}: {exc})") \
            from None
    print("\n".join(lines))
    return 0


def register(subparsers: Any) -> None:
    """Add ``status`` to the `govd` command line."""
    status = subparsers.add_parser("status", help="what the running govd is doing",
                                   description=show_status.__doc__)
    add_common(status)
    status.add_argument("--json", action="store_true", help="print the status file as it is")
    status.set_defaults(func=show_status)
