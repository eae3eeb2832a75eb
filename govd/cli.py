"""The `govd` command line: one sub-command per module, each a thin driver.

Each module listed in `COMMANDS` defines ``register(subparsers)``, which adds its parser and sets
``func(args) -> int`` as the parser default. Errors the user can fix are printed as one line.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from importlib import import_module

from govd import __version__

COMMANDS: list[str] = [
    "govd.device.cli",
    "govd.conf.commands",
    "govd.daemon.run",
    "govd.eval.cli",
    "govd.eval.trace_cli",
    "govd.eval.features_cli",
    "govd.eval.prior_cli",
    "govd.sim.cli",
]


class UsageError(Exception):
    """A problem with what the user asked for; printed as one line, exit status 2."""


def build_parser() -> argparse.ArgumentParser:
    """The full argument parser with every sub-command."""
    parser = argparse.ArgumentParser(
        prog="govd",
        description="A user-space DVFS governor for GPUs: an online frame-time and energy "
        "model picks the clock level every tick.",
    )
    parser.add_argument("--version", action="version", version=f"govd {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for module in COMMANDS:
        import_module(module).register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `govd` console script; returns the exit status."""
    parser = build_parser()
    args = parser.parse_args(argv)
    func = getattr(args, "func", None)
    if func is None:
        parser.print_help()
        return 2
    try:
        status: int = func(args)
    except UsageError as exc:
        print(f"govd {args.command}: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    return status
