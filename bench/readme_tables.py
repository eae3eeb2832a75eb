"""bench/README.md's tables, generated from the committed results, so the figures quoted are the
ones the JSON holds: rerun a benchmark, then this, and the README follows.

    python bench/readme_tables.py           # rewrite every generated table in bench/README.md
    python bench/readme_tables.py --check   # exit 1 naming the tables that differ (a test runs it)

A generated table sits between ``<!-- table NAME: ... -->`` and ``<!-- end table NAME -->``;
each NAME is a function below, from the results file it names to the Markdown rows. The prose
around a table is written by hand and quotes no figure of it.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
README = BENCH / "README.md"
RESULTS = BENCH / "results"


def _load(name: str) -> Any:
    return json.loads((RESULTS / name).read_text())


def _met(ok: bool) -> str:
    return "yes" if ok else "**NO**"


def _thousands(value: float) -> str:
    return f"{value:,.0f}".replace(",", " ")


def _pct(share: float | None, digits: int = 1) -> str:
    return "-" if share is None else f"{100 * share:.{digits}f} %"


def policies() -> list[str]:
    """The Policies targets (bench_policies.py)."""
    data = _load("policies.json")
    s, t = data["summary"], data["targets"]
    sens = {r["sweep"]: r["sensitivity_mape"] for r in data["suite"]
            if r["policy"] == "energy" and r["algo"] == "rls"}
    heavy = {k: v for k, v in s["saving_vs_ondemand"].items()
             if k in ("game-heavy", "game-medium", "rendering-test")}
    light = s["saving_vs_ondemand"]["game-light"]
    rate = {r["policy"]: r["steps_per_s_median"] for r in data["speed"]}
    worst_v100 = max(s["v100_violation_excess_rls"], s["v100_violation_excess_dcd"])
    rows = [
        (f"energy <= {t['suite_energy_ratio_max']:g} x oracle, simulated suite",
         f"{s['suite_energy_ratio_rls']:.3f} / {s['suite_energy_ratio_dcd']:.3f} overall, worst "
         f"scenario {s['suite_worst_energy_ratio_rls']:.3f}",
         s["suite_energy_ratio_rls"] <= t["suite_energy_ratio_max"]),
        (f"energy <= {t['v100_energy_ratio_max']:g} x oracle, V100",
         f"{s['v100_energy_ratio_rls']:.3f} / {s['v100_energy_ratio_dcd']:.3f} (ondemand "
         f"{s['v100_ondemand_energy_ratio']:.3f})",
         s["v100_energy_ratio_rls"] <= t["v100_energy_ratio_max"]),
        (f"violations <= oracle + {100 * t['violation_excess_max']:g} pp",
         f"worst +{100 * s['suite_worst_violation_excess_rls']:.2f} pp (simulated), "
         f"+{100 * s['v100_violation_excess_rls']:.2f} / "
         f"+{100 * s['v100_violation_excess_dcd']:.2f} pp (V100)",
         max(s["suite_worst_violation_excess_rls"], worst_v100) <= t["violation_excess_max"]),
        (f">= {100 * t['heavy_saving_vs_ondemand_min']:g} % less energy than ondemand on heavy "
         "loads",
         ", ".join(f"{_pct(v)} ({k})" for k, v in sorted(heavy.items())),
         min(heavy.values()) >= t["heavy_saving_vs_ondemand_min"]),
        ("no more than ondemand on light loads",
         f"{-100 * light:+.2f} % energy (game-light)", light >= 0),
        (f"frame-time MAPE <= {_pct(t['time_mape_rls_max'])} (RLS), "
         f"<= {_pct(t['time_mape_dcd_max'])} (DCD)",
         f"{_pct(s['suite_time_mape_rls'])} / {_pct(s['suite_time_mape_dcd'])} (mean over the "
         "suite)",
         s["suite_time_mape_rls"] <= t["time_mape_rls_max"]
         and s["suite_time_mape_dcd"] <= t["time_mape_dcd_max"]),
        (f"sensitivity error <= {_pct(t['sensitivity_error_max'])}",
         f"{_pct(s['suite_sensitivity_error_rls'], 0)} / "
         f"{_pct(s['suite_sensitivity_error_dcd'], 0)} mean (rendering-test "
         f"{_pct(sens['rendering-test'])})",
         s["suite_sensitivity_error_rls"] <= t["sensitivity_error_max"]),
        (f">= {_thousands(t['steps_per_s_min'])} governor steps/s",
         f"{_thousands(rate['energy'])} (energy), {_thousands(rate['ondemand'])} (ondemand)",
         rate["energy"] >= t["steps_per_s_min"]),
    ]
    return ["| target | measured (RLS / DCD-RLS) | met |", "|---|---|---|",
            *(f"| {target} | {found} | {_met(ok)} |" for target, found, ok in rows)]


def _convergence(row: dict[str, Any]) -> str:
    median_s, share = row["convergence_median_s"], row["converged_share"]
    if median_s is None or not share:
        return "none settle"
    said = f"{1000 * median_s:.0f} ms" if median_s < 1 else f"{median_s:.2f} s"
    return said if share >= 0.5 else f"{said} ({_pct(share, 0)} settle)"


def seed_methods() -> list[str]:
    """Seed 000's frame-time error per model (bench_seed.py, section ``methods``)."""
    rows = _load("seed-methods.json")["sections"]["methods"]["rows"]
    cells: dict[str, dict[str, str]] = {}
    for row in rows:
        workload = "V100 kernels" if row["sweep"] == "v100" else row["sweep"].rsplit("-s", 1)[0]
        cells.setdefault(workload, {})[row["algo"]] = (
            f"{_pct(row['time_mape'])} / {_pct(row['time_median_ape'])}, {_convergence(row)}")
    return ["| workload | RLS | DCD-RLS | AR-NLMS |", "|---|---|---|---|",
            *(f"| {w} | {c.get('rls', '-')} | {c.get('dcd', '-')} | {c.get('arnlms', '-')} |"
              for w, c in cells.items())]


