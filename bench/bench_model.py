"""Benchmark of the online model: cost of one update and of the whole per-tick call.

For M = 4, 10, 20 features (2 + counters) and L = 9, 30 levels, on a synthetic but model-like
workload (frame times 3–30 ms, level changes, counters of order 1), it measures:

- ``update_ns``: one update. For ``rls``/``dcd`` the compiled kernel inside a compiled loop
  (total / n); for ``numpy-rls`` (`rls_update_ref`) and ``padasip`` (``FilterRLS.adapt``) one
  call from Python.
- ``tick_us``: the whole per-tick call from Python: `OnlineModel.update` for ``rls``/``dcd``,
  `model_tick_ref` for ``numpy-rls``, and for ``padasip`` a tick built the same way from
  padasip filters (see `padasip_tick`).
- ``startup_s``: ``import govd.model.online`` + a model + its first update in a fresh process,
  with an empty numba cache (``startup-cold``: compiles) and with the cache it left
  (``startup-warm``).

Every figure is the median of (time of a loop / its length) over rounds x repeats, the rounds
interleaved over all (impl, M, L); ``*_iqr`` is the 25th-75th percentile spread. Writes
``bench/results/model.json`` (a list of records), ``bench/results/model-env.json`` (machine and
run parameters) and prints a Markdown table with the targets.

    .venv/bin/python bench/bench_model.py
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import padasip
from numba import njit

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.model_report import environment, markdown
from bench.model_startup import measure_startup
from govd.model import tick as k
from govd.model.arrays import FloatArray
from govd.model.dcd import dcd_update
from govd.model.online import OnlineModel
from govd.model.predict import predict_energy_ref, predict_time_ref, sensitivity_ref
from govd.model.rls import rls_update, rls_update_ref
from govd.model.scaling_model import ScalingModel
from govd.model.settings import ModelSettings
from govd.model.two_domain import TwoDomainModel

REPO = Path(__file__).resolve().parent.parent
IMPLS = ("rls", "dcd", "scaling", "pairs-one-mem", "numpy-rls", "padasip")
"""``scaling``: the scaling form (`govd.model.scaling`, RLS, 32 work slots) through
`ScalingModel.update`; ``pairs-one-mem``: eq. 10 through the two-domain kernel
(`TwoDomainModel`) with one memory clock, what merging `govd.model.tick` into
`govd.model.pairs` would cost. Both tick_us only (no separate update kernel)."""
FEATURES = (4, 10, 20)
LEVELS = (9, 30)
RESULTS = REPO / "bench" / "results"
MEM_ACTIVITY = 0.3
DEADLINE_MS = 16.7
WORKLOAD = ("frame times 3-30 ms (scene cost drifting x level), ~27% of ticks move 1-2 levels, "
            "counters ~1 following the scene with noise, busy 0.5-1, mem 0.3, deadline 16.7 ms; "
            "ModelSettings defaults otherwise (lambda 1, mu 1e-14, Nu 4, Mb 16, H 16)")


@dataclass(frozen=True)
class Workload:
    """One synthetic run of n ticks: the samples fed to the model, and the frame-time
    regressors/targets the model builds from them (eq. 10), for the bare update kernels."""

    settings: ModelSettings
    levels_mhz: FloatArray
    time_ms: FloatArray
    freq_mhz: FloatArray
    counters: FloatArray
    power_w: FloatArray
    busy: FloatArray
    regressors: FloatArray
    targets_ms: FloatArray


def workload(algorithm: str, features: int, levels: int, n: int, seed: int = 0) -> Workload:
    """A frame-time trace like a game's: the scene's cost drifts, the governor moves one or two
    levels on ~27% of the ticks, counters follow the scene (order 1) with noise."""
    rng = np.random.default_rng(seed)
    settings = ModelSettings(algorithm=algorithm,  # type: ignore[arg-type]
                             counters=tuple(f"c{i}" for i in range(features - 2)))
    levels_mhz = np.linspace(300.0, 1500.0, levels)
    scene = np.clip(6.0 + np.cumsum(rng.normal(0.0, 0.2, n)), 3.0, 9.0)
    steps = np.where(rng.random(n) < 1 / 3, rng.integers(-2, 3, n), 0)
    # A random walk reflected at both ends of the table (a clipped one would stick there).
    period = 2 * (levels - 1)
    walk = (levels // 2 + np.cumsum(steps)) % period
    index = np.where(walk < levels, walk, period - walk)
    freq_mhz = levels_mhz[index]
    time_ms = scene * (0.6 * levels_mhz[-1] / freq_mhz + 0.4) * (1 + 0.02 * rng.normal(size=n))
    weights = rng.uniform(0.5, 2.0, features - 2)
    counters = np.ascontiguousarray(
        np.outer(scene / 6.0, weights) + 0.1 * rng.normal(size=(n, features - 2)))
    busy = rng.uniform(0.5, 1.0, n)
    power_w = 5.0 + 20.0 * busy * freq_mhz / levels_mhz[-1] + rng.normal(0.0, 0.3, n)
    regressors = np.empty((n - 1, features))
    regressors[:, 0] = time_ms[:-1] * (freq_mhz[:-1] / freq_mhz[1:] - 1.0)
    regressors[:, 1] = (freq_mhz[1:] - freq_mhz[:-1]) * 1e-3
    regressors[:, 2:] = counters[1:] - counters[:-1]
    return Workload(settings, levels_mhz, time_ms, freq_mhz, counters, power_w, busy,
                    regressors, np.diff(time_ms))


def median_iqr(values: list[float]) -> tuple[float, float]:
    """Median and interquartile range of repeated measurements."""
    if len(values) < 2:
        return values[0], 0.0
    q1, _, q3 = statistics.quantiles(values, n=4)
    return statistics.median(values), q3 - q1


def repeat_timed(run: Callable[[], Any], repeats: int) -> list[float]:
    """Wall time of each of ``repeats`` calls of ``run`` (setup belongs outside it). Units: s."""
    times_s = []
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        times_s.append(time.perf_counter() - start)
    return times_s


def per_call_us(loop: Callable[[], Any], n: int, repeats: int) -> float:
    """Median over repeats of the time of ``loop`` (n calls) divided by n. Units: µs."""
    return median_iqr([t / n * 1e6 for t in repeat_timed(loop, repeats)])[0]


@njit(cache=True)
def _rls_loop(a: FloatArray, P: FloatArray, H: FloatArray, d: FloatArray, lam: float,
              max_trace: float, a_init: FloatArray, p0: float, work: FloatArray) -> int:
    resets = 0
    for i in range(H.shape[0]):
        resets += rls_update(a, P, H[i], d[i], lam, max_trace, a_init, p0, work)
    return resets


@njit(cache=True)
def _dcd_loop(w: FloatArray, R: FloatArray, r: FloatArray, H: FloatArray, d: FloatArray,
              lam: float, delta: float, step_h: float, mb: int, nu: int,
              a_init: FloatArray) -> int:
    resets = 0
    for i in range(H.shape[0]):
        resets += dcd_update(w, R, r, H[i], d[i], lam, delta, step_h, mb, nu, a_init)
    return resets


def kernel_update_ns(wl: Workload, n: int, repeats: int) -> tuple[list[float], int]:
    """Compiled update kernel in a compiled loop over the first n regressors, each repeat from
    the model's prior: (ns per update of each repeat, resets seen in the last repeat)."""
    model = OnlineModel(wl.levels_mhz, wl.settings)
    cfg, icfg, a_init = model.cfg, model.icfg, model.vecs[k.A_INIT].copy()
    H, d = wl.regressors[:n], wl.targets_ms[:n]
    resets = [0]

    def state() -> tuple[FloatArray, FloatArray, FloatArray]:
        return model.vecs[k.A].copy(), model.P.copy(), np.zeros(a_init.size)

    if wl.settings.algorithm == "rls":
        def run(a: FloatArray, P: FloatArray, work: FloatArray, H: FloatArray,
                d: FloatArray) -> int:
            return int(_rls_loop(a, P, H, d, cfg[k.LAM], cfg[k.MAX_TRACE], a_init,
                                 1.0 / cfg[k.MU], work))
    else:
        def run(a: FloatArray, P: FloatArray, work: FloatArray, H: FloatArray,
                d: FloatArray) -> int:
            return int(_dcd_loop(a, P, work, H, d, cfg[k.LAM], cfg[k.MU], cfg[k.DCD_H],
                                 int(icfg[k.MB]), int(icfg[k.NU]), a_init))

    run(*state(), H[:10], d[:10])  # compile (or load from cache) outside the timing
    times_s = []
    for _ in range(repeats):
        a, P, work = state()
        start = time.perf_counter()
        resets[0] = run(a, P, work, H, d)
        times_s.append(time.perf_counter() - start)
    return [t / n * 1e9 for t in times_s], resets[0]


