"""``govd run``, ``govd restore``, ``govd reload`` and ``govd status``: the daemon from the
command line."""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path
from typing import Any

from govd.cli import UsageError
from govd.conf.load import DEFAULT_CONFIG, ConfigError, load_config
from govd.conf.schema import Config, state_file_problem


def read_config(args: argparse.Namespace) -> tuple[Config, Path | None]:
    """The configuration named by ``--config`` (the defaults when there is none and the default
    file does not exist). Raises UsageError with every ``file:line`` problem."""
    path: Path | None = args.config
    if path is None and DEFAULT_CONFIG.exists():
        path = DEFAULT_CONFIG
    if path is None:
        return Config(), None
    try:
        return load_config(path, allow_insecure=args.insecure_config), path
    except ConfigError as exc:
        raise UsageError("invalid configuration:\n  " + "\n  ".join(exc.errors)) from None


def with_overrides(config: Config, args: argparse.Namespace) -> Config:
    """The configuration with what the command line sets (state file, frame socket)."""
    update: dict[str, Any] = {}
    if getattr(args, "state_file", None) is not None:
        update["state_file"] = str(Path(args.state_file).absolute())
        problem = state_file_problem(update["state_file"])  # model_copy does not validate
        if problem is not None:
            raise UsageError(f"--state-file: {problem.removeprefix('state_file ')}")
    if getattr(args, "socket", None) is not None:
        socket = config.frames.socket.model_copy(update={"path": str(args.socket)})
        update["frames"] = config.frames.model_copy(update={"socket": socket, "source": "socket"})
    return config.model_copy(update=update) if update else config


def state_file_of(args: argparse.Namespace) -> Path:
    """The state file `restore`/`status` use: ``--state-file``, else the configuration's."""
    if args.state_file is not None:
        return Path(args.state_file)
    try:
        config, _ = read_config(args)
    except UsageError as exc:
        # Putting clocks back must not depend on the configuration being valid.
        default = Config().state_file
        print(f"govd {args.command}: {exc}\n  using the default state file {default}",
              file=sys.stderr)
        return Path(default)
    return Path(config.state_file)


def run_daemon(args: argparse.Namespace) -> int:
    """Govern the GPUs until SIGTERM/SIGINT; with ``--sim``, the simulated-GPU demo."""
    from govd.daemon.footprint import keep_out

    keep_out()  # before anything imports numba
    if args.sim:
        from govd.daemon.demo import run_demo

        if args.scenario is None:
            args.scenario = DEFAULT_SCENARIO
        return run_demo(args)
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


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", type=Path, default=None,
                        help=f"configuration file (default {DEFAULT_CONFIG} when it exists)")
    parser.add_argument("--insecure-config", action="store_true",
                        help="accept a configuration writable by others than root and the user")
    parser.add_argument("--state-file", type=Path, default=None,
                        help="state file (default: the configuration's state_file)")


DEFAULT_SCENARIO = "game-medium"
MIN_SPEED, MAX_SPEED = 0.01, 1000.0
"""The simulated GPU's speeds (simulated s per wall s) the demo accepts: beyond them its clock
would stall or overflow."""


def _speed(text: str) -> float:
    value = float(text)
    if not MIN_SPEED <= value <= MAX_SPEED:
        raise argparse.ArgumentTypeError(f"must be in [{MIN_SPEED:g}, {MAX_SPEED:g}], got {text}")
    return value


def _duration(text: str) -> float:
    value = float(text)
    if not value > 0:  # also refuses nan; inf runs until stopped
        raise argparse.ArgumentTypeError(f"must be positive, got {text}")
    return value


def register(subparsers: Any) -> None:
    """Add ``run``, ``restore``, ``reload`` and ``status`` to the `govd` command line."""
    run = subparsers.add_parser("run", help="govern the GPUs (the daemon)",
                                description=run_daemon.__doc__)
    _common(run)
    run.add_argument("--sim", action="store_true",
                     help="demo: govern the built-in simulated GPU and compare with ondemand")
    run.add_argument("--speed", type=_speed, default=1.0,
                     help="with --sim: simulated seconds per wall second (e.g. 10)")
    run.add_argument("--scenario", default=None,
                     help=f"with --sim: the workload (default {DEFAULT_SCENARIO})")
    run.add_argument("--duration-s", type=_duration, default=None,
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

    back = subparsers.add_parser("restore", help="put every GPU back as govd found it",
                                 description=restore.__doc__)
    _common(back)
    back.set_defaults(func=restore)

    from govd.daemon.reload_request import request_reload

    again = subparsers.add_parser("reload", help="reload the running govd's configuration and "
                                  "wait for its answer", description=request_reload.__doc__)
    _common(again)
    again.add_argument("--pid", type=int, default=None,
                       help="the daemon's pid (default: the status file's; systemd: $MAINPID)")
    again.add_argument("--timeout-s", type=_duration, default=30.0,
                       help="how long to wait for the answer (default 30 s)")
    again.set_defaults(func=request_reload)

    from govd.daemon.status import show_status

    status = subparsers.add_parser("status", help="what the running govd is doing",
                                   description=show_status.__doc__)
    _common(status)
    status.add_argument("--json", action="store_true", help="print the status file as it is")
    status.set_defaults(func=show_status)
