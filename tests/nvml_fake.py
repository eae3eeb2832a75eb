"""Run code under test against the fake NVML library (tests/fake_nvml/fake_nvml.c).

pynvml loads ``libnvidia-ml.so.1`` with ctypes, and the dynamic loader reads LD_LIBRARY_PATH only
when a process starts, so the fake is built once and every scenario runs in a fresh Python
process with LD_LIBRARY_PATH pointing at it. The fake's GPUs live in a key=value state file
(see the C file's header for the keys), which the test, the process under test and a later
process all share.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent
FAKE_SOURCE = Path(__file__).resolve().parent / "fake_nvml" / "fake_nvml.c"

# Names every scenario can use: the backend, its errors, and small helpers to report and to
# change the fake GPU from inside the process under test.
PRELUDE = """
import json, logging, math, os, sys
from govd.device.base import DeviceError, DeviceGone, NotSupported, WriteRefused
from govd.device.nvml import NvmlDevice, discover_nvml, restore_saved
logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(levelname)s %(message)s")

def report(**values):
    print(json.dumps(values))

def outcome(call, *args):
    try:
        call(*args)
        return "ok"
    except DeviceError as exc:
        return f"{type(exc).__name__}: {exc}"

def fake_locks(gpu=0):
    # [graphics lock max, memory lock max] the fake GPU holds, MHz (0 = unlocked)
    lines = open(os.environ["FAKE_NVML_STATE"]).read().splitlines()
    state = dict(line.split("=", 1) for line in lines if "=" in line)
    return [int(state.get(f"gpu{gpu}.{key}", 0)) for key in ("lock_max", "mem_lock_max")]

def fake_set(key, value):
    path = os.environ["FAKE_NVML_STATE"]
    lines = [l for l in open(path).read().splitlines() if not l.startswith(key + "=")]
    open(path, "w").write("\\n".join(lines + [f"{key}={value}"]) + "\\n")
"""


def build_fake_nvml(out_dir: Path) -> Path:
    """Compile the fake into ``out_dir/libnvidia-ml.so.1``; skip the test when there is no cc."""
    cc = shutil.which("cc")
    if cc is None:
        pytest.skip("no C compiler (cc) to build the fake libnvidia-ml.so.1")
    subprocess.run([cc, "-shared", "-fPIC", "-O1", "-Wall", "-Werror", "-o",
                    str(out_dir / "libnvidia-ml.so.1"), str(FAKE_SOURCE)],
                   check=True, capture_output=True, text=True)
    return out_dir


def one_gpu(lib_dir: Path, tmp_path: Path, arch: str) -> FakeNvml:
    """A fake NVML with one GPU of ``arch`` in ``tmp_path``, the caller counting as root."""
    fake = FakeNvml(lib_dir, tmp_path / "nvml.state")
    fake.configure({"gpus": 1, "arch": arch, "root": 1})
    return fake


@dataclass
class FakeNvml:
    """A fake NVML installation: the built library and one state file for one test."""

    lib_dir: Path
    state_path: Path

    def configure(self, keys: dict[str, Any]) -> None:
        """Write the fake's state (e.g. ``{"gpus": 2, "gpu1.arch": "volta"}``) from scratch."""
        self.state_path.write_text("".join(f"{k}={v}\n" for k, v in keys.items()))

    def state(self) -> dict[str, str]:
        """The fake's state as the processes left it."""
        text = self.state_path.read_text() if self.state_path.exists() else ""
        return dict(line.split("=", 1) for line in text.splitlines() if "=" in line)

    def run(self, code: str, *, with_library: bool = True) -> subprocess.CompletedProcess[str]:
        """Run ``code`` (after `PRELUDE`) in a fresh interpreter that finds the fake, or no
        NVML library at all when ``with_library`` is false."""
        lib_dir = self.lib_dir if with_library else self.state_path.parent / "no-nvml"
        lib_dir.mkdir(exist_ok=True)
        env = {**os.environ, "LD_LIBRARY_PATH": str(lib_dir), "PYTHONPATH": str(REPO_ROOT),
               "FAKE_NVML_STATE": str(self.state_path)}
        return subprocess.run([sys.executable, "-c", PRELUDE + textwrap.dedent(code)],
                              env=env, capture_output=True, text=True, timeout=60, check=False)

    def report(self, code: str) -> dict[str, Any]:
        """Run ``code``, which must succeed, and return what its last `report` call printed."""
        done = self.run(code)
        assert done.returncode == 0, f"scenario failed:\n{done.stderr}"
        return dict(json.loads(done.stdout.strip().splitlines()[-1]))
