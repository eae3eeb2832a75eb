"""``govd config schema``: the configuration's JSON Schema, for editors and other tools."""

from __future__ import annotations

import argparse
import json
from typing import Any

from govd.conf.schema import Config
from govd.errors import UsageError


def print_schema(args: argparse.Namespace) -> int:
    """Print the configuration's JSON Schema (for editors and other tools)."""
    print(json.dumps(Config.model_json_schema(), indent=2))
    return 0


def register(subparsers: Any) -> None:
    """Add ``config`` to the `govd` command line."""
    config = subparsers.add_parser("config", help="configuration tools")
    actions = config.add_subparsers(dest="config_command", metavar="ACTION")
    schema = actions.add_parser("schema", help="print the JSON Schema of the configuration")
    schema.set_defaults(func=print_schema)
    config.set_defaults(func=_need_action)


def _need_action(args: argparse.Namespace) -> int:
    raise UsageError("say what to do: govd config schema")
