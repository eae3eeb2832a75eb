"""devfreq devices (`/sys/class/devfreq/<name>/`): Mali (panfrost), Adreno (msm) and other SoC GPUs.

The kernel lists the levels in Hz in ``available_frequencies``. To set one, govd switches the
governor to ``userspace`` (which must be listed in ``available_governors``) and writes
``userspace/set_freq`` in Hz; the kernel clamps it to ``min_freq``..``max_freq`` and rounds it to an
operating point, so the level actually running is read back from ``cur_freq``.
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
import numpy.typing as npt

from govd.device.base import Controllability, DeviceError, Reading, levels_problem
from govd.device.sysfs import SysfsDevice, excerpt, nearest_level

_HZ_PER_MHZ = 1e6
USERSPACE = "userspace"
UNDEFINED = "undefined"
"""What ``userspace/set_freq`` reads until something is written after userspace is selected."""


class DevfreqDevice(SysfsDevice):
    """One devfreq device, driven through the ``userspace`` governor."""

    backend: ClassVar[str] = "devfreq"
    _rewrite = False
    _write_levels: tuple[float, ...] | None = None
    """`levels_mhz` as floats, read at the first `set_level` after taking the device (or after
    `forget_applied`): the governor's levels are fixed for the run too, and rereading and
    parsing the list, then comparing numpy scalars, was most of a level write's cost."""
    STATE_FIELDS: ClassVar[dict[str, tuple[type, ...]]] = {
        "governor": (str,), "min_freq_hz": (int,), "max_freq_hz": (int,), "set_freq_hz": (int,),
        "unset_at_hz": (int,)}
    OPTIONAL_STATE: ClassVar[frozenset[str]] = frozenset({"set_freq_hz", "unset_at_hz"})
    """``unset_at_hz``: under userspace, ``set_freq`` read ``undefined`` (nothing asked since the
    governor was selected) while the device ran at this frequency (Hz)."""
    """Write ``set_freq`` at the next `set_level` whatever it holds (`forget_applied`)."""

    @property
    def levels_mhz(self) -> npt.NDArray[np.float64]:
        """Every operating point in ``available_frequencies``, ascending. Units: MHz."""
        text = self._read("available_frequencies")
        try:
            hz = sorted({int(word) for word in text.split()})
        except ValueError as exc:
            raise DeviceError(f"{self.path}/available_frequencies: cannot parse "
                              f"{excerpt(text)}") from exc
        if not hz or hz[0] <= 0:
            raise DeviceError(f"{self.path}/available_frequencies: no positive frequency listed "
                              f"({excerpt(text)})")
        return np.asarray(hz, dtype=np.float64) / _HZ_PER_MHZ

    @property
    def bounds_mhz(self) -> tuple[float, float]:
        """(``min_freq``, ``max_freq``) as the kernel enforces them now. Units: MHz."""
        return (
            self._read_float("min_freq") / _HZ_PER_MHZ,
            self._read_float("max_freq") / _HZ_PER_MHZ,
        )

    def governor(self) -> str:
        """The devfreq governor in charge now."""
        return self._read("governor")

    def controllable(self) -> Controllability:
        """Needs the ``userspace`` governor compiled in, write access to ``governor`` and a
        list of levels a governor can choose among (`levels_problem`)."""
        try:
            problem = levels_problem(self.levels_mhz)  # raises when there is none listed
        except DeviceError as exc:
            return Controllability(False, str(exc))
        if problem is not None:
            return Controllability(False, problem)
        available = self._read("available_governors").split()
        if USERSPACE not in available:
            return Controllability(
                False, f"kernel lacks the userspace devfreq governor (has {' '.join(available)})"
            )
        refused = self._writable("governor")
        if refused:
            return Controllability(False, f"no permission to write {', '.join(refused)}")
        current = self.governor()
        if current == USERSPACE and self._saved_state is None:
            return Controllability(
                True, "governor already userspace: another tool may be in charge"
            )
        return Controllability(True)

    def read(self) -> Reading:
        """``cur_freq``, ``device/gpu_busy_percent`` where the driver has it, hwmon energy/power."""
        freq_mhz = self._read_float("cur_freq") / _HZ_PER_MHZ
        busy = self._read_optional_float("device/gpu_busy_percent") / 100.0
        energy_mj, power_w = self._hwmon_energy_power("device")
        return Reading(freq_mhz=freq_mhz, busy=busy, energy_mj=energy_mj, power_w=power_w)

    def set_level(self, freq_mhz: float) -> None:
        """Select the userspace governor (once) and write the level to ``userspace/set_freq``."""
        low, high = self.bounds_mhz
        if self._write_levels is None:
            self._write_levels = tuple(float(lv) for lv in self.levels_mhz)
        levels = [lv for lv in self._write_levels if low <= lv <= high] or [low]
        target_hz = round(nearest_level(levels, min(max(freq_mhz, low), high)) * _HZ_PER_MHZ)
        self._chosen = target_hz
        governor = self.governor()
        # Skip only when govd's request already stands in set_freq. Comparing cur_freq instead
        # left an older request of govd's in set_freq whenever the device had not applied it
        # yet (or a thermal/QoS clamp held cur_freq): applied later, it read as another tool's.
        if not self._rewrite and governor == USERSPACE and self._set_freq_text() == str(target_hz):
            return
        self._rewrite = False
        self._ensure_saved()
        if governor != USERSPACE:
            self._write("governor", USERSPACE)
        self._write("userspace/set_freq", target_hz)

    def forget_applied(self) -> None:
        """The next `set_level` writes ``set_freq`` even if it holds the level: after a resume
        the driver may run its own clock while the request still reads as govd's. The levels are
        read again too (a driver reloaded meanwhile may list others)."""
        self._rewrite = True
        self._write_levels = None

    def _set_freq_text(self) -> str:
        """The request standing in ``userspace/set_freq`` (Hz, or ``undefined``)."""
        return self._read("userspace/set_freq")

    def _changed_setting(self, chosen_hz: int | float) -> str | None:
        """Another governor selected, or another request written to ``set_freq``. The kernel
        keeps the request as written, so govd's own stays there however long the device takes
        to apply it, and whatever a thermal or QoS limit does to ``cur_freq`` meanwhile: only
        ``set_freq`` itself tells another tool's hand."""
        governor = self._read("governor")  # read, not `governor()`: one call less a tick
        if governor != USERSPACE:
            return f"governor is {governor}"
        set_freq = self._read("userspace/set_freq")
        if set_freq != str(int(chosen_hz)):
            return f"userspace/set_freq is {set_freq}"
        return None

    def _capture_state(self) -> dict[str, Any]:
        state: dict[str, Any] = {
            "governor": self.governor(),
            "min_freq_hz": int(self._read_float("min_freq")),
            "max_freq_hz": int(self._read_float("max_freq")),
        }
        # The request matters only under userspace (the kernel shows the file only then; the
        # simulator keeps it): a stale one would fail `restore`'s read-back for nothing.
        if state["governor"] == USERSPACE and self._has("userspace/set_freq"):
            text = self._read("userspace/set_freq")
            # Until something is written the kernel prints "undefined" here.
            if text.isdigit():
                state["set_freq_hz"] = int(text)
            elif text == UNDEFINED:
                state["unset_at_hz"] = int(self._read_float("cur_freq"))
        return state

    def _restore_state(self, state: dict[str, Any]) -> None:
        # Bounds first: they are independent of the governor, and with the old governor back a
        # level chosen under our bounds would be re-evaluated at once anyway.
        old = (self._read_float("min_freq"), self._read_float("max_freq"))
        self._write_bounds(
            "min_freq", "max_freq", (state["min_freq_hz"], state["max_freq_hz"]), old
        )
        if self.governor() != state["governor"]:
            self._write("governor", state["governor"])
        set_freq_hz = state.get("set_freq_hz")
        # The request itself is put back, not just the clock: `restore` checks the saved state
        # reads back, and a clock that matches by chance would leave govd's request standing.
        if (
            state["governor"] == USERSPACE
            and set_freq_hz is not None
            and self._set_freq_text() != str(set_freq_hz)
        ):
            self._write("userspace/set_freq", set_freq_hz)
        unset_at_hz = state.get("unset_at_hz")
        if state["governor"] == USERSPACE and unset_at_hz is not None \
                and self._set_freq_text() != UNDEFINED:
            self._unset_request(state, unset_at_hz)

    def _unset_request(self, state: dict[str, Any], running_hz: int) -> None:
        """Make ``set_freq`` read ``undefined`` again, the device still at ``running_hz``: no
        write to it does that; the kernel forgets the request only when the userspace governor
        is selected afresh, and then keeps the frequency it ran at. So the bounds are pinned at
        ``running_hz``, another governor selected (it can only run there), userspace selected
        again, and the bounds put back. Raises DeviceError naming what could not be done."""
        others = [g for g in self._read("available_governors").split() if g != USERSPACE]
        if not others:
            raise DeviceError(f"{self.path}: userspace/set_freq read {UNDEFINED} when govd took "
                              "it; the kernel forgets a request only when another governor is "
                              f"selected, and it offers none: set_freq left at "
                              f"{self._set_freq_text()}")
        other = next((g for g in ("performance", "powersave") if g in others), others[0])
        saved = (state["min_freq_hz"], state["max_freq_hz"])
        pinned = (running_hz, running_hz)
        self._write_bounds("min_freq", "max_freq", pinned, saved)
        try:
            self._write("governor", other)
            self._write("governor", USERSPACE)
        finally:
            self._write_bounds("min_freq", "max_freq", saved, pinned)

    def _not_held(self, saved: dict[str, Any], now: dict[str, Any]) -> list[str]:
        """As `SysfsDevice._not_held`, but a request found ``undefined`` holds when it reads
        ``undefined`` again, whatever the device runs at (the kernel's choice)."""
        if "unset_at_hz" in saved:
            saved = {k: v for k, v in saved.items() if k != "unset_at_hz"}
            if "unset_at_hz" not in now:
                return [*super()._not_held(saved, now),
                        f"userspace/set_freq is {self._set_freq_text()}, not {UNDEFINED}"]
        return super()._not_held(saved, now)
