"""Run under LD_PRELOAD=libumockdev-preload.so: the daemon, in-process on the (mocked) real /sys,
governs an i915 card; a devfreq GPU is plugged while it runs, and the daemon must take it through
the udev ``add`` event, its state saved to the state file first. Prints what happened as JSON.

Used by tests/daemon/test_umockdev_daemon.py; the testbed is driven through ctypes (no PyGObject).
"""

from __future__ import annotations

import ctypes
import json
import sys
from pathlib import Path
from typing import Any

from govd.conf.schema import Config
from govd.daemon.daemon import Daemon, Options

MAX_TICKS = 3000


def main(card_file: str, devfreq_file: str, state_dir: str) -> None:
    lib = ctypes.CDLL("libumockdev.so.0")
    lib.umockdev_testbed_new.restype = ctypes.c_void_p
    lib.umockdev_testbed_add_from_string.argtypes = [ctypes.c_void_p, ctypes.c_char_p,
                                                     ctypes.c_void_p]
    testbed = lib.umockdev_testbed_new()
    lib.umockdev_testbed_add_from_string(testbed, Path(card_file).read_bytes(), None)
    # The userspace governor already in charge, so the plain testbed files take govd's writes.
    devfreq = Path(devfreq_file).read_text().replace("governor=simple_ondemand",
                                                     "governor=userspace")
    state_file = Path(state_dir) / "state.json"
    config = Config.model_validate({
        "period_ms": 10, "policy": {"name": "performance"}, "state_file": str(state_file),
        "frames": {"source": "busy"}, "logging": {"summary_interval_s": 0},
    })
    seen: dict[str, Any] = {}

    def plug_and_watch(daemon: Daemon) -> bool:
        ticks = daemon.stats.ticks
        if ticks == 3:
            seen["before"] = [r.name for r in daemon.runners]
            lib.umockdev_testbed_add_from_string(testbed, devfreq.encode(), None)
        if len(daemon.runners) == 2 and "state" not in seen:
            seen["state"] = [d["name"] for d in json.loads(state_file.read_text())["devices"]]
        return len(daemon.runners) == 2 or ticks >= MAX_TICKS

    daemon = Daemon(Options(config, should_stop=lambda: plug_and_watch(daemon), rescan_s=0))
    seen["exit"] = daemon.run()
    seen["after"] = [r.name for r in daemon.runners]
    print(json.dumps(seen))


if __name__ == "__main__":
    main(*sys.argv[1:])
