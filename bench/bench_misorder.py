"""Why the model misorders levels (issue #11): the `energy` policy's Kendall tau on every
measured table of bench/bench_decisions.py, with the model's time or power replaced by each
phase's true mean curve (`govd.research.misorder`). Writes bench/results/misorder.json.

    .venv/bin/python bench/bench_misorder.py [--max-slowdown 0.1] [--minutes 10] [--quick]
        [--tables v100-sim,gtx980-pairs]

Per table: the model's tau, the tau with true times, with true power, with both (the causal
bound), with the truth below each cut level (the levels the policy never runs), the median
log error of the predicted time and power shapes at every level, the share of units run there,
and the taus over eight consecutive windows (a model that drifts against one that never knew).
"""

from __future__ import annotations

import argparse
import platform
import sys
import time
from dataclasses import asdict
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from bench_decisions import tables, write_report  # noqa: E402

from govd.eval.evaluate import evaluate  # noqa: E402
from govd.eval.reference import mean_curve_kendall_tau  # noqa: E402
from govd.model.settings import ModelSettings  # noqa: E402
from govd.research.misorder import misorder  # noqa: E402
from govd.target import Target  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--max-slowdown", type=float, default=0.10)
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--quick", action="store_true", help="1 simulated minute (tests)")
    parser.add_argument("--tables", default="", help="comma-separated names (default: all)")
    parser.add_argument("--out", type=Path, default=REPO / "bench" / "results" / "misorder.json")
    args = parser.parse_args()
    if not 0.0 < args.max_slowdown < 10.0:
        print(f"--max-slowdown must be in (0, 10), got {args.max_slowdown}", file=sys.stderr)
        return 2
    wanted = {t for t in args.tables.split(",") if t}
    sweeps = [s for s in tables(1.0 if args.quick else args.minutes)
              if not wanted or s.path in wanted]
    if not sweeps:
        print("no measured data beside the project (../shared/data): nothing to measure")
        return 0
    target = Target(max_slowdown=args.max_slowdown)
    started = time.perf_counter()
    report: dict = {"command": " ".join(["bench/bench_misorder.py", *sys.argv[1:]]),
                    "machine": platform.platform(), "python": platform.python_version(),
                    "max_slowdown": args.max_slowdown, "results": {}}
    print(f"{'table':<18}{'model':>7}{'true t':>7}{'true P':>7}{'both':>7}{'bound':>7}")
    for _, sweep, run, sc in evaluate(sweeps, ["energy"], target, ModelSettings()):
        idle_w = float(sweep.meta.get("idle_power_w", 0.0))
        try:
            found = misorder(sweep, run, target, idle_w)
        except ValueError as exc:
            print(f"{sweep.path}: {exc}")
            continue
        row = asdict(found)
        row["scored_kendall_tau"] = sc.kendall_tau
        row["mean_curve_kendall_tau"] = mean_curve_kendall_tau(sweep, target, idle_w)
        report["results"][sweep.path] = row
        print(f"{sweep.path:<18}{found.model:>7.3f}{found.true_time:>7.3f}"
              f"{found.true_power:>7.3f}{found.mean_curves:>7.3f}"
              f"{row['mean_curve_kendall_tau']:>7.3f}")
    write_report(args.out, report, started)
    return 0


if __name__ == "__main__":
    sys.exit(main())
