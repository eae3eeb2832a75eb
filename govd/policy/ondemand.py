"""Linux devfreq ``simple_ondemand``, exactly: the baseline govd is scored against.

`simple_ondemand_target_hz` is `devfreq_simple_ondemand_func` of
drivers/devfreq/governor_simpleondemand.c with C's unsigned arithmetic (``unsigned long`` taken as
64 bits, as on every 64-bit kernel), and `lowest_level_at_least` is what the devfreq core then
does with the answer (clamp to the bounds, then the lowest OPP at or above it). The one
deviation: where the kernel would divide by zero (a shifted ``total_time`` that is a non-zero
multiple of 2^32, since ``div_u64`` keeps only the low 32 bits of its divisor) we answer max
instead of oopsing; that takes an interval of over six days in µs.
"""

from __future__ import annotations

import bisect
import math
from typing import ClassVar

from govd.policy.base import FloatArray, Outlook

DFSO_UPTHRESHOLD = 90
"""Default busy percentage above which simple_ondemand goes to the maximum."""
DFSO_DOWNDIFFERENCTIAL = 5
"""Default hysteresis below the up-threshold in which it keeps the frequency (kernel spelling)."""
DEVFREQ_MAX_FREQ = (1 << 64) - 1
"""ULONG_MAX: the governor's way of asking for the highest frequency allowed. Units: Hz."""

_U64 = (1 << 64) - 1
_U32 = (1 << 32) - 1


def _thresholds(upthreshold: int, downdifferential: int) -> tuple[int, int]:
    """The thresholds in force: 0 means the default, as ``if (data->upthreshold)`` does.
    Raises TypeError for a non-integer (the kernel's are ``unsigned int``; 95.5 would only fail
    later, inside the arithmetic of a tick)."""
    for name, value in (("upthreshold", upthreshold), ("downdifferential", downdifferential)):
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError(f"simple_ondemand {name} must be a whole number, got {value!r}")
    if upthreshold < 0 or downdifferential < 0:
        raise ValueError("simple_ondemand thresholds are unsigned, got "
                         f"upthreshold={upthreshold}, downdifferential={downdifferential}")
    up = upthreshold or DFSO_UPTHRESHOLD
    down = downdifferential or DFSO_DOWNDIFFERENCTIAL
    if up > 100 or up < down:  # the kernel's -EINVAL
        raise ValueError(f"invalid simple_ondemand thresholds: upthreshold={up} must be <= 100 "
                         f"and >= downdifferential={down}")
    return up, down


def simple_ondemand_target_hz(
    busy_time: int,
    total_time: int,
    current_hz: int,
    upthreshold: int = DFSO_UPTHRESHOLD,
    downdifferential: int = DFSO_DOWNDIFFERENCTIAL,
) -> int:
    """The frequency simple_ondemand asks for, before the devfreq core rounds it to a level.

    ``busy_time`` and ``total_time`` are in any one unit (devfreq drivers use ns or µs),
    ``current_hz`` is the running frequency in Hz; all are C ``unsigned long``. Returns Hz, or
    `DEVFREQ_MAX_FREQ` for "the maximum". Raises ValueError where the kernel returns -EINVAL.
    """
    up, down = _thresholds(upthreshold, downdifferential)
    if not all(0 <= v <= _U64 for v in (busy_time, total_time, current_hz)):
        raise ValueError("busy_time, total_time and current_hz must fit an unsigned 64-bit value")
    busy, total = busy_time, total_time
    if total == 0:
        return DEVFREQ_MAX_FREQ
    if busy >= 1 << 24 or total >= 1 << 24:  # "Prevent overflow"
        busy >>= 7
        total >>= 7
    if (busy * 100) & _U64 > (total * up) & _U64:
        return DEVFREQ_MAX_FREQ
    if current_hz == 0:
        return DEVFREQ_MAX_FREQ
    if (busy * 100) & _U64 > (total * (up - down)) & _U64:
        return current_hz
    divisor = total & _U32  # div_u64 takes a u32 divisor
    if divisor == 0:
        return DEVFREQ_MAX_FREQ
    target = ((busy * current_hz) & _U64) // divisor
    target = (target * 100) & _U64
    return target // (up - down // 2)


def lowest_level_at_least(levels_hz: list[int], target_hz: int, lo: int, hi: int) -> int:
    """What devfreq does with a governor's answer: clamp it to [levels_hz[lo], levels_hz[hi]],
    then take the lowest level at or above it (``devfreq_recommended_opp``). Units: Hz."""
    clamped = min(max(target_hz, levels_hz[lo]), levels_hz[hi])
    return bisect.bisect_left(levels_hz, clamped, lo, hi + 1)


def _levels_hz(levels_mhz: FloatArray) -> list[int]:
    return [round(float(f) * 1e6) for f in levels_mhz]


class Ondemand:
    """simple_ondemand on the device's utilisation; busy and total are taken in µs.

    When the device reports no utilisation (busy or interval NaN) it cannot decide: it keeps
    the running level and counts the tick in ``undecided``.
    """

    name: ClassVar[str] = "ondemand"
    uses_model: ClassVar[bool] = False

    def __init__(
        self,
        upthreshold: int = DFSO_UPTHRESHOLD,
        downdifferential: int = DFSO_DOWNDIFFERENCTIAL,
    ) -> None:
        self.upthreshold, self.downdifferential = _thresholds(upthreshold, downdifferential)
        self.undecided = 0
        """Ticks on which the utilisation was unknown and the level was kept."""

    def decide(self, view: Outlook) -> int:
        """The level simple_ondemand would pick for the last tick's utilisation."""
        if not (math.isfinite(view.busy) and math.isfinite(view.interval_s)):
            self.undecided += 1
            return min(max(view.current, view.lo), view.hi)
        total_us = max(round(view.interval_s * 1e6), 0)
        # Utilisation outside 0..1 is a counter artefact; the kernel's busy never exceeds total.
        busy_us = round(min(max(view.busy, 0.0), 1.0) * total_us)
        if view.mem_levels_mhz is not None:
            return self._decide_core(view, busy_us, total_us)
        levels_hz = _levels_hz(view.levels_mhz)
        target_hz = simple_ondemand_target_hz(
            busy_us, total_us, levels_hz[view.current], self.upthreshold, self.downdifferential
        )
        return lowest_level_at_least(levels_hz, target_hz, view.lo, view.hi)

    def _decide_core(self, view: Outlook, busy_us: int, total_us: int) -> int:
        """With (core, memory) pairs: simple_ondemand knows one clock, so it governs the core
        clock with the memory clock at its highest allowed (what a devfreq GPU whose memory
        clock is not governed runs); the pairs at other memory clocks are never chosen."""
        assert view.mem_levels_mhz is not None
        allowed = range(view.lo, view.hi + 1)
        top_mem = max(view.mem_levels_mhz[i] for i in allowed)
        line = [i for i in allowed if view.mem_levels_mhz[i] == top_mem]
        cores_hz = _levels_hz(view.levels_mhz[line])
        running = view.levels_mhz[view.current] * 1e6
        at = min(range(len(line)), key=lambda k: abs(cores_hz[k] - running))
        target_hz = simple_ondemand_target_hz(
            busy_us, total_us, cores_hz[at], self.upthreshold, self.downdifferential
        )
        return line[lowest_level_at_least(cores_hz, target_hz, 0, len(line) - 1)]

    def reset(self) -> None:
        """Forget the count of undecided ticks; simple_ondemand keeps no other history."""
        self.undecided = 0
