"""The configuration's shape: pydantic models, one per section of ``config/govd.yaml``.

Every model forbids unknown keys (a typo must not silently become a default) and is strict about
types (``"50"`` is not a number). ``config/govd.yaml`` documents every field; a test keeps the two
in step.
"""

from __future__ import annotations

import inspect
import math
import re
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from govd.target import Target


class Section(BaseModel):
    """Base of every section: unknown keys are errors, values are not coerced from strings."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


PositiveFloat = Annotated[float, Field(gt=0, allow_inf_nan=False)]
NonNegativeFloat = Annotated[float, Field(ge=0, allow_inf_nan=False)]


class PolicyConfig(Section):
    """A policy by name, with the keyword arguments its constructor takes."""

    name: str = "energy"
    params: dict[str, Any] = Field(default_factory=dict)
    """Keyword arguments of the policy's constructor; absent ones take the policy's defaults."""
    fallback: str = "performance"
    """The policy (default parameters) that decides while the model relearns after stress."""
    fallback_grace_s: NonNegativeFloat = 1.0
    """How long the fallback decides after model stress. Units: s."""

    @field_validator("name", "fallback")
    @classmethod
    def _known_policy(cls, name: str) -> str:
        from govd.policy.registry import available

        if name not in available():
            raise ValueError(f"unknown policy {name!r}; available: {', '.join(available())}")
        return name

    @field_validator("params")
    @classmethod
    def _scalar_params(cls, params: dict[str, Any]) -> dict[str, Any]:
        for key, value in params.items():
            if not isinstance(value, bool | int | float | str):
                raise ValueError(f"parameter {key!r} must be a number, string or boolean")
        return params

    @model_validator(mode="after")
    def _params_accepted(self) -> PolicyConfig:
        # Checked against the policy's own constructor when it can be loaded, so the names
        # cannot drift from the code; a policy that does not load is reported by the daemon.
        from govd.policy.registry import policy_class

        try:
            signature = inspect.signature(policy_class(self.name))
        except Exception:
            return self
        parameters = signature.parameters.values()
        if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters):
            return self
        accepted = {p.name for p in parameters if p.kind is not inspect.Parameter.VAR_POSITIONAL}
        unknown = sorted(set(self.params) - accepted)
        if unknown:
            raise ValueError(
                f"policy {self.name!r} takes no parameter {', '.join(map(repr, unknown))}; "
                f"it takes: {', '.join(sorted(accepted)) or 'none'}"
            )
        return self


class Bounds(Section):
    """Frequency limits within the device's own (null: the device's limit). Units: MHz."""

    min_mhz: PositiveFloat | None = None
    max_mhz: PositiveFloat | None = None

    @model_validator(mode="after")
    def _ordered(self) -> Bounds:
        if self.min_mhz is not None and self.max_mhz is not None and self.min_mhz > self.max_mhz:
            raise ValueError(f"min_mhz ({self.min_mhz:g}) is above max_mhz ({self.max_mhz:g})")
        return self


class DeviceConfig(Section):
    """Settings for the devices matched by name, PCI id and/or backend (all given must match)."""

    name: str | None = None
    pci_id: Annotated[str, Field(pattern=r"^[0-9a-fA-F]{4}:[0-9a-fA-F]{4}$")] | None = None
    backend: Literal["devfreq", "i915", "xe", "amdgpu", "nvml", "sim"] | None = None
    enabled: bool = True
    policy: PolicyConfig | None = None
    bounds: Bounds = Field(default_factory=Bounds)
    memory_clock: Literal["auto", "off"] = "auto"
    """With two clock domains (NVML, Ampere+): ``auto`` governs (core, memory) pairs, ``off``
    the core clock only, the memory clock left at the driver's default."""

    @model_validator(mode="after")
    def _matches_something(self) -> DeviceConfig:
        if self.name is None and self.pci_id is None and self.backend is None:
            raise ValueError("a device entry needs at least one of name, pci_id or backend")
        return self


class TargetConfig(Section):
    """A frame rate or a maximum slowdown: exactly one (see `govd.target.Target`)."""

    fps: PositiveFloat | None = None
    max_slowdown: NonNegativeFloat | None = None

    @model_validator(mode="after")
    def _exactly_one(self) -> TargetConfig:
        if (self.fps is None) == (self.max_slowdown is None):
            raise ValueError("give exactly one of fps or max_slowdown")
        return self

    def to_target(self) -> Target:
        """The `Target` this section describes."""
        return Target(fps=self.fps, max_slowdown=self.max_slowdown)


