"""bench/nvml_loop.py's governed runs under a named policy: a research design is offered to the
daemon as a third party's policy would be, through an entry point, and its configuration loads."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "bench"))

import nvml_loop  # noqa: E402

CHILD = """
import sys
from govd.conf.load import load_config
from govd.policy.registry import policy_class
config = load_config(sys.argv[1], allow_insecure=True)
print(config.policy.name, policy_class(config.policy.name).__name__)
"""


def test_a_research_policy_is_offered_to_the_daemon_through_an_entry_point(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(nvml_loop, "_EXTRA_PATH", [])
    monkeypatch.delenv("PYTHONPATH", raising=False)
    nvml_loop._offer_research(tmp_path, ["energy", "energy-model"])
    config = nvml_loop._config(tmp_path, ["sm_activity"], policy_name="energy-model")
    assert config.name == "govd-energy-model.yaml"
    assert nvml_loop._kind("energy") == "govd" and nvml_loop._kind("x") == "govd-x"
    done = subprocess.run([sys.executable, "-c", CHILD, str(config)], env=nvml_loop._env(),
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["energy-model", "EnergyPolicy"]
    # without the entry point the daemon does not know the name: nothing ships it
    bare = {**nvml_loop._env(), "PYTHONPATH": str(REPO)}
    done = subprocess.run([sys.executable, "-c", CHILD, str(config)], env=bare,
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode != 0 and "energy-model" in done.stderr


def test_only_research_designs_get_an_entry_point(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(nvml_loop, "_EXTRA_PATH", [])
    nvml_loop._offer_research(tmp_path, ["energy", "oracle"])
    assert nvml_loop._EXTRA_PATH == [] and not (tmp_path / "entry-points").exists()


def test_a_python_without_govds_dependencies_is_refused_before_the_gpu_is_touched(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    real = nvml_loop.importlib.util.find_spec
    monkeypatch.setattr(nvml_loop.importlib.util, "find_spec",
                        lambda name, *a: None if name == "pydantic" else real(name, *a))
    assert nvml_loop._missing() == ["pydantic"]
    monkeypatch.setattr(nvml_loop, "discover_nvml", lambda: pytest.fail("touched the GPU"))
    monkeypatch.setattr(sys, "argv", ["nvml_loop.py", "--dry"])
    assert nvml_loop.main() == 1
    assert "govd needs pydantic in this Python" in capsys.readouterr().err
