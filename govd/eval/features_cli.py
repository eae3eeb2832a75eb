"""`govd select-features FILE...`: seed 000's offline choice of the model's counters.

Reads sweep tables or run traces (told apart by their header), drops the counters that follow
the frequency, runs the cross-validated Lasso of eq. 14 (`govd.research.selection`) and reports
η_min and η_1se with their features; ``-o`` writes the ``model.counters`` config snippet.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from govd.cli import UsageError, needs_extra
from govd.formats.regular_file import MAX_TABLE_BYTES, read_regular
from govd.formats.sweep import SweepFormatError, SweepTable, read_sweep
from govd.formats.trace import COLUMNS as TRACE_COLUMNS
from govd.formats.trace import RunTrace, TraceFormatError, read_trace
from govd.research.regression_data import concatenate, sweep_regression, trace_regression
from govd.research.selection import (
    CV_FOLDS,
    FREQUENCY_CORRELATION_LIMIT,
    FREQUENCY_TERMS,
    Choice,
    Selection,
    counter_scale,
    frequency_prefilter,
    select_features,
)


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``govd select-features``."""
    p = sub.add_parser(
        "select-features", help="choose the model's counters (Pearson prefilter + Lasso CV)",
        description="Seed 000's feature selection: drop counters whose |Pearson r| with the "
        f"frequency is >= {FREQUENCY_CORRELATION_LIMIT}, then a {CV_FOLDS}-fold cross-validated "
        "Lasso of the change in frame time on the two frequency terms (always kept) and the "
        "counters' changes. Sweep tables are walked through a seeded random level path so "
        "that the frequency changes between units; run traces are used tick by tick.")
    p.add_argument("files", nargs="+", metavar="FILE", help="sweep tables or run traces (CSV)")
    p.add_argument("--choice", choices=("min", "1se"), default="min",
                   help="which η the snippet uses: least CV error (the seed's) or the largest "
                   "within one standard error of it (fewer features)")
    p.add_argument("--seed", type=int, default=0, help="seed of the level walk over sweeps")
    p.add_argument("--folds", type=int, default=CV_FOLDS, help="cross-validation folds")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.add_argument("-o", "--output", metavar="FILE", help="write the model.counters snippet")
    p.add_argument("--plot", metavar="DIR", help="write the seed's Fig. 8 (CV MSE, features "
                   "against η) as PNG")
    p.set_defaults(func=run)


def load_input(path: str) -> SweepTable | RunTrace:
    """A sweep table or a run trace, by the first header line; raises UsageError when bad."""
    try:
        # A regular file of bounded size only: a FIFO or /dev/zero would hang or fill memory.
        text = read_regular(path, MAX_TABLE_BYTES).decode("utf-8", "replace")
        header = next((line for line in text.splitlines()
                       if line.strip() and not line.startswith("#")), "")
        if header.split(",")[0].strip() == TRACE_COLUMNS[0]:
            return read_trace(path)
        return read_sweep(path)
    except OSError as exc:
        raise UsageError(f"{path}: cannot read: {exc.strerror or exc}") from None
    except (SweepFormatError, TraceFormatError) as exc:
        raise UsageError(str(exc)) from None


def _frequency_and_counters(source: SweepTable | RunTrace,
                            names: list[str]) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """Every row's frequency and counter values, flattened, for the Pearson prefilter."""
    if isinstance(source, SweepTable):
        freq = np.broadcast_to(source.levels_mhz, source.time_ms.shape).ravel()
    else:
        freq = source.freq_mhz
    return freq, {n: np.asarray(source.counters[n]).ravel() for n in names}


def _choice_json(choice: Choice) -> dict[str, Any]:
    return {"eta": choice.eta, "features": [*FREQUENCY_TERMS, *choice.counters],
            "counters": choice.counters, "n_features": choice.n_features,
            "coefficients": dict(zip(choice.counters, choice.coefficients, strict=True)),
            "cv_mse": choice.cv_mse}


