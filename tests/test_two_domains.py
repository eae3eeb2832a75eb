"""Two clock domains: the model over (core, memory) pairs, the governor, the energy policy's
probes, and the two-domain summary on a synthetic table and on the GTX 980 grid."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from govd.eval.domains import at_max_memory_clock, two_domain_summary
from govd.formats.sweep import SweepTable, write_sweep
from govd.governor import Governor, Sample
from govd.model import pairs
from govd.model import tick as k
from govd.model.predict import sensitivity_ref
from govd.model.scaling_model import ScalingModel
from govd.model.settings import ModelSettings
from govd.model.two_domain import TwoDomainModel, level_rows
from govd.policy.base import Outlook
from govd.policy.energy import EnergyPolicy
from govd.policy.static import Performance
from govd.target import Target
from tests.policy_outlook import outlook, predictions

CORES = np.repeat([400.0, 600.0, 800.0, 1000.0], 3)
MEMS = np.tile([500.0, 750.0, 1000.0], 4)


def roofline_ms(core_ms: float, mem_ms: float) -> np.ndarray:
    """t = A/fc + B/fm at every pair, A and B given as the times at 1000 MHz."""
    return core_ms * 1000.0 / CORES + mem_ms * 1000.0 / MEMS


def synthetic_sweep(units: int = 300, seed: int = 0) -> SweepTable:
    """Phases of compute-bound and memory-bound work over the 4 × 3 grid, 0.5 % noise."""
    rng = np.random.default_rng(seed)
    kinds = [(4.0, 0.5), (0.5, 4.0), (2.0, 2.0)]
    phase = np.repeat(rng.integers(0, len(kinds), units // 50 + 1), 50)[:units]
    time_ms = np.stack([roofline_ms(*kinds[p]) for p in phase])
    time_ms *= rng.lognormal(0.0, 0.005, time_ms.shape)
    power_w = 10.0 + 60.0 * (CORES / 1000.0) ** 3 + 20.0 * MEMS / 1000.0
    return SweepTable(levels_mhz=CORES.copy(), mem_levels_mhz=MEMS.copy(), time_ms=time_ms,
                      power_w=np.tile(power_w, (units, 1)), meta={"idle_power_w": "8"})


def fresh_state(model: TwoDomainModel) -> tuple[np.ndarray, tuple[np.ndarray, ...]]:
    """A copy of the model's state buffer and its views."""
    state = model.state.copy()
    return state, k.unpack.py_func(state)


@pytest.mark.parametrize("algorithm", ["rls", "dcd"])
def test_pair_kernel_matches_its_numpy_reference(algorithm: str) -> None:
    model = TwoDomainModel(CORES, MEMS, ModelSettings(algorithm=algorithm, counters=("c",)))
    (state, fast), (_, ref) = fresh_state(model), fresh_state(model)
    rng = np.random.default_rng(1)
    for step in range(40):
        j = int(rng.integers(0, CORES.size))
        t = float(roofline_ms(2.0, 1.0)[j]) * (1.0 + 0.01 * rng.standard_normal())
        x = np.array([rng.uniform(0.0, 2.0)])
        t_in = math.nan if step == 7 else t  # a bad sample is skipped by both
        args = (t_in, CORES[j], MEMS[j], 50.0 + step, 0.8, 16.0)
        v, _, _, _, _, _, _, st, out, sc = fast
        flags = pairs.model_tick_pairs(state, x, *args)
        v2, P2, pw2, Pc2, lv, cfg, icfg, st2, out2, sc2 = ref
        flags_ref = pairs.model_tick_pairs_ref(v2, P2, pw2, Pc2, lv, cfg, icfg, st2, x, out2,
                                               sc2, *args)
        assert flags == flags_ref
        np.testing.assert_allclose(out, out2, rtol=1e-9, atol=1e-12)
        np.testing.assert_allclose(v[k.A], v2[k.A], rtol=1e-9, atol=1e-12)
        np.testing.assert_array_equal(st, st2)
        assert sc[k.SENS] == pytest.approx(sc2[k.SENS], rel=1e-9, abs=1e-15)


def test_model_learns_core_and_memory_scaling_and_predicts_every_pair() -> None:
    model = TwoDomainModel(CORES, MEMS)
    truth = roofline_ms(3.0, 1.0)
    rng = np.random.default_rng(2)
    for _ in range(60):
        j = int(rng.integers(0, CORES.size))
        model.update(float(truth[j]), CORES[j], mem_freq_mhz=MEMS[j])
    a0, b0 = model.coefficients[:2]
    assert a0 > b0 > 0  # this work is mostly core-bound
    ape = np.abs(model.time_ms - truth) / truth
    assert ape[j] < 1e-9  # the running pair's time is the one just measured
    assert ape.mean() < 0.08


def test_sensitivity_is_along_the_core_clock_at_the_running_memory_clock() -> None:
    model = TwoDomainModel(CORES, MEMS)
    model.update(5.0, 600.0, mem_freq_mhz=750.0)
    model.update(4.0, 800.0, mem_freq_mhz=750.0)
    line = np.flatnonzero(MEMS == 750.0)
    expected = sensitivity_ref(4.0, 800.0, CORES[line], np.asarray(model.time_ms)[line])
    assert model.sensitivity_ms_per_mhz == pytest.approx(expected)