def demo_saving() -> list[str]:
    """govd status's estimate against the top-clock twin (bench_demo.py, ``saving``)."""
    rows = _load("demo.json")["saving"]
    return ["| run | saving measured against the top-clock twin | govd status's estimate "
            "| slowdown measured (estimated) | missed deadlines |", "|---|---|---|---|---|",
            *(f"| `{r['command']}` | {_pct(r['measured_saving'])} | "
              f"{_pct(r['estimated_saving'])} ± {100 * r['estimate_uncertainty']:.1f} pts, "
              f"{r['estimate_sure']} | {_pct(r['measured_slowdown'])} "
              f"({_pct(r['estimated_slowdown'])}) | {_pct(r['missed'])} |" for r in rows)]


ARMS = {"shipped": "shipped config: left to its own governor",
        "ondemand_on_busy": "`ondemand` policy on busy time",
        "energy_on_busy_slowdown_10": "`energy` on busy time (`source: busy`, slowdown <= 10 %)"}


def demo_without_frames() -> list[str]:
    """Nothing sends frames: each way of governing against simple_ondemand (``without_frames``)."""
    rows = _load("demo.json")["without_frames"]
    scenarios = list(dict.fromkeys(r["scenario"] for r in rows))
    out = ["| how govd governs | " + " | ".join(scenarios) + " |",
           "|---|" + "---|" * len(scenarios)]
    for arm, label in ARMS.items():
        cells = []
        for scenario in scenarios:
            [r] = [r for r in rows if r["scenario"] == scenario and r["arm"] == arm]
            cost = (f"missed {_pct(r['missed'])}" if r["missed"] is not None
                    else f"{_pct(r.get('slowdown_vs_performance'))} slower than the top clock")
            cells.append(f"{r['vs_ondemand']:.3f}x, {cost}")
        out.append(f"| {label} | " + " | ".join(cells) + " |")
    ondemand = []
    for scenario in scenarios:
        r = next(r for r in rows if r["scenario"] == scenario)
        cost = ("missed " + _pct(r["ondemand_missed"]) if r["ondemand_missed"] is not None
                else "the top clock: busy all the time")
        ondemand.append(f"1x ({r['ondemand_energy_j']:.1f} J), {cost}")
    out.append("| the kernel's `simple_ondemand` | " + " | ".join(ondemand) + " |")
    return out


def demo_speed() -> list[str]:
    """The same scenario at --speed 4 and 20 (``speed``)."""
    rows = _load("demo.json")["speed"]
    out = ["| scenario | saving at --speed 4 / 20 | slowdown at 4 / 20 | spread (pts) |",
           "|---|---|---|---|"]
    for r in rows:
        slow, fast = r["speeds"]["4"], r["speeds"]["20"]
        spread = max(r["spread"]["saving"], r["spread"]["slowdown"])
        out.append(f"| {r['scenario']} | {_pct(slow['saving'])} / {_pct(fast['saving'])} | "
                   f"{_pct(slow['slowdown'])} / {_pct(fast['slowdown'])} | "
                   f"{100 * spread:.2f} |")
    return out


def physics_bound() -> list[str]:
    """Work at the 1/f-safe clock f_top / (1 + b) (bench_physics_bound.py)."""
    rows = _load("physics_bound.json")["results"]
    out = ["| table | budget | 1/f-safe clock | phases over the budget there | units over "
           "| largest excess over 1/f (log) | top > 2 % slower than the fastest "
           "| phases > 3 % over 1/f at one clock: worst / median clock (worst at) |",
           "|---|---|---|---|---|---|---|---|"]
    for table, by_budget in rows.items():
        for b, r in by_budget.items():
            out.append(f"| {table} | {100 * float(b):.0f} % | {r['level_mhz']:.0f} MHz | "
                       f"{_pct(r['phases_over'])} | {_pct(r['units_over'])} | "
                       f"{r['max_excess']:.3f} | {_pct(r['top_not_fastest'])} | "
                       f"{_pct(r['clock_tail_max'])} / {_pct(r['clock_tail_median'])} "
                       f"({r['clock_tail_mhz']:.0f} MHz) |")
    return out


