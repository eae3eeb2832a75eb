"""Plots of the model experiments: the μ sweep (seed Fig. 10) and offline vs online (Fig. 15)."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def plot_experiments(out: dict[str, Any], out_dir: str) -> list[Path]:
    """Write a PNG per experiment present in ``out`` (as `run_experiments` builds it) into
    ``out_dir``; returns the paths written."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    folder = Path(out_dir)
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    if "sweep_param" in out:
        result = out["sweep_param"]
        fig, ax = plt.subplots(figsize=(7, 4))
        for name, series in [*result["workloads"].items(), ("overall", result["overall"])]:
            pairs = [(v, 100 * m, 100 * s) for v, m, s in
                     zip(result["values"], series["mape"], series["std"], strict=True)
                     if m is not None]
            if pairs:
                xs, ms, ss = zip(*pairs, strict=True)
                ax.errorbar(xs, ms, yerr=ss, marker="o", ms=3, capsize=2, label=Path(name).stem)
        if result["param"] == "mu":
            ax.set_xscale("log")
        ax.set_xlabel(result["param"])
        ax.set_ylabel("frame-time APE (%), mean ± std")
        ax.legend(fontsize=8)
        path = folder / f"sweep-{result['param']}.png"
        fig.savefig(path, dpi=110, bbox_inches="tight")
        plt.close(fig)
        written.append(path)
    if "offline_vs_online" in out:
        rows = out["offline_vs_online"]["ratios"]
        fig, ax = plt.subplots(figsize=(6, 4))
        ratios = [r["ratio"] for r in rows]
        ax.plot(ratios, [100 * r["offline_mape"] for r in rows], marker="o", label="offline")
        ax.plot(ratios, [100 * r["online_mape"] for r in rows], ls="--", marker="o",
                label="online RLS")
        ax.set_xlabel("training ratio")
        ax.set_ylabel("frame-time MAPE on held-out tables (%)")
        ax.legend()
        path = folder / "offline-vs-online.png"
        fig.savefig(path, dpi=110, bbox_inches="tight")
        plt.close(fig)
        written.append(path)
    return written
