"""Frequency tables of the simulated GPUs: clock levels, voltage at each, and the power model.

Power while processing (DESIGN §3):

    P = P_static + C_dyn · a_core · f · V(f)² + P_mem · a_mem

with f in MHz, V in volts, a_core the share of the time the shader cores are switching and a_mem the
memory interface's activity (both 0..1). While the GPU waits for the next vsync it is clock- and
power-gated and draws `idle_power_w`, well below P_static: that gap is what makes racing to idle
costly and gives an energy-optimal level inside the range rather than at either end.

V(f) rises from `v_min` to `v_max` as v_min + (v_max − v_min)·(x + x³)/2, x the position of
f between the lowest and highest level: increasing everywhere, nearly flat at the bottom (the
voltage floor real parts sit on) and convex near the top.

The constants are realistic orders of magnitude, not any one part's datasheet:
- `seed9`: the seed's Intel Atom (Minnowboard MAX) GPU, 9 levels 200–511 MHz, mobile: ~0.3 W idle,
  ~2.5 W flat out.
- `desktop`: a discrete desktop card, 16 levels 300–2100 MHz, ~20 W idle to ~230 W.
- `datacenter`: an H100-like accelerator, 22 levels 510–1980 MHz, ~75 W idle to ~650 W.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True)
class LevelTable:
    """The levels of one simulated GPU and the constants of its power model."""

    name: str
    """Interface name (`seed9`, `desktop`, `datacenter`)."""
    description: str
    freqs_mhz: FloatArray
    """Clock levels, ascending. Units: MHz."""
    v_min: float
    """Voltage at the lowest level. Units: V."""
    v_max: float
    """Voltage at the highest level. Units: V."""
    static_power_w: float
    """Leakage and uncore power whenever the GPU is awake. Units: W."""
    dyn_coeff_w: float
    """C_dyn: dynamic power per MHz per V² at full core activity. Units: W/(MHz·V²)."""
    mem_power_w: float
    """Memory power at full memory activity. Units: W."""
    idle_power_w: float
    """Power while gated, waiting for the next frame. Units: W."""

    @property
    def volts(self) -> FloatArray:
        """Voltage at each level, increasing, convex near the top. Units: V."""
        f = self.freqs_mhz
        x = (f - f[0]) / (f[-1] - f[0])
        volts: FloatArray = self.v_min + (self.v_max - self.v_min) * (x + x**3) / 2
        return volts

    def power_w(self, core_activity: FloatArray, mem_activity: FloatArray) -> FloatArray:
        """Power at each level, shape [..., L] for activities broadcastable to it. Units: W."""
        switching = self.dyn_coeff_w * self.freqs_mhz * self.volts**2
        return self.static_power_w + core_activity * switching + self.mem_power_w * mem_activity


LEVEL_TABLES: dict[str, LevelTable] = {
    table.name: table
    for table in (
        LevelTable(
            name="seed9",
            description="Intel Atom GPU of seed 000 (Minnowboard MAX), 9 levels, mobile power",
            freqs_mhz=np.array([200.0, 244, 267, 311, 355, 400, 444, 489, 511]),
            v_min=0.65, v_max=1.02,
            static_power_w=0.38, dyn_coeff_w=0.0041, mem_power_w=0.35, idle_power_w=0.30,
        ),
        LevelTable(
            name="desktop",
            description="discrete desktop GPU, 16 levels 300-2100 MHz, ~20-230 W",
            freqs_mhz=np.linspace(300.0, 2100.0, 16),
            v_min=0.65, v_max=1.10,
            static_power_w=28.0, dyn_coeff_w=0.080, mem_power_w=35.0, idle_power_w=20.0,
        ),
        LevelTable(
            name="datacenter",
            description="H100-like accelerator, 22 levels 510-1980 MHz, ~75-650 W",
            freqs_mhz=np.linspace(510.0, 1980.0, 22),
            v_min=0.65, v_max=1.05,
            static_power_w=95.0, dyn_coeff_w=0.25, mem_power_w=120.0, idle_power_w=75.0,
        ),
    )
}


def level_table(name: str) -> LevelTable:
    """The level table called `name`; `KeyError` names the known ones."""
    try:
        return LEVEL_TABLES[name]
    except KeyError:
        raise KeyError(f"unknown level table {name!r} (known: {', '.join(LEVEL_TABLES)})") from None
