"""What the compiled kernels (`govd.kernels.loader`, `python -m govd.kernels.build`)
change in the daemon's start-up, memory and per-tick call cost (issue #14).

In fresh processes of the given interpreter (the installed service's venv, whose `make install`
built the extension; run from a scratch folder so that it imports its own govd), each step's
anonymous memory (``/proc/self/smaps_rollup``) and wall time:

- numba's JIT (``GOVD_KERNELS=jit``): ``import numpy``, the kernel modules (which import
  numba), the first `OnlineModel` (numba loads the cached kernels: its typing and lowering
  registries, its runtime);
- compiled ahead of time (``GOVD_KERNELS=aot``): ``import numpy``, the kernel modules (which
  load the extension), the first `OnlineModel` and tick; whether numba or llvmlite got imported.

Then, over the same few hundred ticks in each mode, whether the model's state is the same to
the bit, and the cost of one ``model_tick`` call: numba's dispatcher, the compiled kernel
behind `govd.kernels.loader.guarded`'s check of its arrays, and the compiled kernel alone.
``--build`` also rebuilds the extension in that venv and records how long it takes.

Last, ``--pairs`` interleaved pairs of `govd run` on the live simulated GPU (game-medium, real
time), one daemon per mode and pair, the order alternating, numba's cache warm: start to READY,
CPU per tick over ``--seconds`` of frames (/proc utime+stime of the daemon, 10 ms clock ticks),
anonymous memory after it. The machine is shared: only the same minute compares.

Writes `bench/results/aot_probe.json`.
    python bench/aot_probe.py [--python PY] [--ticks 300] [--build] [--pairs 3] [--seconds 15]
"""

from __future__ import annotations

import argparse
import ast
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from daemon_setup import (
    NotifyListener,
    cpu_s,
    env,
    machine,
    memory_mb,
    scratch_dir,
    start_daemon,
    start_sim,
    stop,
    write_result,
)

PERIOD_S = 0.05
SETTLE_S = 3.0

_ANON = """
import sys, time
def anon():
    for line in open('/proc/self/smaps_rollup'):
        if line.startswith('Anonymous:'):
            return int(line.split()[1]) / 1024
steps = {}
def mark(name, start):
    steps[name] = {'anon_mb': round(anon(), 1), 'wall_s': round(time.perf_counter() - start, 4)}
"""

_STEPS = _ANON + """
sys.modules['scipy'] = None  # as `govd run` does (govd.daemon.footprint)
t = time.perf_counter(); import numpy; mark('import numpy', t)
t = time.perf_counter()
import govd.model.online, govd.model.scaling_model
mark('kernel modules', t)
t = time.perf_counter()
model = govd.model.online.OnlineModel(numpy.array([200.0, 400.0, 600.0, 800.0]))
model.update(5.0, 400.0, numpy.zeros(0), 20.0, 0.5, 0.5, 16.6)
mark('first OnlineModel and tick', t)
from govd.kernels import loader as kernels
steps['kernels'] = kernels.MODE_REASON
steps['numba imported'] = 'numba' in sys.modules
steps['llvmlite imported'] = 'llvmlite' in sys.modules
steps['govd'] = kernels.__file__
print(repr(steps))
"""

_TICKS = """
import sys, timeit, math, hashlib
import numpy as np
from govd.kernels import loader as kernels
from govd.model.online import OnlineModel
from govd.model import tick
levels = [200.0, 300.0, 400.0, 600.0, 800.0]
model = OnlineModel(np.array(levels))
state = model.state.copy()
x = np.zeros(0)
x.flags.writeable = False  # as the daemon passes "no counters"
rng = np.random.default_rng(1)
flags = []
for i in range(int(sys.argv[1])):
    f = levels[i % len(levels)]
    t_ms = 1000.0 / f * (1.0 + 0.05 * rng.standard_normal())
    flags.append(tick.model_tick(state, x, t_ms, f, 5.0 + f / 200.0, 0.6, math.nan, 16.6))
n = 20000
args = (x, 5.0, 400.0, 5.0, 0.5, math.nan, 16.6)
out = {'state_sha256': hashlib.sha256(state.tobytes()).hexdigest(),
       'flags_sha256': hashlib.sha256(repr(flags).encode()).hexdigest(),
       'call_us': round(min(timeit.repeat(lambda: tick.model_tick(state, *args), number=n,
                                          repeat=5)) / n * 1e6, 3)}
entry = kernels._kernels.get(id(tick.model_tick))
if entry is not None and entry.compiled is not None:
    raw = entry.compiled
    out['call_us_unguarded'] = round(min(timeit.repeat(lambda: raw(state, *args), number=n,
                                                       repeat=5)) / n * 1e6, 3)
print(repr(out))
"""


def _run(python: str, code: str, mode: str, *args: str) -> object:
    with tempfile.TemporaryDirectory(prefix="govd-aot-") as scratch:  # not the repository
        out = subprocess.run([python, "-c", code, *args], cwd=scratch, check=True,
                             env={**env(repo=python == sys.executable), "GOVD_KERNELS": mode},
                             capture_output=True, text=True, timeout=900).stdout
    return ast.literal_eval(out.strip().splitlines()[-1])  # the repr the snippet printed


