"""What several commands share: the configuration and state-file options of `govd run`,
`restore`, `reload`, `status` and `measure`, and the check for an optional package."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from govd.conf.load import DEFAULT_CONFIG, ConfigError, load_config
from govd.conf.schema import Config, state_file_problem
from govd.errors import UsageError


def add_common(parser: argparse.ArgumentParser) -> None:
    """``--config``, ``--insecure-config`` and ``--state-file``, as the daemon's commands
    spell them."""
    parser.add_argument("--config", type=Path, default=None,
                        help=f"configuration file (default {DEFAULT_CONFIG} when it exists)")
    parser.add_argument("--insecure-config", action="store_true",
                        help="accept a configuration writable by others than root and the user")
    parser.add_argument("--state-file", type=Path, default=None,
                        help="state file (default: the configuration's state_file)")


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


def positive_duration(text: str) -> float:
    """An argparse type: a positive number of seconds (``inf`` allowed, ``nan`` refused)."""
    value = float(text)
    if not value > 0:  # also refuses nan; inf runs until stopped
        raise argparse.ArgumentTypeError(f"must be positive, got {text}")
    return value


def needs_extra(module: str, extra: str, command: str) -> None:
    """Raise UsageError unless the optional ``module`` (from govd's ``extra``) can be imported:
    offline commands use packages the daemon does not install."""
    from importlib.util import find_spec

    if find_spec(module) is None:
        raise UsageError(f"{command} needs {module}, which is not installed "
                         f"(pip install 'govd[{extra}]')")
