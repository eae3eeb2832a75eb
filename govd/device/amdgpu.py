"""AMD GPUs (`/sys/class/drm/cardN/device/`), governed as finely as each generation allows.

What govd does depends on what the card's files offer (formats: `govd.device.amdgpu_tables`):

- **Discrete DPM** (Polaris, Vega: 8 levels in ``pp_dpm_sclk``): ``manual`` in
  ``power_dpm_force_performance_level``, then the level's index in ``pp_dpm_sclk``.
- **Overdrive** (``OD_SCLK`` and ``OD_RANGE`` in ``pp_od_clk_voltage``: APUs always, RDNA1-3
  desktop GPUs when the kernel command line enables overdrive): govd offers a grid of clocks
  across the range (`govd.device.amdgpu_modes`) and pins the soft minimum and maximum to the
  one chosen, as SteamOS does: ``manual``, then ``s 0 MHZ`` and ``s 1 MHZ`` (the maximum first
  when the clock rises above the maximum in force, so no step has min > max), then ``c``. On an
  APU the range is ``OD_RANGE`` (its maximum is the hardware's); on a discrete GPU it is the
  soft range found within ``OD_RANGE`` (never above the maximum found: govd does not
  overclock). A Van Gogh before Linux 6.17 prints the file only in ``manual``: its range is then
  ``pp_dpm_sclk``'s first and last line. APUs refuse ``pp_dpm_sclk`` writes (EINVAL); govd
  never writes it on such a part.
- **Minimum and maximum only** (an RDNA GPU without ``OD_SCLK``): nothing between them can be
  set, so govd does not govern it and says what would enable fine control.
- **RDNA4** prints ``OD_SCLK_OFFSET``, one offset to the firmware's clock curve: it moves the
  curve but caps no clock (smu_v14_0_2 stores one ``GfxclkFoffset``, and users measured no change
  of clock or score from it), so there is no clock for govd to set: not governed, and said why.

Restore (every way out): the found performance level, and on an overdrive part the found
``OD_SCLK`` minimum and maximum, written back in the same safe order and committed; where the
kernel refuses a found value (an RDNA1 boots with a minimum below the range it accepts) ``r`` and
``c`` put back the table it booted with. An APU found outside ``manual`` gets ``r`` + ``c`` (its
defaults, which leaving ``manual`` also restores). What cannot be read back is said, not
pretended: the level mask another tool forced in ``pp_dpm_sclk`` (``2 3 4``) shows only as the
level running, so govd puts back that level and says so (`AmdgpuDevice.unrestorable`).
"""

from __future__ import annotations

import logging
import math
from typing import Any, ClassVar

import numpy as np
import numpy.typing as npt

from govd.device.amdgpu_modes import DISCRETE, LIMITED, classify
from govd.device.amdgpu_tables import (
    OdTable,
    SclkTable,
    od_sclk_pair,
    od_sections,
    parse_od,
    parse_sclk,
    parse_voltage_curve,
)
from govd.device.base import Controllability, DeviceError, Reading, WriteRefused, levels_problem
from govd.device.registry import Backend
from govd.device.sysfs import SysfsDevice, excerpt, nearest_level

log = logging.getLogger(__name__)

MANUAL = "manual"
PERF = "device/power_dpm_force_performance_level"
SCLK = "device/pp_dpm_sclk"
OD = "device/pp_od_clk_voltage"
HWMON_SCLK = "freq1_input"
MAX_OD_TEXT = 8192
"""Longest ``od_other`` a state file may hold: pp_od_clk_voltage is one page (4 KiB)."""

