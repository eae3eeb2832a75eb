"""Level tables of the simulated GPUs: clock levels and, per level, the time and power model.

A level table is a data file, `govd/sim/tables/NAME.json` (shipped as package data), never a
constant in code: hand-set tables say so in their provenance, fitted ones (`govd sim fit`) name the
sweep they were fitted to and their fit error. Per level l
(ascending core clock, then memory clock):

    time(unit, l)  = t_top · ((1 − m) · scalable_time[l] + m · memory_time[l])
    power(unit, l) = static_power_w + a_core · core_power_w[l] + a_mem · mem_power_w[l]

with t_top the unit's time at the highest level, m the share of it that does not scale with the core
clock (memory stalls), `scalable_time` and `memory_time` both 1 at the highest level, and a_core,
a_mem the unit's core and memory activity (0..1). `core_power_w[l]` is C_dyn·f·V(f)²: its voltage
curve is `volts` (V), or for fitted tables, whose data give only C_dyn·V², `volts_rel` (V / V at the
top core clock). While the GPU waits for the next frame it is clock- and power-gated and draws
`idle_power_w`, below `static_power_w`: that gap is what makes racing to idle cost energy.

A table may have two clock domains (`mem_freqs_mhz`, one memory clock per level). The simulated
GPU governs the core clock only: `core_levels()` is the table at its highest memory clock, as the
driver leaves memory unless told otherwise.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]
TABLES_PACKAGE = "govd.sim.tables"
PER_LEVEL = ("scalable_time", "memory_time", "core_power_w", "mem_power_w")


class LevelTableError(ValueError):
    """A level table file that cannot be used; the message names the file and the field."""


@dataclass(frozen=True)
class LevelTable:
    """The levels of one simulated GPU and the per-level constants of its time and power model."""

    name: str
    """Interface name (`seed9`, `desktop`, `v100`, ...)."""
    description: str
    freqs_mhz: FloatArray
    """Core clock of each level, ascending. Units: MHz."""
    scalable_time: FloatArray
    """Time of the core-scalable part relative to the highest level (1 there), per level."""
    memory_time: FloatArray
    """Time of the memory-bound part relative to the highest level (1 there), per level."""
    core_power_w: FloatArray
    """Dynamic core power at full core activity, C_dyn·f·V², per level. Units: W."""
    mem_power_w: FloatArray
    """Memory power at full memory activity, per level. Units: W."""
    static_power_w: float
    """Leakage and uncore power whenever the GPU is awake. Units: W."""
    idle_power_w: float
    """Power while gated, waiting for the next frame. Units: W."""
    volts: FloatArray | None = None
    """Voltage at each level where known. Units: V."""
    volts_rel: FloatArray | None = None
    """Voltage relative to the top core clock's, derived from `core_power_w` (fitted tables)."""
    mem_freqs_mhz: FloatArray | None = None
    """Memory clock of each level for two clock domains, else None. Units: MHz."""
    provenance: dict[str, Any] = field(default_factory=dict)
    """Where the numbers come from: source file(s), how they were made, fit error."""

    def power_w(self, core_activity: FloatArray, mem_activity: FloatArray) -> FloatArray:
        """Power at each level, shape [..., L] for activities broadcastable to it. Units: W."""
        power: FloatArray = (self.static_power_w + core_activity * self.core_power_w
                             + mem_activity * self.mem_power_w)
        return power

    def scalable_at(self, freq_mhz: FloatArray) -> FloatArray:
        """`scalable_time` at any core clock: work/clock interpolated between levels, 1/f
        beyond them (the table is exact at its levels)."""
        f = self.freqs_mhz
        per_mhz = np.interp(freq_mhz, f, self.scalable_time * f)
        result: FloatArray = per_mhz / freq_mhz
        return result

    def memory_at(self, freq_mhz: FloatArray) -> FloatArray:
        """`memory_time` at any core clock, interpolated, constant beyond the levels."""
        result: FloatArray = np.interp(freq_mhz, self.freqs_mhz, self.memory_time)
        return result

    def core_levels(self) -> LevelTable:
        """The table over the core clock alone: itself for one clock domain, else its levels at
        the highest memory clock, renormalised to 1 at the top level."""
        if self.mem_freqs_mhz is None:
            return self
        keep = self.mem_freqs_mhz == self.mem_freqs_mhz.max()
        top = int(np.flatnonzero(keep)[-1])
        return replace(
            self, freqs_mhz=self.freqs_mhz[keep],
            scalable_time=self.scalable_time[keep] / self.scalable_time[top],
            memory_time=self.memory_time[keep] / self.memory_time[top],
            core_power_w=self.core_power_w[keep], mem_power_w=self.mem_power_w[keep],
            volts=None if self.volts is None else self.volts[keep],
            volts_rel=None if self.volts_rel is None else self.volts_rel[keep],
            mem_freqs_mhz=None)


