"""Things found by name: govd's own, then third parties' through an entry-point group.

Backends (`govd.device.registry`), frame sources (`govd.sources.registry`) and model forms
(`govd.model.forms`) each keep one `Registry`: a name maps to ``"module:attribute"``, imported
only when that name is asked for, so that knowing the names (to check a configuration) imports
none of them. A plugin cannot shadow a built-in name.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from importlib import import_module
from importlib.metadata import entry_points
from typing import Any


class Registry:
    """Names in ``builtin`` (name → ``"module:attribute"``) and in the entry-point ``group``.

    ``what``: what a name names, for messages (``"backend"``); ``error``: the LookupError
    raised for a name neither holds; ``kind``: the type an entry point must load (None:
    anything, such as a function); ``also``: values accepted beside the names, listed first
    among them in that message (a form's ``auto``); ``sort``: names sorted, else the built-ins
    in their order, then the plugins'.
    """

    def __init__(self, group: str, builtin: Mapping[str, str], what: str,
                 error: type[LookupError], kind: type | None = None,
                 also: Sequence[str] = (), sort: bool = False) -> None:
        self.group = group
        self.builtin = builtin
        self.what = what
        self.error = error
        self.kind = kind
        self.also = also
        self.sort = sort

    def available(self) -> list[str]:
        """Every name, each once (a plugin does not shadow a built-in)."""
        names = list(self.builtin)
        names += [ep.name for ep in entry_points(group=self.group) if ep.name not in names]
        return sorted(names) if self.sort else names

    def load(self, name: str) -> Any:
        """What ``name`` is registered as; a built-in before any plugin of that name."""
        if name in self.builtin:
            module, _, attr = self.builtin[name].partition(":")
            return getattr(import_module(module), attr)
        for ep in entry_points(group=self.group):
            if ep.name == name:
                loaded = ep.load()
                if self.kind is not None and not isinstance(loaded, self.kind):
                    raise self.error(f"entry point {name!r} of {self.group} is not a "
                                     f"{self.kind.__name__}")
                return loaded
        raise self.error(f"unknown {self.what} {name!r}; available: "
                         f"{', '.join([*self.also, *self.available()])}")
