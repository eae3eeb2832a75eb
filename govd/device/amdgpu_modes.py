"""Which way govd can set an amdgpu card's clock, from what its files offer (the classes of
`govd.device.amdgpu`), and the grid of clocks it offers on an overdrive part."""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt

from govd.device.amdgpu_tables import OdTable, SclkTable

DISCRETE, OVERDRIVE, LIMITED, OFFSET = "discrete", "overdrive", "limited", "offset"

OD_GRID_STEPS_MHZ = (5, 10, 20, 25, 50, 100)
"""Steps the overdrive grid may take: the firmware takes any whole MHz, so the step only trades
resolution against the cost of a tick (which predicts every level)."""
MAX_OD_LEVELS = 100
"""Most levels the overdrive grid offers: the finest step of `OD_GRID_STEPS_MHZ` that keeps the
range within this many levels (88 on a 500-2660 MHz RDNA2, 71 on a Steam Deck)."""
OVERDRIVE_HINT = ("fine control needs overdrive: add amdgpu.ppfeaturemask=0xfff7ffff (the "
                  "default with bit 0x4000 set) to the kernel command line; Linux >= 6.13 marks "
                  "the kernel tainted for it (laptop GPUs may offer no OD_SCLK even then)")


def od_grid_mhz(low_mhz: float, high_mhz: float) -> npt.NDArray[np.float64]:
    """The clocks govd offers on an overdrive part between ``low_mhz`` and ``high_mhz``: both
    ends, and every multiple of the finest step in `OD_GRID_STEPS_MHZ` that keeps them at most
    `MAX_OD_LEVELS`, ascending, whole MHz. Units: MHz."""
    low, high = math.ceil(low_mhz), math.floor(high_mhz)
    step = next((s for s in OD_GRID_STEPS_MHZ if (high - low) / s <= MAX_OD_LEVELS - 1),
                OD_GRID_STEPS_MHZ[-1])
    first = math.ceil(low / step) * step
    inner = np.arange(first, high, step, dtype=np.float64)
    return np.unique(np.concatenate(([float(low)], inner, [float(high)])))


def classify(table: SclkTable | None, od: OdTable | None
             ) -> tuple[str, str, npt.NDArray[np.float64]]:
    """(mode, why the card cannot be governed or "", levels in MHz) from ``pp_dpm_sclk``
    (None: unreadable) and ``pp_od_clk_voltage`` (None: absent) as found. The levels of a card
    not governed are the minimum and maximum it lists, for `govd devices` to show."""
    ends = np.asarray(table.levels_mhz if table else (), dtype=np.float64)
    if table is not None and (table.fine or (od is not None and od.has_sclk_offset)):
        ends = ends[[0, -1]]  # RDNA4's sclk is fine-grained: a longer table is no DPM list
    asleep = bool(ends.size) and ends[-1] <= 0
    if asleep:  # 0 MHz everywhere: a GPU powered down when read, no clock to show
        ends = ends[:0]
    if od is not None and od.has_sclk_offset:
        span = od.range_mhz("SCLK_OFFSET")
        offsets = f" ({span[0]:g}..{span[1]:g} MHz)" if span else ""
        return OFFSET, (
            f"RDNA4 overdrive offers only a clock offset, OD_SCLK_OFFSET{offsets}, which "
            "moves the firmware's clock curve but caps no clock; pp_dpm_sclk sets only its "
            "minimum or maximum: nothing finer for govd to set"), ends
    if table is not None and not table.fine:
        return DISCRETE, "", ends
    if od is not None and od.sclk_mhz is not None and table is not None:
        return _overdrive(od, od.sclk_mhz)
    if od is not None and od.empty and ends.size and 0 < ends[0] < ends[-1]:
        # an APU outside manual before Linux 6.17: pp_dpm_sclk shows its range
        return OVERDRIVE, "", od_grid_mhz(ends[0], ends[-1])
    clocks = (f"pp_dpm_sclk sets only its minimum or maximum ({ends[0]:g} or "
              f"{ends[-1]:g} MHz)" if ends.size else
              "pp_dpm_sclk reads 0 MHz (the GPU sleeps) and sets only its minimum or maximum"
              if asleep else "pp_dpm_sclk cannot be read")
    if od is None:
        return LIMITED, f"{clocks}; {OVERDRIVE_HINT}", ends
    if od.empty:
        return LIMITED, (f"pp_od_clk_voltage reads empty and {clocks}: no range to govern "
                         "(an APU shows OD_SCLK in manual)"), ends
    return LIMITED, ("overdrive is on, but this GPU's pp_od_clk_voltage offers no OD_SCLK "
                     f"minimum and maximum; {clocks}"), ends


def _overdrive(od: OdTable, found: tuple[float, float]
               ) -> tuple[str, str, npt.NDArray[np.float64]]:
    """The overdrive grid: an APU's whole OD_RANGE, a discrete GPU's soft range found within
    OD_RANGE (never above the maximum found: govd does not overclock)."""
    span = od.range_mhz("SCLK")
    if span is None:
        return LIMITED, "pp_od_clk_voltage has OD_SCLK but no SCLK line in OD_RANGE", \
            np.asarray(found, dtype=np.float64)
    if od.apu_like:
        low, high = span  # an APU's OD_RANGE is its hardware range: nothing to overclock
    else:
        low, high = max(span[0], found[0]), min(span[1], found[1])
    if low >= high:
        return LIMITED, (f"OD_SCLK found pinned at {found[0]:g}-{found[1]:g} MHz within "
                         f"OD_RANGE {span[0]:g}-{span[1]:g} MHz: nothing to choose"), \
            np.asarray([low], dtype=np.float64)
    return OVERDRIVE, "", od_grid_mhz(low, high)