def table_from_dict(data: dict[str, Any], where: str) -> LevelTable:
    """A `LevelTable` from its JSON form; `LevelTableError` names `where` and the bad field."""
    try:
        freqs = _array(data, "freqs_mhz", where)
        n = freqs.size
        if n < 2 or np.any(np.diff(freqs) < 0) or freqs[0] <= 0:
            raise LevelTableError(f"{where}: freqs_mhz must hold >= 2 positive ascending clocks")
        per_level = {key: _array(data, key, where, n) for key in PER_LEVEL}
        optional = {key: _array(data, key, where, n) if data.get(key) is not None else None
                    for key in ("volts", "volts_rel", "mem_freqs_mhz")}
        static_w, idle_w = float(data["static_power_w"]), float(data["idle_power_w"])
        table = LevelTable(name=str(data["name"]), description=str(data.get("description", "")),
                           freqs_mhz=freqs, static_power_w=static_w, idle_power_w=idle_w,
                           provenance=dict(data.get("provenance", {})),
                           scalable_time=per_level["scalable_time"],
                           memory_time=per_level["memory_time"],
                           core_power_w=per_level["core_power_w"],
                           mem_power_w=per_level["mem_power_w"], volts=optional["volts"],
                           volts_rel=optional["volts_rel"],
                           mem_freqs_mhz=optional["mem_freqs_mhz"])
    except KeyError as exc:
        raise LevelTableError(f"{where}: missing field {exc}") from None
    except (TypeError, ValueError) as exc:
        if isinstance(exc, LevelTableError):
            raise
        raise LevelTableError(f"{where}: {exc}") from None
    if not (np.all(table.scalable_time > 0) and np.all(table.memory_time > 0)
            and static_w >= 0 and idle_w >= 0):
        raise LevelTableError(f"{where}: times must be > 0 and powers >= 0")
    return table


def table_to_dict(table: LevelTable) -> dict[str, Any]:
    """The JSON form of `table` (inverse of `table_from_dict`)."""
    out: dict[str, Any] = {"name": table.name, "description": table.description,
                           "provenance": table.provenance,
                           "freqs_mhz": table.freqs_mhz.tolist()}
    if table.mem_freqs_mhz is not None:
        out["mem_freqs_mhz"] = table.mem_freqs_mhz.tolist()
    out["static_power_w"] = table.static_power_w
    out["idle_power_w"] = table.idle_power_w
    for key in (*PER_LEVEL, "volts", "volts_rel"):
        value = getattr(table, key)
        if value is not None:
            out[key] = [float(f"{v:.7g}") for v in value]
    return out


def _array(data: dict[str, Any], key: str, where: str, size: int | None = None) -> FloatArray:
    values = np.asarray(data[key], dtype=np.float64)
    if values.ndim != 1 or not np.all(np.isfinite(values)) or (size is not None
                                                               and values.size != size):
        raise LevelTableError(f"{where}: {key} must be a list of {size or 'some'} finite numbers")
    return values


def read_table(path: str | Path) -> LevelTable:
    """Read a level table file; `LevelTableError` (one line, names the file) when unusable."""
    try:
        data = json.loads(Path(path).read_text())
    except OSError as exc:
        raise LevelTableError(f"{path}: cannot read: {exc.strerror or exc}") from None
    except json.JSONDecodeError as exc:
        raise LevelTableError(f"{path}: not JSON ({exc.msg}, line {exc.lineno})") from None
    if not isinstance(data, dict):
        raise LevelTableError(f"{path}: not a level table (a JSON object)")
    return table_from_dict(data, str(path))


def write_table(path: str | Path, table: LevelTable) -> None:
    """Write `table` as JSON, one field per line (arrays on one line: diff-friendly)."""
    fields = [f" {json.dumps(k)}: {json.dumps(v)}" for k, v in table_to_dict(table).items()]
    Path(path).write_text("{\n" + ",\n".join(fields) + "\n}\n")


def _shipped() -> dict[str, LevelTable]:
    tables = {}
    for entry in sorted(resources.files(TABLES_PACKAGE).iterdir(), key=lambda e: e.name):
        if entry.name.endswith(".json"):
            table = table_from_dict(json.loads(entry.read_text()), f"{TABLES_PACKAGE}/{entry.name}")
            tables[table.name] = table
    return tables


LEVEL_TABLES: dict[str, LevelTable] = _shipped()
"""Every shipped level table by name (a few small JSON files, read at import)."""


def level_table(name: str) -> LevelTable:
    """The shipped level table `name`, or a table file when `name` is a path ending in .json;
    `KeyError` names the known ones, `LevelTableError` a bad file."""
    if name.endswith(".json"):
        return read_table(name)
    try:
        return LEVEL_TABLES[name]
    except KeyError:
        raise KeyError(f"unknown level table {name!r} (known: {', '.join(LEVEL_TABLES)})") from None
