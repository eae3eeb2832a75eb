"""`govd run` imports no offline module: the research tools (`govd.research`), the evaluator
(`govd.eval`), the kernel compiler (`govd.kernels.build`, `drive`), the simulator's fitting and
the packages only they use stay out of the service's memory and start-up."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
OFFLINE = ("govd.research", "govd.eval", "govd.kernels.build", "govd.kernels.drive",
           "govd.sim.fit", "sklearn", "matplotlib")
"""Never in `govd run`'s import closure (numba, and scipy which numba's JIT brings, come only
where the kernels compiled ahead of time are missing or stale: tests/test_kernels_aot.py)."""


def offline(modules: list[str]) -> list[str]:
    return sorted(m for m in modules if m.startswith(OFFLINE))


def test_govd_run_starting_the_daemon_imports_no_offline_module(tmp_path: Path) -> None:
    """The real command line, up to the daemon's start (it stops there: no device)."""
    (tmp_path / "sys").mkdir()
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "govd", "run", "--sysfs-root",
         str(tmp_path / "sys"), "--state-file", str(tmp_path / "state.json")],
        env=env, capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert "no device to govern" in done.stderr, done.stderr[-2000:]
    imported = re.findall(r"^import time:.*\|\s*(\S+)$", done.stderr, flags=re.M)
    assert "govd.daemon.daemon" in imported and "govd.governor" in imported
    assert offline(imported) == []


def test_governors_of_every_form_built_and_stepped_import_no_offline_module() -> None:
    """What the daemon builds per device, in each form (``auto`` with both kinds of target
    puts both in force), stepped: the forms and their learners are live, nothing else is."""
    code = """
import sys
import govd.daemon.run, govd.daemon.daemon
from govd.conf.schema import Config
from govd.from_config import governor_from_config
from govd.governor import Sample
from govd.target import Target
for pairs in (None, [500.0, 900.0, 500.0, 900.0]):
    levels = [400.0, 800.0] if pairs is None else [400.0, 400.0, 800.0, 800.0]
    gov = governor_from_config(Config(), levels, pairs)
    for target in (Target(fps=60), Target(max_slowdown=0.1)):
        gov.target = target
        gov.step(Sample(freq_mhz=800.0, frame_time_ms=5.0, frame_count=1, mem_freq_mhz=900.0))
print("\\n".join(sorted(sys.modules)))
"""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                          text=True, timeout=300, check=True)
    modules = done.stdout.split()
    assert {"govd.model.online", "govd.model.scaling_model", "govd.model.two_domain"} \
        <= set(modules)
    assert offline(modules) == []
