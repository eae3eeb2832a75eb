"""One way to build a governor from a configuration (`govd.from_config`): the tick period it is
given, the dwell inside it (replayed by `govd eval` too), and no knob that silently does
nothing under the model forms in force."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from govd.conf.schema import Config
from govd.eval.replay import replay
from govd.formats.sweep import SweepTable
from govd.from_config import governor_from_config, inert_knobs
from govd.governor import Sample
from govd.model.stress import JUMP
from govd.target import Target
from tests.daemon.test_device_runner import Scripted

LEVELS = [200.0, 300.0, 400.0, 600.0]


def test_the_fallback_grace_is_counted_in_the_configured_period() -> None:
    """``fallback_grace_s: 1`` at ``period_ms: 200`` is 5 ticks (1 s); the daemon's governor
    used to count it in 50 ms ticks whatever the period, 4 s at 200 ms."""
    config = Config.model_validate({"period_ms": 200, "policy": {"fallback_grace_s": 1.0}})
    gov = governor_from_config(config, LEVELS, policy=Scripted([0]))
    assert gov.grace_ticks == 5
    conditions = iter([JUMP])
    gov.stress.observe = lambda *args: next(conditions, None)  # type: ignore[method-assign]
    decisions = [gov.step(Sample(freq_mhz=200.0, frame_time_ms=5.0, frame_count=1,
                                 interval_s=0.2)) for _ in range(8)]
    assert [d.fallback for d in decisions] == [JUMP] * 5 + [None] * 3
    assert [d.level for d in decisions] == [3] * 5 + [0] * 3, "performance, then the policy"


def test_the_daemons_governor_is_built_with_the_configured_period(tmp_path: Path) -> None:
    from govd.daemon.governed import build_governor
    from govd.device.devfreq import DevfreqDevice
    from tests.sysfs_fixtures import mali_panfrost

    path, _ = mali_panfrost(tmp_path / "sys", governor="userspace")
    config = Config.model_validate({"period_ms": 200, "min_dwell_ms": 600,
                                    "policy": {"fallback_grace_s": 1.0}})
    governor, _ = build_governor(config, DevfreqDevice(path))
    assert (governor.period_s, governor.grace_ticks, governor.dwell_ticks) == (0.2, 5, 3)


def test_the_dwell_holds_a_new_level_for_its_ticks_inside_the_governor() -> None:
    config = Config.model_validate({"period_ms": 50, "min_dwell_ms": 100})
    gov = governor_from_config(config, LEVELS, policy=Scripted([1, 3, 3, 0, 0, 2]))
    decisions = [gov.step(Sample(freq_mhz=600.0, frame_time_ms=5.0, frame_count=1))
                 for _ in range(6)]
    assert [d.level for d in decisions] == [1, 1, 3, 3, 0, 0]
    assert [d.held for d in decisions] == [False, True, False, True, False, True]


def test_govd_eval_replays_the_configured_dwell() -> None:
    """What the daemon's governor holds back, the evaluator's holds back too: the same
    governor, built from the same configuration."""
    rng = np.random.default_rng(0)
    levels = np.array(LEVELS)
    time_ms = np.outer(rng.uniform(5, 10, 40), 600.0 / levels)
    table = SweepTable(levels, time_ms, time_ms * 0 + 50.0)
    script = [0, 3, 1, 2] * 10
    free = replay(table, Scripted(script), Target(max_slowdown=0.1))
    held = replay(table, Scripted(script), Target(max_slowdown=0.1),
                  config=Config.model_validate({"min_dwell_ms": 150}))
    assert list(free.levels[1:9]) == [0, 3, 1, 2, 0, 3, 1, 2]
    # a new level is kept 3 ticks (150 ms of 50 ms ticks) before the next change
    changes = np.flatnonzero(np.diff(held.levels))
    assert changes.size > 3 and np.all(np.diff(changes) >= 3)


# --- knobs that do nothing under the forms in force ---------------------------------------

SLOWDOWN: dict[str, Any] = {"target": {"max_slowdown": 0.1}}
FRAME_RATE: dict[str, Any] = {"target": {"fps": 60}}


def energy(**params: Any) -> dict[str, Any]:
    return {"policy": {"name": "energy", "params": params}}


@pytest.mark.parametrize(("knob", "inert", "acts"), [
    # the issue's: a margin under the scaling form, the default for slowdown targets
    ("margin", {**SLOWDOWN, **energy(margin=0.3)}, {**FRAME_RATE, **energy(margin=0.3)}),
    ("margin", {**FRAME_RATE, "model": {"form": "scaling"}, **energy(margin=0.3)},
     {**SLOWDOWN, "model": {"form": "seed"}, **energy(margin=0.3)}),
    ("error_weight", {**SLOWDOWN, "model": {"form": "seed"}, **energy(error_weight=1.0)},
     {**FRAME_RATE, **energy(error_weight=1.0)}),
    ("confidence", {**FRAME_RATE, **energy(confidence=3.0)},
     {**SLOWDOWN, **energy(confidence=3.0)}),
    ("price_misses", {**FRAME_RATE, "model": {"form": "scaling"}, **energy(price_misses=True)},
     {**SLOWDOWN, **energy(price_misses=True)}),
    ("miss_budget", {**SLOWDOWN, "model": {"form": "seed"}, **energy(miss_budget=0.02)},
     {**SLOWDOWN, **energy(miss_budget=0.02)}),
    ("margin_rate", {**SLOWDOWN, "model": {"form": "seed"}, **energy(margin_rate=0.1)},
     {**SLOWDOWN, **energy(margin_rate=0.1)}),
    ("mu", {**SLOWDOWN, "model": {"mu": 1e-3}}, {**FRAME_RATE, "model": {"mu": 1e-3}}),
    ("a_init", {**SLOWDOWN, "model": {"a_init": 0.5}}, {**FRAME_RATE, "model": {"a_init": 0.5}}),
    ("dcd.Nu", {"model": {"dcd": {"Nu": 2}}}, {"model": {"algorithm": "dcd", "dcd": {"Nu": 2}}}),
    ("dcd.H", {"model": {"dcd": {"H": 8.0}}}, {"model": {"algorithm": "dcd", "dcd": {"H": 8.0}}}),
    ("dcd.Mb", {"model": {"dcd": {"Mb": 8}}}, {"model": {"algorithm": "dcd", "dcd": {"Mb": 8}}}),
])
def test_a_knob_that_acts_under_no_form_in_force_is_refused(knob, inert, acts) -> None:
    refused = inert_knobs(Config.model_validate(inert))
    assert len(refused) == 1 and f"{knob}:" in refused[0] and "changes nothing" in refused[0]
    assert inert_knobs(Config.model_validate(acts)) == []


def test_a_knob_is_accepted_where_one_application_puts_a_form_it_acts_under_in_force():
    """``auto`` with a frame-rate target and one slowdown application runs both forms: a
    margin acts for the first."""
    config = Config.model_validate({**FRAME_RATE, "apps": {"blender": {"max_slowdown": 0.2}},
                                    **energy(margin=0.3, confidence=3.0)})
    assert inert_knobs(config) == []


def test_a_knob_left_at_its_default_is_no_problem() -> None:
    """The shipped file lists every key at its default: nothing there may be refused."""
    config = Config.model_validate({**SLOWDOWN, "model": {"mu": 1e-14, "a_init": 1.0},
                                    **energy(margin=0.05)})
    assert inert_knobs(config) == []


def test_the_energy_policys_memory_is_refused_where_no_slowdown_limit_can_use_it() -> None:
    """``memory`` acts under a slowdown limit with the scaling form only; its default, set
    out, is never refused (the defaults are read through the policy's base class too)."""
    assert inert_knobs(Config.model_validate({**SLOWDOWN, **energy(memory=False)})) == []
    refused = inert_knobs(Config.model_validate({**FRAME_RATE, **energy(memory=False)}))
    assert [p.split(":")[0] for p in refused] == ["policy.params.memory"]
    assert inert_knobs(Config.model_validate({**FRAME_RATE, **energy(memory=True)})) == []


def test_a_device_entrys_policy_is_checked_too() -> None:
    config = Config.model_validate({**SLOWDOWN, "devices": [
        {"name": "card0", "policy": {"name": "energy", "params": {"margin": 0.2}}}]})
    assert [p.split(":")[0] for p in inert_knobs(config)] == ["devices[0].policy.params.margin"]


def test_govd_eval_refuses_a_margin_under_a_slowdown_target(tmp_path: Path) -> None:
    """The issue's measurement: ``--margin`` 0.0 and 0.3 gave the same joules under the
    default form for slowdown targets. Now it is refused, and acts under the seed form."""
    import subprocess
    import sys

    from govd.formats.sweep import write_sweep

    levels = np.array(LEVELS)
    time_ms = np.outer(np.linspace(5, 10, 30), 600.0 / levels)
    sweep = tmp_path / "s.csv"
    write_sweep(sweep, SweepTable(levels, time_ms, time_ms * 0 + 50.0))
    repo = Path(__file__).resolve().parents[1]

    def govd_eval(*extra: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "govd", "eval", "--sweep", str(sweep),
                               "--policy", "energy", "--max-slowdown", "0.1", *extra],
                              capture_output=True, text=True, cwd=repo, timeout=300)

    refused = govd_eval("--margin", "0.3")
    assert refused.returncode == 2
    assert "policy.params.margin: 0.3 changes nothing" in refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1
    assert govd_eval("--margin", "0.3", "--form", "seed").returncode == 0
    # a configuration's knobs are checked the same way, and its dwell replayed
    config = tmp_path / "govd.yaml"
    config.write_text("min_dwell_ms: 150\npolicy: {name: energy, params: {confidence: 3.0}}\n")
    assert govd_eval("--config", str(config), "--insecure-config").returncode == 0
    config.write_text("policy: {name: energy, params: {margin: 0.3}}\n")
    refused = govd_eval("--config", str(config), "--insecure-config")
    assert refused.returncode == 2 and "margin: 0.3 changes nothing" in refused.stderr


