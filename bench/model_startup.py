"""Start-up cost of the model in a fresh interpreter: ``import govd.model.online``, a model and
its first update, with an empty numba cache (everything compiles) and with the cache that run
left behind."""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
STARTUP_FEATURES, STARTUP_LEVELS = 4, 9

STARTUP_SCRIPT = """
import time
start = time.perf_counter()
import numpy as np
from govd.model.online import OnlineModel
from govd.model.settings import ModelSettings
model = OnlineModel(np.linspace(300.0, 1500.0, {levels}),
                    ModelSettings(counters=tuple(f"c{{i}}" for i in range({features} - 2))))
model.update(12.0, 900.0, np.ones({features} - 2), 8.0, 0.7, 0.3, 16.7)
print(time.perf_counter() - start)
"""


def startup_s(cache_dir: Path) -> float:
    """``import govd.model.online`` + a model + its first update in a fresh interpreter whose
    numba cache is ``cache_dir``. Units: s."""
    env = dict(os.environ, NUMBA_CACHE_DIR=str(cache_dir),
               PYTHONPATH=os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])))
    script = STARTUP_SCRIPT.format(features=STARTUP_FEATURES, levels=STARTUP_LEVELS)
    done = subprocess.run([sys.executable, "-c", script], env=env, cwd=REPO, check=True,
                          capture_output=True, text=True)
    return float(done.stdout.strip().splitlines()[-1])


def measure_startup(runs: int) -> list[dict[str, Any]]:
    """Cold start (each run with a new, empty numba cache: everything compiles) and warm start
    (reusing the cache the last cold run left), median of ``runs`` each."""
    cold_s, warm_s = [], []
    with tempfile.TemporaryDirectory(prefix="govd-bench-numba-") as tmp:
        for i in range(runs):
            cache = Path(tmp) / f"cold{i}"
            cache.mkdir()
            cold_s.append(startup_s(cache))
        warm_s = [startup_s(cache) for _ in range(runs)]
    return [{"impl": impl, "features": STARTUP_FEATURES, "levels": STARTUP_LEVELS,
             "startup_s": statistics.median(times), "runs": runs}
            for impl, times in (("startup-cold", cold_s), ("startup-warm", warm_s))]