def python_update_ns(impl: str, wl: Workload, n: int, repeats: int) -> list[float]:
    """One update called from Python (``numpy-rls`` or ``padasip``), looped n times: ns per
    call, one figure per repeat."""
    model = OnlineModel(wl.levels_mhz, wl.settings)
    lam, mu = wl.settings.forgetting, wl.settings.mu
    max_trace, a_init = float(model.cfg[k.MAX_TRACE]), model.vecs[k.A_INIT].copy()
    rows = list(zip(wl.regressors[:n], wl.targets_ms[:n].tolist(), strict=True))
    times_s = []
    for _ in range(repeats):
        if impl == "numpy-rls":
            a, P = a_init.copy(), np.eye(a_init.size) / mu
            start = time.perf_counter()
            for h, d in rows:
                rls_update_ref(a, P, h, d, lam, max_trace, a_init, 1.0 / mu)
        else:
            adapt = padasip.filters.FilterRLS(n=a_init.size, mu=lam, eps=mu, w=a_init.copy()).adapt
            start = time.perf_counter()
            for h, d in rows:
                adapt(d, h)
        times_s.append(time.perf_counter() - start)
    return [t / len(rows) * 1e9 for t in times_s]


def tick_rows(wl: Workload, n: int) -> list[tuple[float, float, FloatArray, float, float]]:
    """The first n ticks as Python values, built before any timing."""
    return list(zip(wl.time_ms[:n].tolist(), wl.freq_mhz[:n].tolist(), list(wl.counters[:n]),
                    wl.power_w[:n].tolist(), wl.busy[:n].tolist(), strict=True))


