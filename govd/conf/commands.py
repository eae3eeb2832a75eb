"""``govd check-config FILE`` and ``govd config schema``: the configuration from the shell."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from govd.cli import UsageError
from govd.conf.load import ConfigError, load_config
from govd.conf.schema import Config


def check_config(args: argparse.Namespace) -> int:
    """Print ``FILE: ok``, or each problem as ``file:line: path: message``; 1 when there are any."""
    try:
        load_config(args.file, allow_insecure=args.insecure_config)
    except ConfigError as exc:
        for line in exc.errors:
            print(line, file=sys.stderr)
        return 1
    print(f"{args.file}: ok")
    return 0


def print_schema(args: argparse.Namespace) -> int:
    """Print the configuration's JSON Schema (for editors and other tools)."""
    print(json.dumps(Config.model_json_schema(), indent=2))
    return 0


def register(subparsers: Any) -> None:
    """Add ``check-config`` and ``config`` to the `govd` command line."""
    check = subparsers.add_parser(
        "check-config", help="validate a configuration file", description=check_config.__doc__
    )
    check.add_argument("file", help="the YAML configuration file")
    check.add_argument(
        "--insecure-config",
        action="store_true",
        help="accept a file or folder writable by others than root and the user",
    )
    check.set_defaults(func=check_config)

    config = subparsers.add_parser("config", help="configuration tools")
    actions = config.add_subparsers(dest="config_command", metavar="ACTION")
    schema = actions.add_parser("schema", help="print the JSON Schema of the configuration")
    schema.set_defaults(func=print_schema)
    config.set_defaults(func=_need_action)


def _need_action(args: argparse.Namespace) -> int:
    raise UsageError("say what to do: govd config schema")
