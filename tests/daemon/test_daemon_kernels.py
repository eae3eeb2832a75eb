"""`govd run` with the compiled kernels maps neither numba nor llvmlite (issue #14: ~40 MB of
anonymous memory and ~0.3 s of start-up), and says at start which kernels it runs."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

from govd.daemon.status import STATUS_NAME
from tests.daemon.test_daemon_process import WAIT_S, env, found, sim, taken, wait_for
from tests.kernels_built import ensure_built

__all__ = ["sim"]  # the live simulated GPU fixture


def _mapped(pid: int) -> set[str]:
    """The files mapped into process ``pid`` (its shared libraries and extensions)."""
    paths = set()
    for line in Path(f"/proc/{pid}/maps").read_text().splitlines():
        fields = line.split(maxsplit=5)
        if len(fields) == 6 and fields[5].startswith("/"):
            paths.add(fields[5])
    return paths


def test_the_daemon_with_compiled_kernels_loads_neither_numba_nor_llvmlite(tmp_path, sim):
    extension = ensure_built()
    before = found(sim)
    log = open(tmp_path / "daemon.err", "ab")  # noqa: SIM115 - closed below
    daemon = subprocess.Popen(
        [sys.executable, "-m", "govd", "run", "--sysfs-root", str(sim), "--socket",
         str(tmp_path / "frames.sock"), "--state-file", str(tmp_path / "state.json")],
        env={**env(), "GOVD_KERNELS": "auto"}, stdout=subprocess.DEVNULL, stderr=log)
    try:
        wait_for(lambda: taken(sim), "the daemon to take the device", daemon)
        wait_for(lambda: (tmp_path / STATUS_NAME).exists(), "the status file", daemon)
        time.sleep(1.0)  # frames flow from the simulated game: ticks with model updates
        mapped = _mapped(daemon.pid)
    finally:
        daemon.send_signal(signal.SIGTERM)
        assert daemon.wait(timeout=WAIT_S) == 0
        log.close()
    text = (tmp_path / "daemon.err").read_text()
    assert str(extension) in mapped  # the positive control: it runs the compiled kernels
    # by package folder: numpy's own OpenBLAS is called libscipy_openblas
    heavy = sorted(p for p in mapped for name in ("numba", "llvmlite", "scipy")
                   if f"/site-packages/{name}/" in p)
    assert heavy == []
    assert f"kernels: compiled ahead of time ({extension.name})" in text
    assert found(sim) == before


def test_the_daemon_warns_once_when_its_compiled_kernels_are_unusable(tmp_path):
    # an empty sysfs tree: `govd run` logs its start, finds no device and exits 1
    root = tmp_path / "pkg"
    model = root / "govd" / "model"
    shutil.copytree(Path(__file__).resolve().parents[2] / "govd", root / "govd",
                    ignore=shutil.ignore_patterns("__pycache__", "_aot_*", ".build-*"))
    (model / "_aot_0123456789abcdef.cpython-311-x86_64-linux-gnu.so").write_bytes(b"old")
    done = subprocess.run(
        [sys.executable, "-m", "govd", "run", "--sysfs-root", str(tmp_path / "empty"),
         "--state-file", str(tmp_path / "state.json")],
        env={**os.environ, "PYTHONPATH": str(root), "GOVD_KERNELS": "auto"},
        capture_output=True, text=True, timeout=WAIT_S, cwd=tmp_path)
    warnings = [line for line in done.stderr.splitlines() if "kernels:" in line]
    assert len(warnings) == 1 and "WARNING" in warnings[0] and "stale" in warnings[0], done.stderr
