"""Does "time grows at most as 1/f near the top" hold on measured work? (issue #24)

Issue #24's design note says that under a slowdown budget b the clock f_top / (1 + b) is always
inside it, because a work's time grows at most as 1/f near the top. A policy that trusts that
bound may run any new work there without measuring it. This benchmark checks the premise on
every single-clock slowdown table `bench_decisions.py` judges (the (core, memory) pair tables
are left out: the bound speaks of one clock). Per table and budget it reports:

- ``level_mhz``: the lowest level with log(f_top / f) <= log(1 + b), the 1/f-safe clock;
- ``phases_over``: the share of phases (`govd.eval.reference.phase_means`: runs of the same
  work, their mean curves) whose mean time there exceeds (1 + b) x their fastest level's;
- ``units_over``: the share of units (noise included) that miss the budget there, as
  `govd.eval.score.violations` counts them (against each unit's own fastest level);
- ``max_excess``: the largest excess of a phase's mean log time ratio to the top over
  log(f_top / f), over the levels from that clock up (0: the bound holds everywhere there);
- ``top_not_fastest``: the share of phases whose top level is more than 2 % slower than their
  fastest level (the budget's reference is then not the top);
- ``clock_tail_max``, ``clock_tail_median``, ``clock_tail_mhz``: per level from that clock up
  (the top excluded), the share of phases whose mean log time ratio to the top exceeds
  log(f_top / f) by more than ``TAIL_EXCESS``; the largest share, the median share, and the
  level of the largest. Where a work's excess were its own, the share would grow smoothly
  as the clock falls; a largest share many times the median says that some clocks are slow
  for many works at once (the excess belongs to the clock, not to the work).

    .venv/bin/python bench/bench_physics_bound.py [--out bench/results/physics_bound.json]

Tables missing from ../shared/data are skipped with a message, as in `bench_decisions.py`.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_decisions as bd
from decision_tables import slowdown_tables

from govd.eval.reference import phase_means
from govd.eval.score import violations
from govd.formats.sweep import SweepTable
from govd.target import Target

BUDGETS = (0.10, 0.25)
TOP_SLOWER = math.log(1.02)
"""Log time by which the top level must exceed a phase's fastest to count as not fastest."""
TAIL_EXCESS = math.log(1.03)
"""Excess over 1/f (log time) that counts a phase as over the bound at a level: three times the
1 % per-unit noise the tables carry, so that a phase's mean is over it by more than noise."""


def check(sweep: SweepTable, budget: float) -> dict[str, float]:
    """The figures of the module's docstring for one table at one slowdown budget."""
    f = sweep.levels_mhz
    _, means = phase_means(sweep)
    log_t = np.log(means.time_ms)
    u = np.log(f[-1] / f)
    k = int(np.flatnonzero(u <= math.log1p(budget))[0])
    ratio = log_t - log_t.min(axis=1, keepdims=True)
    excess = log_t[:, k:] - log_t[:, -1:] - u[None, k:]
    tail = np.mean(excess[:, :-1] > TAIL_EXCESS, axis=0) if excess.shape[1] > 1 else np.zeros(1)
    worst = int(np.argmax(tail))
    return {
        "level_mhz": float(f[k]),
        "phases_over": float(np.mean(ratio[:, k] > math.log1p(budget))),
        "units_over": float(violations(sweep, Target(max_slowdown=budget))[:, k].mean()),
        "max_excess": float(max(excess.max(), 0.0)),
        "top_not_fastest": float(np.mean(ratio[:, -1] > TOP_SLOWER)),
        "clock_tail_max": float(tail[worst]),
        "clock_tail_median": float(np.median(tail)),
        "clock_tail_mhz": float(f[k + worst]),
        "phases": int(log_t.shape[0]),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path,
                        default=bd.REPO / "bench" / "results" / "physics_bound.json")
    args = parser.parse_args()
    started = time.perf_counter()
    tables = [t for t in bd.tables(10.0) + slowdown_tables(bd.DATA, False, bd.unit_sweep)
              if t.mem_levels_mhz is None]
    rows: dict[str, dict[str, dict[str, float]]] = {}
    print(f"{'table':<22}{'b':>6}{'MHz':>7}{'phases over':>13}{'units over':>12}"
          f"{'max excess':>12}{'top slow':>10}{'tail max':>10}{'median':>8}{'at MHz':>8}")
    for sweep in tables:
        name = str(sweep.path)
        rows[name] = {}
        for b in BUDGETS:
            r = rows[name][f"{b:g}"] = check(sweep, b)
            print(f"{name:<22}{b:>6g}{r['level_mhz']:>7.0f}{r['phases_over']:>13.3f}"
                  f"{r['units_over']:>12.3f}{r['max_excess']:>12.3f}"
                  f"{r['top_not_fastest']:>10.3f}{r['clock_tail_max']:>10.3f}"
                  f"{r['clock_tail_median']:>8.3f}{r['clock_tail_mhz']:>8.0f}")
    report = {"command": "python bench/bench_physics_bound.py", "budgets": list(BUDGETS),
              "results": rows}
    bd.write_report(args.out, report, started)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