class StressConfig(Section):
    """When the model counts as stressed (reset, then the policy's fallback decides for a
    grace period): `govd.model.stress.StressSettings`."""

    jump_ratio: Annotated[float, Field(ge=0, allow_inf_nan=False)] = 10.0
    """A frame time this many times off the prediction (either way) starts a jump; 0: jumps
    are never stress (workloads that alternate 100x-different kernels)."""
    jump_run: Annotated[int, Field(ge=1, le=1000)] = 2
    """Consecutive outlying updates that make a jump."""
    stuck_ticks: Annotated[int, Field(ge=1)] = 200
    """Ticks a counter stays at its maximum (or not finite) to count as saturated."""


class DcdConfig(Section):
    """DCD-RLS settings (DESIGN.md §2): step range H (a power of two), bits Mb, updates Nu."""

    H: PositiveFloat = 16.0
    Mb: Annotated[int, Field(ge=1, le=32)] = 16
    Nu: Annotated[int, Field(ge=1, le=64)] = 4

    @field_validator("H")
    @classmethod
    def _power_of_two(cls, h: float) -> float:
        if math.frexp(h)[0] != 0.5:
            raise ValueError(f"H must be a power of two, got {h:g}")
        return h


class ModelConfig(Section):
    """The online frame-time model (DESIGN.md §2)."""

    form: str = "auto"
    """`govd.model.settings.ModelSettings.form`, a registered form (`govd.model.forms`) or
    auto = scaling under a slowdown target, the seed's eq. 10 under a frame rate, resolved
    from the target in force at each tick."""
    algorithm: Literal["rls", "dcd"] = "rls"
    forgetting: Annotated[float, Field(gt=0, le=1)] = 1.0
    mu: PositiveFloat = 1e-14
    a_init: Annotated[float, Field(allow_inf_nan=False)] = 1.0
    counters: list[str] = Field(default_factory=list)
    counter_scales: list[Annotated[float, Field(gt=0, allow_inf_nan=False)]] = Field(
        default_factory=list
    )
    dcd: DcdConfig = Field(default_factory=DcdConfig)
    prior: str | None = None
    """Prior file from `govd fit-prior` (seeds a0, a1 after the first samples), None for none."""
    stress: StressConfig = Field(default_factory=StressConfig)

    @field_validator("form")
    @classmethod
    def _known_form(cls, form: str) -> str:
        from govd.model.forms import available

        if form != "auto" and form not in available():
            raise ValueError(f"unknown model form {form!r}; available: "
                             f"{', '.join(['auto', *available()])}")
        return form

    @model_validator(mode="after")
    def _one_scale_per_counter(self) -> ModelConfig:
        if self.counter_scales and len(self.counter_scales) != len(self.counters):
            raise ValueError(f"counter_scales needs one scale per counter ({len(self.counters)}),"
                             f" got {len(self.counter_scales)}")
        if self.prior and self.form == "scaling":
            raise ValueError("prior seeds the seed form's coefficients: set form to seed or "
                             "auto, or remove prior")
        return self


class VoltagePoint(Section):
    """One point of a voltage/frequency table."""

    freq_mhz: PositiveFloat
    voltage_v: PositiveFloat


class PowerConfig(Section):
    """Power-model inputs the device may not expose itself (DESIGN.md §3)."""

    voltage: dict[str, list[VoltagePoint]] = Field(default_factory=dict)
    idle_power_w: NonNegativeFloat | None = None

    @field_validator("voltage")
    @classmethod
    def _ascending(cls, tables: dict[str, list[VoltagePoint]]) -> dict[str, list[VoltagePoint]]:
        for device, points in tables.items():
            freqs = [p.freq_mhz for p in points]
            if freqs != sorted(set(freqs)):
                raise ValueError(f"voltage table of {device!r} must have ascending frequencies")
        return tables


class SocketConfig(Section):
    """The frame socket (`govd.sources.socket.SocketSource`)."""

    path: str = "/run/govd/frames.sock"
    group: str | None = "govd"
    allow_uids: list[Annotated[int, Field(ge=0)]] = Field(default_factory=list)
    allow_gids: list[Annotated[int, Field(ge=0)]] = Field(default_factory=list)
    rate_fps: NonNegativeFloat = 2000.0
    burst: Annotated[float, Field(ge=1, allow_inf_nan=False)] = 500.0
    max_queue: Annotated[int, Field(ge=1, le=1_000_000)] = 4096


