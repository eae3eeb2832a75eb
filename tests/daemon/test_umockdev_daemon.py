"""The daemon on a /sys that pyudev really sees (umockdev): a GPU plugged after start is taken."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.umockdev_required import needs_umockdev

REPO = Path(__file__).resolve().parents[2]
UMOCKDEV = REPO / "tests" / "umockdev"


@needs_umockdev
def test_gpu_plugged_after_start_is_taken_through_the_udev_add_event(tmp_path, umockdev_tmpdir):
    env = dict(os.environ, PYTHONPATH=str(REPO), LD_PRELOAD="libumockdev-preload.so.0",
               TMPDIR=str(umockdev_tmpdir))
    result = subprocess.run(
        [sys.executable, str(REPO / "tests" / "umockdev_daemon.py"),
         str(UMOCKDEV / "i915-gen9.umockdev"), str(UMOCKDEV / "mali-panfrost.umockdev"),
         str(tmp_path)],
        env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    seen = json.loads(result.stdout.strip().splitlines()[-1])
    assert seen["before"] == ["card0"]
    assert seen["after"] == ["card0", "fde60000.gpu"]
    assert seen["state"] == ["card0", "fde60000.gpu"]  # saved before its runner could write
    assert seen["exit"] == 0
