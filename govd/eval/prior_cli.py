"""`govd fit-prior`: cluster the scaling curves of sweep tables into a prior file (seed 001).

With ``--measure FILE...`` it also runs `govd.eval.prior_gain.prior_gain` on those (test)
tables and prints the comparison as JSON.
"""

from __future__ import annotations

import argparse
import json
import sys

from govd.cli import UsageError, needs_extra
from govd.eval.prior_fit import fit_prior
from govd.eval.prior_gain import prior_gain
from govd.formats.prior import write_prior
from govd.formats.sweep import SweepFormatError, SweepTable, read_sweep
from govd.target import Target


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``govd fit-prior``."""
    p = sub.add_parser(
        "fit-prior",
        help="cluster scaling curves of sweep tables into a model prior",
        description="k-means clusters of the normalised time and power curves of the tables' "
        "phases; writes a JSON prior (model.prior in the config) with each cluster's curves, "
        "model coefficients a0/a1 and P0 scale.",
    )
    p.add_argument("sweeps", nargs="+", metavar="FILE", help="training sweep table CSVs")
    p.add_argument("-o", "--output", required=True, metavar="PRIOR", help="prior file to write")
    p.add_argument("--clusters", type=int, default=6, help="k-means clusters (default 6)")
    p.add_argument("--seed", type=int, default=0, help="k-means random seed")
    p.add_argument("--measure", nargs="+", metavar="FILE",
                   help="test sweep tables: print convergence and early energy with and "
                        "without the prior (never list training tables here)")
    goal = p.add_mutually_exclusive_group()
    goal.add_argument("--target-fps", type=float, metavar="F", help="for --measure: 1000/F ms")
    goal.add_argument("--max-slowdown", type=float, metavar="S", help="for --measure")
    p.set_defaults(func=run)


def _read(paths: list[str]) -> list[SweepTable]:
    try:
        return [read_sweep(path) for path in paths]
    except (OSError, SweepFormatError) as exc:
        raise UsageError(str(exc)) from exc


def run(args: argparse.Namespace) -> int:
    """Fit, write, and optionally measure."""
    needs_extra("sklearn", "fit", "govd fit-prior")
    if args.clusters < 1:
        raise UsageError(f"--clusters must be at least 1, got {args.clusters}")
    train = _read(args.sweeps)
    try:
        prior = fit_prior(train, args.clusters, args.seed)
    except ValueError as exc:
        raise UsageError(f"fit-prior: {exc}") from exc
    write_prior(args.output, prior)
    sizes = ", ".join(f"a0 {c.a0:.2f} ({c.members})" for c in prior.clusters)
    print(f"{args.output}: {len(prior.clusters)} clusters: {sizes}", file=sys.stderr)
    if args.measure:
        if args.target_fps is None and args.max_slowdown is None:
            raise UsageError("--measure needs --target-fps or --max-slowdown")
        target = (Target(fps=args.target_fps) if args.target_fps is not None
                  else Target(max_slowdown=args.max_slowdown))
        print(json.dumps(prior_gain(train, _read(args.measure), target, prior=prior), indent=1))
    return 0
