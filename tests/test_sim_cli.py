"""`govd sim` on the command line: list, sweep round trip, bad arguments."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from govd.cli import main
from govd.formats.sweep import read_sweep
from govd.sim.gpu import simulate

REPO = Path(__file__).resolve().parents[1]


def test_sweep_written_by_the_cli_reads_back_as_the_simulation(tmp_path: Path) -> None:
    out = tmp_path / "heavy.csv"
    assert main(["sim", "sweep", "--scenario", "game-heavy", "--minutes", "0.1",
                 "--levels", "desktop", "--seed", "3", "-o", str(out)]) == 0
    table = read_sweep(out)
    expected = simulate("game-heavy", "desktop", 0.1, seed=3)
    np.testing.assert_array_equal(table.levels_mhz, expected.levels_mhz)
    np.testing.assert_allclose(table.time_ms, expected.time_ms, rtol=1e-6)
    np.testing.assert_allclose(table.counters["render_busy"],
                               expected.counters["render_busy"], rtol=1e-6)
    assert table.meta["scenario"] == "game-heavy"


def test_nonpositive_minutes_is_a_usage_error(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    status = main(["sim", "sweep", "--scenario", "art3", "--minutes", "0",
                   "-o", str(tmp_path / "x.csv")])
    assert status == 2
    assert "--minutes must be in (0, 1440], got 0" in capsys.readouterr().err
    assert not (tmp_path / "x.csv").exists()


@pytest.mark.parametrize("minutes", ["inf", "1e309", "nan", "1441"])
def test_infinite_or_huge_minutes_is_a_usage_error_not_a_traceback(
    minutes: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    status = main(["sim", "sweep", "--scenario", "art3", "--minutes", minutes,
                   "-o", str(tmp_path / "x.csv")])
    assert status == 2 and "--minutes must be in" in capsys.readouterr().err


def test_list_runs_as_a_subprocess_and_names_scenarios_and_tables() -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    result = subprocess.run([sys.executable, "-m", "govd", "sim", "list"], env=env,
                            capture_output=True, text=True, timeout=120, check=True)
    for name in ("rendering-test", "art3", "game-light", "game-medium", "game-heavy", "gpgpu",
                 "seed9", "desktop", "datacenter"):
        assert name in result.stdout
    assert "200, 244, 267, 311, 355, 400, 444, 489, 511" in result.stdout
