"""`govd select-features`: seed 000's Pearson prefilter and cross-validated Lasso, on data whose
truth is known."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from importlib.util import find_spec
from pathlib import Path

import numpy as np
import pytest

from govd.commands.select_features import config_snippet, select
from govd.conf.load import parse_config
from govd.formats.sweep import SweepTable, write_sweep
from govd.research.regression_data import sweep_regression, walk_levels
from govd.research.selection import counter_scale, frequency_prefilter, select_features

# Whether scikit-learn is installed, not an import of it: collecting this module would cost
# every pytest-xdist worker ~1.5 s of CPU (sklearn imports SciPy's stats), most for nothing.
pytestmark = pytest.mark.skipif(find_spec("sklearn") is None,
                                reason="scikit-learn (govd[fit]) not installed")

REPO = Path(__file__).resolve().parents[1]
LEVELS_MHZ = np.array([300.0, 400.0, 500.0, 600.0, 700.0, 800.0, 900.0])


def known_table(units: int = 800, seed: int = 1) -> SweepTable:
    """Frame time = 4 + 2·drive_a + 1.5·drive_b + 3000/f ms (+ noise): drive_a and drive_b are
    frequency-independent and drive the time, noise is frequency-independent and drives nothing,
    clock_cycles follows the frequency."""
    rng = np.random.default_rng(seed)
    shape = (units, LEVELS_MHZ.size)
    a = rng.uniform(0, 4, units)[:, None]
    b = rng.uniform(0, 4, units)[:, None]
    n = rng.uniform(0, 4, units)[:, None]
    time_ms = 4 + 2 * a + 1.5 * b + 3000 / LEVELS_MHZ + rng.normal(0, 0.05, shape)
    jitter = 1 + rng.normal(0, 0.005, shape)
    counters = {"drive_a": a * 1e4 * jitter, "drive_b": b * 1e4 * jitter,
                "noise": np.broadcast_to(n, shape) * 1e3 * jitter,
                "clock_cycles": LEVELS_MHZ * 1e3 * (1 + rng.normal(0, 0.05, shape))}
    return SweepTable(levels_mhz=LEVELS_MHZ.copy(), time_ms=time_ms,
                      power_w=np.full(shape, 5.0), counters=counters)


def write_known(tmp_path: Path, table: SweepTable | None = None) -> Path:
    path = tmp_path / "known.csv"
    write_sweep(path, table or known_table())
    return path


def govd(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, "-m", "govd", *args], capture_output=True, text=True,
                          env=env, timeout=120)


def test_walk_changes_level_mostly_and_stays_within_the_levels() -> None:
    level = walk_levels(5000, 7, seed=3)
    assert level.min() == 0 and level.max() == 6
    assert np.abs(np.diff(level)).max() <= 2
    assert np.mean(np.diff(level) != 0) > 0.6


def test_prefilter_drops_the_frequency_dependent_counter_with_its_r() -> None:
    table = known_table()
    pre = frequency_prefilter(np.broadcast_to(table.levels_mhz, table.time_ms.shape),
                              table.counters)
    assert set(pre.kept) == {"drive_a", "drive_b", "noise"}
    assert list(pre.dropped) == ["clock_cycles"]
    assert pre.dropped["clock_cycles"] > 0.9
    assert all(abs(r) < 0.1 for r in pre.kept.values())


def test_lasso_keeps_both_drivers_and_drops_the_noise_counter_at_1se() -> None:
    table = known_table()
    names = ["drive_a", "drive_b", "noise"]
    data = sweep_regression(table, names, [counter_scale(table.counters[n]) for n in names], 0)
    result = select_features(data)
    assert {"drive_a", "drive_b"} <= set(result.minimum.counters)
    assert result.one_se.counters == ["drive_a", "drive_b"]
    assert result.one_se.n_features == 4
    assert result.one_se.eta >= result.minimum.eta
    assert result.etas.shape == result.cv_mse_mean.shape == result.n_features.shape


def test_snippet_parses_through_the_config_loader(tmp_path: Path) -> None:
    report, result = select([str(write_known(tmp_path))], seed=0, folds=10)
    assert result is not None
    config = parse_config(config_snippet(report, "eta_1se"), "snippet")
    assert list(config.model.counters) == ["drive_a", "drive_b"]


def test_run_trace_is_read_as_a_trace_and_selects_the_drivers(tmp_path: Path) -> None:
    table = known_table()
    level = walk_levels(table.units, LEVELS_MHZ.size, seed=5)
    rows = np.arange(table.units)
    names = list(table.counters)
    lines = ["time_s,frame_time_ms,frame_count,freq_mhz,power_w," + ",".join(names)]
    for u in rows:
        cells = [u * 0.05, table.time_ms[u, level[u]], 1, LEVELS_MHZ[level[u]], ""]
        cells += [table.counters[n][u, level[u]] for n in names]
        lines.append(",".join(str(c) for c in cells))
    path = tmp_path / "trace.csv"
    path.write_text("\n".join(lines) + "\n")
    report, result = select([str(path)], seed=0, folds=10)
    assert result is not None
    assert "clock_cycles" in report["prefilter"]["dropped"]
    assert result.one_se.counters == ["drive_a", "drive_b"]


def test_cli_writes_json_snippet_and_figure(tmp_path: Path) -> None:
    snippet, plots = tmp_path / "model.yaml", tmp_path / "plots"
    done = govd("select-features", str(write_known(tmp_path)), "--choice", "1se", "--json",
                "-o", str(snippet), "--plot", str(plots))
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["choice"] == "eta_1se"
    assert report["eta_1se"]["counters"] == ["drive_a", "drive_b"]
    assert report["eta_1se"]["n_features"] == 4
    assert "clock_cycles" in report["prefilter"]["dropped"]
    assert list(parse_config(snippet.read_text()).model.counters) == ["drive_a", "drive_b"]
    assert (plots / "fig8_lasso_cv.png").stat().st_size > 0


def test_cli_bad_file_is_one_clear_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.csv"
    bad.write_text("unit,freq_mhz,time_ms\n0,300,1\n")
    done = govd("select-features", str(bad))
    assert done.returncode == 2
    assert done.stderr.strip().count("\n") == 0
    assert "lacks required column(s) power_w" in done.stderr


def test_cli_exits_1_when_every_counter_follows_the_frequency(tmp_path: Path) -> None:
    table = known_table(units=50)
    table.counters = {"clock_cycles": table.counters["clock_cycles"]}
    done = govd("select-features", str(write_known(tmp_path, table)))
    assert done.returncode == 1
    assert "no counter is independent of the frequency" in done.stderr
    assert "clock_cycles r=+" in done.stderr
