"""`govd eval`: score policies against the oracle on sweep tables (DESIGN §5)."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from pydantic import ValidationError

from govd.cli import UsageError
from govd.conf.schema import Config
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
    p.add_argument("--form", default=None,
                   help="the frame-time model form: scaling, seed (the seed's eq. 10) or auto "
                        "(scaling under --max-slowdown, seed under --target-fps; default: the "
                        "configuration's, auto); the experiments --sweep-param and "
                        "--offline-ratios always use seed")
    p.add_argument("--algo", choices=("rls", "dcd", "arnlms"), default=None,
                   help="model learner: rls, dcd (DCD-RLS) or arnlms (the seed's baseline: "
                        "10th-order autoregressive frame time learned by NLMS, no frequency "
                        "model: one prediction for every level); default: the "
                        "configuration's, rls")
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
    p.add_argument("--config", metavar="FILE",
                   help="replay the governor this configuration builds (its policy fallback, "
                        "grace, dwell, period, stress thresholds, model section); the options "
                        "above override it (default: govd's defaults without a dwell)")
    p.add_argument("--insecure-config", action="store_true",
                   help="accept a configuration writable by others than root and the user")
    p.add_argument("--json", action="store_true", help="print JSON records instead of a table")
    p.add_argument("--plot", metavar="DIR", help="write PNG plots (matplotlib) into DIR")
    experiments_cli.add_options(p)
    p.set_defaults(func=run)


def _config(args: argparse.Namespace, target: Target,
            energy_params: dict[str, Any]) -> Config:
    """The configuration the replayed governors are built from: ``--config`` (else the
    evaluator's defaults) with the target, model and energy options of the command line."""
    from govd.conf.load import ConfigError, load_config
    from govd.eval.replay import EVALUATION

    config = EVALUATION
    if args.config is not None:
        try:
            config = load_config(args.config, allow_insecure=args.insecure_config)
        except ConfigError as exc:
            raise UsageError("invalid configuration:\n  " + "\n  ".join(exc.errors)) from None
    model: dict[str, Any] = {key: value for key, value in (("form", args.form),
                                                           ("algorithm", args.algo)) if value}
    if args.algo == "arnlms":  # an RLS power model beside its own frame-time predictor
        model.update(form="seed", algorithm="rls")
    if args.forgetting is not None:
        model["forgetting"] = args.forgetting
    if args.mu is not None:
        model["mu"] = args.mu
    policy = config.policy
    if policy.name == "energy" or energy_params:
        policy = policy.model_copy(update={
            "name": "energy",
            "params": {**(policy.params if policy.name == "energy" else {}), **energy_params}})
    try:
        return Config.model_validate({
            **config.model_dump(), "policy": policy.model_dump(),
            "target": {"fps": target.fps, "max_slowdown": target.max_slowdown},
            "model": {**config.model.model_dump(), **model},
        })
    except ValidationError as exc:
        raise UsageError(f"invalid options: {exc.errors()[0]['msg']}") from None


def _settings(config: Config) -> ModelSettings:
    from govd.from_config import model_settings

    try:
        return model_settings(config)
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
    config = _config(args, target, energy_params)
    from govd.from_config import inert_knobs

    inert = inert_knobs(config)
    if inert:
        raise UsageError(inert[0] + (f" (and {len(inert) - 1} more)" if len(inert) > 1 else ""))
    settings = _settings(config)
    args.algo = args.algo or config.model.algorithm  # what the records and experiments name
    if config.policy.name == "energy":
        energy_params = dict(config.policy.params)
    try:
        sweeps = [read_sweep(path) for path in args.sweep]
    except (OSError, SweepFormatError) as exc:
        raise UsageError(str(exc)) from None
    if experiments_cli.wanted(args):
        return experiments_cli.run_experiments(args, sweeps, target, settings)
    progress = _Progress()
    try:
        results = evaluate(sweeps, policies, target, settings, args.idle_power_w, counters,
                           {"energy": energy_params}, progress, args.algo, config=config)
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
