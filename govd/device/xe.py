"""Intel xe GPUs (`/sys/class/drm/cardN/device/tile*/gt*/freq0/`): GuC SLPC limits pinned.

The xe driver offers no list of levels, only ``rpn_freq`` and ``rp0_freq``; govd derives levels
every 50 MHz between them (RP0 always included), the granularity GuC SLPC requests in.
Pinning writes ``min_freq`` = ``max_freq`` in MHz, ordered by direction like i915. The firmware has
the last word (it may run elsewhere for power or thermal reasons), so only ``act_freq`` is trusted.

Only the first GT of the first tile is governed: on Meteor Lake and later that is the render GT
(gt1 is the media GT); multi-tile parts would need one device per tile.
"""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

import numpy as np
import numpy.typing as npt

from govd.device.i915 import I915Device
from govd.device.registry import Backend
from govd.device.sysfs import SysfsIO

XE_STEP_MHZ = 50.0


class XeDevice(I915Device):
    """An xe GT, governed through ``freq0/min_freq`` and ``freq0/max_freq``."""

    backend: ClassVar[str] = "xe"
    BOOST = None

    def __init__(self, path: Path, sysfs_root: Path = Path("/sys"), io: SysfsIO | None = None):
        super().__init__(path, sysfs_root, io)
        gts = sorted(self.path.glob("device/tile*/gt*/freq0"))
        freq0 = str(gts[0].relative_to(self.path)) if gts else "device/tile0/gt0/freq0"
        self.MIN = f"{freq0}/min_freq"
        self.MAX = f"{freq0}/max_freq"
        self.RPN = f"{freq0}/rpn_freq"
        self.RP0 = f"{freq0}/rp0_freq"
        self.ACT = f"{freq0}/act_freq"
        self.CUR = f"{freq0}/cur_freq"

    @property
    def levels_mhz(self) -> npt.NDArray[np.float64]:
        """RPn, then every 50 MHz multiple above it, then RP0, ascending. Units: MHz."""
        rpn_mhz, rp0_mhz = self.bounds_mhz
        first = np.ceil(rpn_mhz / XE_STEP_MHZ) * XE_STEP_MHZ
        grid = np.arange(first, rp0_mhz, XE_STEP_MHZ)
        return np.unique(np.concatenate(([rpn_mhz], grid, [rp0_mhz])).astype(np.float64))


BACKEND = Backend("xe", sysfs_class=XeDevice)
"""The backend ``xe`` (`govd.device.registry`)."""
