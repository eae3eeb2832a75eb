"""``govd run``: govern the GPUs (the daemon); with ``--sim``, the simulated-GPU demo."""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path
from typing import Any

from govd.commands.options import add_common, positive_duration, read_config, with_overrides
from govd.conf.schema import Config
from govd.errors import UsageError


def run_daemon(args: argparse.Namespace) -> int:
    """Govern the GPUs until SIGTERM/SIGINT; with ``--sim``, the simulated-GPU demo."""
    from govd.daemon.footprint import keep_out

    keep_out()  # before anything imports numba
    if args.sim:
        from govd.daemon.demo import run_demo

        if args.scenario is None:
            args.scenario = DEFAULT_SCENARIO
        config, path = read_config(args) if args.config is not None else (Config(), None)
        return run_demo(args, config, path)
    only_sim = [flag for flag, given in (("--speed", args.speed != 1.0),
                                         ("--scenario", args.scenario is not None),
                                         ("--duration-s", args.duration_s is not None)) if given]
    if only_sim:
        raise UsageError(f"{', '.join(only_sim)} only appl{'ies' if len(only_sim) == 1 else 'y'} "
                         "to --sim")
    if args.record is not None and not args.record.absolute().parent.is_dir():
        raise UsageError(f"--record {args.record}: its folder does not exist")
    if args.report is not None or args.no_frames:
        raise UsageError("--report and --no-frames only apply to --sim")
    from govd.custody.signals import held_stops

    # A stop while the daemon's modules import and its configuration is read is held for the
    # daemon's signal flags: it stops before taking any device (`held_stops`).
    with held_stops():
        return _govern(args)


def _govern(args: argparse.Namespace) -> int:
    """The daemon proper: `run_daemon` without ``--sim``."""
    from govd.custody.state_file import StateFileError
    from govd.daemon.daemon import Daemon, Options, StartError
    from govd.daemon.governed import SetupError
    from govd.daemon.status import status_path
    from govd.telemetry.log import setup_logging

    config, path = read_config(args)
    config = with_overrides(config, args)
    setup_logging(config.logging.level)
    from govd.kernels.loader import log_mode

    log_mode(logging.getLogger("govd.daemon"))
    options = Options(
        config=config, config_path=path, insecure_config=args.insecure_config,
        sysfs_root=args.sysfs_root, record=args.record,
        status_file=status_path(Path(config.state_file)),
        overrides=lambda reread: with_overrides(reread, args),
    )
    try:
        return Daemon(options).run()
    except (StartError, SetupError, StateFileError) as exc:
        for line in str(exc).splitlines():
            logging.getLogger("govd.daemon").error("%s", line)
            print(f"govd run: {line}", file=sys.stderr)
        return 1


DEFAULT_SCENARIO = "game-medium"
MIN_SPEED, MAX_SPEED = 0.01, 1000.0
"""The simulated GPU's speeds (simulated s per wall s) the demo accepts: beyond them its clock
would stall or overflow."""


def _speed(text: str) -> float:
    value = float(text)
    if not MIN_SPEED <= value <= MAX_SPEED:
        raise argparse.ArgumentTypeError(f"must be in [{MIN_SPEED:g}, {MAX_SPEED:g}], got {text}")
    return value


def register(subparsers: Any) -> None:
    """Add ``run`` to the `govd` command line."""
    run = subparsers.add_parser("run", help="govern the GPUs (the daemon)",
                                description=run_daemon.__doc__)
    add_common(run)
    run.add_argument("--sim", action="store_true",
                     help="demo: govern the built-in simulated GPU and compare with ondemand")
    run.add_argument("--speed", type=_speed, default=1.0,
                     help="with --sim: simulated seconds per wall second (e.g. 10)")
    run.add_argument("--scenario", default=None,
                     help=f"with --sim: the workload (default {DEFAULT_SCENARIO})")
    run.add_argument("--duration-s", type=positive_duration, default=None,
                     help="with --sim: simulated seconds to run (default 600)")
    run.add_argument("--no-frames", action="store_true",
                     help="with --sim: the simulated application reports no frames")
    run.add_argument("--report", type=Path, default=None,
                     help="with --sim: write the comparison with the twins as JSON to this file")
    run.add_argument("--record", type=Path, default=None,
                     help="write a run trace CSV (time_s,frame_time_ms,frame_count,freq_mhz,...)")
    run.add_argument("--sysfs-root", type=Path, default=Path("/sys"),
                     help="look for devices under this sysfs root (fixtures, simulators)")
    run.add_argument("--socket", type=Path, default=None,
                     help="frame socket path (overrides frames.socket.path; source socket)")
    run.set_defaults(func=run_daemon)
