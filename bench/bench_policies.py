"""Policies against the oracle: the simulated graphics suite at 60 FPS and the measured V100
kernels at a 10 % slowdown limit, plus evaluator speed. Writes bench/results/policies.json.

    .venv/bin/python bench/bench_policies.py [--minutes 5] [--seed 1]

Every figure comes from `govd.eval.evaluate`, the same code `govd eval` runs; the V100 part
is skipped with a message where ../shared/data/nv-dvfs is absent.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from govd.eval.evaluate import evaluate  # noqa: E402
from govd.eval.report import record, table  # noqa: E402
from govd.model.settings import ModelSettings  # noqa: E402
from govd.sim.gpu import simulate  # noqa: E402
from govd.sim.nvdvfs import nvdvfs_sweep  # noqa: E402
from govd.target import Target  # noqa: E402

SUITE = ["rendering-test", "art3", "game-light", "game-medium", "game-heavy"]
HEAVY = {"game-heavy", "game-medium", "rendering-test"}
LIGHT = {"game-light"}
DATA = REPO.parent / "shared" / "data" / "nv-dvfs"
TARGETS = {
    "suite_energy_ratio_max": 1.02,
    "v100_energy_ratio_max": 1.05,
    "violation_excess_max": 0.01,
    "heavy_saving_vs_ondemand_min": 0.40,
    "time_mape_rls_max": 0.042,
    "time_mape_dcd_max": 0.046,
    "sensitivity_error_max": 0.067,
    "steps_per_s_min": 50_000,
}


def run_suite(minutes: float, seed: int, levels: str = "seed9") -> list[dict]:
    """Every policy (energy with RLS and with DCD-RLS) over each simulated scenario."""
    target = Target(fps=60)
    sweeps = []
    for name in SUITE:
        sweep = simulate(name, levels, minutes, seed)
        sweep.path = name
        sweeps.append(sweep)
    records = []
    for algo in ("rls", "dcd"):
        policies = ["energy"] if algo == "dcd" else ["ondemand", "energy", "oracle",
                                                      "performance", "powersave"]
        for name, sweep, run, sc in evaluate(sweeps, policies, target,
                                             ModelSettings(algorithm=algo)):
            records.append(record(name, algo, sweep.path, run, sc))
    return records


def run_v100(minutes: float, seed: int) -> list[dict]:
    """The measured V100 kernels at max slowdown 0.10, or [] where the data is absent."""
    if not DATA.is_dir():
        print(f"skipping V100: {DATA} not found", file=sys.stderr)
        return []
    sweep = nvdvfs_sweep("v100", DATA, minutes, seed)
    sweep.path = "v100"
    target = Target(max_slowdown=0.10)
    records = []
    for algo in ("rls", "dcd"):
        policies = ["energy"] if algo == "dcd" else ["ondemand", "energy", "oracle",
                                                      "performance"]
        for name, sw, run, sc in evaluate([sweep], policies, target,
                                          ModelSettings(algorithm=algo)):
            records.append(record(name, algo, sw.path, run, sc))
    return records


def run_speed(repeats: int = 3) -> list[dict]:
    """Governor steps per second on a one-hour 50 ms trace's worth of steps (72 000 units)."""
    sweep = simulate("game-medium", "seed9", 20.0, 7)  # 20 min at 60 FPS = 72 000 frames
    out = []
    for policy in ("ondemand", "energy", "oracle", "performance"):
        rates = []
        for _ in range(repeats):
            started = time.perf_counter()
            evaluate([sweep], [policy], Target(fps=60))
            rates.append(sweep.units / (time.perf_counter() - started))
        out.append({"policy": policy, "units": sweep.units,
                    "steps_per_s_median": statistics.median(rates),
                    "one_hour_trace_s": 72_000 / statistics.median(rates)})
    return out


def summarise(suite: list[dict], v100: list[dict]) -> dict:
    """The issue's headline comparisons from the records."""
    def pick(records: list[dict], policy: str, algo: str = "rls") -> dict[str, dict]:
        return {r["sweep"]: r for r in records if r["policy"] == policy and r["algo"] == algo}

    summary: dict = {}
    for algo in ("rls", "dcd"):
        energy = pick(suite, "energy", algo)
        total = sum(r["energy_j"] for r in energy.values())
        oracle = sum(r["oracle_energy_j"] for r in energy.values())
        summary[f"suite_energy_ratio_{algo}"] = total / oracle
        summary[f"suite_worst_energy_ratio_{algo}"] = max(r["energy_ratio"]
                                                           for r in energy.values())
        summary[f"suite_worst_violation_excess_{algo}"] = max(
            r["violation_rate"] - r["oracle_violation_rate"] for r in energy.values())
        summary[f"suite_time_mape_{algo}"] = statistics.mean(r["time_mape"]
                                                             for r in energy.values())
        summary[f"suite_sensitivity_error_{algo}"] = statistics.mean(
            r["sensitivity_mape"] for r in energy.values())
    ondemand, energy = pick(suite, "ondemand"), pick(suite, "energy")
    summary["saving_vs_ondemand"] = {s: 1 - energy[s]["energy_j"] / ondemand[s]["energy_j"]
                                     for s in energy}
    if v100:
        for algo in ("rls", "dcd"):
            r = pick(v100, "energy", algo)["v100"]
            summary[f"v100_energy_ratio_{algo}"] = r["energy_ratio"]
            summary[f"v100_violation_excess_{algo}"] = (r["violation_rate"]
                                                        - r["oracle_violation_rate"])
        summary["v100_ondemand_energy_ratio"] = pick(v100, "ondemand")["v100"]["energy_ratio"]
    return summary


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=5.0, help="per simulated scenario")
    parser.add_argument("--v100-minutes", type=float, default=10.0)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--levels", default="seed9", help="level table of the simulated suite")
    parser.add_argument("--out", default=str(REPO / "bench" / "results" / "policies.json"))
    args = parser.parse_args()
    suite = run_suite(args.minutes, args.seed, args.levels)
    print("simulated suite, 60 FPS:")
    print(table(suite))
    v100 = run_v100(args.v100_minutes, args.seed)
    if v100:
        print("\nV100 measured kernels, max slowdown 10 %:")
        print(table(v100))
    speed = run_speed()
    summary = summarise(suite, v100)
    print("\nspeed:", json.dumps(speed, indent=1))
    print("summary:", json.dumps(summary, indent=1))
    result = {
        "command": "python bench/bench_policies.py "
                   f"--minutes {args.minutes:g} --v100-minutes {args.v100_minutes:g} "
                   f"--seed {args.seed} --levels {args.levels}",
        "machine": {"arch": platform.machine(), "python": platform.python_version(),
                    "cpus": __import__("os").cpu_count()},
        "targets": TARGETS,
        "summary": summary,
        "suite": suite,
        "v100": v100,
        "speed": speed,
    }
    Path(args.out).write_text(json.dumps(result, indent=1) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
