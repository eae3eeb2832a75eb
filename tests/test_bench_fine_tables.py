"""bench/bench_fine_tables.py: the made-up power-law tables it judges the energy policy on, and
its verdicts against the references."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))

import bench_fine_tables as fine
from decision_tables import POWER_LAW_GRID, power_law_table


def test_a_power_law_table_scales_each_work_as_its_slope_says() -> None:
    table = power_law_table([0.2, 0.9], units=400, run=100, noise=0.0)
    ratio = table.time_ms[:, 0] / table.time_ms[:, -1]
    span = POWER_LAW_GRID[-1] / POWER_LAW_GRID[0]
    assert ratio[:100] == pytest.approx(span ** 0.2)  # the first work's turn
    assert ratio[100:200] == pytest.approx(span ** 0.9)
    assert table.time_ms[100, -1] == pytest.approx(2 * table.time_ms[0, -1])
    slow = power_law_table([0.3], units=10, noise=0.0, slow=80)
    assert slow.time_ms[0, 80] == pytest.approx(1.2 * (1500.0 / POWER_LAW_GRID[80]) ** 0.3 * 20.0)


def test_a_case_s_verdicts_follow_its_figures() -> None:
    row = fine.judge((0.9,), {"units": 300}, 0.25, 0)
    assert row["static_reference_vs_oracle"] >= 1.0 and row["hedged_reference_vs_oracle"] >= 1.0
    expected = "".join(letter for letter, miss in (
        ("S", row["energy_ratio"] > row["static_reference_vs_oracle"] + 0.005),
        ("H", row["energy_ratio"] > row["hedged_reference_vs_oracle"] + 0.03),
        ("V", row["violation_excess"] > 0.01)) if miss)
    assert row["missed"] == expected


def test_the_report_counts_the_cases(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fine, "CASES", (((0.9,), {"units": 200}),))
    monkeypatch.setattr(fine, "SEEDS", (0,))
    out = tmp_path / "fine.json"
    assert fine.main(["--out", str(out)]) == 0
    report = json.loads(out.read_text())
    assert report["summary"]["cases"] == 2  # two limits
    assert report["summary"]["meeting_all"] == sum(not r["missed"] for r in report["cases"])
    assert np.isclose(report["summary"]["energy_ratio_sum"],
                      sum(r["energy_ratio"] for r in report["cases"]), atol=1e-3)