def test_pairs_must_come_sorted_by_core_then_memory() -> None:
    with pytest.raises(ValueError, match="sorted by core then memory"):
        TwoDomainModel(CORES[::-1], MEMS[::-1])
    with pytest.raises(ValueError, match="one memory clock per core clock"):
        TwoDomainModel(CORES, MEMS[:3])


@pytest.mark.parametrize("cores,mems,message", [
    (CORES[::-1], MEMS[::-1], "sorted by core then memory"),
    (CORES, MEMS[:3], "one memory clock per core clock"),
    (CORES * np.nan, MEMS, "positive and finite"),
])
def test_both_model_forms_refuse_the_same_bad_pairs(cores, mems, message) -> None:
    """One check (`level_rows`) serves the seed form and the scaling form."""
    with pytest.raises(ValueError, match=message):
        TwoDomainModel(cores, mems)
    with pytest.raises(ValueError, match=message):
        ScalingModel(cores, mem_levels_mhz=mems)


def test_both_model_forms_derive_g_from_a_published_voltage_table_alike() -> None:
    volts = tuple(0.6 + 0.1 * i for i in range(np.unique(CORES).size))
    settings = ModelSettings(volts=volts)
    seed = TwoDomainModel(CORES, MEMS, settings)
    scaling = ScalingModel(CORES, settings, mem_levels_mhz=MEMS)
    np.testing.assert_array_equal(scaling.lv, level_rows(CORES, MEMS, settings))
    np.testing.assert_array_equal(scaling.lv, np.asarray(seed.lv)[:4])


def test_decision_carries_the_memory_clock_of_the_chosen_pair() -> None:
    gov = Governor(CORES, Performance(), Target(max_slowdown=0.1), mem_levels_mhz=MEMS)
    decision = gov.step(Sample(freq_mhz=600.0, frame_time_ms=3.0, frame_count=1,
                               mem_freq_mhz=500.0))
    assert decision.outlook.current == 3  # (600, 500)
    assert (decision.freq_mhz, decision.mem_freq_mhz) == (1000.0, 1000.0)
    one = Governor([400.0, 600.0], Performance(), Target(max_slowdown=0.1))
    assert one.step(Sample(freq_mhz=400.0, frame_time_ms=3.0)).mem_freq_mhz is None


def outlook_at(level: int, tick: int) -> Outlook:
    time_ms = np.ones(CORES.size)
    return outlook(CORES, current=level, busy=1.0, target=Target(max_slowdown=0.1), tick=tick,
                   mem_levels_mhz=MEMS,
                   predicted=predictions(CORES.size, time_ms=time_ms, power_w=time_ms,
                                         energy_mj=CORES * MEMS / 1e6, ready=True))


def test_energy_probes_step_along_core_then_memory_and_up_from_the_bottom() -> None:
    policy = EnergyPolicy(probe_ticks=2)
    # equal times: the cheapest pair (400, 500) wins, at the bottom of both axes
    picks = [policy.decide(outlook_at(0, t)) for t in range(9)]
    probes = [p for p in picks if p != 0]
    assert probes[:2] == [3, 1]  # core up to (600, 500), then memory up to (400, 750)


def test_two_domain_summary_on_a_synthetic_table(tmp_path: Path) -> None:
    path = tmp_path / "two.csv"
    write_sweep(path, synthetic_sweep())
    summary = two_domain_summary(path)
    assert summary["pairs"] == 12
    for target in ("slowdown", "fps"):
        part = summary[target]
        for run in ("two_domain", "core_only_mem_max", "core_only_oracle"):
            assert part[run]["energy_vs_oracle"] >= 1.0 - 1e-9
        assert 0.0 <= part["two_domain"]["violation_rate"] <= 1.0
        assert part["all_pairs_time_mape"] < 0.5
    # memory-bound phases gain from a lower memory clock that core-only cannot reach
    assert summary["slowdown"]["core_only_oracle"]["energy_vs_oracle"] > 1.01


def test_core_only_table_keeps_the_highest_memory_clock() -> None:
    table = at_max_memory_clock(synthetic_sweep(units=10))
    assert table.mem_levels_mhz is None
    np.testing.assert_array_equal(table.levels_mhz, [400.0, 600.0, 800.0, 1000.0])
    with pytest.raises(ValueError, match="one clock domain"):
        at_max_memory_clock(table)


def test_two_domain_summary_on_the_gtx980_grid(tmp_path: Path) -> None:
    from govd.sim.nvdvfs import default_data_dir, nvdvfs_sweep
    data = default_data_dir()
    if not (data / "gtx980-dvfs-performance.csv").exists():
        pytest.skip(f"no nv-dvfs data at {data}")
    path = tmp_path / "gtx980.csv"
    write_sweep(path, nvdvfs_sweep("gtx980", data, 0.1, seed=0))
    summary = two_domain_summary(path)
    assert summary["pairs"] == 36
    slowdown = summary["slowdown"]
    assert slowdown["two_domain"]["energy_vs_oracle"] < 1.3
    assert slowdown["two_domain"]["time_median_ape"] < 0.05
