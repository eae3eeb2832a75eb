"""The evaluator's output: JSON records and a table a person can read."""

from __future__ import annotations

import math
from dataclasses import asdict
from typing import Any

from govd.eval.replay import Replay
from govd.eval.score import Score


def record(policy: str, algo: str, sweep: str, run: Replay, result: Score) -> dict[str, Any]:
    """One JSON record: the issue's keys first, then the rest of the score."""
    fields = asdict(result)
    out: dict[str, Any] = {
        "policy": policy,
        "algo": algo,
        "sweep": sweep,
        "units": result.units,
        "energy_j": result.energy_j,
        "oracle_energy_j": result.oracle_energy_j,
        "energy_ratio": result.energy_ratio,
        "violation_rate": result.violation_rate,
        "time_mape": result.time_mape,
        "sensitivity_mape": result.sensitivity_mape,
        "kendall_tau": result.kendall_tau,
        "switches": result.switches,
    }
    for key, value in fields.items():
        out.setdefault(key, value)
    out["steps_per_s"] = result.units / run.wall_s if run.wall_s > 0 else None
    out["model_resets"] = run.model_stats.get("resets", 0)
    out["skipped_samples"] = run.model_stats.get("skipped", 0)
    return {k: (None if isinstance(v, float) and not math.isfinite(v) else v)
            for k, v in out.items()}


def _cell(value: Any, fmt: str) -> str:
    return "-" if value is None else format(value, fmt)


def table(records: list[dict[str, Any]]) -> str:
    """A fixed-width table of the records, one line per (sweep, policy)."""
    fps = any(r.get("mean_fps") is not None for r in records)
    head = (f"{'sweep':<24} {'policy':<12} {'energy J':>10} {'x oracle':>8} {'viol %':>7} "
            f"{'oracle %':>8} {'FPS' if fps else 'slowdown':>8} {'switch':>7} {'MAPE %':>7} "
            f"{'medAPE %':>8} {'sens %':>7} {'tau':>6} {'conv s':>7}")
    lines = [head, "-" * len(head)]
    for r in records:
        perf = r["mean_fps"] if fps else r["mean_slowdown"]
        pct = (lambda v: None if v is None else 100 * v)  # noqa: E731
        lines.append(
            f"{r['sweep'][-24:]:<24} {r['policy']:<12} {r['energy_j']:>10.1f} "
            f"{_cell(r['energy_ratio'], '.3f'):>8} {100 * r['violation_rate']:>7.2f} "
            f"{100 * r['oracle_violation_rate']:>8.2f} {_cell(perf, '.3f'):>8} "
            f"{r['switches']:>7} {_cell(pct(r['time_mape']), '.2f'):>7} "
            f"{_cell(pct(r['time_median_ape']), '.2f'):>8} "
            f"{_cell(pct(r['sensitivity_mape']), '.2f'):>7} {_cell(r['kendall_tau'], '.3f'):>6} "
            f"{_cell(r.get('convergence_median_s'), '.3f'):>7}"
        )
    return "\n".join(lines)
