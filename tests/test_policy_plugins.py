"""A third party's policy, pip-installed, is found by name; it cannot take a built-in's name."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from govd.policy.registry import UnknownPolicyError, available, make_policy

REPO_ROOT = Path(__file__).resolve().parents[1]

PYPROJECT = """\
[build-system]
requires = []
build-backend = "wheel_backend"
backend-path = ["."]

[project]
name = "govd-halfway"
version = "0.1"

[project.entry-points."govd.policies"]
halfway = "govd_halfway:Halfway"
performance = "govd_halfway:Impostor"
"""

POLICY = '''\
"""Half-way between the bounds: a third party's policy."""


class Halfway:
    name = "halfway"
    uses_model = False

    def decide(self, view):
        return (view.lo + view.hi) // 2

    def reset(self):
        pass


class Impostor(Halfway):
    name = "performance"
'''

# The venv's setuptools cannot build wheels without the `wheel` package and the test must not
# reach the network, so the distribution carries its own PEP 517 backend: it packs the module
# and the [project] table's entry points into a wheel, which pip then installs as any other.
BACKEND = '''\
import base64, hashlib, tomllib, zipfile
from pathlib import Path


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    project = tomllib.loads(Path("pyproject.toml").read_text())["project"]
    stem = f"{project['name'].replace('-', '_')}-{project['version']}"
    info = f"{stem}.dist-info"
    entry_points = "".join(
        f"[{group}]\\n" + "".join(f"{k} = {v}\\n" for k, v in eps.items())
        for group, eps in project["entry-points"].items()
    )
    files = {
        "govd_halfway.py": Path("govd_halfway.py").read_text(),
        f"{info}/METADATA": f"Metadata-Version: 2.1\\nName: {project['name']}\\n"
                            f"Version: {project['version']}\\n",
        f"{info}/WHEEL": "Wheel-Version: 1.0\\nGenerator: wheel_backend\\n"
                         "Root-Is-Purelib: true\\nTag: py3-none-any\\n",
        f"{info}/entry_points.txt": entry_points,
    }
    name = f"{stem}-py3-none-any.whl"
    record = []
    with zipfile.ZipFile(Path(wheel_directory) / name, "w") as wheel:
        for path, text in files.items():
            data = text.encode()
            digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=")
            record.append(f"{path},sha256={digest.decode()},{len(data)}")
            wheel.writestr(path, data)
        wheel.writestr(f"{info}/RECORD", "\\n".join([*record, f"{info}/RECORD,,"]) + "\\n")
    return name
'''

PROBE = """\
import json, numpy as np
from importlib.metadata import entry_points
from govd.model.base import Predictions
from govd.policy.base import Outlook, Policy
from govd.policy.registry import UnknownPolicyError, available, make_policy
from govd.target import Target

levels = np.array([300.0, 600.0, 900.0, 1200.0, 1500.0])
nan = np.full(5, np.nan)
predicted = Predictions(time_ms=nan, power_w=nan, energy_mj=nan, time_sd_now=nan,
                        time_sd_top=nan, time_noise=0.0, ready=False,
                        work_ticks=0, sensitivity_ms_per_mhz=float("nan"),
                        fitted_time_ms=float("nan"))
view = Outlook(levels_mhz=levels, lo=1, hi=4, current=0, predictions=predicted,
               time_error=float("nan"), busy=0.5, interval_s=0.05, target=Target(fps=60), tick=0)
halfway = make_policy("halfway")
try:
    make_policy("no-such-policy")
    unknown = ""
except UnknownPolicyError as e:
    unknown = str(e)
print(json.dumps({
    "available": available(),
    "is_policy": isinstance(halfway, Policy),
    "halfway_decides": halfway.decide(view),
    "performance_class": type(make_policy("performance")).__module__,
    "performance_decides": make_policy("performance").decide(view),
    "unknown": unknown,
    "performance_entry_points": [
        ep.value for ep in entry_points(group="govd.policies") if ep.name == "performance"
    ],
}))
"""


@pytest.fixture(scope="module")
def probe(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    """Build and pip-install the plugin into a private target dir, then ask a fresh govd."""
    src = tmp_path_factory.mktemp("govd-halfway")
    (src / "pyproject.toml").write_text(PYPROJECT)
    (src / "govd_halfway.py").write_text(POLICY)
    (src / "wheel_backend.py").write_text(BACKEND)
    target = tmp_path_factory.mktemp("site")
    env = {**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1", "PIP_NO_INPUT": "1"}
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-index",
         "--no-build-isolation", "--no-cache-dir", "--target", str(target), str(src)],
        check=True, env=env, capture_output=True, timeout=120,
    )
    env["PYTHONPATH"] = f"{target}{os.pathsep}{REPO_ROOT}"
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(PROBE)], check=True, env=env,
                          capture_output=True, text=True, timeout=60, cwd=target)
    result: dict[str, object] = json.loads(done.stdout)
    return result


def test_installed_plugin_is_listed_with_the_builtins(probe: dict[str, object]) -> None:
    names = probe["available"]
    assert isinstance(names, list)
    assert "halfway" in names and "ondemand" in names
    assert names == sorted(set(names))


def test_installed_plugin_is_built_by_name_and_decides(probe: dict[str, object]) -> None:
    assert probe["is_policy"] is True
    assert probe["halfway_decides"] == 2  # half-way between bounds 1 and 4


def test_plugin_cannot_shadow_a_builtin_name(probe: dict[str, object]) -> None:
    impostors = probe["performance_entry_points"]
    assert isinstance(impostors, list) and "govd_halfway:Impostor" in impostors
    assert probe["performance_class"] == "govd.policy.static"
    assert probe["performance_decides"] == 4


def test_unknown_name_lists_what_is_available_plugins_included(probe: dict[str, object]) -> None:
    message = probe["unknown"]
    assert isinstance(message, str)
    assert "'no-such-policy'" in message and "halfway" in message and "ondemand" in message


def test_unknown_name_lists_the_builtins() -> None:
    with pytest.raises(UnknownPolicyError) as caught:
        make_policy("ondemandd")
    message = str(caught.value)
    assert "unknown policy 'ondemandd'" in message
    for name in ("ondemand", "energy", "oracle", "performance", "powersave", "fixed"):
        assert name in available() and name in message
