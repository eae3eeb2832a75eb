"""bench/bench_decisions.py runs and reports every figure the issue asks for (no timing and no
decision figure is asserted here: those are the benchmark's, on the full tables)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

REPO = Path(__file__).resolve().parent.parent
DATA = REPO.parent / "shared" / "data"


@pytest.mark.skipif(not (DATA / "nv-dvfs").is_dir() or not (DATA / "hkbu").is_dir(),
                    reason="the measured data (../shared/data) is not beside this checkout")
def test_the_coarse_tables_are_every_measured_gpu_on_its_own_grid() -> None:
    sys.path.insert(0, str(REPO / "bench"))
    try:
        from bench_decisions import tables
    finally:
        sys.path.remove(str(REPO / "bench"))
    assert {t.path for t in tables(1.0)} == {
        "v100-sim", "v100-sim-s1", "v100-sim-s2", "v100-units", "gtx980-pairs",
        "gtx1080ti-pairs", "gtx1080ti-core", "rtx2070s-pairs", "rtx2070s-core"}


@pytest.mark.skipif(not (DATA / "nv-dvfs").is_dir() or not (DATA / "hkbu").is_dir(),
                    reason="the measured data (../shared/data) is not beside this checkout")
def test_unit_seed_draws_other_units_of_the_same_kernels_and_keeps_the_simulations() -> None:
    """``--unit-seed N``: every table of measured kernels' units is drawn with its seed + N
    (the same kernels and grid, other phases and noise); the V100 simulations stay as they
    are."""
    sys.path.insert(0, str(REPO / "bench"))
    try:
        from bench_decisions import reseeded, tables, unit_sweep
    finally:
        sys.path.remove(str(REPO / "bench"))
    from govd.sim.nvdvfs import GPUS, core_slice

    assert reseeded(0) is unit_sweep
    base = {t.path: t for t in tables(1.0)}
    other = {t.path: t for t in tables(1.0, reseeded(2))}
    assert base.keys() == other.keys()
    for name in ("v100-sim", "v100-sim-s1", "gtx980-pairs"):
        assert (other[name].time_ms == base[name].time_ms).all()
    for name in ("v100-units", "rtx2070s-core", "gtx1080ti-pairs"):
        assert (other[name].levels_mhz == base[name].levels_mhz).all()
        assert not (other[name].time_ms == base[name].time_ms).all()
    again = unit_sweep(core_slice(GPUS["rtx2070s"](DATA / "nv-dvfs")), "rtx2070s-core", seed=3)
    assert (other["rtx2070s-core"].time_ms == again.time_ms).all()  # its seed 1, plus 2


@pytest.mark.skipif(not (DATA / "nv-dvfs").is_dir() or not (DATA / "hkbu").is_dir(),
                    reason="the measured data (../shared/data) is not beside this checkout")
def test_quick_run_reports_every_table_and_target(tmp_path: Path) -> None:
    """Every row, of a table of one clock domain and of one of two, at both targets (the
    coarse tables are listed by the test above; each goes through the same rows)."""
    out = tmp_path / "decisions.json"
    tables = {"v100-units", "gtx1080ti-pairs"}
    run = subprocess.run([sys.executable, str(REPO / "bench" / "bench_decisions.py"), "--quick",
                          "--tables", "coarse", "--only", ",".join(sorted(tables)),
                          "--unit-seed", "1", "--out", str(out)],
                         capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr
    report = json.loads(out.read_text())
    assert report["unit_seed"] == 1
    for slowdown in ("0.1", "0.25"):
        rows = report["results"][slowdown]
        assert set(rows) == tables
        for row in rows.values():
            for key in ("energy_ratio", "energy_vs_reference", "violation_excess", "kendall_tau",
                        "stress_per_hour", "performance_ratio", "ondemand_ratio",
                        "safe_reference_vs_oracle", "causal_reference_vs_oracle",
                        "hedged_reference_vs_oracle", "hedged_reference_violation_rate",
                        "true_curves_vs_oracle", "true_curves_violation_rate",
                        "mean_curve_kendall_tau"):
                assert key in row
            assert row["energy_ratio"] >= 0.99  # nothing beats the oracle by more than noise
            assert row["ondemand_violation_rate"] <= 0.05, "ondemand over pairs is sane"
        assert set(report["met"][slowdown]) == tables
        flags = report["fixed_clock_met"][slowdown]
        assert set(flags) == tables
        for table, f in flags.items():
            row = rows[table]
            assert f["never_worse_than_static"] == (
                row["energy_ratio"] <= row["static_reference_vs_oracle"] + 0.005)
            assert set(f) == {"never_worse_than_static", "near_hedged", "violations", "stress"}
    summary = report["fixed_clock_summary"]
    assert summary["rows"] == 2 * len(tables)
    assert 0 <= summary["rows_meeting_all"] <= summary["rows"]


@pytest.mark.skipif(not (DATA / "nv-dvfs").is_dir() or not (DATA / "hkbu").is_dir(),
                    reason="the measured data (../shared/data) is not beside this checkout")
def test_against_judges_the_energy_policy_alone_with_the_earlier_reports_references(
        tmp_path: Path) -> None:
    """``--against``: the energy policy's figures are its own (an energy parameter changes
    them), the references are the earlier report's, and the verdicts follow from both."""
    tables = "v100-units"
    bench = str(REPO / "bench" / "bench_decisions.py")
    earlier = tmp_path / "earlier.json"
    run = subprocess.run([sys.executable, bench, "--quick", "--tables", "coarse", "--only",
                          tables, "--out", str(earlier)],
                         capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr
    before = json.loads(earlier.read_text())
    # a forged reference: the verdicts must come from the earlier report's rows
    before["results"]["0.1"]["v100-units"]["static_reference_vs_oracle"] = 0.5
    earlier.write_text(json.dumps(before))
    out = tmp_path / "against.json"
    run = subprocess.run([sys.executable, bench, "--quick", "--tables", "coarse", "--only",
                          tables, "--against", str(earlier), "--energy-param",
                          "probe_ticks=0", "--spread-scale", "1", "--out", str(out)],
                         capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr
    report = json.loads(out.read_text())
    assert report["energy_params"] == {"probe_ticks": 0}
    assert report["spread_scale"] == 1.0  # the spread as the model gives it, wrapped
    assert report["fixed_clock_summary"]["rows"] == 2
    assert not report["fixed_clock_met"]["0.1"]["v100-units"]["never_worse_than_static"]
    rows = report["results"]["0.25"]
    for table, row in rows.items():
        assert row["static_reference_vs_oracle"] == \
            before["results"]["0.25"][table]["static_reference_vs_oracle"]
    # without probes the model learns from no pair where the default probes made some
    assert any(rows[t]["model_updates"] != before["results"]["0.25"][t]["model_updates"]
               for t in rows)
    assert "rows meeting every target" in run.stdout
    # the policy without its memory on the same tables, judged with the same references
    memory = tmp_path / "memory.json"
    run = subprocess.run([sys.executable, bench, "--quick", "--tables", "coarse", "--only",
                          tables, "--against", str(earlier), "--energy-param", "memory=false",
                          "--out", str(memory)], capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr
    design = json.loads(memory.read_text())
    assert design["energy_params"] == {"memory": False} and design["spread_scale"] is None
    assert design["fixed_clock_summary"]["rows"] == 2
    for table, row in design["results"]["0.25"].items():
        assert row["hedged_reference_vs_oracle"] == \
            before["results"]["0.25"][table]["hedged_reference_vs_oracle"]


def test_against_refuses_to_overwrite_its_report_and_reads_a_bad_one_clearly(
        tmp_path: Path) -> None:
    bench = str(REPO / "bench" / "bench_decisions.py")
    report = tmp_path / "r.json"
    report.write_text("{}")
    same = subprocess.run([sys.executable, bench, "--against", str(report), "--out",
                           str(report)], capture_output=True, text=True, timeout=120)
    assert same.returncode == 2 and "overwrite" in same.stderr
    assert report.read_text() == "{}"
    bad = subprocess.run([sys.executable, bench, "--against", str(report)],
                         capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and "not a report of this benchmark" in bad.stderr
    param = subprocess.run([sys.executable, bench, "--energy-param", "miss_budget"],
                           capture_output=True, text=True, timeout=120)
    assert param.returncode == 2 and "NAME=VALUE" in param.stderr
    alone = subprocess.run([sys.executable, bench, "--spread-scale", "0.3"],
                           capture_output=True, text=True, timeout=120)
    assert alone.returncode == 2 and "goes with --against" in alone.stderr
    negative = subprocess.run([sys.executable, bench, "--against", str(report),
                               "--spread-scale", "-1"], capture_output=True, text=True,
                              timeout=120)
    assert negative.returncode == 2 and "--spread-scale" in negative.stderr
    assert "Traceback" not in negative.stderr
    for flag in ("--unit-seed", "--game-seed"):  # numpy's generators refuse a negative seed
        seed = subprocess.run([sys.executable, bench, flag, "-3"], capture_output=True,
                              text=True, timeout=120)
        assert seed.returncode == 2 and flag in seed.stderr and "0 or more" in seed.stderr
        assert "Traceback" not in seed.stderr
    memory = subprocess.run([sys.executable, bench, "--energy-param", "memory=1"],
                            capture_output=True, text=True, timeout=120)
    assert memory.returncode == 2 and "memory must be true or false" in memory.stderr
    for bad in ("no_such_knob=1", "miss_budget=2"):  # the policy refuses, in one line
        run = subprocess.run([sys.executable, bench, "--energy-param", bad],
                             capture_output=True, text=True, timeout=120)
        assert run.returncode == 2 and "--energy-param" in run.stderr
        assert "Traceback" not in run.stderr


def test_only_game_tables_are_judged_at_the_frame_rate_alone(tmp_path: Path) -> None:
    """``--only`` naming game tables alone runs them (it used to say there was no measured
    data and measure nothing); the game suite is simulated, so no measured data is needed,
    and ``--game-seed`` simulates it on other frames."""
    out = tmp_path / "games.json"
    run = subprocess.run([sys.executable, str(REPO / "bench" / "bench_decisions.py"), "--quick",
                          "--only", "game-light@mobile", "--out", str(out)],
                         capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr
    report = json.loads(out.read_text())
    assert list(report["results"]) == ["60fps"]
    assert list(report["results"]["60fps"]) == ["game-light@mobile"]
    assert report["fixed_clock_summary"]["rows"] == 1
    # ``--game-seed``: the same scenario on other frames, and the report says which (here with
    # the voltage table the game tables record given to the model, ``--table-volts``)
    run = subprocess.run([sys.executable, str(REPO / "bench" / "bench_decisions.py"), "--quick",
                          "--only", "game-light@mobile", "--game-seed", "1", "--table-volts",
                          "--out", str(out)], capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr
    other = json.loads(out.read_text())
    assert "--game-seed 1" in other["command"]
    assert (report["table_volts"], other["table_volts"]) == (False, True)
    rows = [r["results"]["60fps"]["game-light@mobile"] for r in (report, other)]
    assert rows[0]["units"] == rows[1]["units"]
    assert rows[0]["static_reference_vs_oracle"] != rows[1]["static_reference_vs_oracle"]



def test_a_row_counts_the_clock_changes_per_thousand_units() -> None:
    sys.path.insert(0, str(REPO / "bench"))
    try:
        from bench_decisions import energy_figures
    finally:
        sys.path.remove(str(REPO / "bench"))
    names = ("energy_ratio", "reference_ratio", "violation_rate", "oracle_violation_rate",
             "kendall_tau", "stress_episodes", "stress_per_hour", "work_hours",
             "reference_energy_j", "oracle_energy_j", "reference_violation_rate", "time_mape")
    score = SimpleNamespace(**{name: 1.0 for name in names})
    run = SimpleNamespace(levels=[2, 2, 1, 1, 2], model_stats={})
    sweep = SimpleNamespace(levels_mhz=np.array([1000.0, 1500.0, 2000.0]))
    row = energy_figures(sweep, run, score)
    assert row["clock_changes"] == 500.0  # 2 changes between 5 units: 4 steps
    assert row["top_share"] == 0.6
