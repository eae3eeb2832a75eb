"""Model forms by name, as policies are (`govd.policy.registry`): govd's own and third parties'.

A form registers with one line in its module, a `Form` naming how to build it, and one line
here (or, for a third party, one entry point in the ``govd.model_forms`` group naming that
`Form`)::

    SCALING = Form("scaling", build_scaling, spread_from_pairs=True)   # in its module
    "scaling": "govd.model.scaling_model:SCALING",                     # in _BUILTIN below

``model.form: auto`` is resolved from the target in force at each tick (`resolve`): the
governor switches forms when the kind of target changes and keeps each form's state.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from importlib import import_module
from importlib.metadata import entry_points

from govd.model.arrays import FloatArray
from govd.model.base import Model
from govd.model.settings import AUTO, ModelSettings

GROUP = "govd.model_forms"

_BUILTIN = {
    "seed": "govd.model.online:SEED",
    "scaling": "govd.model.scaling_model:SCALING",
}
"""govd's own forms, so that a source checkout that is not pip-installed still finds them."""

AUTO_FRAME_RATE = "seed"
"""The form ``auto`` puts in force under a frame-rate target, and whenever a prior is given
(a prior holds eq. 10's coefficients). Under a frame deadline eq. 10's counter terms follow the
frame's complexity tick by tick: 1.003x the oracle and Kendall tau 0.999 against 1.016x and
0.87 for the scaling form on the graphics table (bench/results/decisions.json)."""
AUTO_SLOWDOWN = "scaling"
"""The form ``auto`` puts in force under a slowdown target: on the measured GPUs eq. 10 ran at
up to 35 % violations or saved nothing there (bench/results/decisions.json)."""

Builder = Callable[[FloatArray, FloatArray | None, ModelSettings, float], Model]
"""(core clocks MHz, memory clocks MHz or None, settings, idle power W or NaN) -> a model."""


class UnknownFormError(LookupError):
    """No form of that name is built in or registered."""


@dataclass(frozen=True, slots=True)
class Form:
    """A registered form: its name and how to build it over a level table."""

    name: str
    build: Builder
    takes_prior: bool = False
    """Whether a prior (`govd.model.prior`, eq. 10's coefficients) can seed it."""
    spread_from_pairs: bool = False
    """As `govd.model.base.Predictions.spread_from_pairs`, for every record it fills."""
    inert_settings: frozenset[str] = frozenset()
    """`ModelSettings` fields (``model`` keys of the configuration) it does not read:
    ``govd check-config`` refuses them set where it is the only form in force."""


def available() -> list[str]:
    """Names of every form that can be selected, sorted (``auto`` is not a form)."""
    names = set(_BUILTIN)
    names.update(ep.name for ep in entry_points(group=GROUP))
    return sorted(names)


def form(name: str) -> Form:
    """The form registered under ``name``; built-ins cannot be shadowed by a plugin."""
    if name in _BUILTIN:
        module, _, attr = _BUILTIN[name].partition(":")
        found: Form = getattr(import_module(module), attr)
        return found
    for ep in entry_points(group=GROUP):
        if ep.name == name:
            loaded = ep.load()
            if not isinstance(loaded, Form):
                raise UnknownFormError(f"entry point {name!r} of {GROUP} is not a Form")
            return loaded
    raise UnknownFormError(f"unknown model form {name!r}; available: "
                           f"{', '.join([AUTO, *available()])}")


def resolve(setting: str, frame_rate: bool, prior: bool = False) -> str:
    """The form in force for ``model.form: setting`` under a frame-rate (``frame_rate``) or a
    slowdown target; ``prior``: a prior is configured (``auto`` then keeps the seed form)."""
    if setting != AUTO:
        return setting
    return AUTO_FRAME_RATE if frame_rate or prior else AUTO_SLOWDOWN


def forms_in_force(setting: str, frame_rate: bool | None, prior: bool = False) -> set[str]:
    """The forms ``setting`` can put in force: under a frame rate (``frame_rate`` True), a
    slowdown (False), or either (None: targets of both kinds may come, per application)."""
    kinds = (True, False) if frame_rate is None else (frame_rate,)
    return {resolve(setting, kind, prior) for kind in kinds}
