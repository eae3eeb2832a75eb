"""One model interface: every form fills the whole `Predictions` record every tick, forms are
found by name, and ``auto`` follows the target in force tick by tick."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from govd.governor import Governor, Sample
from govd.model import forms
from govd.model import tick as k
from govd.model.base import Model, Predictions
from govd.model.online import OnlineModel
from govd.model.scaling_model import ScalingModel
from govd.model.settings import ModelSettings
from govd.policy.energy import EnergyPolicy
from govd.target import Target

REPO = Path(__file__).resolve().parents[1]

LEVELS = np.array([400.0, 500.0, 600.0, 700.0, 800.0, 900.0, 1000.0])
CORES = np.array([400.0, 400.0, 700.0, 700.0, 1000.0, 1000.0])
MEMS = np.array([500.0, 900.0, 500.0, 900.0, 500.0, 900.0])


def _work_ms(fc: float, fm: float, rng: np.random.Generator, noise: float = 0.02) -> float:
    """Work of which 60 % scales with the core clock, 20 % with the memory clock."""
    return 10.0 * (0.6 * 1000.0 / fc + 0.2 * 900.0 / fm + 0.2) * rng.lognormal(0.0, noise)


def _drive(model: Model, ticks: int, rng: np.random.Generator, two: bool = False,
           check: Callable[[int, Predictions], None] | None = None) -> None:
    """Random levels of `_work_ms`; ``check(tick, record)`` after each update (a record is
    valid until the next update)."""
    levels = CORES if two else LEVELS
    for tick in range(ticks):
        k = int(rng.integers(levels.size))
        fc, fm = float(levels[k]), float(MEMS[k]) if two else math.nan
        model.update(_work_ms(fc, fm if two else 900.0, rng), fc, np.zeros(0), 80.0, 1.0,
                     math.nan, math.nan, fm)
        if check is not None:
            check(tick, model.predictions())


@pytest.mark.parametrize("name", ["seed", "scaling"])
@pytest.mark.parametrize("algorithm", ["rls", "dcd"])
@pytest.mark.parametrize("two", [False, True], ids=["one-domain", "pairs"])
def test_every_form_fills_every_field_of_the_record_every_tick(name, algorithm, two) -> None:
    settings = ModelSettings(form=name, algorithm=algorithm)
    model = forms.form(name).build(CORES if two else LEVELS, MEMS if two else None, settings,
                                   math.nan)
    assert isinstance(model, Model) and model.form == name
    n = (CORES if two else LEVELS).size

    def check(tick: int, p: Predictions) -> None:
        if tick < 20:
            return
        assert p.ready
        for values in (p.time_ms, p.power_w, p.energy_mj, p.time_sd_now, p.time_sd_top):
            assert values.shape == (n,) and np.all(np.isfinite(values))
            assert not values.flags.writeable
        assert np.all(p.time_sd_now >= 0) and np.all(p.time_sd_top >= 0)
        assert 0.0 < p.time_noise < 0.2
        assert math.isfinite(p.sensitivity_ms_per_mhz) and math.isfinite(p.fitted_time_ms)
        assert p.work_ticks >= 0
        assert p.spread_from_pairs is forms.form(name).spread_from_pairs

    _drive(model, 200, np.random.default_rng(1), two, check)


def test_before_any_sample_the_record_says_not_ready_and_holds_nan() -> None:
    for name in ("seed", "scaling"):
        p = forms.form(name).build(LEVELS, None, ModelSettings(form=name), math.nan).predictions()
        assert not p.ready and np.all(np.isnan(p.time_ms))


def test_the_seed_forms_spread_is_nothing_known_before_it_learns_then_shrinks() -> None:
    """Eq. 10 from P0 = I/μ knows nothing of how time scales: the spread is then the whole
    physical span of each ratio (no scaling .. 1/f), not a huge number; it is 0 at the running
    level, and shrinks once the model has seen the work at several levels."""
    model = OnlineModel(LEVELS)
    model.update(10.0, 1000.0, power_w=80.0, busy=1.0)
    model.update(10.0, 1000.0, power_w=80.0, busy=1.0)
    span = np.abs(np.log(1000.0 / LEVELS))
    np.testing.assert_allclose(model.time_sd_now, span)
    assert model.time_sd_now[-1] == 0.0
    rng = np.random.default_rng(2)
    _drive(model, 300, rng)
    running = model.scal[k.F_NOW]  # the level the last tick ran at
    span = np.abs(np.log(running / LEVELS))
    assert np.all(model.time_sd_now <= 0.25 * span + 1e-12)


@pytest.mark.parametrize("two", [False, True], ids=["one-domain", "pairs"])
def test_the_seed_forms_derived_spread_is_honest_about_its_next_tick_errors(two) -> None:
    """The spread derived from the a-priori errors and the RLS covariance must describe the
    errors the model then makes: the error of each tick's prediction at the level that ran
    next, over sqrt(sd_now² + 2·noise²) (the ratio of two noisy units), has an RMS near 1."""
    model = (OnlineModel(LEVELS) if not two else
             forms.form("seed").build(CORES, MEMS, ModelSettings(form="seed"), math.nan))
    levels = CORES if two else LEVELS
    rng = np.random.default_rng(3)
    z = []
    p = None
    for tick in range(3000):
        k = int(rng.integers(levels.size))
        fc, fm = float(levels[k]), float(MEMS[k]) if two else math.nan
        t = _work_ms(fc, fm if two else 900.0, rng)
        if p is not None and tick > 100:
            spread = math.sqrt(p.time_sd_now[k] ** 2 + 2.0 * p.time_noise ** 2)
            z.append(math.log(t / p.time_ms[k]) / spread)
        model.update(t, fc, np.zeros(0), 80.0, 1.0, math.nan, math.nan, fm)
        p = model.predictions()
    rms = float(np.sqrt(np.mean(np.square(z))))
    assert 0.6 < rms < 1.6, rms


def test_scaling_form_counts_ticks_since_it_judged_the_work_changed() -> None:
    """`work_ticks` restarts at 0 on the tick whose counters say other work, and counts on
    while the work stays; the seed form, which does not judge, counts from its reset."""
    model = ScalingModel(LEVELS, ModelSettings(counters=("x",)))
    seed = OnlineModel(LEVELS, ModelSettings(counters=("x",)))
    rng = np.random.default_rng(4)
    counts, seeds = [], []
    for tick in range(60):
        x = 1.0 if tick < 30 else 8.0  # another kernel from tick 30 on
        f = float(LEVELS[int(rng.integers(LEVELS.size))])
        t = x * (0.6 * 1000.0 / f + 0.4) * rng.lognormal(0, 0.01)
        for m, out in ((model, counts), (seed, seeds)):
            m.update(t, f, np.array([x]), 80.0, 1.0)
            out.append(m.predictions().work_ticks)
    assert counts[30] == 0 and counts[29] > 20 and counts[59] == 29
    assert seeds == list(range(60))


def test_forms_are_found_by_name_and_an_unknown_one_is_refused_with_the_list() -> None:
    assert {"seed", "scaling"} <= set(forms.available())
    assert forms.form("seed").takes_prior and not forms.form("scaling").takes_prior
    with pytest.raises(ValueError, match="unknown model form 'quadratic'; available: auto, "):
        ModelSettings(form="quadratic")


@pytest.mark.parametrize(("frame_rate", "prior", "expected"), [
    (True, False, "seed"), (False, False, "scaling"), (False, True, "seed")])
def test_auto_resolves_from_the_kind_of_target_and_the_prior(frame_rate, prior, expected):
    assert forms.resolve("auto", frame_rate, prior) == expected
    assert forms.resolve("scaling", frame_rate, prior) == "scaling"


def test_auto_switches_forms_when_the_kind_of_target_changes_and_keeps_each_forms_state():
    """Per-application targets change each tick in the daemon: under ``auto`` the form in
    force follows the target in force, and a form switched away from resumes where it was
    (its model is neither rebuilt nor reset)."""
    gov = Governor(LEVELS, EnergyPolicy(), Target(fps=30.0))
    rng = np.random.default_rng(5)

    def ticks(count: int) -> None:
        for _ in range(count):
            f = float(LEVELS[int(rng.integers(LEVELS.size))])
            gov.step(Sample(freq_mhz=f, frame_time_ms=_work_ms(f, 900.0, rng), frame_count=2,
                            busy=1.0, power_w=80.0))

    ticks(30)
    seed_model = gov.model
    assert gov.form == "seed" and isinstance(seed_model, OnlineModel)
    assert seed_model.stats_dict()["ticks"] == 30
    gov.target = Target(max_slowdown=0.1)
    ticks(20)
    assert gov.form == "scaling" and isinstance(gov.model, ScalingModel)
    assert gov.model.stats_dict()["ticks"] == 20
    assert seed_model.stats_dict()["ticks"] == 30  # paused, not fed the other target's ticks
    gov.target = Target(fps=60.0)
    ticks(5)
    assert gov.model is seed_model and seed_model.stats_dict()["ticks"] == 35
    assert seed_model.stats_dict()["updates"] >= 33, "resumed, not relearning from scratch"


def test_a_fixed_form_stays_in_force_whatever_the_target() -> None:
    gov = Governor(LEVELS, EnergyPolicy(), Target(fps=30.0), ModelSettings(form="scaling"))
    gov.target = Target(max_slowdown=0.2)
    gov.step(Sample(freq_mhz=1000.0, frame_time_ms=5.0, frame_count=1))
    gov.target = Target(fps=60.0)
    gov.step(Sample(freq_mhz=1000.0, frame_time_ms=5.0, frame_count=1))
    assert gov.form == "scaling" and isinstance(gov.model, ScalingModel)


def test_a_prior_is_refused_for_a_form_that_takes_none() -> None:
    from govd.model.prior import Cluster, Prior

    prior = Prior(np.array([0.5, 1.0]), 1000.0, 0.02,
                  [Cluster(np.array([1.5, 1.0]), np.array([0.5, 1.0]), 0.8, 0.0, np.eye(2), 3)])
    with pytest.raises(ValueError, match="a prior seeds the seed form only"):
        Governor(LEVELS, EnergyPolicy(), Target(fps=30.0), ModelSettings(form="scaling"),
                 prior=prior)
    gov = Governor(LEVELS, EnergyPolicy(), Target(max_slowdown=0.1), prior=prior)
    assert gov.form == "seed", "auto keeps the form a prior seeds"


PLUGIN = '''\
"""A third party's model form: eq. 10 under another name."""
from govd.model.forms import Form
from govd.model.online import OnlineModel


