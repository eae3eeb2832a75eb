"""`govd select-features --plot DIR`: the seed's Fig. 8 for our data."""

from __future__ import annotations

from pathlib import Path

from govd.research.selection import Selection


def plot_selection(result: Selection, out_dir: str) -> list[Path]:
    """Write Fig. 8: (a) CV MSE, mean ± one standard error, and (b) the number of selected
    features, both against η on a log axis, with η_min and η_1se marked. Returns the paths."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    marks = ((result.minimum.eta, "η_min", "tab:red"), (result.one_se.eta, "η_1se", "tab:green"))
    fig, (ax_mse, ax_n) = plt.subplots(1, 2, figsize=(10, 4))
    ax_mse.errorbar(result.etas, result.cv_mse_mean, yerr=result.cv_mse_se, color="black",
                    ecolor="0.6", capsize=2, label=f"mean ± 1 SE ({result.folds} folds)")
    ax_mse.set_ylabel("cross-validated MSE of Δ frame time (ms²)")
    ax_n.step(result.etas, result.n_features, where="mid", color="black")
    ax_n.set_ylabel("selected features (incl. the 2 frequency terms)")
    for ax, title in ((ax_mse, "(a) CV error"), (ax_n, "(b) features")):
        ax.set_xscale("log")
        ax.set_xlabel("η (ℓ1 penalty on standardised Δcounters)")
        ax.set_title(title)
        for eta, label, color in marks:
            ax.axvline(eta, color=color, linestyle="--", label=f"{label} = {eta:.3g}")
        ax.legend(fontsize="small")
    fig.tight_layout()
    path = out / "fig8_lasso_cv.png"
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return [path]
