"""The model benchmark at tiny sizes: its JSON keeps the issue's schema and covers every
(impl, M, L); its workload is model-like; its report calls a missed target a miss. No timing is
asserted."""

from __future__ import annotations

import itertools
import json
import math
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest

from bench.model_report import target_checks

TINY = ["--n-kernel", "1000", "--n-tick", "1000", "--n-python", "20", "--rounds", "1",
        "--repeats", "1",
        "--startup-runs", "1"]


@pytest.fixture(scope="module")
def bench_model() -> ModuleType:
    """bench/bench_model.py, imported when a test here runs, not when pytest collects this
    module: it imports padasip (with SciPy's stats, ~2 s of CPU), which every pytest-xdist
    worker would pay for at collection, most for nothing."""
    from bench import bench_model

    return bench_model


@pytest.fixture(scope="module")
def results(bench_model: ModuleType, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("results")
    assert bench_model.main([*TINY, "--out", str(out)]) == 0
    return out


def test_json_is_a_list_with_one_record_per_impl_features_and_levels(
        bench_model: ModuleType, results: Path) -> None:
    records = json.loads((results / "model.json").read_text())
    assert isinstance(records, list)
    timed = [r for r in records if r["impl"] in bench_model.IMPLS]
    keys = {(r["impl"], r["features"], r["levels"]) for r in timed}
    want = set(itertools.product(bench_model.IMPLS, bench_model.FEATURES, bench_model.LEVELS))
    assert keys == want
    assert len(timed) == len(want)
    for r in timed:
        assert {"impl", "features", "levels", "update_ns", "tick_us"} <= r.keys()
        # the scaling form's update is not a kernel of its own: its tick is what is timed
        assert (r["update_ns"] is None) == (r["impl"] in ("scaling", "pairs-one-mem"))
        assert r["update_ns"] is None or (r["update_ns"] > 0 and math.isfinite(r["update_ns"]))
        assert r["tick_us"] > 0 and math.isfinite(r["tick_us"])


def test_compiled_kernels_are_timed_without_resets(results: Path) -> None:
    """A reset to the prior is a shortcut: a timing that included one would flatter."""
    records = json.loads((results / "model.json").read_text())
    assert [r["resets"] for r in records if r["impl"] in ("rls", "dcd")] == [0] * 12


def test_startup_records_for_cold_and_warm_cache(results: Path) -> None:
    records = json.loads((results / "model.json").read_text())
    startup = {r["impl"]: r for r in records if r["impl"].startswith("startup-")}
    assert set(startup) == {"startup-cold", "startup-warm"}
    for r in startup.values():
        assert (r["features"], r["levels"]) == (4, 9)
        assert r["startup_s"] > 0


def test_environment_written_beside_the_results(results: Path) -> None:
    env = json.loads((results / "model-env.json").read_text())
    assert {"cpu", "versions", "repeats", "rls_tick_breakdown_us"} <= env.keys()


@pytest.mark.parametrize(("features", "levels"), [(4, 9), (20, 30)])
def test_workload_is_model_like_not_zero(bench_model: ModuleType, features: int,
                                         levels: int) -> None:
    wl = bench_model.workload("rls", features, levels, 2000)
    assert wl.regressors.shape == (1999, features)
    assert wl.time_ms.min() > 2.0 and wl.time_ms.max() < 40.0
    assert np.count_nonzero(wl.regressors[:, 1]) > 200  # the level changes
    assert np.all(np.any(wl.regressors != 0.0, axis=1))  # never a zero regressor
    assert 0.1 < np.abs(wl.counters).mean() < 10.0


def _records(impls: tuple[str, ...], rls_tick_us: float,
             dcd_cost: float) -> list[dict[str, float | str]]:
    records: list[dict[str, float | str]] = []
    for impl, m, levels in itertools.product(impls, (4, 20), (9, 30)):
        records.append({"impl": impl, "features": m, "levels": levels, "update_ns": 50.0,
                        "tick_us": 1.0})
    for r in records:
        if r["impl"] == "rls":
            r["tick_us"] = rls_tick_us
        if r["impl"] == "padasip":
            r["update_ns"] = 10_000.0
        if r["impl"] == "dcd":
            r["update_ns"], r["tick_us"] = dcd_cost * 50.0, dcd_cost
    return records


def test_report_calls_a_missed_target_a_miss(bench_model: ModuleType) -> None:
    impls = bench_model.IMPLS
    met = {t: ok for t, _, ok in target_checks(_records(impls, rls_tick_us=1.0, dcd_cost=0.8))}
    assert all(met.values())
    missed = {t for t, _, ok in target_checks(_records(impls, rls_tick_us=3.0, dcd_cost=1.2))
              if not ok}
    assert "rls tick_us <= 2 at M=4, L=9" in missed
    assert "padasip adapt / rls tick >= 10 at M=4, L=9" in missed
    assert "dcd cheaper than rls (update_ns) at M=20, L=9" in missed
