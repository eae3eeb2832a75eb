"""Whatever the file holds, loading gives a Config or a ConfigError, never another exception."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from govd.conf import Config, ConfigError, parse_config

SHIPPED_LINES = (Path(__file__).resolve().parents[2] / "config" / "govd.yaml").read_text().split(
    "\n"
)
DEFAULT_DATA = Config().model_dump()
ERROR_LINE = re.compile(r"^f\.yaml:\d+: \S")

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**20), max_value=10**20),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=12),
)
values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4)
    | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)
yamlish = st.text(alphabet=":-[]{}#&*!|>'\"\n\t ,?%@`abdefmpsy0129.eE_", max_size=120)


@st.composite
def mutated_default(draw: st.DrawFn) -> str:
    lines = list(SHIPPED_LINES)
    for _ in range(draw(st.integers(1, 4))):
        at = draw(st.integers(0, len(lines) - 1))
        op = draw(st.sampled_from(["delete", "duplicate", "replace_value", "insert", "indent"]))
        if op == "delete":
            del lines[at]
        elif op == "duplicate":
            lines.insert(at, lines[at])
        elif op == "replace_value" and ":" in lines[at]:
            key = lines[at].split(":", 1)[0]
            lines[at] = f"{key}: {yaml.safe_dump(draw(values), default_flow_style=True).strip()}"
        elif op == "insert":
            lines.insert(at, draw(yamlish))
        else:
            lines[at] = " " * draw(st.integers(0, 5)) + lines[at].lstrip()
    return "\n".join(lines)


@st.composite
def default_with_replaced_value(draw: st.DrawFn) -> str:
    data: Any = yaml.safe_load(yaml.safe_dump(DEFAULT_DATA))
    node = data
    path = draw(st.lists(st.sampled_from(sorted({k for k in _keys(DEFAULT_DATA)})), max_size=3))
    for key in path[:-1]:
        if isinstance(node, dict) and isinstance(node.get(key), dict):
            node = node[key]
    node[path[-1] if path else draw(st.text(max_size=8))] = draw(values)
    return yaml.safe_dump(data)


def _keys(data: Any) -> set[str]:
    if not isinstance(data, dict):
        return set()
    return set(data) | {k for v in data.values() for k in _keys(v)}


def _loads_or_reports(text: str) -> None:
    try:
        config = parse_config(text, "f.yaml")
    except ConfigError as exc:
        assert exc.errors and all(ERROR_LINE.match(line) for line in exc.errors), exc.errors
    else:
        assert isinstance(config, Config)


@settings(max_examples=150, deadline=None)
@given(yamlish)
def test_random_yamlish_text_loads_or_reports(text: str) -> None:
    _loads_or_reports(text)


@settings(max_examples=150, deadline=None)
@given(mutated_default())
def test_mutated_default_config_loads_or_reports(text: str) -> None:
    _loads_or_reports(text)


@settings(max_examples=100, deadline=None)
@given(default_with_replaced_value())
def test_default_with_random_values_loads_or_reports(text: str) -> None:
    _loads_or_reports(text)


@settings(max_examples=150, deadline=None)
@given(st.text(max_size=60))
def test_any_unicode_text_loads_or_reports(text: str) -> None:
    _loads_or_reports(text)
