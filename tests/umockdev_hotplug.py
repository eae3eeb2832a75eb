"""Run under LD_PRELOAD=libumockdev-preload.so: builds a umockdev testbed through its C API,
plugs and unplugs the devices described in the files given, and prints what govd saw as JSON.

Used by tests/test_device_discovery.py; the venv has no PyGObject, so the testbed is driven
through ctypes.
"""

from __future__ import annotations

import ctypes
import json
import sys
from pathlib import Path

from govd.device.discovery import HotplugMonitor, scan

CARD = b"/sys/devices/pci0000:00/0000:00:02.0/drm/card0"


def main(description_files: list[str]) -> None:
    lib = ctypes.CDLL("libumockdev.so.0")
    lib.umockdev_testbed_new.restype = ctypes.c_void_p
    lib.umockdev_testbed_add_from_string.argtypes = [ctypes.c_void_p, ctypes.c_char_p,
                                                     ctypes.c_void_p]
    lib.umockdev_testbed_uevent.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_char_p]
    lib.umockdev_testbed_remove_device.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
    testbed = lib.umockdev_testbed_new()
    monitor = HotplugMonitor()
    monitor.start()
    for name in description_files:
        lib.umockdev_testbed_add_from_string(testbed, Path(name).read_bytes(), None)
    seen = {"after_add": [f.name for f in scan()]}
    lib.umockdev_testbed_uevent(testbed, CARD, b"remove")
    # umockdev leaves a child's class link dangling: unplug the connector before the card.
    lib.umockdev_testbed_remove_device(testbed, CARD + b"/card0-eDP-1")
    lib.umockdev_testbed_remove_device(testbed, CARD)
    seen["after_remove"] = [f.name for f in scan()]
    # Replug only the card (and what hangs below it): its PCI parent never went away.
    blocks = Path(description_files[0]).read_text().split("\n\n")
    card_blocks = [b for b in blocks if b.strip().startswith("P: " + CARD.decode()[4:])]
    lib.umockdev_testbed_add_from_string(testbed, "\n\n".join(card_blocks).encode(), None)
    seen["after_replug"] = [f.name for f in scan()]
    events = []
    while (event := monitor.poll(timeout_s=0.5)) is not None:
        events.append([event.action, event.subsystem, event.name])
    seen["events"] = events
    print(json.dumps(seen))


if __name__ == "__main__":
    main(sys.argv[1:])
