"""`govd sim fit`: the level-table fit recovers known curves, and the shipped tables are what the
fit makes of ../shared/data."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from govd.cli import main
from govd.formats.sweep import SweepTable, read_sweep, write_sweep
from govd.sim.fit import cross_validate, fit_curves, fit_table, predict
from govd.sim.levels import LEVEL_TABLES, read_table
from govd.sim.nvdvfs import GPUS, default_data_dir, kernel_sweep

DATA = default_data_dir()
needs_data = pytest.mark.skipif(not (DATA.is_dir() and (DATA.parent / "hkbu").is_dir()),
                                reason=f"measured data absent ({DATA.parent})")


def _synthetic_sweep(units: int = 12, seed: int = 0) -> SweepTable:
    """Kernels made by the fit's own model on a 1-D table whose time curve is not 1/f."""
    rng = np.random.default_rng(seed)
    f = np.array([400.0, 600, 800, 1000, 1200])
    g = (f[-1] / f) ** 1.2
    h = np.array([1.6, 1.3, 1.1, 1.02, 1.0])
    d = 0.05 * f * np.linspace(0.8, 1.0, f.size) ** 2
    a, b, e = rng.uniform(0.5, 5, units), rng.uniform(0.1, 3, units), rng.uniform(0, 0.2, units)
    alpha, beta = rng.uniform(0.2, 1, units), rng.uniform(0.1, 1, units)
    time = a[:, None] * g + b[:, None] * h + e[:, None]
    power = 30.0 + alpha[:, None] * d + beta[:, None] * 20.0
    return SweepTable(levels_mhz=f, time_ms=time, power_w=power, meta={"idle_power_w": "12"})


def test_fit_reproduces_a_sweep_made_by_its_own_model() -> None:
    sweep = _synthetic_sweep()
    curves, units = fit_curves(sweep)
    time, power = predict(curves, units)
    np.testing.assert_allclose(time, sweep.time_ms, rtol=0.02)
    np.testing.assert_allclose(power, sweep.power_w, rtol=0.01)


def test_held_out_units_are_predicted_from_curves_fitted_without_them() -> None:
    errors = cross_validate(_synthetic_sweep(units=15), folds=5)
    assert errors["heldout_time_mape_pct"] < 2.0
    assert errors["heldout_power_mape_pct"] < 1.0


def test_fitted_table_carries_its_error_and_idle_power(tmp_path: Path) -> None:
    table = fit_table(_synthetic_sweep(), "synthetic")
    fit = table.provenance["fit"]
    assert fit["units"] == 12 and fit["folds"] == 5
    assert table.idle_power_w == 12.0
    assert table.scalable_time[-1] == pytest.approx(1.0)
    assert np.all(np.diff(table.scalable_time) < 0)  # more clock, less time
    assert table.volts_rel is not None and table.volts_rel[-1] == pytest.approx(1.0)


def test_fit_cli_writes_a_table_that_sweep_can_simulate(tmp_path: Path) -> None:
    sweep_path, table_path = tmp_path / "k.csv", tmp_path / "t.json"
    write_sweep(sweep_path, _synthetic_sweep())
    assert main(["sim", "fit", str(sweep_path), "--name", "mine", "-o", str(table_path)]) == 0
    assert read_table(table_path).name == "mine"
    out = tmp_path / "s.csv"
    assert main(["sim", "sweep", "--scenario", "gpgpu", "--minutes", "0.05",
                 "--levels", str(table_path), "-o", str(out)]) == 0
    assert out.stat().st_size > 0


