"""`govd eval --plot DIR`: the seed's figures for our runs (Figs. 11, 19, 21)."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np

from govd.eval.replay import Replay
from govd.eval.score import Score
from govd.formats.sweep import SweepTable
from govd.policy.oracle import oracle_levels
from govd.target import Target

WINDOW = 2000
"""Units shown in the time-series plots (the start of the run, where learning is visible)."""


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", Path(text).stem or "sweep")


def plot_results(
    results: list[tuple[str, SweepTable, Replay, Score]], target: Target, out_dir: str
) -> list[Path]:
    """Write PNGs: predicted vs actual frame time and chosen vs oracle level per model-driven
    policy and table, and energy per policy per table. Returns the paths written."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    by_sweep: dict[str, list[tuple[str, Score]]] = {}
    for name, sweep, run, result in results:
        by_sweep.setdefault(sweep.path, []).append((name, result))
        if not np.isfinite(run.predicted_time_ms).any():
            continue
        n = min(WINDOW, sweep.units)
        units = np.arange(n)
        actual = sweep.time_ms[units, run.levels[:n]]
        fig, (ax1, ax2) = plt.subplots(2, 1, figsize=(10, 6), sharex=True)
        ax1.plot(units, actual, lw=0.8, label="actual")
        ax1.plot(units, run.predicted_time_ms[:n], lw=0.8, label="predicted")
        ax1.set_ylabel("frame time (ms)")
        ax1.legend(loc="upper right")
        best = oracle_levels(sweep, target)[:n]
        ax2.step(units, sweep.levels_mhz[run.levels[:n]], lw=0.8, label=name)
        ax2.step(units, sweep.levels_mhz[best], lw=0.8, alpha=0.7, label="oracle")
        ax2.set_ylabel("level (MHz)")
        ax2.set_xlabel("unit")
        ax2.legend(loc="upper right")
        fig.suptitle(f"{Path(sweep.path).name}: {name}, {target.describe()}")
        path = out / f"{_slug(sweep.path)}-{name}-timeline.png"
        fig.savefig(path, dpi=110, bbox_inches="tight")
        plt.close(fig)
        written.append(path)
    for sweep_path, rows in by_sweep.items():
        fig, ax = plt.subplots(figsize=(6, 4))
        names = [name for name, _ in rows]
        ratios = [r.energy_ratio for _, r in rows]
        ax.bar(names, ratios)
        ax.axhline(1.0, color="red", ls=":", label="oracle")
        ax.set_ylabel("energy / oracle")
        ax.set_title(Path(sweep_path).name)
        ax.legend()
        path = out / f"{_slug(sweep_path)}-energy.png"
        fig.savefig(path, dpi=110, bbox_inches="tight")
        plt.close(fig)
        written.append(path)
    return written
