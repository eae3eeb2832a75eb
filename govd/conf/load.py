"""Loading the configuration: permissions, YAML, validation; errors as ``file:line: path: msg``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from govd.conf.document import Document, DocumentError, read_document
from govd.conf.schema import Config
from govd.conf.trust import trust_problems
from govd.formats.regular_file import read_regular

DEFAULT_CONFIG = Path("/etc/govd/govd.yaml")
"""The configuration every govd command reads when none is named and this one exists."""
MAX_CONFIG_BYTES = 1 << 20
"""A configuration file larger than this is refused (1 MiB)."""


class ConfigError(Exception):
    """The configuration cannot be used; ``errors`` holds one ``file:line: path: message`` line
    per problem (``file:line: message`` where no field is concerned)."""

    def __init__(self, errors: list[str]) -> None:
        super().__init__("\n".join(errors))
        self.errors = errors


def _key_text(key: str) -> str:
    # A key that is empty or holds spaces or control characters (a stray "\r") is quoted, so
    # every error stays one readable "file:line: path: message" line.
    if key and key.isprintable() and not any(ch.isspace() for ch in key):
        return key
    return repr(key)


def _path_text(loc: tuple[str | int, ...]) -> str:
    text = ""
    for part in loc:
        if isinstance(part, int):
            text += f"[{part}]"
        else:
            text += f".{_key_text(part)}" if text else _key_text(part)
    return text or "(top level)"


def _fields_at(loc: tuple[str | int, ...]) -> list[str]:
    """The keys the model at ``loc`` accepts (empty when ``loc`` is not a model)."""
    model: Any = Config
    for part in loc:
        if isinstance(part, int):
            continue  # list items: the model is the item type, found through the annotation
        if not (isinstance(model, type) and issubclass(model, BaseModel)):
            return []
        info = model.model_fields.get(str(part))
        if info is None:
            return []
        model = _item_model(info.annotation)
    if isinstance(model, type) and issubclass(model, BaseModel):
        return list(model.model_fields)
    return []


def _item_model(annotation: Any) -> Any:
    """The BaseModel inside ``X | None`` or ``list[X]`` (dict values are not followed)."""
    for arg in (annotation, *getattr(annotation, "__args__", ())):
        if isinstance(arg, type) and issubclass(arg, BaseModel):
            return arg
        inner = getattr(arg, "__args__", ())
        if getattr(arg, "__origin__", None) is list and inner:
            return _item_model(inner[0])
    return None


def _message(error: Any) -> str:
    loc = tuple(error["loc"])
    if error["type"] == "extra_forbidden":
        allowed = _fields_at(loc[:-1])
        return "unknown key" + (f" (allowed: {', '.join(allowed)})" if allowed else "")
    if error["type"] == "missing":
        return "required key is missing"
    message = str(error["msg"]).removeprefix("Value error, ")
    value = error.get("input")
    if error["type"] in _TEXT_EXPECTED and isinstance(value, bool | int | float):
        # YAML 1.1 reads unquoted off/on/yes/no as booleans and 0000 as a number: without
        # this, `memory_clock: off` reads "should be 'auto' or 'off'", which baffles.
        kind = "boolean" if isinstance(value, bool) else "number"
        message += f" (YAML read the unquoted value as the {kind} {value!r}: quote it)"
    return message


_TEXT_EXPECTED = frozenset({"literal_error", "string_type"})
"""pydantic error types where text was expected."""


def parse_config(text: str, source: str = "<config>") -> Config:
    """Validate the YAML ``text``; ``source`` names it in error lines. Raises `ConfigError`."""
    try:
        doc: Document = read_document(text)
    except DocumentError as exc:
        raise ConfigError([f"{source}:{exc.line}: {exc.message}"]) from None
    found = [(line, f"{_path_text(path)}: duplicate key") for path, line in doc.duplicates]
    config = None
    if not isinstance(doc.data, dict):
        found.append((doc.line_of(()), "the configuration must be a mapping of keys"))
    else:
        try:
            config = Config.model_validate(doc.data)
        except ValidationError as exc:
            for error in exc.errors():
                loc = tuple(p if isinstance(p, int) else str(p) for p in error["loc"])
                found.append((doc.line_of(loc), f"{_path_text(loc)}: {_message(error)}"))
    if found or config is None:
        found.sort(key=lambda item: item[0])  # stable: same-line errors keep pydantic's order
        raise ConfigError([f"{source}:{line}: {text}" for line, text in found])
    return config


def check_permissions(path: Path) -> list[str]:
    """Why the configuration at ``path`` may not be trusted (`govd.conf.trust`: the file and
    every folder up to ``/``, as sshd's StrictModes). Empty when fine."""
    return trust_problems(path, "configuration")


def load_config(path: str | Path, allow_insecure: bool = False) -> Config:
    """Read and validate the configuration file at ``path``. Raises `ConfigError` on any problem:
    unreadable, unsafe permissions (unless ``allow_insecure``), bad YAML, invalid values."""
    path = Path(path)
    try:
        problems = [] if allow_insecure else check_permissions(path)
        if problems:
            # One self-contained line per problem: the daemon's journal shows each on its own.
            raise ConfigError([
                f"{path}:1: refusing an unsafe configuration: {p}; fix the ownership/mode, "
                "or pass --insecure-config" for p in problems
            ])
        raw = read_regular(path, MAX_CONFIG_BYTES)
    except OSError as exc:
        raise ConfigError([f"{path}:1: cannot read: {exc.strerror}"]) from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise ConfigError([f"{path}:{line}: not UTF-8 text"]) from None
    return parse_config(text, str(path))
