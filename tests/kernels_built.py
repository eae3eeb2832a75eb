"""The compiled kernels for the tests: built from the current sources when `make setup` has not
(or the sources changed since), as `make setup` would."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
MODEL = REPO / "govd" / "model"


def python(code: str, *args: str, mode: str = "auto", pythonpath: Path = REPO,
           cwd: Path = REPO, check: bool = True) -> subprocess.CompletedProcess[str]:
    """``code`` in a fresh interpreter with ``GOVD_KERNELS=mode``."""
    env = {**os.environ, "PYTHONPATH": str(pythonpath), "GOVD_KERNELS": mode}
    done = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True,
                          env=env, cwd=cwd, timeout=600)
    if check:
        assert done.returncode == 0, done.stderr
    return done


def ensure_built() -> Path:
    """The extension for the current sources in govd/model (built now if missing)."""
    probe = ("from govd.kernels.loader import load_extension\n"
             "ext, why, _ = load_extension()\n"
             "print(ext.module.__file__ if ext else '')\n")
    path = python(probe, mode="jit").stdout.strip()
    if not path:
        done = python("from govd.kernels.build import main; raise SystemExit(main())",
                      mode="jit", check=False)
        assert done.returncode == 0, f"the kernels do not build: {done.stderr}"
        path = python(probe, mode="jit").stdout.strip()
    assert path, "built, yet not loadable"
    return Path(path)