class MangoHudConfig(Section):
    """MangoHud log following (`govd.sources.mangohud.MangoHudSource`)."""

    dir: str | None = None
    rescan_s: NonNegativeFloat = 1.0


class FramesConfig(Section):
    """Where frame times come from."""

    source: Literal["socket", "mangohud", "busy", "sim"] = "socket"
    silent_after_s: PositiveFloat = 5.0
    """A device no frame came for this long is left to its own governor until frames come
    (`govd.daemon.device_runner`). Units: s."""
    socket: SocketConfig = Field(default_factory=SocketConfig)
    mangohud: MangoHudConfig = Field(default_factory=MangoHudConfig)

    @model_validator(mode="after")
    def _mangohud_needs_dir(self) -> FramesConfig:
        if self.source == "mangohud" and not self.mangohud.dir:
            raise ValueError("source mangohud needs mangohud.dir (MangoHud's output_folder)")
        return self


class LoggingConfig(Section):
    """Journal output."""

    level: Literal["debug", "info", "warning", "error"] = "info"
    summary_interval_s: NonNegativeFloat = 60.0


class IdleConfig(Section):
    """Idle back-off: a slow tick while the GPU has nothing to do (no frames, busy ~ 0)."""

    enabled: bool = True
    after_s: PositiveFloat = 5.0
    # At most 4 s: systemd's watchdog (WatchdogSec=10s) is pinged from the tick, every 5 s.
    period_ms: Annotated[int, Field(ge=10, le=4000)] = 1000
    busy_below: Annotated[float, Field(ge=0, le=1, allow_inf_nan=False)] = 0.05


_LISTEN = re.compile(r"^(\[[0-9a-fA-F:.]+\]|[A-Za-z0-9.-]+):([0-9]{1,5})$")


class MetricsConfig(Section):
    """Optional Prometheus exporter."""

    enabled: bool = False
    listen: str = "127.0.0.1:9586"
    allow_non_loopback: bool = False
    """Listen on an address other hosts reach (the numbers say what runs on the GPU)."""

    @field_validator("listen")
    @classmethod
    def _host_port(cls, listen: str) -> str:
        match = _LISTEN.match(listen)
        if match is None or not 0 < int(match[2]) < 65536:
            raise ValueError(f"listen must be host:port (e.g. 127.0.0.1:9586), got {listen!r}")
        return listen


class Config(Section):
    """The whole configuration file."""

    devices: list[DeviceConfig] = Field(default_factory=list)
    policy: PolicyConfig = Field(default_factory=PolicyConfig)
    target: TargetConfig = Field(default_factory=lambda: TargetConfig(fps=60.0))
    apps: dict[Annotated[str, Field(min_length=1)], TargetConfig] = Field(default_factory=dict)
    period_ms: Annotated[int, Field(ge=10, le=1000)] = 50
    min_dwell_ms: Annotated[int, Field(ge=0, le=60_000)] = 100
    model: ModelConfig = Field(default_factory=ModelConfig)
    power: PowerConfig = Field(default_factory=PowerConfig)
    frames: FramesConfig = Field(default_factory=FramesConfig)
    logging: LoggingConfig = Field(default_factory=LoggingConfig)
    metrics: MetricsConfig = Field(default_factory=MetricsConfig)
    idle: IdleConfig = Field(default_factory=IdleConfig)
    state_file: str = "/run/govd/state.json"

    @model_validator(mode="after")
    def _idle_slower(self) -> Config:
        if self.idle.enabled and self.idle.period_ms <= self.period_ms:
            raise ValueError(f"idle.period_ms ({self.idle.period_ms}) must be longer than "
                             f"period_ms ({self.period_ms}), or set idle.enabled: false")
        return self

    @field_validator("state_file")
    @classmethod
    def _absolute(cls, state_file: str) -> str:
        problem = state_file_problem(state_file)
        if problem is not None:
            raise ValueError(problem)
        return state_file


def state_file_problem(state_file: str) -> str | None:
    """Why ``state_file`` cannot be govd's state file, None when it can: an absolute path that
    names a file (the status file and `govd measure`'s state files go beside it)."""
    if not state_file.startswith("/"):
        return f"state_file must be an absolute path, got {state_file!r}"
    if state_file.endswith("/") or state_file.rsplit("/", 1)[-1] in ("", ".", ".."):
        return f"state_file must name a file, got {state_file!r}"
    if "\0" in state_file:
        return "state_file holds a NUL character"
    return None