def padasip_tick(wl: Workload) -> Callable[[FloatArray, float, float, float, float, float], None]:
    """A tick built from padasip like `model_tick` is: adapt the frame-time filter (regressor
    given ready-made, which favours padasip) and a 4-feature power filter, then predict time,
    sensitivity, power and energy at every level with govd's NumPy references."""
    s = wl.settings
    levels = wl.levels_mhz
    g_levels = OnlineModel(levels, s).lv[k.G]
    time_filter = padasip.filters.FilterRLS(n=s.n_features, mu=s.forgetting, eps=s.mu,
                                            w=np.full(s.n_features, s.a_init))
    power_filter = padasip.filters.FilterRLS(n=4, mu=s.power_forgetting, eps=1 / s.power_p0,
                                             w=np.array([0.0, 0.0, 1.0, 0.0]))
    phi = np.empty(4)

    def tick(h: FloatArray, d: float, t_ms: float, f_mhz: float, power_w: float,
             busy: float) -> None:
        time_filter.adapt(d, h)
        g = float(np.interp(f_mhz, levels, g_levels))
        phi[:] = (1.0, busy, busy * g, busy * MEM_ACTIVITY)
        power_filter.adapt(power_w, phi)
        w = time_filter.w
        t_pred = predict_time_ref(t_ms, f_mhz, w[0], w[1], levels)
        sensitivity_ref(t_ms, f_mhz, levels, t_pred)
        predict_energy_ref(power_filter.w, g_levels, MEM_ACTIVITY, t_pred, DEADLINE_MS, np.nan)

    return tick


def tick_us(impl: str, wl: Workload, n: int, repeats: int) -> list[float]:
    """The whole per-tick call from Python, looped over n ticks, each repeat on a fresh model:
    µs per tick, one figure per repeat."""
    rows = tick_rows(wl, n)
    times_s = []
    for _ in range(repeats):
        model = OnlineModel(wl.levels_mhz, wl.settings)
        if impl in ("rls", "dcd", "scaling", "pairs-one-mem"):
            update = model.update
            if impl == "scaling":
                update = ScalingModel(wl.levels_mhz, replace(wl.settings, form="scaling")).update
            elif impl == "pairs-one-mem":
                pairs = TwoDomainModel(wl.levels_mhz, np.full(wl.levels_mhz.size, 1000.0),
                                       wl.settings)
                update = partial(pairs.update, mem_freq_mhz=1000.0)
            update(*rows[0], MEM_ACTIVITY, DEADLINE_MS)  # compile/load outside the timing
            start = time.perf_counter()
            for t, f, x, p, b in rows:
                update(t, f, x, p, b, MEM_ACTIVITY, DEADLINE_MS)
        elif impl == "numpy-rls":
            state = (model.vecs, model.P, model.pw, model.Pc, model.lv, model.cfg,
                     model.icfg, model.stats)
            out, scal, ref = model.out, model.scal, k.model_tick_ref
            start = time.perf_counter()
            for t, f, x, p, b in rows:
                ref(*state, x, out, scal, t, f, p, b, MEM_ACTIVITY, DEADLINE_MS)
        else:
            tick = padasip_tick(wl)
            hd = list(zip(wl.regressors[:n], wl.targets_ms[:n].tolist(), strict=False))
            start = time.perf_counter()
            for (h, d), (t, f, _, p, b) in zip(hd, rows[1:], strict=False):
                tick(h, d, t, f, p, b)
        times_s.append(time.perf_counter() - start)
    count = len(rows) - (impl == "padasip")
    return [t / count * 1e6 for t in times_s]


