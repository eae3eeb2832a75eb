"""What a configuration must pass before the daemon applies it: one check for start-up, SIGHUP
and `govd check-config`, so that what check-config accepts the daemon accepts.

The schema (`govd.conf.load`) checks the file alone; this checks what needs code or the machine:
each policy built with its parameters (a policy may refuse a value the schema cannot know, e.g.
ondemand's whole-number thresholds), no setting that changes nothing under the model forms in
force (`govd.from_config.inert_knobs`), the prior file read, the metrics exporter's address, a
state file already there being one govd can use, and for each device found a whole governor built
(bounds against the device's own, levels).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from govd.conf.schema import Config, PolicyConfig
from govd.daemon.device_runner import RunnerSettings
from govd.daemon.governed import SetupError, build_governor
from govd.device.base import Device
from govd.from_config import inert_knobs
from govd.governor import Governor
from govd.policy.registry import make_policy


@dataclass(frozen=True, slots=True)
class Built:
    """A device with the governor and runner settings the configuration gives it."""

    device: Device
    governor: Governor
    settings: RunnerSettings


class ConfigRefused(SetupError):
    """The configuration cannot be applied; ``errors`` holds one line per problem."""

    def __init__(self, errors: list[str]) -> None:
        super().__init__("\n".join(errors))
        self.errors = errors


def _policy_problems(where: str, policy: PolicyConfig) -> list[str]:
    problems = []
    for name, params in ((policy.name, policy.params), (policy.fallback, {})):
        try:
            make_policy(name, **params)
        except (ValueError, TypeError, LookupError, OSError) as exc:
            problems.append(f"{where}: policy {name!r} refuses its parameters: {exc}")
    return problems


def _metrics_problems(config: Config) -> list[str]:
    if not config.metrics.enabled:
        return []
    from govd.telemetry.metrics import (
        MetricsUnavailable,
        check_available,
        check_listen_address,
    )

    host = config.metrics.listen.rpartition(":")[0].strip("[]")
    try:
        check_listen_address(host, config.metrics.allow_non_loopback)
        check_available()
    except (ValueError, MetricsUnavailable) as exc:
        return [f"metrics.listen: {exc}"]
    return []


def _prior_problems(config: Config) -> list[str]:
    if not config.model.prior:
        return []
    from govd.formats.prior import read_prior

    try:
        read_prior(config.model.prior)
    except (ValueError, OSError) as exc:
        return [f"model.prior: {exc}"]
    return []


def _state_file_problems(config: Config) -> list[str]:
    """What the daemon's start would say of ``state_file`` when something is there already: a
    folder, a FIFO, or a file that is no govd state (never overwritten: govd did not write it).
    A file this process may not read (check-config as a user, the file root's) is left to the
    daemon to judge."""
    from govd.custody.state_file import StateFileError, load_state

    path = Path(config.state_file)
    if os.path.lexists(path) and not os.access(path, os.R_OK):
        return []
    try:
        load_state(path)
    except StateFileError as exc:
        return [f"state_file: {exc}"]
    return []


def check_applicable(config: Config, devices: Sequence[Device]) -> list[Built]:
    """Everything the daemon checks before it applies ``config`` to ``devices``; returns what it
    built for each device. Raises `ConfigRefused` listing every problem, one line each."""
    problems = _policy_problems("policy", config.policy)
    for i, entry in enumerate(config.devices):
        if entry.policy is not None:
            problems += _policy_problems(f"devices[{i}].policy", entry.policy)
    problems += _prior_problems(config) + _metrics_problems(config) + _state_file_problems(config)
    if not problems:
        problems += inert_knobs(config)
    built = []
    if not problems:  # a bad policy or prior would fail every device again: said once above
        for device in devices:
            try:
                built.append(Built(device, *build_governor(config, device)))
            except SetupError as exc:
                problems.append(str(exc))
    if problems:
        raise ConfigRefused(problems)
    return built
