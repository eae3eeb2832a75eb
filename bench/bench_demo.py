"""Benchmark: what a user sees and gets, on the simulated GPU beside its twins (`govd run --sim`).

Three questions, each answered by running the demo (`govd.daemon.demo`: the real daemon on a
live simulated GPU in lockstep with it, twins of the same workload under the kernel's
`performance` and `simple_ondemand` governors) and reading its `--report` JSON:

- `saving`: does what `govd status` says govd saved against the top clock match what the
  `performance` twin measured on the same work? `make demo`'s own run (game-medium, 600 s at
  --speed 10), and gpgpu.
- `without_frames`: with nothing sending frames (`--no-frames`), what does each way of
  governing cost against the kernel's `simple_ondemand`: the shipped configuration (govd
  leaves the device to its own governor until frames come), govd's own `ondemand` policy on
  busy time, and the `energy` policy on busy time (`frames.source: busy`, slowdown <= 10 %).
- `speed`: does the same scenario give the same verdict at --speed 4 and 20?

    python bench/bench_demo.py [--part saving,without_frames,speed] [--quick]

Writes `bench/results/demo.json`; bench/README.md's "What a user sees" tables are generated
from it (`python bench/readme_tables.py`).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "bench" / "results" / "demo.json"

ARMS: dict[str, dict[str, Any]] = {
    "shipped": {},
    "ondemand_on_busy": {"policy": {"name": "ondemand"}},
    "energy_on_busy_slowdown_10": {"frames": {"source": "busy"},
                                   "target": {"max_slowdown": 0.1}},
}
"""Ways to govern without frames: configuration over the defaults."""


def demo(scenario: str, speed: float, duration_s: float, *, no_frames: bool = False,
         config: dict[str, Any] | None = None) -> dict[str, Any]:
    """One `govd run --sim` as a user runs it; its `--report` and wall time."""
    with tempfile.TemporaryDirectory(prefix="govd-bench-demo-") as tmp:
        report = Path(tmp) / "report.json"
        user = ["govd", "run", "--sim", "--scenario", scenario, "--speed", f"{speed:g}",
                "--duration-s", f"{duration_s:g}", *(["--no-frames"] if no_frames else [])]
        command = [sys.executable, "-m", *user, "--report", str(report)]
        if config:
            path = Path(tmp) / "govd.yaml"
            path.write_text(yaml.safe_dump(config))
            command += ["--config", str(path)]
            user += ["--config", "ARM.yaml"]
        started = time.monotonic()
        done = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=3600)
        if done.returncode != 0:
            raise RuntimeError(f"{' '.join(command)} exited {done.returncode}:\n"
                               f"{done.stdout[-2000:]}{done.stderr[-2000:]}")
        found: dict[str, Any] = json.loads(report.read_text())
    found["wall_s"] = round(time.monotonic() - started, 1)
    # the demo prints what `govd status` shows, once a second: the last of it
    shown = [line.split("] ", 1)[1] for line in done.stdout.splitlines()
             if line.startswith("[") and "] " in line]
    found["status_line"] = shown[-1] if shown else None
    found["command"] = " ".join(user)
    return found


def saving(quick: bool) -> list[dict[str, Any]]:
    """govd status's estimate against the performance twin's measurement."""
    rows = []
    for scenario, speed, duration_s in (("game-medium", 10, 600), ("gpgpu", 10, 300)):
        run = demo(scenario, speed, duration_s / (5 if quick else 1))
        twin = run["twins"]["performance"]
        estimate = run["estimate"]
        rows.append({
            "scenario": scenario, "command": run["command"], "wall_s": run["wall_s"],
            "status_line": run["status_line"],
            "measured_saving": twin["saving"], "measured_slowdown": twin["slowdown"],
            "missed": twin["missed"],
            "estimated_saving": estimate["saved_share"],
            "estimate_uncertainty": estimate["saved_uncertainty"],
            "estimate_sure": estimate["sure"], "correction": estimate["correction"],
            "estimated_slowdown": estimate["mean_slowdown"],
            "difference_pts": None if estimate["saved_share"] is None else
            100 * (estimate["saved_share"] - twin["saving"]),
        })
    return rows


def without_frames(quick: bool) -> list[dict[str, Any]]:
    """Each way of governing without frames against simple_ondemand, per scenario."""
    rows = []
    for scenario in ("game-medium", "game-heavy", "gpgpu"):
        for arm, config in ARMS.items():
            run = demo(scenario, 20, 60 if quick else 300, no_frames=True, config=config)
            twins = run["twins"]
            rows.append({
                "scenario": scenario, "arm": arm, "command": run["command"],
                "energy_j": run["energy_j"], "frames": run["frames"],
                "ondemand_energy_j": twins["ondemand"]["energy_j"],
                "performance_energy_j": twins["performance"]["energy_j"],
                "vs_ondemand": run["energy_j"] / twins["ondemand"]["energy_j"],
                "vs_performance": run["energy_j"] / twins["performance"]["energy_j"],
                "missed": twins["ondemand"]["missed"],
                "ondemand_missed": twins["ondemand"]["twin_missed"],
                # equal work against the top clock: how much longer the same frames took
                "slowdown_vs_performance": twins["performance"]["slowdown"],
            })
    return rows


def speed(quick: bool) -> list[dict[str, Any]]:
    """The same scenario at --speed 4 and 20: saving and slowdown against the top clock."""
    rows = []
    for scenario in ("game-medium", "gpgpu"):
        verdicts = {}
        for pace in (4, 20):
            run = demo(scenario, pace, 30 if quick else 120)
            twin = run["twins"]["performance"]
            verdicts[pace] = {"saving": twin["saving"], "slowdown": twin["slowdown"],
                              "missed": twin["missed"], "frames": run["frames"],
                              "wall_s": run["wall_s"]}
        spread = {key: abs((verdicts[4][key] or 0.0) - (verdicts[20][key] or 0.0))
                  for key in ("saving", "slowdown", "missed")}
        rows.append({"scenario": scenario, "speeds": verdicts, "spread": spread})
    return rows


PARTS = {"saving": saving, "without_frames": without_frames, "speed": speed}


def main() -> None:
    """Run the parts asked for and merge them into the JSON."""
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--part", default=",".join(PARTS),
                        help=f"comma-separated, of {', '.join(PARTS)}")
    parser.add_argument("--quick", action="store_true", help="shorter runs (a smoke test)")
    args = parser.parse_args()
    results: dict[str, Any] = json.loads(RESULTS.read_text()) if RESULTS.exists() else {}
    for part in args.part.split(","):
        results[part] = PARTS[part](args.quick)
        results[part + "_quick"] = args.quick
    results["machine"] = {"arch": platform.machine(), "python": platform.python_version(),
                          "cpus": os.cpu_count(), "load_1min": os.getloadavg()[0]}
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(results, indent=1) + "\n")
    print(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