def select(paths: list[str], seed: int, folds: int) -> tuple[dict[str, Any], Selection | None]:
    """Read the files and run both steps; the report and the Lasso result (None when no counter
    survives the prefilter)."""
    sources = [load_input(p) for p in paths]
    common = sorted(set.intersection(*(set(s.counters) for s in sources)))
    missing = sorted(set().union(*(set(s.counters) for s in sources)) - set(common))
    parts = [_frequency_and_counters(s, common) for s in sources]
    freq = np.concatenate([f for f, _ in parts])
    values = {n: np.concatenate([c[n] for _, c in parts]) for n in common}
    pre = frequency_prefilter(freq, values)
    names = list(pre.kept)
    scales = [counter_scale(values[n]) for n in names]
    report: dict[str, Any] = {
        "files": paths, "seed": seed, "folds": folds,
        "prefilter": {"limit": FREQUENCY_CORRELATION_LIMIT, "kept": pre.kept,
                      "dropped": pre.dropped, "constant": pre.constant,
                      "not_in_every_file": missing},
        "counter_scales": dict(zip(names, scales, strict=True)),
    }
    if not names:
        return report, None
    data = concatenate([sweep_regression(s, names, scales, seed) if isinstance(s, SweepTable)
                        else trace_regression(s, names, scales) for s in sources])
    try:
        result = select_features(data, folds)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    report.update(samples=result.samples, eta_min=_choice_json(result.minimum),
                  eta_1se=_choice_json(result.one_se),
                  path={"eta": result.etas.tolist(), "cv_mse_mean": result.cv_mse_mean.tolist(),
                        "cv_mse_se": result.cv_mse_se.tolist(),
                        "n_features": result.n_features.astype(int).tolist()})
    return report, result


def config_snippet(report: dict[str, Any], choice_key: str) -> str:
    """The YAML ``model`` snippet for the chosen η: the counters and their scales (each
    counter's standard deviation, so that the model sees changes of order 1)."""
    choice = report[choice_key]
    scales = [float(f"{report['counter_scales'][n]:.6g}") for n in choice["counters"]]
    model = yaml.safe_dump({"model": {"counters": choice["counters"], "counter_scales": scales}},
                           default_flow_style=None, sort_keys=False)
    return (f"# govd select-features ({choice_key.replace('_', ' ')} = {choice['eta']:.4g}, "
            f"{choice['n_features']} features) on {', '.join(report['files'])}\n"
            f"{model}")


def _print_report(report: dict[str, Any], choice_key: str) -> None:
    pre = report["prefilter"]
    print(f"{', '.join(report['files'])}: {report['samples']} samples, {report['folds']}-fold "
          f"cross-validation")
    print(f"  step 1, |Pearson r| with frequency < {pre['limit']:g}:")
    for name, r in pre["kept"].items():
        print(f"    kept     {name:<24} r = {r:+.4f}")
    for name, r in pre["dropped"].items():
        print(f"    dropped  {name:<24} r = {r:+.4f}")
    for name in pre["constant"]:
        print(f"    dropped  {name:<24} constant")
    for name in pre["not_in_every_file"]:
        print(f"    skipped  {name:<24} not in every file")
    print("  step 2, Lasso (frequency terms always kept):")
    for key, label in (("eta_min", "η_min (least CV MSE)"), ("eta_1se", "η_1se (within 1 SE)")):
        c = report[key]
        mark = "  <- chosen" if key == choice_key else ""
        print(f"    {label:<22} η = {c['eta']:.4g}, CV MSE {c['cv_mse']:.4g} ms², "
              f"{c['n_features']} features: {', '.join(c['features'])}{mark}")


def run(args: argparse.Namespace) -> int:
    """Select the features and print, write and plot as asked."""
    needs_extra("sklearn", "fit", "govd select-features")
    if args.folds < 2:
        raise UsageError(f"--folds must be at least 2, got {args.folds}")
    report, result = select(args.files, args.seed, args.folds)
    if result is None:
        pre = report["prefilter"]
        print(f"govd select-features: no counter is independent of the frequency "
              f"(dropped: {', '.join(f'{n} r={r:+.3f}' for n, r in pre['dropped'].items())}"
              f"{'; constant: ' + ', '.join(pre['constant']) if pre['constant'] else ''}); "
              "the model would use the frequency terms alone", file=sys.stderr)
        return 1
    choice_key = "eta_min" if args.choice == "min" else "eta_1se"
    if args.output:
        Path(args.output).write_text(config_snippet(report, choice_key), encoding="utf-8")
    if args.plot:
        from govd.eval.features_plot import plot_selection

        report["plots"] = [str(p) for p in plot_selection(result, args.plot)]
    if args.json:
        print(json.dumps({**report, "choice": choice_key}, indent=2))
    else:
        _print_report(report, choice_key)
        for path in report.get("plots", []):
            print(f"  wrote {path}")
        if args.output:
            print(f"  wrote {args.output}")
    return 0