class AmdgpuDevice(SysfsDevice):
    """An amdgpu card (``cardN``); its files live in the PCI device directory ``cardN/device``."""

    backend: ClassVar[str] = "amdgpu"
    STATE_FIELDS: ClassVar[dict[str, tuple[type, ...]]] = {
        "performance_level": (str,), "sclk_index": (int,), "od_sclk_mhz": (list,),
        "od_other": (str,)}
    OPTIONAL_STATE: ClassVar[frozenset[str]] = frozenset({"sclk_index", "od_sclk_mhz",
                                                          "od_other"})

    @classmethod
    def check_state(cls, state: object) -> None:
        """As `SysfsDevice.check_state`, and ``od_sclk_mhz`` two whole MHz, the minimum first,
        ``od_other`` no longer than a page of the file it comes from."""
        super().check_state(state)
        assert isinstance(state, dict)
        pair = state.get("od_sclk_mhz")
        if pair is not None and not (
                len(pair) == 2 and all(type(v) is int and 0 < v < 100_000 for v in pair)
                and pair[0] <= pair[1]):
            raise ValueError(f"amdgpu state 'od_sclk_mhz' is {excerpt(str(pair))}")
        if len(state.get("od_other", "")) > MAX_OD_TEXT:
            raise ValueError(f"amdgpu state 'od_other' is longer than {MAX_OD_TEXT} characters")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._mode_cache: tuple[str, str, npt.NDArray[np.float64]] | None = None
        self._hwmon_sclk: str | None = None

    # -- what the card offers ----------------------------------------------------------------
    def _table(self) -> SclkTable:
        text = self._read(SCLK)
        try:
            return parse_sclk(text)
        except ValueError as exc:
            raise DeviceError(f"{self.path}/{SCLK}: {exc}") from exc

    def _od(self) -> OdTable | None:
        """``pp_od_clk_voltage`` now, None where the driver has none (overdrive off)."""
        if not self._has(OD):
            return None
        return parse_od(self._read(OD))

    def _mode(self) -> tuple[str, str, npt.NDArray[np.float64]]:
        """(mode, why not governed or "", levels), worked out once from the files as found: the
        levels must not move under a governor built for them."""
        if self._mode_cache is None:
            self._mode_cache = self._find_mode()
        return self._mode_cache

    def _find_mode(self) -> tuple[str, str, npt.NDArray[np.float64]]:
        od = self._od()
        try:
            table: SclkTable | None = self._table()
        except DeviceError:
            if od is None or not (od.has_sclk_offset or od.sclk_mhz is None):
                raise
            table = None  # the OD table alone says this card cannot be governed
        return classify(table, od)

    @property
    def levels_mhz(self) -> npt.NDArray[np.float64]:
        """The levels govd sets: the DPM levels of a discrete part, the overdrive grid of a
        fine-grained one (elsewhere the minimum and maximum listed), ascending. Units: MHz."""
        return self._mode()[2].copy()

    @property
    def bounds_mhz(self) -> tuple[float, float]:
        """(lowest, highest) level. Units: MHz."""
        levels = self._mode()[2]
        if not levels.size:
            raise DeviceError(f"{self.path}/{SCLK}: no clock levels")
        return float(levels[0]), float(levels[-1])

    def performance_level(self) -> str:
        """``power_dpm_force_performance_level`` now: auto, low, high, manual, profile_*."""
        return self._read(PERF)

    def controllable(self) -> Controllability:
        """Needs a discrete table or an overdrive range (`levels_problem` holding) and write
        access to the files govd writes; notes a performance level another tool set."""
        try:
            mode, why, levels = self._mode()
        except DeviceError as exc:
            return Controllability(False, str(exc))
        if why:
            return Controllability(False, why)
        problem = levels_problem(levels)
        if problem is not None:
            return Controllability(False, problem)
        refused = self._writable(PERF, SCLK if mode == DISCRETE else OD)
        if refused:
            return Controllability(False, f"no permission to write {', '.join(refused)}")
        level = self.performance_level()
        if self._saved_state is None and level != "auto":
            note = f"performance level is {excerpt(level, 20)}: another tool may be in charge"
            if mode == DISCRETE and level == MANUAL:
                note += f"; {self._mask_caveat()}"
            return Controllability(True, note)
        return Controllability(True)

    def _mask_caveat(self, index: int | None = None) -> str:
        which = "the one running" if index is None else f"level {index}, the one running then"
        return ("the kernel does not show which pp_dpm_sclk levels a forced mask holds, so a "
                f"restore puts back {which} (a mask of several levels is narrowed to it)")

    # -- reading -----------------------------------------------------------------------------
    def read(self) -> Reading:
        """Running shader clock (pp_dpm_sclk's mark, or hwmon's ``freq1_input`` where nothing is
        marked, else NaN), ``gpu_busy_percent`` and hwmon power (µW) or energy (µJ)."""
        current = self._table().current_mhz
        if current is None:
            current = self._hwmon_sclk_mhz()
        busy = self._read_optional_float("device/gpu_busy_percent") / 100.0
        energy_mj, power_w = self._hwmon_energy_power("device")
        return Reading(freq_mhz=current, busy=busy, energy_mj=energy_mj, power_w=power_w)

    def _hwmon_sclk_mhz(self) -> float:
        """hwmon's shader clock (``freq1_input``, Hz) in MHz, NaN where there is none."""
        if self._hwmon_sclk is None:
            hwmons = sorted((self.path / "device").glob("hwmon/hwmon*"))
            self._hwmon_sclk = f"{hwmons[0].relative_to(self.path)}/{HWMON_SCLK}" if hwmons \
                else ""
        if not self._hwmon_sclk:
            return math.nan
        return self._read_optional_float(self._hwmon_sclk) / 1e6

    # -- setting -----------------------------------------------------------------------------
    def set_level(self, freq_mhz: float) -> None:
        """Run at the level nearest ``freq_mhz``: ``manual`` first, then the level's index
        (discrete) or the overdrive pin ``s 0``/``s 1``/``c``. Writes nothing that holds."""
        mode, why, levels = self._mode()
        if why:
            raise DeviceError(f"{self.path}: {why}")
        target = nearest_level(levels, freq_mhz)
        perf = self.performance_level()
        if mode == DISCRETE:
            index = int(np.searchsorted(levels, target))
            self._chosen = index
            if perf == MANUAL and self._table().running_index == index:
                return
            self._ensure_saved()
            if perf != MANUAL:
                self._write(PERF, MANUAL)
            self._write(SCLK, index)
            return
        mhz = int(target)
        self._chosen = mhz
        if perf == MANUAL and self._od_sclk() == (mhz, mhz):
            return
        self._ensure_saved()
        if perf != MANUAL:
            self._write(PERF, MANUAL)
        self._pin(mhz, mhz)

    def _od_sclk(self) -> tuple[int, int] | None:
        """OD_SCLK's (minimum, maximum) now, None where the file shows none (read each tick
        after a write, so without parsing the whole file). Units: MHz."""
        if not self._has(OD):
            return None
        pair = od_sclk_pair(self._read(OD))
        return None if pair is None else (round(pair[0]), round(pair[1]))

    def _pin(self, low_mhz: int, high_mhz: int) -> None:
        """Edit OD_SCLK to (``low_mhz``, ``high_mhz``) and commit: the maximum first when the new
        minimum lies above the maximum being edited, so no step has min > max; when the second
        edit is refused the first is put back before the error goes up."""
        now = self._od_sclk()
        if now is None:
            raise DeviceError(f"{self.path}/{OD}: no OD_SCLK in manual")
        steps = [(0, low_mhz, now[0]), (1, high_mhz, now[1])]
        if low_mhz > now[1]:
            steps.reverse()
        done: list[tuple[int, int]] = []
        try:
            for which, new, old in steps:
                if new != old:
                    self._write(OD, f"s {which} {new}")
                    done.append((which, old))
            self._write(OD, "c")
        except DeviceError:
            # nothing is applied before "c": leave no edit behind for another tool's commit
            for which, old in reversed(done):
                self._write(OD, f"s {which} {old}")
            raise

    def _changed_setting(self, chosen: int | float) -> str | None:
        """Out of ``manual``, another level forced (discrete) or another OD_SCLK pin."""
        perf = self.performance_level()
        if perf != MANUAL:
            return f"performance level is {excerpt(perf, 20)}"
        if self._mode()[0] == DISCRETE:
            index = self._table().running_index
            # deep sleep marks no level: nothing to compare
            if index is not None and index != chosen:
                return f"pp_dpm_sclk runs level {index}, not {chosen}"
            return None
        pair = self._od_sclk()
        if pair is not None and pair != (chosen, chosen):
            return f"OD_SCLK is {pair[0]}-{pair[1]} MHz, not {chosen} MHz"
        return None

    def volts_by_level(self) -> npt.NDArray[np.float64] | None:
        """Core voltage at each level from ``pp_od_clk_voltage``, interpolated on its curve;
        None where the driver exposes no voltages. Units: V."""
        if not self._has(OD):
            return None
        curve = parse_voltage_curve(self._read(OD))
        if not curve:
            return None
        freqs, volts = zip(*curve, strict=True)
        volts_v = np.interp(self.levels_mhz, np.asarray(freqs), np.asarray(volts))
        return np.asarray(volts_v, dtype=np.float64)

    # -- what govd found, and putting it back ------------------------------------------------
    def _capture_state(self) -> dict[str, Any]:
        state: dict[str, Any] = {"performance_level": self.performance_level()}
        if state["performance_level"] == MANUAL and self._table_mode() == DISCRETE:
            index = self._table().running_index  # what a mask shows of itself
            if index is not None:
                state["sclk_index"] = index
        od = self._od()
        if od is not None and od.sclk_mhz is not None:
            state["od_sclk_mhz"] = [round(od.sclk_mhz[0]), round(od.sclk_mhz[1])]
            state["od_other"] = od.without("OD_SCLK")
        return state

    def _table_mode(self) -> str:
        """The mode as the files show it now (a device reopened for `govd restore` has not
        seen them as found, and needs no levels)."""
        try:
            return self._mode()[0]
        except DeviceError:
            return LIMITED

    def unrestorable(self) -> str | None:
        """What `restore` cannot put back as found: a pp_dpm_sclk mask another tool forced (the
        kernel shows only the level running), None when the found state can be put back whole."""
        saved = self._saved_state or {}
        if saved.get("performance_level") != MANUAL or self._table_mode() != DISCRETE:
            return None
        if "sclk_index" not in saved:
            return (f"{self.name}: pp_dpm_sclk marked no level when found (deep sleep), so the "
                    "level mask another tool forced is not known and is not put back")
        return f"{self.name}: {self._mask_caveat(saved['sclk_index'])}"

    def _restore_state(self, state: dict[str, Any]) -> None:
        failure: DeviceError | None = None
        try:  # the performance level is put back whatever happens here
            self._restore_od(state)
        except DeviceError as exc:
            failure = exc
        self._restore_level(state)
        if failure is not None:
            if self._not_held(state, self._capture_state()):
                raise failure
            # an APU leaving manual takes its default clocks back by itself
            log.info("%s: %s; the found state holds all the same", self.name, failure)

    def _restore_od(self, state: dict[str, Any]) -> None:
        """Put OD_SCLK back: the values found, in the safe order, committed; ``r`` + ``c`` where
        the kernel refuses a value found or (an APU found outside manual) none was shown."""
        found_od = state.get("od_sclk_mhz")
        now_od = self._od_sclk()
        if now_od is None:
            return
        if found_od is None and state["performance_level"] != MANUAL:
            # an APU found outside manual showed no OD_SCLK: its defaults, which leaving
            # manual also brings back
            self._ensure_manual()
            self._write(OD, "r")
            self._write(OD, "c")
        elif found_od is not None and tuple(found_od) != now_od:
            self._ensure_manual()
            try:
                self._pin(*found_od)
            except WriteRefused as exc:
                log.info("%s: %s; putting back the table the GPU booted with (r, c)",
                         self.name, exc)
                self._write(OD, "r")
                self._write(OD, "c")

    def _restore_level(self, state: dict[str, Any]) -> None:
        """Put the performance level back (and, in manual, the level that was running)."""
        saved = state["performance_level"]
        if saved == MANUAL:
            self._ensure_manual()
            if "sclk_index" in state and self._table().running_index != state["sclk_index"]:
                self._write(SCLK, state["sclk_index"])
            caveat = self.unrestorable()
            if caveat:
                log.warning("%s", caveat)
        elif self.performance_level() != saved:
            # Writing "auto" (or any non-manual level) also drops the forced sclk mask.
            self._write(PERF, saved)

    def _ensure_manual(self) -> None:
        if self.performance_level() != MANUAL:
            self._write(PERF, MANUAL)

    def _not_held(self, saved: dict[str, Any], now: dict[str, Any]) -> list[str]:
        """As `SysfsDevice._not_held`, except for what cannot be read back now: a forced level
        while the table marks none (deep sleep) and OD_SCLK where the file hides it (an APU
        outside manual before 6.17); the other OD sections are compared one by one."""
        saved = dict(saved)
        if "sclk_index" in saved and "sclk_index" not in now \
                and now.get("performance_level") == MANUAL:
            del saved["sclk_index"]
        for hidden in ("od_sclk_mhz", "od_other"):
            if hidden in saved and hidden not in now:
                del saved[hidden]
        differ = []
        if "od_other" in saved:
            found, after = od_sections(saved.pop("od_other")), od_sections(now.get("od_other",
                                                                                   ""))
            differ = [f"{name} is {excerpt(' | '.join(after.get(name, ())), 40)}, not "
                      f"{excerpt(' | '.join(lines), 40)}"
                      for name, lines in found.items() if after.get(name) != lines]
        return differ + super()._not_held(saved, now)


BACKEND = Backend("amdgpu", sysfs_class=AmdgpuDevice)
"""The backend ``amdgpu`` (`govd.device.registry`)."""
