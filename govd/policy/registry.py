"""Finding policies by name: govd's own, and third parties' through entry points."""

from __future__ import annotations

from importlib import import_module
from importlib.metadata import entry_points
from typing import Any

from govd.policy.base import Policy

GROUP = "govd.policies"

# govd's own policies, so that a source checkout that is not pip-installed still finds them.
_BUILTIN = {
    "ondemand": "govd.policy.ondemand:Ondemand",
    "energy": "govd.policy.memory:MeasuredMemory",
    "oracle": "govd.policy.oracle:OraclePolicy",
    "performance": "govd.policy.static:Performance",
    "powersave": "govd.policy.static:Powersave",
    "fixed": "govd.policy.static:Fixed",
}


class UnknownPolicyError(LookupError):
    """No policy of that name is built in or registered."""


def _load(target: str) -> type[Policy]:
    module, _, attr = target.partition(":")
    cls: type[Policy] = getattr(import_module(module), attr)
    return cls


def available() -> list[str]:
    """Names of every policy that can be selected, sorted."""
    names = set(_BUILTIN)
    names.update(ep.name for ep in entry_points(group=GROUP))
    return sorted(names)


def policy_class(name: str) -> type[Policy]:
    """The class registered under ``name``; built-ins cannot be shadowed by a plugin."""
    if name in _BUILTIN:
        return _load(_BUILTIN[name])
    for ep in entry_points(group=GROUP):
        if ep.name == name:
            cls: type[Policy] = ep.load()
            return cls
    raise UnknownPolicyError(
        f"unknown policy {name!r}; available: {', '.join(available())}"
    )


def make_policy(name: str, **params: Any) -> Policy:
    """Build the policy ``name`` with its parameters (from the config or the command line)."""
    return policy_class(name)(**params)
