"""`govd replay TRACE.csv`: rerun the model over a recorded run and report its accuracy; with
``--config FILE``, rerun the whole governor that configuration builds and compare its decisions
with the ones the live run took (`govd.eval.trace_replay`)."""

from __future__ import annotations

import argparse
import json
import math
from typing import Any

import numpy as np

from govd.cli import UsageError
from govd.formats.trace import RunTrace
from govd.model.online import OnlineModel
from govd.model.settings import ModelSettings
from govd.research.selection import counter_scale


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``govd replay``."""
    p = sub.add_parser("replay", help="rerun the model over a run trace and report accuracy",
                       description="Rerun the frame-time model over a trace recorded by "
                       "`govd run --record` and report how well it predicted each tick.")
    p.add_argument("trace", metavar="TRACE.csv")
    p.add_argument("--algo", choices=("rls", "dcd"), default="rls")
    p.add_argument("--forgetting", type=float, default=1.0, help="forgetting factor λ")
    p.add_argument("--mu", type=float, default=1e-14, help="regularisation μ (P0 = I/μ)")
    p.add_argument("--levels", metavar="MHZ,MHZ,...",
                   help="the device's levels (default: the frequencies the trace ran at)")
    p.add_argument("--counters", metavar="A,B", help="counters to use (default: all columns)")
    p.add_argument("--config", metavar="FILE",
                   help="replay the governor this configuration builds (the one the run was "
                        "recorded with) and compare its decisions with the run's, tick by tick")
    p.add_argument("--insecure-config", action="store_true",
                   help="accept a configuration writable by others than root and the user")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=run)


def accuracy(trace: RunTrace, levels_mhz: np.ndarray, settings: ModelSettings) -> dict[str, Any]:
    """Replay the model over the trace: the seed's a-priori error (counters of the tick known)
    and the error of the previous tick's prediction at the frequency that then ran."""
    model = OnlineModel(levels_mhz, settings)
    counters = (np.stack([trace.counters[c] for c in settings.counters], axis=1)
                if settings.counters else np.zeros((trace.ticks, 0)))
    fitted = np.full(trace.ticks, math.nan)
    ahead = np.full(trace.ticks, math.nan)
    for k in range(trace.ticks):
        f = float(trace.freq_mhz[k])
        if k and model.ready:
            ahead[k] = float(np.interp(f, levels_mhz, model.time_ms))
        flags = model.update(float(trace.frame_time_ms[k]), f, counters[k],
                             float(trace.power_w[k]))
        if flags & 1 and model.ready:
            fitted[k] = model.fitted_time_ms
    actual = trace.frame_time_ms

    def errors(pred: np.ndarray) -> dict[str, float | None]:
        ok = np.isfinite(pred) & np.isfinite(actual) & (actual > 0)
        if not ok.any():
            return {"mape": None, "median_ape": None, "within_10": None, "within_20": None}
        ape = np.abs(pred[ok] - actual[ok]) / actual[ok]
        return {"mape": float(ape.mean()), "median_ape": float(np.median(ape)),
                "within_10": float(np.mean(ape <= 0.1)), "within_20": float(np.mean(ape <= 0.2))}

    stats = model.stats_dict()
    return {"trace": trace.path, "ticks": trace.ticks,
            "ticks_with_frames": int(np.isfinite(actual).sum()),
            "algo": settings.algorithm, "counters": list(settings.counters),
            "fitted": errors(fitted), "next_tick": errors(ahead),
            "skipped": stats["skipped"], "resets": stats["resets"],
            "coefficients": model.coefficients.tolist()}


def run(args: argparse.Namespace) -> int:
    """Replay and print the accuracy report."""
    from govd.formats.trace import TraceFormatError, read_trace

    try:
        trace = read_trace(args.trace)
    except (OSError, TraceFormatError) as exc:
        raise UsageError(str(exc)) from None
    if args.config is not None:
        return _decisions(args, trace)
    names = list(trace.counters) if args.counters is None else args.counters.split(",")
    missing = [c for c in names if c and c not in trace.counters]
    if missing:
        raise UsageError(f"{args.trace}: no counter column {', '.join(missing)}")
    try:
        levels = (np.array(sorted(float(v) for v in args.levels.split(",")))
                  if args.levels else np.unique(trace.freq_mhz))
        if levels.size < 2:
            levels = np.array([levels[0] * 0.5, levels[0]])
        scales = tuple(counter_scale(trace.counters[c]) for c in names if c)
        settings = ModelSettings(algorithm=args.algo, forgetting=args.forgetting, mu=args.mu,
                                 counters=tuple(c for c in names if c), counter_scales=scales)
        report = accuracy(trace, levels, settings)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    print(f"{report['trace']}: {report['ticks']} ticks, {report['ticks_with_frames']} with "
          f"frames, model {report['algo']}, counters: {', '.join(names) or 'none'}")
    for label, key in (("a-priori (seed's measure)", "fitted"), ("next-tick prediction",
                                                                  "next_tick")):
        e = report[key]
        if e["mape"] is None:
            print(f"  {label}: no prediction could be scored")
            continue
        print(f"  {label}: MAPE {100 * e['mape']:.2f} %, median {100 * e['median_ape']:.2f} %, "
              f"within 10 % {100 * e['within_10']:.1f} %, within 20 % {100 * e['within_20']:.1f} %")
    print(f"  skipped samples {report['skipped']}, model resets {report['resets']}")
    return 0


def _decisions(args: argparse.Namespace, trace: RunTrace) -> int:
    """Replay the governor of ``--config`` over ``trace``; 0 when every decision is the run's,
    1 otherwise (the first differing ticks are named)."""
    from govd.conf.load import ConfigError, load_config
    from govd.eval.trace_replay import replay_decisions
    from govd.formats.trace import TraceFormatError

    try:
        config = load_config(args.config, allow_insecure=args.insecure_config)
    except ConfigError as exc:
        raise UsageError("invalid configuration:\n  " + "\n  ".join(exc.errors)) from None
    try:
        result = replay_decisions(trace, config)
    except (TraceFormatError, ValueError, OSError) as exc:
        raise UsageError(str(exc)) from None
    bad = result.mismatches
    report = {"trace": trace.path, "ticks": trace.ticks, "equal": int(trace.ticks - bad.size),
              "first_differences": [
                  {"tick": int(k), "time_s": float(trace.time_s[k]),
                   "recorded_mhz": float(result.recorded_mhz[k]),
                   "replayed_mhz": float(result.replayed_mhz[k])} for k in bad[:5]]}
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print(f"{trace.path}: {trace.ticks} ticks, the replayed governor decided as the run "
              f"did on {report['equal']}")
        for d in report["first_differences"]:
            print(f"  tick {d['tick']} ({d['time_s']:.3f} s): the run chose "
                  f"{d['recorded_mhz']:g} MHz, the replay {d['replayed_mhz']:g} MHz")
    return 0 if bad.size == 0 else 1
