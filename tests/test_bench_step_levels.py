"""bench/bench_step_levels.py measures a step at every level count for both forms and reports
the ratio issue #24 bounds (the figures are the benchmark's, not asserted here)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def test_quick_run_reports_each_level_count_and_the_ratio(tmp_path: Path) -> None:
    out = tmp_path / "step_levels.json"
    run = subprocess.run([sys.executable, str(REPO / "bench" / "bench_step_levels.py"),
                          "--quick", "--out", str(out)], capture_output=True, text=True,
                         timeout=600)
    assert run.returncode == 0, run.stderr
    report = json.loads(out.read_text())
    assert {r["form"] for r in report["results"].values()} == {"scaling", "seed"}
    for result in report["results"].values():
        assert set(result["median_step_us"]) == {"9", "38", "81", "190"}
        assert all(v > 0 for v in result["median_step_us"].values())
        ratio = result["ratio_L190_to_L9"]
        assert result["met"] == (ratio <= report["target_ratio"])
