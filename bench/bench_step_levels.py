"""What one `Governor.step` costs as the level table grows (issue #24: a tick's cost must not grow
with the level count; `Governor.step` at L = 190 at most 1.5x its cost at L = 9, measured in one
run).

The governor the shipped configuration builds (`governor_from_config`, energy policy, form
``auto``), on levels evenly spaced from 300 to 1500 MHz, L = 9, 38, 81, 190 (an NVML datacenter
GPU's grids), under a slowdown limit (the scaling form) and a frame rate (the seed form). Each
step is fed a synthetic tick of work whose time follows 0.6/f + 0.4 of its top-level time
(memory-bound share 0.4) with 2 % noise, at the level the governor chose. After a warm-up, the
per-step wall time (`time.perf_counter_ns`) of every tick is kept; the medians are reported,
the sizes interleaved round after round so that the machine's load falls on all alike.

Writes bench/results/step_levels.json.

    .venv/bin/python bench/bench_step_levels.py [--ticks 4000] [--rounds 5] [--quick]
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from govd.conf.schema import Config  # noqa: E402
from govd.from_config import governor_from_config  # noqa: E402
from govd.governor import Governor, Sample  # noqa: E402
from govd.target import Target  # noqa: E402

LEVELS = (9, 38, 81, 190)
TARGET_RATIO = 1.5
"""Issue #24: Governor.step at L = 190 at most this many times its cost at L = 9."""
WARMUP_TICKS = 300


def governor(levels: int, target: Target) -> Governor:
    """The shipped configuration's governor over ``levels`` evenly spaced clocks."""
    gov = governor_from_config(Config(), np.linspace(300.0, 1500.0, levels), target=target)
    return gov


def step_costs_ns(gov: Governor, ticks: int, rng: np.random.Generator) -> list[int]:
    """Per-step wall time (ns) over ``ticks`` steps of synthetic work after the warm-up."""
    top_ms = 10.0
    freq_mhz = float(gov.levels_mhz[-1])
    top_mhz = freq_mhz
    noise = rng.lognormal(0.0, 0.02, WARMUP_TICKS + ticks)
    costs = []
    perf_ns = time.perf_counter_ns
    for i in range(WARMUP_TICKS + ticks):
        time_ms = top_ms * (0.6 * top_mhz / freq_mhz + 0.4) * float(noise[i])
        sample = Sample(freq_mhz=freq_mhz, frame_time_ms=time_ms, frame_count=5,
                        interval_s=0.05, busy=0.9, power_w=20.0 * freq_mhz / top_mhz + 5.0)
        started = perf_ns()
        decision = gov.step(sample)
        spent = perf_ns() - started
        if i >= WARMUP_TICKS:
            costs.append(spent)
        freq_mhz = float(decision.freq_mhz)
    return costs


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ticks", type=int, default=4000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="a few hundred ticks (tests)")
    parser.add_argument("--out", type=Path,
                        default=REPO / "bench" / "results" / "step_levels.json")
    args = parser.parse_args()
    ticks, rounds = (200, 1) if args.quick else (args.ticks, args.rounds)
    targets = {"slowdown 10 %": Target(max_slowdown=0.10), "60 FPS": Target(fps=60.0)}
    rng = np.random.default_rng(0)
    kept: dict[str, dict[int, list[int]]] = {name: {n: [] for n in LEVELS} for name in targets}
    forms: dict[str, str] = {}
    for _ in range(rounds):
        for name, target in targets.items():
            for n in LEVELS:
                gov = governor(n, target)
                kept[name][n] += step_costs_ns(gov, ticks, rng)
                forms[name] = gov.form
    report: dict = {"command": " ".join(["bench/bench_step_levels.py", *sys.argv[1:]]),
                    "machine": platform.platform(), "python": platform.python_version(),
                    "ticks_per_round": ticks, "rounds": rounds, "target_ratio": TARGET_RATIO,
                    "results": {}}
    for name in targets:
        medians = {n: statistics.median(kept[name][n]) / 1000.0 for n in LEVELS}
        ratio = medians[LEVELS[-1]] / medians[LEVELS[0]]
        report["results"][name] = {
            "form": forms[name],
            "median_step_us": {str(n): round(v, 2) for n, v in medians.items()},
            "p99_step_us": {str(n): round(float(np.percentile(kept[name][n], 99)) / 1000.0, 2)
                            for n in LEVELS},
            f"ratio_L{LEVELS[-1]}_to_L{LEVELS[0]}": round(ratio, 3),
            "met": bool(ratio <= TARGET_RATIO)}
        print(f"{name:<14} form {forms[name]:<8} median step (µs) "
              + "  ".join(f"L={n}: {v:.1f}" for n, v in medians.items())
              + f"   L{LEVELS[-1]}/L{LEVELS[0]} = {ratio:.2f} (target <= {TARGET_RATIO})")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=1) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