def fixed_clock_reach() -> list[str]:
    """Learners of one clock, fed for free, beside the static reference
    (bench_fixed_clock_reach.py)."""
    data = _load("fixed_clock_reach.json")
    out = ["| table | budget | static | leader | search | anchored search | bandit "
           "| sure | smooth and sure | inverted pairs |",
           "|---|---|---|---|---|---|---|---|---|---|"]

    def over(r: dict[str, Any], name: str) -> str:
        return f"{r[name]:.3f} ({_pct(r[name + '_excess'], 2)})"

    for table, by_budget in data["results"].items():
        for b, r in by_budget.items():
            out.append(f"| {table} | {100 * float(b):.0f} % | {r['static']:.3f} | "
                       f"{over(r, 'leader')} | {over(r, 'search')} | {over(r, 'anchored')} | "
                       f"{over(r, 'bandit')} | {over(r, 'sure')} | {over(r, 'smooth')} | "
                       f"{_pct(r['inverted'])} |")
    return out


def decisions() -> list[str]:
    """Every row against issue #24's targets (bench_decisions.py): energy x oracle, the share
    of units over the target, the references, and the targets missed (S, H, V, T)."""
    from bench_decisions import missed_targets  # the bench's own reading of its verdicts

    data = _load("decisions.json")
    out = ["| table | target | levels | govd | violations | static | hedged | true c | misses |",
           "|---|---|---|---|---|---|---|---|---|"]
    for limit, rows in data["results"].items():
        target = limit if limit.endswith("fps") else f"{100 * float(limit):.0f} %"
        for table, r in rows.items():
            misses = missed_targets(data["fixed_clock_met"][limit][table]) or "ok"
            out.append(f"| {table} | {target} | {r['levels']} | {r['energy_ratio']:.3f} | "
                       f"{_pct(r['violation_rate'])} | {r['static_reference_vs_oracle']:.3f} | "
                       f"{r['hedged_reference_vs_oracle']:.3f} | "
                       f"{r['true_curves_vs_oracle']:.3f} | {misses} |")
    return out


TABLES: dict[str, tuple[str, Callable[[], list[str]]]] = {
    "decisions": ("decisions.json", decisions),
    "physics-bound": ("physics_bound.json", physics_bound),
    "fixed-clock-reach": ("fixed_clock_reach.json", fixed_clock_reach),
    "policies": ("policies.json", policies),
    "seed-methods": ("seed-methods.json", seed_methods),
    "demo-saving": ("demo.json", demo_saving),
    "demo-without-frames": ("demo.json", demo_without_frames),
    "demo-speed": ("demo.json", demo_speed),
}
_BLOCK = re.compile(r"(<!-- table (?P<name>[\w-]+): [^>]*-->\n)(?P<body>.*?)(<!-- end table "
                    r"(?P=name) -->)", re.DOTALL)


def render(text: str) -> tuple[str, list[str]]:
    """``text`` with every generated table rewritten, and the names of those that changed."""
    changed: list[str] = []

    def one(match: re.Match[str]) -> str:
        name = match["name"]
        if name not in TABLES:
            raise KeyError(f"bench/README.md names an unknown table {name!r}")
        body = "\n".join(TABLES[name][1]()) + "\n"
        if body != match["body"]:
            changed.append(name)
        return match.group(1) + body + match.group(4)

    return _BLOCK.sub(one, text), changed


def header(name: str) -> str:
    """The opening marker of table ``name`` (to paste into bench/README.md)."""
    return f"<!-- table {name}: generated from bench/results/{TABLES[name][0]} by " \
           "bench/readme_tables.py -->"


def main(argv: list[str] | None = None) -> int:
    """Rewrite bench/README.md's tables (or, with --check, say which differ)."""
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true", help="change nothing; exit 1 if stale")
    args = parser.parse_args(argv)
    text = README.read_text()
    new, changed = render(text)
    missing = [n for n in TABLES if f"<!-- table {n}:" not in text]
    if args.check:
        for name in changed:
            print(f"bench/README.md: table {name} differs from bench/results/{TABLES[name][0]}"
                  " (run python bench/readme_tables.py)", file=sys.stderr)
        for name in missing:
            print(f"bench/README.md: no table {name} ({header(name)})", file=sys.stderr)
        return 1 if changed or missing else 0
    README.write_text(new)
    print(f"bench/README.md: {len(changed)} table(s) rewritten: {', '.join(changed) or 'none'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
