"""A configuration value that names something registered (a device backend, a frame source):
checked against the registry when the file is read, not against a list kept here, so that a
backend or source registered by its own module (or a third party's entry point) is accepted
without an edit to the schema."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pydantic import GetCoreSchemaHandler, GetJsonSchemaHandler
from pydantic_core import PydanticCustomError, core_schema


class RegisteredName:
    """Pydantic annotation (``Annotated[str, RegisteredName(names)]``): a string among
    ``names()``, refused with the message and JSON Schema (``enum``) a ``Literal`` of those
    names gives."""

    def __init__(self, names: Callable[[], list[str]]) -> None:
        self.names = names

    def _check(self, value: Any) -> str:
        names = self.names()
        if isinstance(value, str) and value in names:
            return value
        quoted = [repr(name) for name in names]
        expected = (" or ".join(quoted) if len(quoted) <= 2
                    else f"{', '.join(quoted[:-1])} or {quoted[-1]}")
        raise PydanticCustomError("literal_error", "Input should be {expected}",
                                  {"expected": expected})

    def __get_pydantic_core_schema__(self, source: Any,
                                     handler: GetCoreSchemaHandler) -> core_schema.CoreSchema:
        """Validate by `_check`, whatever the input's type (as a ``Literal`` does)."""
        return core_schema.no_info_plain_validator_function(self._check)

    def __get_pydantic_json_schema__(self, schema: core_schema.CoreSchema,
                                     handler: GetJsonSchemaHandler) -> dict[str, Any]:
        """The names registered when the schema is asked for, as a ``Literal``'s enum."""
        return {"enum": self.names(), "type": "string"}