def test_fit_without_idle_power_is_a_one_line_usage_error(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    sweep = _synthetic_sweep()
    sweep.meta.clear()
    write_sweep(tmp_path / "k.csv", sweep)
    status = main(["sim", "fit", str(tmp_path / "k.csv"), "--name", "x",
                   "-o", str(tmp_path / "t.json")])
    assert status == 2
    err = capsys.readouterr().err
    assert "--idle-w" in err and err.count("\n") == 1
    assert not (tmp_path / "t.json").exists()


def test_bad_table_file_is_a_one_line_usage_error(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    bad = tmp_path / "bad.json"
    bad.write_text('{"name": "x", "freqs_mhz": [1]}')
    status = main(["sim", "sweep", "--scenario", "art3", "--minutes", "0.1",
                   "--levels", str(bad), "-o", str(tmp_path / "o.csv")])
    assert status == 2
    assert "bad.json" in capsys.readouterr().err


def test_list_shows_each_tables_source_and_fit_error(capsys) -> None:  # type: ignore[no-untyped-def]
    assert main(["sim", "list"]) == 0
    out = capsys.readouterr().out
    for name in LEVEL_TABLES:
        assert name in out
    assert "v100-dvfs-real-profile.csv" in out
    assert "held out" in out and "not fitted to a measurement" in out


@needs_data
@pytest.mark.needs_data
@pytest.mark.parametrize("gpu", sorted(GPUS))
def test_shipped_table_is_what_the_fit_makes_of_the_data(gpu: str, tmp_path: Path) -> None:
    shipped = LEVEL_TABLES[gpu]
    # through the CSV, as `sim from-nvdvfs --kernels` then `sim fit` made it (7 digits)
    write_sweep(tmp_path / "k.csv", kernel_sweep(gpu, DATA))
    sweep = read_sweep(tmp_path / "k.csv")
    assert shipped.provenance["source_sha256"] == sweep.meta["source_sha256"]
    refit = fit_table(sweep, gpu)
    np.testing.assert_allclose(refit.scalable_time, shipped.scalable_time, rtol=1e-4)
    np.testing.assert_allclose(refit.core_power_w, shipped.core_power_w, rtol=1e-4)
    assert refit.static_power_w == pytest.approx(shipped.static_power_w, rel=1e-3)
    for key in ("time_mape_pct", "power_mape_pct", "heldout_time_mape_pct"):
        assert refit.provenance["fit"][key] == pytest.approx(shipped.provenance["fit"][key],
                                                             abs=0.01)


def test_sweeps_with_other_levels_cannot_be_pooled(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    a, b = _synthetic_sweep(), _synthetic_sweep(seed=1)
    b.levels_mhz = b.levels_mhz * 1.1
    write_sweep(tmp_path / "a.csv", a)
    write_sweep(tmp_path / "b.csv", b)
    status = main(["sim", "fit", str(tmp_path / "a.csv"), str(tmp_path / "b.csv"), "--name", "x",
                   "-o", str(tmp_path / "t.json")])
    assert status == 2
    assert "levels differ" in capsys.readouterr().err


def test_pooled_sweeps_fit_every_unit(tmp_path: Path) -> None:
    write_sweep(tmp_path / "a.csv", _synthetic_sweep(units=6))
    write_sweep(tmp_path / "b.csv", _synthetic_sweep(units=7, seed=2))
    assert main(["sim", "fit", str(tmp_path / "a.csv"), str(tmp_path / "b.csv"), "--name", "x",
                 "-o", str(tmp_path / "t.json")]) == 0
    assert read_table(tmp_path / "t.json").provenance["fit"]["units"] == 13


@pytest.mark.parametrize("command", [["sim", "fit", "k.csv", "--name", "x", "-o", "t.json"],
                                     ["sim", "fit-games", "-o", "g.json"]])
def test_fitting_without_scipy_names_the_extra_in_one_line(
        command: list[str], tmp_path: Path, monkeypatch, capsys) -> None:  # type: ignore[no-untyped-def]
    # scipy lives in the `fit` extra (the service venv has no use for it): a bare install must
    # say what to install, not end in an ImportError traceback
    monkeypatch.chdir(tmp_path)
    monkeypatch.setitem(sys.modules, "scipy", None)
    assert main(command) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert "needs scipy" in err and "govd[fit]" in err
    assert not (tmp_path / command[-1]).exists()


def test_simulating_needs_no_scipy(tmp_path: Path) -> None:
    # a fresh interpreter: this file's own imports have loaded govd.sim.fit (and scipy) already
    code = ("import sys; sys.modules['scipy'] = None\n"
            "from govd.cli import main\n"
            "sys.exit(main(['sim', 'sweep', '--scenario', 'gpgpu', '--minutes', '0.05', "
            f"'-o', {str(tmp_path / 's.csv')!r}]))\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "s.csv").stat().st_size > 0
