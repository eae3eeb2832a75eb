"""Frame sources by name (``frames.source``), as policies are (`govd.policy.registry`): govd's
own and third parties' (an entry point in the ``govd.frame_sources`` group).

A source registers with one line here (or one entry point) naming its opener, a function in its
own module that opens it from the configuration::

    "mangohud": "govd.sources.mangohud:open_mangohud",

The names are known without importing any source (`available`: the configuration checks
``frames.source`` against them); the opener is imported only for the source asked for.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from govd.plugins import Registry
from govd.sources.base import FrameSource, Opening

GROUP = "govd.frame_sources"

Opener = Callable[[Any, Opening], FrameSource | None]
"""(the configuration's ``frames`` section, what the daemon tells the source) -> the source, or
None when the daemon feeds each device its own (``busy``). Raises `SourceSetupError` (one
line)."""

_BUILTIN = {
    "socket": "govd.sources.socket:open_socket",
    "mangohud": "govd.sources.mangohud:open_mangohud",
    "busy": "govd.sources.busy:open_busy",
    "sim": "govd.sources.socket:open_socket",
}
"""govd's own sources (``sim``: the simulated GPU's frames, which come to the socket)."""


class UnknownSourceError(LookupError):
    """No frame source of that name is built in or registered."""


_REGISTRY = Registry(GROUP, _BUILTIN, "frame source", UnknownSourceError)


def available() -> list[str]:
    """Names of every frame source: govd's own in their order, then the registered ones."""
    return _REGISTRY.available()


def opener(name: str) -> Opener:
    """The opener registered under ``name``; a built-in cannot be shadowed by a plugin."""
    found: Opener = _REGISTRY.load(name)
    return found
