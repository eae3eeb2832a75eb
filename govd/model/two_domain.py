"""`TwoDomainModel`: the online models over (core, memory) clock pairs (see `govd.model.pairs`).

Same state arrays and views as `OnlineModel`; a level is a pair, the pairs sorted by core then
memory clock, and `update` takes the memory clock that ran beside the core clock.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from govd.model import pairs
from govd.model import tick as k
from govd.model.arrays import FloatArray
from govd.model.online import OnlineModel, default_volts
from govd.model.settings import MAX_LEVELS, ModelSettings

_NO_COUNTERS = np.zeros(0)


class TwoDomainModel(OnlineModel):
    """Online frame-time and power models over (core, memory) clock pairs."""

    lead_features = pairs.LEAD

    def __init__(
        self,
        levels_mhz: Sequence[float] | FloatArray,
        mem_levels_mhz: Sequence[float] | FloatArray,
        settings: ModelSettings | None = None,
        idle_power_w: float = math.nan,
    ) -> None:
        """``levels_mhz``, ``mem_levels_mhz``: core and memory clock of every pair (MHz),
        sorted by core then memory clock, no pair twice. ``settings.volts``, when given, holds
        one voltage per distinct core clock."""
        self.mem_levels_mhz = np.asarray(mem_levels_mhz, dtype=np.float64)
        super().__init__(levels_mhz, settings, idle_power_w)

    def _level_table(self, levels_mhz: Sequence[float] | FloatArray, settings: ModelSettings
                     ) -> FloatArray:
        """Level rows [core MHz, g(fc), memory MHz, fm/fm_max] after checking the pairs."""
        return level_rows(np.asarray(levels_mhz, dtype=np.float64), self.mem_levels_mhz,
                          settings)

    def update(
        self,
        frame_time_ms: float,
        freq_mhz: float,
        counters: FloatArray = _NO_COUNTERS,
        power_w: float = math.nan,
        busy: float = math.nan,
        mem_activity: float = math.nan,
        deadline_ms: float = math.nan,
        mem_freq_mhz: float = math.nan,
    ) -> int:
        """Learn from one tick at (``freq_mhz``, ``mem_freq_mhz``) and predict every pair;
        as `OnlineModel.update` otherwise. ``mem_activity`` is not a feature here: the power
        model's memory term is the memory clock."""
        flags: int = pairs.model_tick_pairs(self.state, counters, frame_time_ms, freq_mhz,
                                            mem_freq_mhz, power_w, busy, deadline_ms)
        if flags & k.RESCALE_DUE and self._rescale:
            self.rescale_counters()
        return flags


def nearest_pair(
    cores_mhz: FloatArray, mems_mhz: FloatArray, freq_mhz: float, mem_freq_mhz: float,
    fallback: int,
) -> int:
    """Index of the pair at the memory clock nearest to ``mem_freq_mhz`` (the highest when it
    is not a number) whose core clock is nearest to ``freq_mhz``; ``fallback`` when the core
    clock is not a number. Ties go to the lower core clock, as `Governor.nearest_level`."""
    if not math.isfinite(freq_mhz):
        return fallback
    if math.isfinite(mem_freq_mhz):
        gaps = np.abs(mems_mhz - mem_freq_mhz)
        at_mem = gaps <= gaps.min()
    else:
        at_mem = mems_mhz == mems_mhz.max()
    candidates = np.flatnonzero(at_mem)
    gaps = np.abs(cores_mhz[candidates] - freq_mhz)
    return int(candidates[np.flatnonzero(gaps <= gaps.min())[0]])


def level_rows(cores: FloatArray, mems: FloatArray | None, settings: ModelSettings
               ) -> FloatArray:
    """Checked level table of either model form: rows [core MHz, g(fc), memory MHz,
    fm/fm_max] (`govd.model.pairs` row order), ``mems`` None with one clock domain (its memory
    row then holds 1). g(f) = (f/f_max)(V/V_max)², V from ``settings.volts`` (one per distinct
    core clock) or affine in the clock over the table (`default_volts`).
    Raises ValueError naming what is wrong."""
    two = mems is not None
    mem: FloatArray = mems if mems is not None else np.ones_like(cores)
    if cores.ndim != 1 or mem.shape != cores.shape:
        raise ValueError("need one memory clock per core clock")
    what = "(core, memory) pairs" if two else "levels"
    if not 2 <= cores.size <= MAX_LEVELS:
        raise ValueError(f"need 2..{MAX_LEVELS} {what}, got {cores.size}")
    if not (np.all(np.isfinite(cores)) and np.all(np.isfinite(mem)) and cores.min() > 0
            and mem.min() > 0):
        raise ValueError("clocks must be positive and finite")
    if two:
        order = np.lexsort((mem, cores))
        same = (np.diff(cores) == 0) & (np.diff(mem) == 0)
        if not np.array_equal(order, np.arange(cores.size)) or same.any():
            raise ValueError("pairs must be sorted by core then memory clock, none twice")
    elif not np.all(np.diff(cores) > 0):
        raise ValueError("levels must be strictly ascending")
    distinct = np.unique(cores)
    volts = np.asarray(settings.volts, dtype=np.float64) if settings.volts else None
    if volts is None:
        volts = default_volts(distinct)
    elif volts.shape != distinct.shape or not np.all(volts > 0):
        raise ValueError("volts needs one positive voltage per distinct core clock")
    g = (distinct / distinct[-1]) * (volts / volts.max()) ** 2
    lv = np.empty((pairs.N_LV_ROWS, cores.size))
    lv[pairs.CORE] = cores
    lv[pairs.G] = g[np.searchsorted(distinct, cores)]
    lv[pairs.MEM] = mem
    lv[pairs.GM] = mem / mem.max()
    return lv
