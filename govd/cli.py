"""The `govd` command line's entry point: one sub-command per module of `govd.commands`.

`COMMANDS` maps each sub-command to the module that defines ``register(subparsers)``, which adds
its parser and sets ``func(args) -> int`` as the parser default. Only the module of the
command asked for is imported: `govd status` or `govd restore` then starts in a fraction of a
second and loads no compiled kernels (numba needs a writable cache folder, which an ordinary user
without a home may lack). Errors the user can fix are printed as one line.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import sys
from collections.abc import Sequence
from importlib import import_module

from govd import __version__
from govd.custody.signals import held_stops
from govd.errors import UsageError

COMMANDS: dict[str, str] = {
    "devices": "govd.commands.devices",
    "check-config": "govd.commands.check_config",
    "config": "govd.commands.config",
    "run": "govd.commands.run",
    "restore": "govd.commands.restore",
    "reload": "govd.commands.reload",
    "status": "govd.commands.status",
    "eval": "govd.commands.eval",
    "replay": "govd.commands.replay",
    "select-features": "govd.commands.select_features",
    "fit-prior": "govd.commands.fit_prior",
    "sim": "govd.commands.sim",
    "measure": "govd.commands.measure",
}
"""Sub-command name → the module in `govd.commands` that registers it."""


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The argument parser: with ``command`` one of `COMMANDS`, only that command's module is
    imported and registered; otherwise every sub-command (for ``--help``)."""
    parser = argparse.ArgumentParser(
        prog="govd",
        description="A user-space DVFS governor for GPUs: an online frame-time and energy "
        "model picks the clock level every tick.",
    )
    parser.add_argument("--version", action="version", version=f"govd {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    modules = [COMMANDS[command]] if command in COMMANDS else COMMANDS.values()
    for module in dict.fromkeys(modules):
        import_module(module).register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `govd` console script; returns the exit status."""
    args_list = sys.argv[1:] if argv is None else list(argv)
    command = next((a for a in args_list if not a.startswith("-")), None)
    try:
        # Ctrl-C while the command's module imports (numba, pydantic: the first fraction of a
        # second) is held until they have imported, then raised again: it ends quietly too.
        with held_stops():
            parser = build_parser(command)
            args = parser.parse_args(args_list)
        func = getattr(args, "func", None)
        if func is None:
            parser.print_help()
            return 2
        status: int = func(args)
        sys.stdout.flush()
    except UsageError as exc:
        print(f"govd {command}: {exc}", file=sys.stderr)  # measure's args.command is its CMD
        return 2
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # `govd status | head`: the reader left. Nothing more can be said to it; the rest of
        # the output goes nowhere so that the flush at exit does not raise again.
        _stdout_to_devnull()
        return 128 + signal.SIGPIPE  # as a shell reports a process ended by SIGPIPE
    except ImportError as exc:
        # govd.model.kernels refuses the kernel mode asked for (GOVD_KERNELS unknown, or aot
        # without a fresh extension) in one line of its own, at import.
        if not str(exc).startswith("GOVD_KERNELS="):
            raise
        print(f"govd {command}: {exc}", file=sys.stderr)
        return 2
    return status


def _stdout_to_devnull() -> None:
    with contextlib.suppress(OSError, ValueError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
