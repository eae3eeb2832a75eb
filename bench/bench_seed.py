"""Seed 000's headline comparisons on our suite, written to `bench/results/seed-methods.json`.

The report is a list of sections; each is a function of the shared `Suite` that returns a dict
with its results and `command`, the `govd` command lines that reproduce it (sweep tables first
made with `govd sim`). To add a section, write one more function and list it in `SECTIONS`.

    python bench/bench_seed.py [--minutes 1] [--out bench/results/seed-methods.json]

Workloads: the simulator's graphics scenarios at 60 FPS on the seed's 9 levels, and the V100
kernels of nv-dvfs (`../shared/data/nv-dvfs`, skipped where absent) under a 10 % slowdown.
"""

from __future__ import annotations

import argparse
import json
import platform
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from govd.commands.select_features import select
from govd.eval.evaluate import evaluate
from govd.eval.experiments import offline_vs_online, param_sweep
from govd.eval.prior_gain import prior_gain, v100_kernel_split
from govd.formats.sweep import SweepTable, write_sweep
from govd.model.settings import ModelSettings
from govd.research.domains import two_domain_summary
from govd.sim.gpu import simulate
from govd.sim.nvdvfs import NvDvfsError, default_data_dir, nvdvfs_sweep
from govd.target import Target

RESULTS = Path(__file__).resolve().parent / "results" / "seed-methods.json"
GRAPHICS = ("rendering-test", "art3", "game-light", "game-medium", "game-heavy")
ALGOS = ("rls", "dcd", "arnlms")
OFFLINE_RATIOS = (0.1, 0.3, 0.5, 0.7, 0.9)
TWO_DOMAIN_MINUTES = 1.0
"""The GTX 980 grid's length: 13 000 kernel launches per half minute, 36 pairs each."""


@dataclass
class Suite:
    """The sweep tables every section reads, written to ``folder`` for the CLI commands."""

    minutes: float
    folder: Path
    graphics: dict[str, SweepTable] = field(default_factory=dict)
    v100: SweepTable | None = None
    v100_note: str = ""

    def files(self, names: list[str]) -> str:
        """The file names of the named tables, as the CLI commands list them."""
        return " ".join(f"{n}.csv" for n in names)

    def commands(self, names: list[str], *lines: str) -> list[str]:
        """`govd sim` lines that make the named tables, then ``lines``."""
        return [*self.make_commands(names), *lines]

    def make_commands(self, names: list[str]) -> list[str]:
        """`govd sim` lines that make the named tables."""
        lines = []
        for name in names:
            if name == "v100":
                lines.append(f"govd sim from-nvdvfs --gpu v100 --minutes {self.minutes:g} "
                             "-o v100.csv")
            else:
                scenario, _, seed = name.rpartition("-s")
                lines.append(f"govd sim sweep --scenario {scenario} --minutes {self.minutes:g} "
                             f"--seed {seed} -o {name}.csv")
        return lines


def build_suite(minutes: float, folder: Path) -> Suite:
    """Simulate the graphics scenarios (seeds 0 and 1) and read the V100 data if present."""
    suite = Suite(minutes, folder)
    for scenario in GRAPHICS:
        for seed in (0, 1):
            name = f"{scenario}-s{seed}"
            table = simulate(scenario, "seed9", minutes, seed=seed)
            table.path = name
            write_sweep(folder / f"{name}.csv", table)
            suite.graphics[name] = table
    try:
        suite.v100 = nvdvfs_sweep("v100", default_data_dir(), minutes)
        suite.v100.path = "v100"
    except NvDvfsError as exc:
        suite.v100_note = f"skipped: {exc}"
    return suite


def _methods_rows(tables: list[SweepTable], target: Target) -> list[dict[str, Any]]:
    rows = []
    for algo in ALGOS:
        settings = ModelSettings(form="seed",  # the seed's own model
                                 algorithm="rls" if algo == "arnlms" else algo)  # type: ignore[arg-type]
        for _, sweep, _, score in evaluate(tables, ["energy"], target, settings, algo=algo):
            rows.append({"algo": algo, "sweep": sweep.path, "time_mape": score.time_mape,
                         "time_median_ape": score.time_median_ape,
                         "sensitivity_mape": score.sensitivity_mape,
                         "phase_changes": score.phase_changes,
                         "convergence_median_s": score.convergence_median_s,
                         "converged_share": score.converged_share,
                         "energy_ratio": score.energy_ratio,
                         "violation_rate": score.violation_rate})
    return rows


def methods(suite: Suite) -> dict[str, Any]:
    """RLS vs DCD-RLS vs AR-NLMS driving the energy policy: error and convergence."""
    names = [n for n in suite.graphics if n.endswith("-s0")]
    rows = _methods_rows([suite.graphics[n] for n in names], Target(fps=60))
    command = suite.make_commands(names) + [
        f"govd eval --sweep {suite.files(names)} --target-fps 60 --policy energy --algo {a}"
        for a in ALGOS]
    if suite.v100 is not None:
        rows += _methods_rows([suite.v100], Target(max_slowdown=0.1))
        command += suite.make_commands(["v100"]) + [
            f"govd eval --sweep v100.csv --max-slowdown 0.1 --policy energy --algo {a}"
            for a in ALGOS]
    summary = {}
    for algo in ALGOS:
        mine = [r for r in rows if r["algo"] == algo]
        conv = [r["convergence_median_s"] for r in mine if r["convergence_median_s"] is not None]
        summary[algo] = {"time_mape_mean": float(np.mean([r["time_mape"] for r in mine])),
                         "convergence_median_s": float(np.median(conv)) if conv else None}
    return {"rows": rows, "summary": summary, "v100": suite.v100_note or "included",
            "command": command}