@njit(cache=True)
def _no_op_tick(state: FloatArray, x: FloatArray, t_ms: float, f_mhz: float, power_w: float,
                busy: float, mem: float, deadline_ms: float) -> int:
    return 0


@njit(cache=True)
def _tick_loop(state: FloatArray, X: FloatArray, T: FloatArray, F: FloatArray, W: FloatArray,
               B: FloatArray, mem: float, deadline_ms: float) -> int:
    flags = 0
    for i in range(T.shape[0]):
        flags |= k.model_tick(state, X[i], T[i], F[i], W[i], B[i], mem, deadline_ms)
    return flags


def tick_breakdown_us(features: int, levels: int, n: int, repeats: int) -> dict[str, float]:
    """Where an RLS tick's time goes: `model_tick` inside a compiled loop (its arithmetic
    alone), numba's dispatch of its 8 arguments (a compiled no-op with the same signature),
    `model_tick` called from Python, and through `OnlineModel.update`. Median µs per tick."""
    wl = workload("rls", features, levels, n)
    rows = tick_rows(wl, n)
    model = OnlineModel(wl.levels_mhz, wl.settings)
    state = model.state
    columns = (wl.time_ms[:n], wl.freq_mhz[:n], wl.power_w[:n], wl.busy[:n])

    def compiled() -> None:
        _tick_loop(state, wl.counters[:n], *columns, MEM_ACTIVITY, DEADLINE_MS)

    compiled()
    model.reset()
    result = {"compiled_loop": per_call_us(compiled, n, repeats)}
    for name, call in (("dispatch_only", _no_op_tick), ("model_tick", k.model_tick)):
        call(state, rows[0][2], 10.0, 900.0, 8.0, 0.7, MEM_ACTIVITY, DEADLINE_MS)

        def loop(call: Callable[..., int] = call) -> None:
            for t, f, x, p, b in rows:
                call(state, x, t, f, p, b, MEM_ACTIVITY, DEADLINE_MS)

        result[name] = per_call_us(loop, n, repeats)
    result["online_model_update"] = median_iqr(tick_us("rls", wl, n, repeats))[0]
    return result


@dataclass(frozen=True)
class Sizes:
    """Loop lengths: updates per compiled kernel loop, ticks per compiled-tick loop, calls per
    loop for the Python implementations (numpy-rls, padasip)."""

    kernel: int
    tick: int
    python: int


def sample_costs(impl: str, features: int, levels: int, sizes: Sizes,
                 repeats: int) -> tuple[list[float], list[float], int]:
    """``repeats`` figures each of update_ns and tick_us for one implementation, and the resets
    its compiled kernel loop saw (0 for the Python ones)."""
    algorithm = "dcd" if impl == "dcd" else "rls"
    n = max(sizes.kernel, sizes.tick, sizes.python) + 1
    wl = workload(algorithm, features, levels, n, seed=features * 1000 + levels)
    if impl in ("rls", "dcd"):
        update_ns, resets = kernel_update_ns(wl, sizes.kernel, repeats)
        return update_ns, tick_us(impl, wl, sizes.tick, repeats), resets
    if impl in ("scaling", "pairs-one-mem"):
        return [], tick_us(impl, wl, sizes.tick, repeats), 0
    return (python_update_ns(impl, wl, sizes.python, repeats),
            tick_us(impl, wl, sizes.python, repeats), 0)


