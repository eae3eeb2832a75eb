"""AMD GPUs (`/sys/class/drm/cardN/device/`): a forced DPM level in ``pp_dpm_sclk``.

``pp_dpm_sclk`` lists one line per shader-clock level, ``N: 500Mhz``, with ``*`` after the one
running (``Mhz`` or ``MHz`` by kernel version; newer kernels add an ``S: 19Mhz *`` deep-sleep line,
which is no level). A level index is accepted only once ``power_dpm_force_performance_level`` is
``manual``, so that is written first.

Fine-grained parts (RDNA, APUs) list only their minimum and maximum, with a middle line for the
current clock when it lies between (that line is no level). Their driver maps a written index 0 to
the minimum and any higher index to the maximum, so govd treats min and max as the only two levels;
finer control would go through ``pp_od_clk_voltage`` overdrive, which needs a kernel parameter.
"""

from __future__ import annotations

import re
from typing import Any, ClassVar

import numpy as np
import numpy.typing as npt

from govd.device.base import Controllability, DeviceError, Reading, levels_problem
from govd.device.sysfs import SysfsDevice, nearest_level

_LEVEL_LINE = re.compile(r"^\s*(\w+):\s*(\d+(?:\.\d+)?)\s*mhz\s*(\*)?\s*$", re.IGNORECASE)
_OD_POINT = re.compile(
    r"^\s*\d+:\s*(\d+(?:\.\d+)?)\s*mhz\s+(\d+(?:\.\d+)?)\s*mv\s*$", re.IGNORECASE
)
MANUAL = "manual"


def parse_dpm_levels(text: str) -> tuple[list[float], int | None, float | None, bool]:
    """Parse ``pp_dpm_sclk``: (levels MHz ascending, index of the running level or None when the
    running clock is not a level, running clock MHz or None, fine-grained?)."""
    rows: list[tuple[int, float, bool]] = []
    sleeping_mhz = None
    for line in text.splitlines():
        match = _LEVEL_LINE.match(line)
        if match is None:
            continue
        tag, mhz, star = match.group(1), float(match.group(2)), match.group(3) is not None
        if not tag.isdigit():
            if star:
                sleeping_mhz = mhz
            continue
        rows.append((int(tag), mhz, star))
    if not rows:
        raise ValueError(f"no clock levels in {text!r}")
    rows.sort()
    # The index written back is the level's position: it is the driver's number only when the
    # lines are numbered 0..n-1 (as amdgpu prints them); any other table would force a level
    # the driver numbers differently.
    if [tag for tag, _, _ in rows] != list(range(len(rows))):
        raise ValueError(f"levels not numbered 0..{len(rows) - 1}: "
                         f"{' '.join(str(tag) for tag, _, _ in rows)}")
    freqs = [mhz for _, mhz, _ in rows]
    running = [i for i, (_, _, star) in enumerate(rows) if star]
    current_mhz = sleeping_mhz if sleeping_mhz is not None else (
        freqs[running[0]] if running else None
    )
    # Every discrete sclk table amdgpu prints has more than three levels; two or three lines are
    # the fine-grained min/(current)/max form, whose middle line is the running clock.
    fine = len(rows) <= 3
    levels = [freqs[0], freqs[2]] if fine and len(rows) == 3 else freqs
    if levels != sorted(levels):  # `levels_mhz` is ascending; nearest-level search relies on it
        raise ValueError(f"clocks not ascending: {' '.join(f'{mhz:g}' for mhz in levels)} MHz")
    if fine and len(rows) == 3:
        return levels, None, current_mhz, True
    index = running[0] if running and sleeping_mhz is None else None
    return freqs, index, current_mhz, fine


def parse_voltage_curve(text: str) -> list[tuple[float, float]]:
    """(MHz, V) points from ``pp_od_clk_voltage``: ``OD_VDDC_CURVE`` where present, else the
    ``OD_SCLK`` lines that carry a voltage (Polaris, Vega10). Empty when it has neither."""
    sections: dict[str, list[tuple[float, float]]] = {}
    section = ""
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.endswith(":") and stripped[:-1].replace("_", "").isalpha():
            section = stripped[:-1].upper()
            continue
        match = _OD_POINT.match(line)
        if match is not None:
            point = (float(match.group(1)), float(match.group(2)) / 1000.0)
            sections.setdefault(section, []).append(point)
    return sorted(sections.get("OD_VDDC_CURVE") or sections.get("OD_SCLK") or [])