def offline(suite: Suite) -> dict[str, Any]:
    """Offline (eq. 18, batch, frozen) vs online RLS over training ratios (Fig. 15)."""
    names = list(suite.graphics)
    result = offline_vs_online([suite.graphics[n] for n in names], OFFLINE_RATIOS,
                               Target(fps=60), ModelSettings(form="seed"), splits=5)
    ratios = ",".join(f"{r:g}" for r in OFFLINE_RATIOS)
    result["command"] = suite.commands(
        names, f"govd eval --sweep {suite.files(names)} --target-fps 60 --offline-ratios {ratios}")
    return result


def features(suite: Suite) -> dict[str, Any]:
    """Feature selection (seed §IV-C) on RenderingTest, the seed's training application."""
    report, _ = select([str(suite.folder / "rendering-test-s0.csv")], seed=0, folds=10)
    keep = ("prefilter", "counter_scales", "samples", "eta_min", "eta_1se")
    out = {k: report[k] for k in keep if k in report}
    out["command"] = suite.commands(["rendering-test-s0"],
                                    "govd select-features rendering-test-s0.csv")
    return out


def mu_sweep(suite: Suite) -> dict[str, Any]:
    """μ from 1e-28 to 1e20, one point per decade, on RenderingTest and Art3 (Fig. 10)."""
    names = ["rendering-test-s0", "art3-s0"]
    values = np.logspace(-28, 20, 49)
    result = param_sweep([suite.graphics[n] for n in names], "mu", values, Target(fps=60),
                         ModelSettings(form="seed"))
    sweep = f"govd eval --sweep {suite.files(names)} --target-fps 60"
    result["command"] = suite.commands(names, f"{sweep} --sweep-param mu=1e-28:1e20")
    return result


PRIOR_TRAIN = ("rendering-test", "art3", "game-light")
PRIOR_TEST = ("game-medium", "game-heavy")


def prior(suite: Suite) -> dict[str, Any]:
    """Offline prior (seed 001) vs a_init = 1 at the start of each phase: graphics trained on
    three scenarios and measured on the other two; V100 trained and measured on disjoint
    kernels."""
    train = [f"{n}-s0" for n in PRIOR_TRAIN]
    test = [f"{n}-s1" for n in PRIOR_TEST]
    graphics = prior_gain([suite.graphics[n] for n in train], [suite.graphics[n] for n in test],
                          Target(fps=60))
    command = suite.commands(train + test, f"govd fit-prior {suite.files(train)} -o prior.json "
                             f"--measure {suite.files(test)} --target-fps 60")
    result: dict[str, Any] = {"graphics": graphics}
    try:
        v100_train, v100_test = v100_kernel_split(default_data_dir(), suite.minutes)
        result["v100"] = prior_gain([v100_train], [v100_test], Target(max_slowdown=0.1))
        result["v100"]["note"] = "kernels split even/odd in the data's order (not a CLI command)"
    except NvDvfsError as exc:
        result["v100"] = f"skipped: {exc}"
    result["command"] = command
    return result


def two_domains(suite: Suite) -> dict[str, Any]:
    """Two clock domains (seed 002) on the GTX 980's measured 6 × 6 core × memory grid: the
    governor over (core, memory) pairs against a core-only one with memory at its highest
    clock, both scored against the oracle over all pairs."""
    minutes = min(suite.minutes, TWO_DOMAIN_MINUTES)
    path = suite.folder / "gtx980.csv"
    command = [f"govd sim from-nvdvfs --gpu gtx980 --minutes {minutes:g} -o gtx980.csv",
               "govd eval --sweep gtx980.csv --max-slowdown 0.1 --policy energy,oracle"]
    try:
        write_sweep(path, nvdvfs_sweep("gtx980", default_data_dir(), minutes))
    except NvDvfsError as exc:
        return {"skipped": str(exc), "command": command}
    result = two_domain_summary(path)
    result["command"] = command
    result["note"] = "core-only beside it: govd.research.domains.two_domain_summary (no CLI)"
    return result


SECTIONS: list[tuple[str, Callable[[Suite], dict[str, Any]]]] = [
    ("methods", methods),
    ("offline_vs_online", offline),
    ("feature_selection", features),
    ("mu_sweep", mu_sweep),
    ("prior", prior),
    ("two_domains", two_domains),
]


def main() -> None:
    """Build the suite, run every section, write the JSON."""
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--minutes", type=float, default=1.0, help="length of each workload")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    report: dict[str, Any] = {"machine": platform.machine(), "python": platform.python_version(),
                              "minutes": args.minutes, "sections": {}}
    with tempfile.TemporaryDirectory() as tmp:
        suite = build_suite(args.minutes, Path(tmp))
        for name, section in SECTIONS:
            started = time.perf_counter()
            report["sections"][name] = section(suite)
            report["sections"][name]["wall_s"] = round(time.perf_counter() - started, 1)
            print(f"{name}: {report['sections'][name]['wall_s']} s")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=1) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
