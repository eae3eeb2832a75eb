"""Benchmark: generating a one-hour `game-heavy` workload on the seed's 9 levels, and its CSV.

Writes `bench/results/sim.json` with the median of a few runs (seconds) of: generation
(`simulate`), writing the sweep table, and reading it back.

    python bench/bench_sim.py [--runs 5]
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import tempfile
import time
from pathlib import Path

from govd.formats.sweep import read_sweep, write_sweep
from govd.sim.gpu import simulate

RESULTS = Path(__file__).resolve().parent / "results" / "sim.json"


def _timed(fn):  # type: ignore[no-untyped-def]
    start = time.perf_counter()
    value = fn()
    return time.perf_counter() - start, value


def main() -> None:
    """Run the benchmark and write the JSON."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    simulate("game-heavy", "seed9", 0.1, seed=0)  # warm-up: imports, numba caches
    generate, write, read = [], [], []
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "heavy.csv"
        write_sweep(path, simulate("game-heavy", "seed9", 0.1))
        read_sweep(path)
        for run in range(args.runs):
            seconds, table = _timed(lambda run=run: simulate("game-heavy", "seed9", 60.0, run))
            generate.append(seconds)
            write.append(_timed(lambda table=table: write_sweep(path, table))[0])
            read.append(_timed(lambda: read_sweep(path))[0])
            size_mb = path.stat().st_size / 1e6
    result = {
        "benchmark": "one hour of game-heavy at 60 FPS on seed9 (216000 frames x 9 levels)",
        "runs": args.runs,
        "generate_s_median": round(statistics.median(generate), 3),
        "write_csv_s_median": round(statistics.median(write), 3),
        "read_csv_s_median": round(statistics.median(read), 3),
        "csv_mb": round(size_mb, 1),
        "units": table.units,
        "levels": int(table.levels_mhz.size),
        "machine": f"{platform.machine()} {platform.processor() or ''}".strip(),
        "python": platform.python_version(),
    }
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result))


if __name__ == "__main__":
    main()