class AmdgpuDevice(SysfsDevice):
    """An amdgpu card (``cardN``); its files live in the PCI device directory ``cardN/device``."""

    backend: ClassVar[str] = "amdgpu"
    STATE_FIELDS: ClassVar[dict[str, tuple[type, ...]]] = {
        "performance_level": (str,), "sclk_index": (int,)}
    OPTIONAL_STATE: ClassVar[frozenset[str]] = frozenset({"sclk_index"})

    def _table(self) -> tuple[list[float], int | None, float | None, bool]:
        text = self._read("device/pp_dpm_sclk")
        try:
            return parse_dpm_levels(text)
        except ValueError as exc:
            raise DeviceError(f"{self.path}/device/pp_dpm_sclk: {exc}") from exc

    @property
    def levels_mhz(self) -> npt.NDArray[np.float64]:
        """The DPM levels (min and max only on fine-grained parts), ascending. Units: MHz."""
        return np.asarray(self._table()[0], dtype=np.float64)

    @property
    def bounds_mhz(self) -> tuple[float, float]:
        """(lowest, highest) DPM level. Units: MHz."""
        levels = self._table()[0]
        return levels[0], levels[-1]

    def performance_level(self) -> str:
        """``power_dpm_force_performance_level`` now: auto, low, high, manual, profile_*."""
        return self._read("device/power_dpm_force_performance_level")

    def controllable(self) -> Controllability:
        """Needs levels a governor can choose among (`levels_problem`) and write access to
        both files; notes a level forced by another tool."""
        try:
            problem = levels_problem(self.levels_mhz)
        except DeviceError as exc:
            return Controllability(False, str(exc))
        if problem is not None:
            return Controllability(False, problem)
        refused = self._writable("device/power_dpm_force_performance_level", "device/pp_dpm_sclk")
        if refused:
            return Controllability(False, f"no permission to write {', '.join(refused)}")
        level = self.performance_level()
        if self._saved_state is None and level != "auto":
            return Controllability(True, f"performance level is {level!r}: another tool may be "
                                   "in charge")
        return Controllability(True)

    def read(self) -> Reading:
        """Running shader clock, ``gpu_busy_percent`` and hwmon power (µW) or energy (µJ)."""
        _, _, current_mhz, _ = self._table()
        if current_mhz is None:
            raise DeviceError(f"{self.path}/device/pp_dpm_sclk marks no running level")
        busy = self._read_optional_float("device/gpu_busy_percent") / 100.0
        energy_mj, power_w = self._hwmon_energy_power("device")
        return Reading(freq_mhz=current_mhz, busy=busy, energy_mj=energy_mj, power_w=power_w)

    def set_level(self, freq_mhz: float) -> None:
        """Force the DPM level nearest ``freq_mhz``: ``manual`` first, then its index."""
        levels, index, _, _ = self._table()
        target = levels.index(nearest_level(levels, freq_mhz))
        self._chosen = target
        perf = self.performance_level()
        if perf == MANUAL and index == target:
            return
        self._ensure_saved()
        if perf != MANUAL:
            self._write("device/power_dpm_force_performance_level", MANUAL)
        self._write("device/pp_dpm_sclk", target)

    def _changed_setting(self, chosen: int | float) -> str | None:
        """Out of ``manual``, or (discrete parts) another level forced in ``pp_dpm_sclk``."""
        perf = self.performance_level()
        if perf != MANUAL:
            return f"performance level is {perf}"
        _, index, _, fine = self._table()
        # Fine-grained parts and deep sleep mark no level: nothing to compare.
        if not fine and index is not None and index != chosen:
            return f"pp_dpm_sclk runs level {index}, not {chosen}"
        return None

    def volts_by_level(self) -> npt.NDArray[np.float64] | None:
        """Core voltage at each level from ``pp_od_clk_voltage``, interpolated on its curve;
        None where the driver exposes no voltages. Units: V."""
        if not self._has("device/pp_od_clk_voltage"):
            return None
        curve = parse_voltage_curve(self._read("device/pp_od_clk_voltage"))
        if not curve:
            return None
        freqs, volts = zip(*curve, strict=True)
        volts_v = np.interp(self.levels_mhz, np.asarray(freqs), np.asarray(volts))
        return np.asarray(volts_v, dtype=np.float64)

    def _capture_state(self) -> dict[str, Any]:
        state: dict[str, Any] = {"performance_level": self.performance_level()}
        if state["performance_level"] == MANUAL:  # the table's index matters only in manual
            index = self._table()[1]
            if index is not None:
                state["sclk_index"] = index
        return state

    def _not_held(self, saved: dict[str, Any], now: dict[str, Any]) -> list[str]:
        """As `SysfsDevice._not_held`, but a forced level is not read back while the table
        marks none (deep sleep, ``S: 19Mhz *``): which one is forced cannot be seen then."""
        if "sclk_index" in saved and "sclk_index" not in now \
                and now.get("performance_level") == MANUAL:
            saved = {key: value for key, value in saved.items() if key != "sclk_index"}
        return super()._not_held(saved, now)

    def _restore_state(self, state: dict[str, Any]) -> None:
        saved = state["performance_level"]
        if saved == MANUAL:
            if self.performance_level() != MANUAL:
                self._write("device/power_dpm_force_performance_level", MANUAL)
            if "sclk_index" in state and self._table()[1] != state["sclk_index"]:
                self._write("device/pp_dpm_sclk", state["sclk_index"])
        elif self.performance_level() != saved:
            # Writing "auto" (or any non-manual level) also drops the forced sclk mask.
            self._write("device/power_dpm_force_performance_level", saved)
