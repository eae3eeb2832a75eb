"""The shipped config/govd.yaml: parses to the defaults and documents every key."""

from __future__ import annotations

import re
import typing
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel

from govd.conf import Config, load_config

SHIPPED = Path(__file__).resolve().parents[2] / "config" / "govd.yaml"


def _models_in(annotation: Any) -> list[type[BaseModel]]:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return [m for arg in typing.get_args(annotation) for m in _models_in(arg)]


def _fields(model: type[BaseModel], path: tuple[str, ...], direct: bool):
    """(path, direct) for every field reachable from ``model``; ``direct`` is False below a
    list or dict, where the shipped file can only show the key in a commented example."""
    for name, info in model.model_fields.items():
        yield (*path, name), direct
        container = typing.get_origin(info.annotation) in (list, dict)
        for inner in _models_in(info.annotation):
            yield from _fields(inner, (*path, name), direct and not container)


def test_shipped_config_parses_to_the_defaults() -> None:
    assert load_config(SHIPPED, allow_insecure=True) == Config()


def test_every_field_is_in_the_shipped_config() -> None:
    text = SHIPPED.read_text()
    data = yaml.safe_load(text)
    absent = object()
    undocumented = []
    for path, direct in _fields(Config, (), True):
        node: Any = data
        for key in path:
            node = node.get(key, absent) if isinstance(node, dict) else absent
        if direct and node is not absent:
            continue
        # Keys that cannot all be set at once (target's fps / max_slowdown) and keys of list or
        # dict entries (empty by default) must at least appear in a commented example.
        commented = rf"^\s*#.*(^|[\s{{,-]){re.escape(path[-1])}:"
        if not re.search(commented, text, re.MULTILINE):
            undocumented.append(".".join(path))
    assert undocumented == []


def test_every_section_has_a_comment() -> None:
    lines = SHIPPED.read_text().splitlines()
    for key in Config.model_fields:
        at = next(i for i, line in enumerate(lines) if line.startswith(f"{key}:"))
        assert lines[at - 1].startswith("#") or "#" in lines[at], key
