"""`govd eval --sweep-param ...` and `govd eval --offline-ratios ...`: the seed's model
experiments (see `govd.eval.experiments`), printed as a table or JSON."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from govd.errors import UsageError
from govd.formats.sweep import SweepTable
from govd.model.settings import ModelSettings
from govd.target import Target


def add_options(p: argparse.ArgumentParser) -> None:
    """The experiment options of ``govd eval``."""
    group = p.add_argument_group(
        "model experiments (seed 000 Figs. 10, 15)",
        "The model alone, learning along the levels a driver policy picks (one that does not "
        "read the model); the error is the a-priori frame-time MAPE.")
    group.add_argument("--sweep-param", metavar="NAME=LO:HI[:N]",
                       help="sweep a model setting: mu on a log grid of N points per decade "
                            "(default 1; e.g. mu=1e-28:1e20), forgetting on N evenly spaced "
                            "points (default 5; e.g. forgetting=0.9:1)")
    group.add_argument("--offline-ratios", metavar="R,R,...",
                       help="offline (eq. 18, batch, frozen) against online RLS: train on "
                            "this share of the sweep tables, score both on the rest "
                            "(e.g. 0.1,0.3,0.5,0.7,0.9)")
    group.add_argument("--driver", default="ondemand",
                       help="policy that picks the levels in the experiments "
                            "(default: %(default)s)")
    group.add_argument("--splits", type=int, default=5,
                       help="random train/test splits per ratio (default: %(default)s)")


def wanted(args: argparse.Namespace) -> bool:
    """Whether the command line asks for an experiment instead of the policy scores."""
    return args.sweep_param is not None or args.offline_ratios is not None


def _ratios(text: str) -> list[float]:
    try:
        ratios = [float(r) for r in text.split(",") if r.strip()]
    except ValueError:
        raise UsageError(f"--offline-ratios wants numbers like 0.1,0.5, got {text!r}") from None
    if not ratios or any(not 0.0 < r < 1.0 for r in ratios):
        raise UsageError(f"--offline-ratios: each ratio must be in (0, 1), got {text!r}")
    return ratios


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.2f}"


def sweep_table(result: dict[str, Any]) -> str:
    """One line per value: the mean APE (%) of every workload and over all."""
    names = list(result["workloads"])
    head = f"{result['param']:>12} " + " ".join(f"{n[-18:]:>18}" for n in names) + \
        f" {'overall':>9} {'std':>7}"
    lines = [head, "-" * len(head)]
    for i, value in enumerate(result["values"]):
        cells = " ".join(f"{_pct(result['workloads'][n]['mape'][i]):>18}" for n in names)
        lines.append(f"{value:>12.4g} {cells} {_pct(result['overall']['mape'][i]):>9} "
                     f"{_pct(result['overall']['std'][i]):>7}")
    lines.append(f"lowest overall error at {result['param']} = {result['best']}")
    return "\n".join(lines)


def offline_table(result: dict[str, Any]) -> str:
    """One line per training ratio: offline and online MAPE (%) on the held-out tables."""
    head = f"{'ratio':>6} {'train':>6} {'offline %':>10} {'online %':>9}"
    lines = [head, "-" * len(head)]
    for r in result["ratios"]:
        lines.append(f"{r['ratio']:>6.2f} {r['train_tables']:>6} "
                     f"{_pct(r['offline_mape']):>10} {_pct(r['online_mape']):>9}")
    return "\n".join(lines)


def run_experiments(args: argparse.Namespace, sweeps: list[SweepTable], target: Target,
                    settings: ModelSettings) -> int:
    """Run what ``--sweep-param`` / ``--offline-ratios`` ask and print it; exit status 0."""
    from govd.eval.experiments import offline_vs_online, param_sweep, parse_sweep_param
    from govd.policy.registry import UnknownPolicyError, policy_class

    try:
        if policy_class(args.driver).uses_model:
            raise UsageError(f"--driver {args.driver} reads the model; pick one that does not "
                             "(ondemand, performance, fixed...)")
    except UnknownPolicyError as exc:
        raise UsageError(str(exc)) from None
    out: dict[str, Any] = {}
    try:
        if args.sweep_param is not None:
            name, values = parse_sweep_param(args.sweep_param)
            out["sweep_param"] = param_sweep(sweeps, name, values, target, settings, args.algo,
                                             args.driver, args.idle_power_w)
        if args.offline_ratios is not None:
            if args.splits < 1:
                raise UsageError("--splits must be >= 1")
            out["offline_vs_online"] = offline_vs_online(
                sweeps, _ratios(args.offline_ratios), target, settings, args.driver,
                args.splits, 0, args.idle_power_w)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    if args.json:
        print(json.dumps(out, indent=2))
    else:
        print(f"target: {target.describe()}, driver: {args.driver}")
        if "sweep_param" in out:
            print(f"a-priori frame-time MAPE (%), model {args.algo}")
            print(sweep_table(out["sweep_param"]))
        if "offline_vs_online" in out:
            print("frame-time MAPE (%) on held-out tables: offline (batch, frozen) vs online RLS")
            print(offline_table(out["offline_vs_online"]))
    if args.plot:
        from govd.eval.experiments_plot import plot_experiments

        for path in plot_experiments(out, args.plot):
            print(f"wrote {path}", file=sys.stderr)
    return 0
