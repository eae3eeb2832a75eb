"""Intel i915 GPUs (`/sys/class/drm/cardN/`): the GT's RPS soft limits pinned to one level.

The GT runs between ``gt_RPn_freq_mhz`` and ``gt_RP0_freq_mhz`` in steps of its frequency unit:
50 MHz up to gen8 (Broadwell), 50/3 MHz on gen9 and later. The kernel converts each MHz value to a
unit count rounding to the closest (``DIV_ROUND_CLOSEST``) and prints it back the same way, so the
levels are ``DIV_ROUND_CLOSEST(k * 50, 3)`` for k from RPn to RP0. Pinning means min = max (= boost,
so wait-boosting does not escape the pin); min > max is refused with EINVAL, so the writes are
ordered by direction. Firmware and thermal limits may still override: trust ``gt_act_freq_mhz``.
"""

from __future__ import annotations

import math
from typing import Any, ClassVar

import numpy as np
import numpy.typing as npt

from govd.device.base import Controllability, DeviceError, Reading, levels_problem
from govd.device.registry import Backend
from govd.device.sysfs import SysfsDevice, nearest_level

# PCI device-id high bytes of the GTs whose frequency unit is 50 MHz (gen6 Sandy Bridge to gen8
# Broadwell). Every later GT uses 50/3 MHz. Cherryview and Valleyview have their own formulas;
# they are treated as 50 MHz parts here, which only makes their level list coarser.
_PRE_GEN9_ID_PREFIXES = (0x01, 0x04, 0x0A, 0x0C, 0x0D, 0x0F, 0x16, 0x22)

MAX_GT_MHZ = 100_000.0
"""Highest RP0 believed: far above any GT's few GHz, low enough that the level list built from
RPn..RP0 stays a few thousand entries (an RP0 of 1e11 MHz asked for tens of GiB). Units: MHz."""


