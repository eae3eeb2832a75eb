"""One way to build a `Governor` from a configuration: the daemon (`govd.daemon.governed`),
`govd eval` (`govd.eval.replay`), the replay of a recorded run and the demo all call
`governor_from_config`, so that each decides as the configuration says (policy and its
parameters, model form and learner, fallback and its grace, dwell, tick period, stress
thresholds, idle power), and none can drift from the others.

What is not in the configuration comes from the caller: the level table (a device's, a sweep
table's), bounds, a voltage table, and where the evaluator derives them from a table, the
model's counters, the idle power and a policy built around the table (the oracle, `TrueCurves`).

`inert_knobs` says which settings of a configuration would change nothing under the model
forms it puts in force (``govd check-config``, the daemon's start and reload, ``govd eval``).
"""

from __future__ import annotations

import copy
import inspect
import math
from collections.abc import Iterable, Sequence

import numpy as np

from govd.conf.schema import Config, PolicyConfig
from govd.governor import Governor, Sample
from govd.model import forms
from govd.model.arrays import FloatArray
from govd.model.prior import Prior
from govd.model.settings import ModelSettings
from govd.model.stress import StressSettings
from govd.policy.base import INERT_HOOK, Policy
from govd.policy.registry import make_policy, policy_class
from govd.target import Target


def model_settings(config: Config, volts: Sequence[float] = ()) -> ModelSettings:
    """The model's settings from the ``model`` section; ``volts``: one voltage per distinct
    core clock of the device (V), empty for V affine in f."""
    m = config.model
    return ModelSettings(
        form=m.form, algorithm=m.algorithm, forgetting=m.forgetting, mu=m.mu, a_init=m.a_init,
        counters=tuple(m.counters), counter_scales=tuple(m.counter_scales), dcd_h=m.dcd.H,
        dcd_mb=m.dcd.Mb, dcd_nu=m.dcd.Nu, volts=tuple(volts),
    )


def stress_settings(config: Config) -> StressSettings:
    """The stress detector's thresholds from ``model.stress``."""
    s = config.model.stress
    return StressSettings(jump_ratio=s.jump_ratio, jump_run=s.jump_run,
                          stuck_ticks=s.stuck_ticks)


def governor_from_config(
    config: Config,
    levels_mhz: Sequence[float] | FloatArray,
    mem_levels_mhz: Sequence[float] | FloatArray | None = None,
    *,
    policy_config: PolicyConfig | None = None,
    policy: Policy | None = None,
    target: Target | None = None,
    settings: ModelSettings | None = None,
    bounds_mhz: tuple[float, float] | None = None,
    idle_power_w: float | None = None,
    prior: Prior | None = None,
) -> Governor:
    """A fresh governor over ``levels_mhz`` (MHz; with two clock domains, ``mem_levels_mhz``
    the memory clock of each pair) as ``config`` says, its ticks counted in ``period_ms``.

    ``policy_config``: a device entry's policy (default ``config.policy``); ``policy``: the
    main policy already built (the evaluator's oracle, a wrapped policy), else built from
    ``policy_config``; ``target``: the target in force at the start (default
    ``config.target``); ``settings``: the model's (default `model_settings` of ``config``);
    ``idle_power_w``: W, default ``power.idle_power_w`` (None there: learned); ``prior``: the
    prior read from ``model.prior`` (reading the file is the caller's). Raises ValueError,
    TypeError or LookupError naming what the configuration asks that cannot be built."""
    chosen = policy_config or config.policy
    idle_w = config.power.idle_power_w if idle_power_w is None else idle_power_w
    return Governor(
        levels_mhz,
        policy if policy is not None else make_policy(chosen.name, **chosen.params),
        target if target is not None else config.target.to_target(),
        settings if settings is not None else model_settings(config),
        bounds_mhz=bounds_mhz,
        idle_power_w=math.nan if idle_w is None else idle_w,
        fallback=make_policy(chosen.fallback),
        fallback_grace_s=chosen.fallback_grace_s,
        stress_settings=stress_settings(config),
        mem_levels_mhz=mem_levels_mhz,
        prior=prior,
        period_s=config.period_ms / 1000.0,
        min_dwell_s=config.min_dwell_ms / 1000.0,
    )