def test_every_caller_builds_the_same_governor_from_one_configuration() -> None:
    """The daemon, the evaluator, the trace replay and the demo go through
    `governor_from_config`: nothing of the configuration is read anywhere else."""
    repo = Path(__file__).resolve().parents[1]
    for module in ("govd/daemon/governed.py", "govd/eval/replay.py",
                   "govd/eval/trace_replay.py", "govd/daemon/demo.py"):
        text = (repo / module).read_text()
        assert "governor_from_config(" in text, module
        assert "Governor(" not in text.replace("governor_from_config(", ""), module
    assert not math.isnan(governor_from_config(Config(), LEVELS).period_s)


@pytest.mark.parametrize("mems", [None, [500.0, 900.0, 500.0, 900.0]])
def test_warming_up_steps_a_copy_under_every_target_and_leaves_the_governor_as_it_was(
        mems: list[float] | None) -> None:
    """The daemon warms its governors' kernels before READY=1 (a first JIT compile under load
    outlasted WatchdogSec): the copy steps under each target, the governor itself stays at its
    first tick with the target it had."""
    from govd.from_config import warm_up

    cores = [400.0, 400.0, 800.0, 800.0] if mems else [400.0, 600.0, 800.0]
    gov = governor_from_config(Config(), cores, mems, target=Target(fps=60.0))
    warm_up(gov, [Target(fps=60.0), Target(max_slowdown=0.1)])
    assert gov.ticks == 0 and gov.target == Target(fps=60.0)
    assert not gov.model.predictions().ready


def test_warming_up_feeds_the_configured_counters_power_and_busy(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Each of a real tick's inputs takes kernels of its own: on an H200 under numba's JIT, a
    warm-up without the configured counters left an 11 s compile to the first real tick, which
    read no frame socket meanwhile (a tenth of a training job's step reports were refused)."""
    from govd.conf.schema import ModelConfig
    from govd.from_config import warm_up
    from govd.governor import Governor

    seen: list[Any] = []
    real_step = Governor.step

    def step(self: Governor, sample: Any) -> Any:
        seen.append(sample)
        return real_step(self, sample)

    monkeypatch.setattr(Governor, "step", step)
    config = Config(model=ModelConfig(counters=["sm_activity", "dram_bw_util"]))
    warm_up(governor_from_config(config, [400.0, 600.0, 800.0]),
            [Target(fps=60.0), Target(max_slowdown=0.1)])
    assert len(seen) == 2
    for sample in seen:
        assert sample.counters.shape == (2,) and np.isfinite(sample.counters).all()
        assert math.isfinite(sample.power_w) and math.isfinite(sample.busy)
