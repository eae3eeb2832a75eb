"""`govd eval`: score policies against the oracle on sweep tables (DESIGN §5)."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from govd.cli import UsageError
from govd.eval import experiments_cli
from govd.model.settings import ModelSettings
from govd.target import Target


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``govd eval``."""
    p = sub.add_parser(
        "eval",
        help="score policies against the oracle on sweep tables",
        description="Replay each policy over each sweep table (every unit measured at every "
        "level); each policy sees only the rows of the levels it chose, the oracle sees all.",
    )
    p.add_argument("--sweep", nargs="+", required=True, metavar="FILE", help="sweep table CSVs")
    p.add_argument("--policy", default="ondemand,energy,oracle",
                   help="comma-separated policy names (default: %(default)s)")
    goal = p.add_mutually_exclusive_group(required=True)
    goal.add_argument("--target-fps", type=float, metavar="F", help="frame deadline 1000/F ms")
    goal.add_argument("--max-slowdown", type=float, metavar="S",
                      help="allowed slowdown against the fastest level, e.g. 0.10")
    p.add_argument("--form", choices=("auto", "scaling", "seed"), default="auto",
                   help="the frame-time model: scaling, the seed's eq. 10, or auto (default: "
                        "scaling under --max-slowdown, seed under --target-fps); the "
                        "experiments --sweep-param and --offline-ratios always use seed")
    p.add_argument("--algo", choices=("rls", "dcd", "arnlms"), default="rls",
                   help="model learner: rls, dcd (DCD-RLS) or arnlms (the seed's baseline: "
                        "10th-order autoregressive frame time learned by NLMS, no frequency "
                        "model: one prediction for every level)")
    p.add_argument("--idle-power-w", type=float, metavar="W",
                   help="idle power for scoring (default: the table's idle_power_w, else 0)")
    p.add_argument("--counters", metavar="A,B",
                   help="model counters (default: the table's frequency-independent ones; "
                        "'none' for none)")
    p.add_argument("--forgetting", type=float, default=None, help="RLS forgetting factor λ")
    p.add_argument("--mu", type=float, default=None, help="RLS regularisation μ (P0 = I/μ)")
    p.add_argument("--margin", type=float, default=None, help="energy policy safety margin")
    p.add_argument("--hysteresis", type=float, default=None, help="energy policy hysteresis")
    p.add_argument("--error-weight", type=float, default=None,
                   help="energy policy: margin >= this times the recent RMS prediction error")
    p.add_argument("--json", action="store_true", help="print JSON records instead of a table")
    p.add_argument("--plot", metavar="DIR", help="write PNG plots (matplotlib) into DIR")
    experiments_cli.add_options(p)
    p.set_defaults(func=run)


def _settings(args: argparse.Namespace) -> ModelSettings:
    # arnlms keeps an RLS power model beside its own frame-time predictor
    kwargs: dict[str, Any] = {"algorithm": "rls" if args.algo == "arnlms" else args.algo,
                              "form": "seed" if args.algo == "arnlms" else args.form}
    if args.forgetting is not None:
        kwargs["forgetting"] = args.forgetting
    if args.mu is not None:
        kwargs["mu"] = args.mu
    try:
        return ModelSettings(**kwargs)
    except ValueError as exc:
        raise UsageError(str(exc)) from None


class _Progress:
    """A one-line progress bar on stderr, silent when stderr is not a terminal."""

    def __init__(self) -> None:
        self.enabled = sys.stderr.isatty()

    def __call__(self, policy: str, unit: int, units: int) -> None:
        if self.enabled:
            done = unit / max(units, 1)
            bar = "#" * int(30 * done)
            print(f"\r{policy:<12} [{bar:<30}] {100 * done:5.1f} %", end="", file=sys.stderr)

    def clear(self) -> None:
        if self.enabled:
            print("\r" + " " * 60 + "\r", end="", file=sys.stderr)


def run(args: argparse.Namespace) -> int:
    """Evaluate and print; exit 0, or 2 on a usage or file error."""
    from govd.eval.evaluate import evaluate
    from govd.eval.report import record, table
    from govd.formats.sweep import SweepFormatError, read_sweep
    from govd.policy.registry import UnknownPolicyError, policy_class

    try:
        target = Target(fps=args.target_fps, max_slowdown=args.max_slowdown)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    policies = [p.strip() for p in args.policy.split(",") if p.strip()]
    try:
        for name in policies:
            policy_class(name)
    except UnknownPolicyError as exc:
        raise UsageError(str(exc)) from None
    counters = None
    if args.counters is not None:
        counters = [] if args.counters == "none" else args.counters.split(",")
    energy_params = {k: v for k, v in (("margin", args.margin), ("hysteresis", args.hysteresis),
                                       ("error_weight", args.error_weight)) if v is not None}
    settings = _settings(args)
    try:
        sweeps = [read_sweep(path) for path in args.sweep]
    except (OSError, SweepFormatError) as exc:
        raise UsageError(str(exc)) from None
    if experiments_cli.wanted(args):
        return experiments_cli.run_experiments(args, sweeps, target, settings)
    progress = _Progress()
    try:
        results = evaluate(sweeps, policies, target, settings, args.idle_power_w, counters,
                           {"energy": energy_params}, progress, args.algo)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    finally:
        progress.clear()
    records = [record(name, args.algo, sweep.path, rep, sc) for name, sweep, rep, sc in results]
    if args.json:
        print(json.dumps({"results": records}, indent=2))
    else:
        print(f"target: {target.describe()}, model: {args.algo}")
        print(table(records))
    if args.plot:
        from govd.eval.plot import plot_results

        for path in plot_results(results, target, args.plot):
            print(f"wrote {path}", file=sys.stderr)
    return 0
