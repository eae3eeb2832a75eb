"""Governors in each model configuration the daemon can run, driven by synthetic ticks.

`govd.kernels.build` drives them to find which kernels the daemon calls per tick and
with which argument types; `tests/test_kernels_aot.py` to compare the compiled-ahead kernels
with numba's JIT to the bit. The ticks are closed-loop (each tick runs at the level the last
decision chose, as in the daemon) so that the policy walks the level table and the model's
update, reset and rescale paths all run.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from govd.model.arrays import FloatArray
from govd.model.settings import ModelSettings

CORE_MHZ = (300.0, 450.0, 600.0, 750.0, 900.0, 1050.0, 1200.0, 1350.0)
MEM_MHZ = (405.0, 810.0, 810.0, 1600.0, 810.0, 1600.0, 1600.0, 1600.0)
"""With two clock domains, the memory clock of each core level: (core, memory) pairs."""
COUNTERS = ("instructions", "dram_bytes")


@dataclass(frozen=True)
class Configuration:
    """One way the daemon can run the model (``model.form``, ``model.algorithm``, clock
    domains, counters, target)."""

    form: str
    algorithm: str
    two_domains: bool
    counters: bool
    fps: float | None
    """Frame-rate target, else a 10 % slowdown target (throughput work)."""

    @property
    def name(self) -> str:
        """E.g. ``seed-rls-pairs-counters-fps``."""
        return "-".join((self.form, self.algorithm, "pairs" if self.two_domains else "core",
                         "counters" if self.counters else "plain",
                         "fps" if self.fps is not None else "slowdown"))


CONFIGURATIONS = tuple(
    Configuration(form, algorithm, two, counters, fps)
    for form in ("seed", "scaling", "auto")
    for algorithm in ("rls", "dcd")
    for two in (False, True)
    for counters in (False, True)
    for fps in (60.0, None)
)


def governor(config: Configuration) -> object:
    """A `govd.governor.Governor` in ``config`` with the energy policy (imported here: the
    model package does not depend on the governor otherwise)."""
    from govd.governor import Governor
    from govd.policy.energy import EnergyPolicy
    from govd.target import Target

    settings = ModelSettings(form=config.form, algorithm=config.algorithm,  # type: ignore[arg-type]
                             counters=COUNTERS if config.counters else ())
    target = Target(fps=config.fps) if config.fps is not None else Target(max_slowdown=0.1)
    mems = np.array(MEM_MHZ) if config.two_domains else None
    return Governor(np.array(CORE_MHZ), EnergyPolicy(), target, settings,
                    mem_levels_mhz=mems, idle_power_w=math.nan)


_READ_ONLY_EMPTY = np.zeros(0)
_READ_ONLY_EMPTY.flags.writeable = False  # as the daemon passes "no counters"


def drive(config: Configuration, ticks: int, seed: int = 1, reset_at: int = -1
          ) -> dict[str, FloatArray]:
    """Run ``ticks`` synthetic ticks (a workload whose frame time scales partly with the core
    clock and changes phase every 80 ticks); ``reset_at`` >= 0 resets the governor before
    that tick. Returns the model's state and, per tick, its predictions, flags and choices."""
    from govd.governor import Sample

    gov = governor(config)
    model = gov.model  # type: ignore[attr-defined]
    rng = np.random.default_rng(seed)
    level = len(CORE_MHZ) - 1
    rows: dict[str, list[FloatArray]] = {"time_ms": [], "power_w": [], "energy_mj": [],
                                         "flags_level": []}
    for i in range(ticks):
        if i == reset_at:
            gov.reset()  # type: ignore[attr-defined]
        f = CORE_MHZ[level]
        fm = MEM_MHZ[level] if config.two_domains else math.nan
        phase = (i // 80) % 3
        work = (4.0, 9.0, 2.5)[phase] * (1.0 + 0.03 * rng.standard_normal())
        t_ms = work * (0.6 * 900.0 / f + 0.4)
        busy = min(1.0, t_ms / 16.6)
        counters = _READ_ONLY_EMPTY
        if config.counters:  # the daemon builds a fresh float64 array every tick
            counters = np.array([work * 1e6 * (1 + 0.01 * rng.standard_normal()),
                                 (1.0 + phase) * 3e4])
        idle = i % 37 == 36  # now and then a tick without frames
        sample = Sample(
            freq_mhz=f, frame_time_ms=math.nan if idle else t_ms, frame_count=0 if idle else 3,
            busy=math.nan if idle else busy,
            power_w=20.0 + 0.02 * f * busy + 0.5 * rng.standard_normal(),
            mem_activity=0.3 + 0.1 * phase, counters=counters, mem_freq_mhz=fm,
            late_share=math.nan if idle else float(t_ms > 16.6),
        )
        decision = gov.step(sample)  # type: ignore[attr-defined]
        level = decision.level
        rows["time_ms"].append(np.array(model.time_ms, dtype=np.float64))
        rows["power_w"].append(np.array(model.power_w, dtype=np.float64))
        rows["energy_mj"].append(np.array(model.energy_mj, dtype=np.float64))
        rows["flags_level"].append(np.array([decision.model_flags, level], dtype=np.float64))
    result = {name: np.stack(values) for name, values in rows.items()}
    result["state"] = np.array(model.state, dtype=np.float64)
    return result