def measure(sizes: Sizes, rounds: int, repeats: int) -> list[dict[str, Any]]:
    """One record per (impl, features, levels), from ``rounds`` passes over all of them with
    ``repeats`` timings each: interleaving spreads the shared machine's bursts of load over
    every figure instead of spoiling a few."""
    keys = list(itertools.product(FEATURES, LEVELS, IMPLS))
    update_ns: dict[tuple[int, int, str], list[float]] = {key: [] for key in keys}
    tick: dict[tuple[int, int, str], list[float]] = {key: [] for key in keys}
    resets = dict.fromkeys(keys, 0)
    for done in range(rounds):
        for features, levels, impl in keys:
            upd, tck, seen = sample_costs(impl, features, levels, sizes, repeats)
            update_ns[features, levels, impl] += upd
            tick[features, levels, impl] += tck
            resets[features, levels, impl] += seen
        print(f"round {done + 1}/{rounds} done", file=sys.stderr)
    records = []
    for features, levels, impl in keys:
        upd, upd_iqr = (median_iqr(update_ns[features, levels, impl])
                         if update_ns[features, levels, impl] else (None, None))
        tck, tck_iqr = median_iqr(tick[features, levels, impl])
        compiled = impl in ("rls", "dcd", "scaling", "pairs-one-mem")
        record: dict[str, Any] = {
            "impl": impl, "features": features, "levels": levels, "update_ns": upd,
            "tick_us": tck, "update_iqr_ns": upd_iqr, "tick_iqr_us": tck_iqr,
            "n_update": sizes.kernel if compiled else sizes.python,
            "n_tick": sizes.tick if compiled else sizes.python,
            "samples": len(update_ns[features, levels, impl]),
        }
        if compiled:
            record["resets"] = resets[features, levels, impl]
        records.append(record)
    return records


def python_loop_ns(n: int, repeats: int) -> float:
    """Cost of the bare Python loop the tick timings run in (included in them). Units: ns."""
    rows = tick_rows(workload("rls", 4, 9, n), n)

    def loop() -> None:
        for _t, _f, _x, _p, _b in rows:
            pass

    return per_call_us(loop, n, repeats) * 1e3


def main(argv: list[str] | None = None) -> int:
    """Run every measurement, write the JSON files and print the tables."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n-kernel", type=int, default=100_000, help="updates per kernel loop")
    parser.add_argument("--n-tick", type=int, default=20_000, help="ticks per compiled-tick loop")
    parser.add_argument("--n-python", type=int, default=1_000,
                        help="calls per loop for numpy-rls and padasip")
    parser.add_argument("--rounds", type=int, default=5,
                        help="passes over every (impl, M, L), interleaved")
    parser.add_argument("--repeats", type=int, default=3, help="timings per pass")
    parser.add_argument("--startup-runs", type=int, default=3)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    started = time.perf_counter()
    load_before = os.getloadavg()
    sizes = Sizes(kernel=args.n_kernel, tick=args.n_tick, python=args.n_python)
    records = measure(sizes, args.rounds, args.repeats) + measure_startup(args.startup_runs)
    breakdown = tick_breakdown_us(FEATURES[0], LEVELS[0], args.n_tick,
                                  args.rounds * args.repeats)
    env = environment({
        "n_kernel": args.n_kernel, "n_tick": args.n_tick, "n_python": args.n_python,
        "rounds": args.rounds, "repeats": args.repeats, "startup_runs": args.startup_runs,
        "python_loop_ns": python_loop_ns(args.n_tick, args.rounds * args.repeats),
        "rls_tick_breakdown_us": breakdown, "workload": WORKLOAD,
        # 1-, 5- and 15-minute load averages: on a shared machine, what the figures carry.
        "loadavg_before": list(load_before), "loadavg_after": list(os.getloadavg()),
    })
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "model.json").write_text(json.dumps(records, indent=1) + "\n")
    (args.out / "model-env.json").write_text(json.dumps(env, indent=1) + "\n")
    print(markdown(records, breakdown))
    print(f"\n{env['cpu']}, {env['cpus']} CPUs; bare Python loop in each tick_us: "
          f"{env['python_loop_ns']:.0f} ns; took {time.perf_counter() - started:.0f} s; "
          f"load average {load_before[0]:.2f} before, {env['loadavg_after'][0]:.2f} after")
    return 0


if __name__ == "__main__":
    sys.exit(main())