def gt_levels_mhz(rpn_mhz: float, rp0_mhz: float, unit_num: int, unit_den: int) -> list[float]:
    """Every level from RPn to RP0 for a GT whose unit is ``unit_num / unit_den`` MHz, rounded
    to whole MHz the way the kernel prints them. Units: MHz."""
    first = (round(rpn_mhz) * unit_den + unit_num // 2) // unit_num
    last = (round(rp0_mhz) * unit_den + unit_num // 2) // unit_num
    return [float((k * unit_num + unit_den // 2) // unit_den) for k in range(first, last + 1)]


class I915Device(SysfsDevice):
    """An i915 GT (``cardN``), governed through ``gt_min_freq_mhz``/``gt_max_freq_mhz``."""

    backend: ClassVar[str] = "i915"
    STATE_FIELDS: ClassVar[dict[str, tuple[type, ...]]] = {
        "min_freq_mhz": (int, float), "max_freq_mhz": (int, float),
        "boost_freq_mhz": (int, float)}
    OPTIONAL_STATE: ClassVar[frozenset[str]] = frozenset({"boost_freq_mhz"})
    # File names relative to the device directory; the xe backend swaps them for its own.
    MIN: str = "gt_min_freq_mhz"
    MAX: str = "gt_max_freq_mhz"
    BOOST: str | None = "gt_boost_freq_mhz"
    RPN: str = "gt_RPn_freq_mhz"
    RP0: str = "gt_RP0_freq_mhz"
    ACT: str = "gt_act_freq_mhz"
    CUR: str = "gt_cur_freq_mhz"

    def _freq_unit(self) -> tuple[int, int]:
        """(numerator, denominator) of the GT's frequency unit in MHz."""
        if self._has("device/device"):
            try:
                pci_id = int(self._read("device/device"), 16)
            except ValueError:
                pci_id = 0
            if pci_id >> 8 in _PRE_GEN9_ID_PREFIXES:
                return 50, 1
        return 50, 3

    @property
    def levels_mhz(self) -> npt.NDArray[np.float64]:
        """RPn..RP0 in steps of the GT's frequency unit, ascending. Units: MHz."""
        rpn_mhz, rp0_mhz = self.bounds_mhz
        return np.asarray(gt_levels_mhz(rpn_mhz, rp0_mhz, *self._freq_unit()), dtype=np.float64)

    @property
    def bounds_mhz(self) -> tuple[float, float]:
        """(RPn, RP0), the range the hardware accepts for the soft limits. Units: MHz. Raises
        DeviceError for a range no GT has (0 < RPn <= RP0 <= `MAX_GT_MHZ` fails)."""
        rpn_mhz, rp0_mhz = self._read_float(self.RPN), self._read_float(self.RP0)
        if not 0 < rpn_mhz <= rp0_mhz <= MAX_GT_MHZ:
            raise DeviceError(f"{self.path}: implausible clock range {self.RPN}={rpn_mhz:g} .. "
                              f"{self.RP0}={rp0_mhz:g} MHz")
        return rpn_mhz, rp0_mhz

    def controllable(self) -> Controllability:
        """Needs a plausible RPn..RP0 range holding levels a governor can choose among
        (`levels_problem`) and write access to the soft limits; notes a pin someone else left."""
        try:
            bounds = self.bounds_mhz
            problem = levels_problem(self.levels_mhz)
        except DeviceError as exc:
            return Controllability(False, str(exc))
        if problem is not None:
            return Controllability(False, problem)
        refused = self._writable(self.MIN, self.MAX)
        if refused:
            return Controllability(False, f"no permission to write {', '.join(refused)}")
        low, high = self._pinned()
        if self._saved_state is None and low == high and (low, high) != bounds:
            return Controllability(True, f"clock already pinned at {low:g} MHz by another tool")
        return Controllability(True)

    def _pinned(self) -> tuple[float, float]:
        return self._read_float(self.MIN), self._read_float(self.MAX)

    def _boost(self) -> float | None:
        """The wait-boost frequency, None where the driver has no such knob. Units: MHz."""
        if self.BOOST is None or not self._has(self.BOOST):
            return None
        return self._read_float(self.BOOST)

    def read(self) -> Reading:
        """``gt_act_freq_mhz`` (0 while the GT sleeps) and hwmon energy/power of the card."""
        energy_mj, power_w = self._hwmon_energy_power("device")
        return Reading(
            freq_mhz=self._read_float(self.ACT),
            busy=math.nan,
            energy_mj=energy_mj,
            power_w=power_w,
            counters={"requested_freq_mhz": self._read_float(self.CUR)},
        )

    def set_level(self, freq_mhz: float) -> None:
        """Pin min = max (= boost) to the level nearest ``freq_mhz``; ordered writes."""
        levels = self.levels_mhz
        target = nearest_level(levels, min(max(freq_mhz, levels[0]), levels[-1]))
        self._chosen = target
        old = self._pinned()
        boost = self._boost()
        if old == (target, target) and boost in (None, target):
            return
        self._ensure_saved()
        self._write_bounds(self.MIN, self.MAX, (target, target), old)
        if boost is not None and boost != target:
            self._write(self.BOOST or "", round(target))

    def _changed_setting(self, chosen_mhz: int | float) -> str | None:
        """The soft limits no longer pinned where govd's last `set_level` put them."""
        low, high = self._pinned()
        if (low, high) != (chosen_mhz, chosen_mhz):
            return f"min/max are {low:g}/{high:g} MHz, not {chosen_mhz:g}"
        return None

    def _capture_state(self) -> dict[str, Any]:
        low, high = self._pinned()
        state: dict[str, Any] = {"min_freq_mhz": low, "max_freq_mhz": high}
        boost = self._boost()
        if boost is not None:
            state["boost_freq_mhz"] = boost
        return state

    def _restore_state(self, state: dict[str, Any]) -> None:
        saved = (state["min_freq_mhz"], state["max_freq_mhz"])
        self._write_bounds(self.MIN, self.MAX, saved, self._pinned())
        boost = state.get("boost_freq_mhz")
        if boost is not None and self._boost() not in (None, boost):
            self._write(self.BOOST or "", round(boost))


BACKEND = Backend("i915", sysfs_class=I915Device)
"""The backend ``i915`` (`govd.device.registry`)."""