def _build(python: str) -> dict[str, object]:
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="govd-aot-") as scratch:
        done = subprocess.run([python, "-m", "govd.kernels.build"], cwd=scratch,
                              env={**env(repo=python == sys.executable), "GOVD_KERNELS": "jit"},
                              capture_output=True, text=True, timeout=900)
    return {"wall_s": round(time.perf_counter() - start, 1), "returncode": done.returncode,
            "said": (done.stdout + done.stderr).strip().splitlines()[-1:]}


def _daemon(tmp: Path, root: Path, python: str | None, mode: str, seconds: float
            ) -> dict[str, Any]:
    """One `govd run` with ``GOVD_KERNELS=mode``: READY, CPU per tick, memory."""
    os.environ["GOVD_KERNELS"] = mode  # start_daemon passes this process's environment on
    notify = NotifyListener(tmp / f"notify-{mode}-{time.monotonic_ns()}.sock")
    try:
        start = time.perf_counter()
        daemon = start_daemon(tmp, root, notify.path, python=python)
        notify.wait_ready(daemon)
        ready_s = time.perf_counter() - start
        notify.drain_in_background()
        time.sleep(SETTLE_S)
        cpu0, wall0 = cpu_s(daemon.pid), time.monotonic()
        time.sleep(seconds)
        cpu1, wall1 = cpu_s(daemon.pid), time.monotonic()
        memory = memory_mb(daemon.pid)
        stop(daemon)
    finally:
        notify.close()
        del os.environ["GOVD_KERNELS"]
    return {"start_to_ready_s": round(ready_s, 3),
            "cpu_per_tick_us": round((cpu1 - cpu0) / ((wall1 - wall0) / PERIOD_S) * 1e6, 1),
            **memory}


def _interleaved(python: str | None, pairs: int, seconds: float) -> dict[str, Any]:
    runs: dict[str, list[dict[str, Any]]] = {"jit": [], "aot": []}
    with scratch_dir("govd-aot-") as tmp_name:
        tmp = Path(tmp_name)
        root = tmp / "gpu"
        sim = start_sim(root, tmp / "frames.sock", 1.0, "game-medium")
        try:
            _daemon(tmp, root, python, "jit", 0.0)  # warms numba's cache, discarded
            for pair in range(pairs):
                for mode in ("jit", "aot") if pair % 2 == 0 else ("aot", "jit"):
                    runs[mode].append(_daemon(tmp, root, python, mode, seconds))
        finally:
            sim.terminate()
            sim.wait(timeout=60)
    return {"pairs": pairs, "seconds": seconds, **runs}


def main() -> None:
    """Run the probe and write the JSON."""
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--python", default=sys.executable, help="the interpreter to probe")
    parser.add_argument("--ticks", type=int, default=300)
    parser.add_argument("--build", action="store_true",
                        help="rebuild the extension in that venv first and time the build")
    parser.add_argument("--pairs", type=int, default=3,
                        help="interleaved pairs of daemons, one per mode (0: none)")
    parser.add_argument("--seconds", type=float, default=15.0,
                        help="frames measured per daemon, wall s")
    args = parser.parse_args()
    build = _build(args.python) if args.build else None
    _run(args.python, _STEPS, "jit")  # warms numba's cache: the daemon's case is a warm start
    jit_ticks = _run(args.python, _TICKS, "jit", str(args.ticks))
    aot_ticks = _run(args.python, _TICKS, "aot", str(args.ticks))
    assert isinstance(jit_ticks, dict) and isinstance(aot_ticks, dict)
    result = {
        "benchmark": "numba's JIT against the per-tick kernels compiled ahead of time "
                     "(govd.kernels.build): start-up steps, memory, call cost",
        "python": args.python,
        "build": build,
        "jit_steps": _run(args.python, _STEPS, "jit"),
        "aot_steps": _run(args.python, _STEPS, "aot"),
        "aot_vs_jit": {
            "ticks": args.ticks,
            "state_bit_identical": aot_ticks["state_sha256"] == jit_ticks["state_sha256"],
            "flags_equal": aot_ticks["flags_sha256"] == jit_ticks["flags_sha256"],
            "call_us_jit_dispatcher": jit_ticks["call_us"],
            "call_us_aot_guarded": aot_ticks["call_us"],
            "call_us_aot_unguarded": aot_ticks.get("call_us_unguarded"),
        },
        "daemon_interleaved": _interleaved(
            None if args.python == sys.executable else args.python, args.pairs, args.seconds)
        if args.pairs > 0 else None,
        "notes": "each step's anon_mb is the process's Anonymous memory after it (MiB), "
                 "wall_s the step's own time; a fresh process per column, numba's cache warm. "
                 "call_us: the best of 5 x 20000 model_tick calls (M=2, 5 levels, no "
                 "counters); aot_guarded is what govd calls (govd.kernels.loader.guarded checks "
                 "the arrays' type, dtype, layout and writability), aot_unguarded the extension's "
                 "function alone. daemon_interleaved: per mode, one govd run per pair "
                 "(cpu_per_tick_us from /proc utime+stime over the window, anon_mb etc. from "
                 "smaps_rollup after sync).",
        "machine": machine(),
    }
    write_result("aot_probe", result)


if __name__ == "__main__":
    main()