def _in_force(config: Config) -> list[tuple[bool, forms.Form]]:
    """(frame-rate target?, form in force) for every kind of target the configuration sets
    (the default one and each application's)."""
    kinds = {config.target.fps is not None}
    kinds.update(t.fps is not None for t in config.apps.values())
    prior = bool(config.model.prior)
    return [(kind, forms.form(forms.resolve(config.model.form, kind, prior)))
            for kind in sorted(kinds)]


def _where(in_force: list[tuple[bool, forms.Form]]) -> str:
    return " and ".join(f"model form {f.name} (in force for {'frame-rate' if kind else 'slowdown'}"
                        " targets)" for kind, f in in_force)


def inert_knobs(config: Config) -> list[str]:
    """One line for each setting ``config`` moves from its default that acts under none of
    the model forms and kinds of target it can put in force (a knob that silently changes
    nothing misleads whoever tunes it): model keys a form does not read
    (`govd.model.forms.Form.inert_settings`), DCD-RLS keys with RLS, and policy parameters the
    policy says change no decision there (`govd.policy.base.INERT_HOOK`)."""
    in_force = _in_force(config)
    where = _where(in_force)
    problems = []
    model, defaults = config.model, type(config.model)()
    for key in sorted(set.intersection(*(set(f.inert_settings) for _, f in in_force))):
        if getattr(model, key) != getattr(defaults, key):
            problems.append(f"model.{key}: {getattr(model, key)!r} changes nothing under {where}"
                            "; remove it, or set a model.form that reads it")
    if model.algorithm != "dcd":
        for key, value in model.dcd.model_dump().items():
            if value != getattr(defaults.dcd, key):
                problems.append(f"model.dcd.{key}: {value!r} changes nothing with model.algorithm"
                                f" {model.algorithm}; remove it, or set model.algorithm: dcd")
    policies = [("policy", config.policy)] + [
        (f"devices[{i}].policy", e.policy) for i, e in enumerate(config.devices) if e.policy]
    for name, policy in policies:
        problems += _inert_params(name, policy, in_force, where)
    return problems


def _inert_params(name: str, policy: PolicyConfig, in_force: list[tuple[bool, forms.Form]],
                  where: str) -> list[str]:
    """``policy``'s parameters set away from their defaults that act under none of
    ``in_force``."""
    cls = policy_class(policy.name)
    hook = getattr(cls, INERT_HOOK, None)
    if hook is None or not policy.params:
        return []
    inert = set.intersection(*(set(hook(f.spread_from_pairs, kind)) for kind, f in in_force))
    defaults = _defaults(cls)
    return [f"{name}.params.{key}: {value!r} changes nothing in policy {policy.name!r} under "
            f"{where}; remove it, or set a model.form it acts under"
            for key, value in sorted(policy.params.items())
            if key in inert and value != defaults.get(key)]


def warm_up(governor: Governor, targets: Iterable[Target]) -> None:
    """Compile (numba's JIT, where the kernels were not compiled ahead of time) or load the
    model kernels ``governor`` will call, before its first real tick: a copy of it is stepped
    once under each of ``targets`` (each kind of target may put another model form in force).
    The daemon does it before it tells systemd it is ready, so that a first compile is paid
    inside the start timeout, not against the watchdog; the demo, before its clock starts.
    ``governor`` itself is left as it was."""
    spare = copy.deepcopy(governor)
    top = int(spare.levels_mhz.size) - 1
    mems = spare.mem_levels_mhz
    # A sample as full as a real tick's: the configured counters, power and busy each take
    # their own kernels (measured on an H200 under numba's JIT: a warm-up without counters left
    # an 11 s compile to the first real tick, which read no frame socket meanwhile).
    counters = np.full(len(spare.model_settings.counters), 0.5)
    for target in targets:
        spare.target = target
        spare.step(Sample(freq_mhz=float(spare.levels_mhz[top]), frame_time_ms=5.0,
                          frame_count=1, busy=0.9, power_w=100.0, counters=counters,
                          mem_freq_mhz=math.nan if mems is None else float(mems[top])))


def _defaults(cls: type) -> dict[str, object]:
    """Each constructor parameter's default, a subclass's passing ``**params`` on to its base
    (the `energy` policy's memory over `EnergyPolicy`) included."""
    defaults: dict[str, object] = {}
    for klass in reversed(cls.__mro__):
        init = klass.__dict__.get("__init__")
        if init is None:
            continue
        for p in inspect.signature(init).parameters.values():
            if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY) and p.name != "self":
                defaults[p.name] = p.default
    return defaults
