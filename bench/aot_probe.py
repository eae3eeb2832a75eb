"""Probe: what numba costs the daemon's start-up and memory, and whether the tick kernel could be
compiled ahead of time instead (issue #14; measured, not wired into govd).

In fresh processes of the given interpreter (the installed service's venv), each step's
anonymous memory (``/proc/self/smaps_rollup``) and wall time:

- ``import numpy``, then ``import numba``;
- the first call of a cached kernel (`govd.model.online.OnlineModel`, as the daemon's start-up
  makes it): numba then loads its typing and lowering registries and compiles its runtime;
- ``model_tick`` compiled ahead of time with ``numba.pycc`` (pending deprecation since numba
  0.57) into a temporary folder: its build time, the cost of importing the extension beside
  numpy alone (numba not imported), whether it gives the JIT's results bit for bit over a few
  hundred ticks, and the cost of one call of each.

Writes `bench/results/aot_probe.json`.   python bench/aot_probe.py [--python PY] [--ticks 300]
"""

from __future__ import annotations

import argparse
import ast
import subprocess
import sys
import tempfile

from daemon_setup import REPO, env, machine, write_result

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

_IMPORTS = _ANON + """
sys.modules['scipy'] = None  # as `govd run` does (govd.daemon.footprint)
t = time.perf_counter(); import numpy; mark('import numpy', t)
t = time.perf_counter(); import numba; mark('import numba', t)
t = time.perf_counter()
from govd.model.online import OnlineModel
OnlineModel(numpy.array([200.0, 400.0, 600.0, 800.0]))
mark('first cached kernel (OnlineModel)', t)
print(repr(steps))
"""

_BUILD = """
import time, warnings, sys
warnings.simplefilter('ignore')  # NumbaPendingDeprecationWarning: pycc
t = time.perf_counter()
from numba.pycc import CC
from govd.model import tick
cc = CC('govd_tick_aot')
cc.output_dir = sys.argv[1]
cc.export('model_tick', 'i8(f8[::1], f8[::1], f8, f8, f8, f8, f8, f8)')(tick.model_tick.py_func)
cc.compile()
print(repr(round(time.perf_counter() - t, 2)))
"""

_LOAD_AOT = _ANON + """
t = time.perf_counter(); import numpy; mark('import numpy', t)
sys.path.insert(0, sys.argv[1])
t = time.perf_counter(); import govd_tick_aot; mark('import the AOT model_tick', t)
steps['numba imported'] = 'numba' in sys.modules
print(repr(steps))
"""

_COMPARE = """
import sys, timeit, math
import numpy as np
sys.path.insert(0, sys.argv[1])
import govd_tick_aot
from govd.model.online import OnlineModel
from govd.model import tick
levels = [200.0, 300.0, 400.0, 600.0, 800.0]
model = OnlineModel(np.array(levels))
aot, jit = model.state.copy(), model.state.copy()
x = np.zeros(0)
x.flags.writeable = False  # as the daemon passes its counters
rng = np.random.default_rng(1)
same_flags = True
for i in range(int(sys.argv[2])):
    f = levels[i % len(levels)]
    t_ms = 1000.0 / f * (1.0 + 0.05 * rng.standard_normal())
    args = (x, t_ms, f, 5.0 + f / 200.0, 0.6, math.nan, 16.6)
    same_flags &= govd_tick_aot.model_tick(aot, *args) == tick.model_tick(jit, *args)
n = 20000
args = (x, 5.0, 400.0, 5.0, 0.5, math.nan, 16.6)
print(repr({
    'flags_equal': bool(same_flags),
    'state_bit_identical': bool(np.array_equal(aot, jit, equal_nan=True)),
    'call_us_aot': round(timeit.timeit(lambda: govd_tick_aot.model_tick(aot, *args), number=n)
                         / n * 1e6, 3),
    'call_us_jit': round(timeit.timeit(lambda: tick.model_tick(jit, *args), number=n)
                         / n * 1e6, 3),
}))
"""


def _run(python: str, code: str, *args: str) -> object:
    out = subprocess.run([python, "-c", code, *args], env=env(), cwd=REPO, check=True,
                         capture_output=True, text=True, timeout=600).stdout
    return ast.literal_eval(out.strip().splitlines()[-1])  # the repr the snippet printed


def main() -> None:
    """Run the probe and write the JSON."""
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--python", default=sys.executable, help="the interpreter to probe")
    parser.add_argument("--ticks", type=int, default=300)
    args = parser.parse_args()
    _run(args.python, _IMPORTS)  # warms numba's cache: the daemon's case is a warm start
    with tempfile.TemporaryDirectory(prefix="govd-aot-") as folder:
        result = {
            "benchmark": "numba's share of the daemon's start-up and memory; model_tick "
                         "compiled ahead of time with numba.pycc",
            "python": args.python,
            "jit_steps": _run(args.python, _IMPORTS),
            "aot_build_s": _run(args.python, _BUILD, folder),
            "aot_steps": _run(args.python, _LOAD_AOT, folder),
            "aot_vs_jit": _run(args.python, _COMPARE, folder, str(args.ticks)),
            "notes": "each step's anon_mb is the process's Anonymous memory after it (MiB), "
                     "wall_s the step's own time; a fresh process per column. The AOT module "
                     "is built in a temporary folder and not used by govd.",
            "machine": machine(),
        }
    write_result("aot_probe", result)


if __name__ == "__main__":
    main()