class Damped(OnlineModel):
    form = "damped"


def build(levels_mhz, mem_levels_mhz, settings, idle_power_w):
    return Damped(levels_mhz, settings, idle_power_w)


DAMPED = Form("damped", build)
IMPOSTOR = Form("seed", build)
'''

PROBE = '''\
import json
from govd.conf.schema import Config
from govd.from_config import governor_from_config
from govd.governor import Sample
from govd.model import forms
gov = governor_from_config(Config.model_validate({"model": {"form": "damped"}}), [400.0, 800.0])
gov.step(Sample(freq_mhz=800.0, frame_time_ms=5.0, frame_count=1))
print(json.dumps({"available": forms.available(), "form": gov.form,
                  "model": type(gov.model).__name__, "seed": forms.form("seed").build.__module__}))
'''


def test_a_third_partys_form_registers_by_one_entry_point_and_cannot_shadow_a_builtin(
        tmp_path: Path) -> None:
    """A registration is one `Form` line in the form's module and one entry point in the
    ``govd.model_forms`` group; ``model.form`` then takes its name."""
    (tmp_path / "damped_form.py").write_text(PLUGIN)
    info = tmp_path / "damped_form-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: damped-form\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(
        "[govd.model_forms]\ndamped = damped_form:DAMPED\nseed = damped_form:IMPOSTOR\n")
    env = {**os.environ, "PYTHONPATH": f"{tmp_path}{os.pathsep}{REPO}"}
    done = subprocess.run([sys.executable, "-c", PROBE], env=env, capture_output=True,
                          text=True, timeout=300, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout)
    assert "damped" in seen["available"]
    assert (seen["form"], seen["model"]) == ("damped", "Damped")
    assert seen["seed"] == "govd.model.seed_form", "a built-in cannot be shadowed"
