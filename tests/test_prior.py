"""Offline priors (seed 001): fitting clusters, the prior file, and seeding the governor."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from govd.eval.prior_fit import fit_prior
from govd.eval.prior_gain import prior_gain
from govd.formats.prior import PriorFormatError, prior_to_json, read_prior, write_prior
from govd.formats.sweep import SweepTable, write_sweep
from govd.target import Target

ROOT = Path(__file__).resolve().parents[1]
LEVELS_MHZ = np.linspace(300.0, 1200.0, 8)
SHARES = (0.2, 0.6, 0.95)
"""Scalable share of the time of each known family: t(f) = T·(s·f_max/f + 1 − s)."""


def family_sweep(shares: tuple[float, ...], phases: int = 6, units: int = 40,
                 seed: int = 0, noise: float = 0.01) -> SweepTable:
    """Phases cycling through ``shares``, each of ``units`` units with its own size T (ms)."""
    rng = np.random.default_rng(seed)
    ratio = LEVELS_MHZ[-1] / LEVELS_MHZ
    times, powers = [], []
    for p in range(phases):
        share = shares[p % len(shares)]
        # sizes 3, 6, 12 ms in turn: the top-level time jumps 2x at every phase change
        size_ms = 3.0 * 2.0 ** (p % 3) * rng.uniform(1.0, 1.1)
        curve = share * ratio + 1.0 - share
        jitter = rng.lognormal(0.0, noise, (units, LEVELS_MHZ.size))
        times.append(size_ms * curve * jitter)
        powers.append((20.0 + 100.0 * share * LEVELS_MHZ / LEVELS_MHZ[-1]) * jitter)
    return SweepTable(LEVELS_MHZ.copy(), np.concatenate(times), np.concatenate(powers),
                      meta={"idle_power_w": "10"}, path=f"families-{seed}")


def test_fit_prior_recovers_known_scaling_families() -> None:
    prior = fit_prior([family_sweep(SHARES, phases=12), family_sweep(SHARES, 12, seed=1)],
                      clusters=3)
    assert [c.members for c in prior.clusters] == [8, 8, 8]
    ratio = LEVELS_MHZ[-1] / LEVELS_MHZ
    for cluster, share in zip(prior.clusters, SHARES, strict=True):  # sorted by a0
        assert np.allclose(cluster.time_curve, share * ratio + 1.0 - share, rtol=0.02)
    a0 = [c.a0 for c in prior.clusters]
    assert a0 == sorted(a0) and a0[0] < 0.4 < a0[1] < 0.8 < a0[2]


def test_prior_file_round_trips(tmp_path: Path) -> None:
    prior = fit_prior([family_sweep(SHARES)], clusters=3)
    path = tmp_path / "prior.json"
    write_prior(path, prior)
    again = read_prior(path)
    assert prior_to_json(again) == prior_to_json(prior)


@pytest.mark.parametrize(("edit", "message"), [
    (lambda text: text[: len(text) // 2], "not JSON"),
    (lambda text: text.replace('"version": 1', '"version": 7'), "version 7 unsupported"),
    (lambda text: text.replace('"a0"', '"b0"'), "cluster 0: missing field 'a0'"),
    (lambda text: text.replace('"time_noise": ', '"time_noise": -'), "must be positive"),
])
def test_corrupt_prior_names_the_file_and_the_fault(tmp_path: Path, edit, message: str) -> None:
    path = tmp_path / "prior.json"
    write_prior(path, fit_prior([family_sweep(SHARES)], clusters=3))
    path.write_text(edit(path.read_text()))
    with pytest.raises(PriorFormatError, match=message) as caught:
        read_prior(path)
    assert str(path) in str(caught.value)


def test_prior_cuts_early_violations_on_known_clusters_without_slowing_convergence() -> None:
    # clean workloads converge in 2 ticks (the model is ready after 2 updates) with or without
    # a prior; what the prior changes is the first decisions, made before noisy samples agree
    train = family_sweep(SHARES, phases=12, noise=0.03)
    test = family_sweep(SHARES, phases=6, units=60, seed=7, noise=0.03)
    gain = prior_gain([train], [test], Target(max_slowdown=0.1), clusters=3)
    without, with_prior = gain["without_prior"], gain["with_prior"]
    assert with_prior["phases"] == without["phases"] == 6
    assert with_prior["ticks_mean"] <= without["ticks_mean"]
    assert with_prior["early_violation_rate"] < without["early_violation_rate"]


def _govd(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "govd", *args], capture_output=True, text=True,
                          env=env, timeout=120)


def test_fit_prior_command_writes_the_prior_and_measures_on_test_tables(tmp_path: Path) -> None:
    train, test = tmp_path / "train.csv", tmp_path / "test.csv"
    write_sweep(train, family_sweep(SHARES, phases=9))
    write_sweep(test, family_sweep(SHARES, phases=3, seed=3))
    out = _govd("fit-prior", str(train), "-o", str(tmp_path / "p.json"), "--clusters", "3",
                "--measure", str(test), "--max-slowdown", "0.1")
    assert out.returncode == 0, out.stderr
    assert len(read_prior(tmp_path / "p.json").clusters) == 3
    report = json.loads(out.stdout)
    assert report["with_prior"]["phases"] == report["without_prior"]["phases"] == 3


def test_fit_prior_command_rejects_a_missing_table(tmp_path: Path) -> None:
    out = _govd("fit-prior", str(tmp_path / "none.csv"), "-o", str(tmp_path / "p.json"))
    assert out.returncode == 2 and "none.csv" in out.stderr
    assert not (tmp_path / "p.json").exists()
