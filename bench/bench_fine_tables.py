"""The energy policy on made-up fine grids, judged as bench_decisions.py judges its rows (#24)

`bench_decisions.py`'s rows are the measured and made-up tables the decisions were developed
on. This benchmark holds the same policy to issue #24's targets on a kind of table none of them
is: works whose time goes as a power of the clock (`decision_tables.power_law_table`, 101
clocks 5 MHz apart, 1 % noise per unit and clock, the memory policy's test tables), one work
for the whole run or several taking turns, and one with a clock that breaks physics. Per case,
limit (10 %, 25 %) and seed (0, 1): the energy policy's energy over the oracle's, its units
over the limit beyond the oracle's rate, one fixed clock (`static_reference_level`) and the
hedged causal reference, each with the oracle's rate + 1 pp, and the targets missed (S: over
one fixed clock + 0.005, H: over the hedged reference + 0.03, V: more than 1 pp of units over
the oracle's rate).

    .venv/bin/python bench/bench_fine_tables.py [--out bench/results/fine_tables.json]
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from decision_tables import power_law_table  # noqa: E402

from govd.eval.evaluate import evaluate  # noqa: E402
from govd.eval.reference import (  # noqa: E402
    hedged_reference_levels,
    oracle_levels,
    static_reference_level,
)
from govd.eval.score import unit_energy_mj  # noqa: E402
from govd.target import Target  # noqa: E402

CASES: tuple[tuple[tuple[float, ...], dict[str, int]], ...] = (
    ((0.2,), {}), ((0.5,), {}), ((0.9,), {}), ((0.2, 0.9), {}),
    ((0.2, 0.9), {"units": 1200, "run": 200}), ((0.3,), {"slow": 80}),
    ((0.9, 0.2, 0.5), {"units": 1500, "run": 100}))
"""(slopes, `power_law_table` arguments): one memory-bound, one mixed, one compute-bound work;
two works taking turns every 300 and every 200 units; a clock 20 % slow; three works every 100."""
LIMITS = (0.10, 0.25)
SEEDS = (0, 1)
EXCESS = 0.01
"""Violations over the oracle's rate the references may spend and the policy may let over."""
STATIC_SLACK = 0.005
HEDGED_SLACK = 0.03


def judge(slopes: tuple[float, ...], kwargs: dict[str, int], limit: float, seed: int) -> dict:
    """One case: the energy policy's figures beside the references, and the targets missed."""
    table = power_law_table(list(slopes), seed=seed, **kwargs)
    target = Target(max_slowdown=limit)
    ((_, _, _, score),) = evaluate([table], ["energy"], target)
    energy = unit_energy_mj(table, target, 0.0)
    units = np.arange(table.units)
    oracle = float(energy[units, oracle_levels(table, target, 0.0)].sum())
    static = float(energy[:, static_reference_level(table, target, 0.0, EXCESS)].sum()) / oracle
    hedged_levels, _ = hedged_reference_levels(table, target, 0.0, EXCESS)
    hedged = float(energy[units, hedged_levels].sum()) / oracle
    over = float(score.violation_rate - score.oracle_violation_rate)
    missed = "".join(letter for letter, miss in (
        ("S", score.energy_ratio > static + STATIC_SLACK),
        ("H", score.energy_ratio > hedged + HEDGED_SLACK), ("V", over > EXCESS)) if miss)
    return {"slopes": list(slopes), **kwargs, "limit": limit, "seed": seed,
            "energy_ratio": float(score.energy_ratio), "violation_excess": over,
            "static_reference_vs_oracle": static, "hedged_reference_vs_oracle": hedged,
            "missed": missed}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=REPO / "bench" / "results" / "fine_tables.json")
    args = parser.parse_args(argv)
    started = time.monotonic()
    rows = []
    for slopes, kwargs in CASES:
        for limit in LIMITS:
            for seed in SEEDS:
                row = judge(slopes, kwargs, limit, seed)
                rows.append(row)
                print(f"{list(slopes)!s:<17}{kwargs!s:<28}{limit:>5.2f}{seed:>3}"
                      f"{row['energy_ratio']:>8.3f}{100 * row['violation_excess']:>7.2f}%"
                      f"{row['static_reference_vs_oracle']:>8.3f}"
                      f"{row['hedged_reference_vs_oracle']:>8.3f}  {row['missed'] or 'ok'}")
    summary = {"cases": len(rows), "meeting_all": sum(not r["missed"] for r in rows),
               **{name: sum(letter in r["missed"] for r in rows)
                  for letter, name in (("S", "never_worse_than_static"),
                                       ("H", "near_hedged"), ("V", "violations"))},
               "energy_ratio_sum": round(sum(r["energy_ratio"] for r in rows), 3),
               "most_units_over": max(r["violation_excess"] for r in rows)}
    print(f"\ncases meeting every target: {summary['meeting_all']} of {summary['cases']}; "
          f"one fixed clock missed on {summary['never_worse_than_static']}, the hedged "
          f"reference on {summary['near_hedged']}, the violation target on "
          f"{summary['violations']}; energy ratios summed {summary['energy_ratio_sum']}")
    report = {"command": "python bench/bench_fine_tables.py", "cases": rows, "summary": summary,
              "machine": {"python": platform.python_version(), "arch": platform.machine()},
              "wall_s": round(time.monotonic() - started, 1)}
    args.out.write_text(json.dumps(report, indent=1) + "\n")
    print(f"wrote {args.out} ({report['wall_s']:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
