"""`make install` / `make uninstall`, staged under DESTDIR (no system state is touched)."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
from pathlib import Path

import pytest

from tests.installing import EDITED_CONFIG, REPO, StagedInstall, make

pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")


def test_install_lays_out_service_and_uninstall_reverses_it(
        staged_install: StagedInstall, tmp_path: Path) -> None:
    # `make install` ran over an edited configuration (the stage tests/pid1 boots, too); the
    # uninstall below runs on a copy
    done = staged_install.done
    assert done.returncode == 0, done.stderr
    stage = staged_install.copy(tmp_path / "stage")
    conf = stage / "etc/govd/govd.yaml"
    for rel in ("etc/systemd/system/govd.service", "etc/systemd/system/govd.socket",
                "usr/lib/sysusers.d/govd.conf", "usr/local/share/doc/govd/README.md"):
        path = stage / rel
        assert path.is_file(), rel
        assert stat.S_IMODE(path.stat().st_mode) == 0o644, rel
    assert os.readlink(stage / "usr/local/bin/govd") == "/opt/govd/bin/govd"
    version = subprocess.run([str(stage / "opt/govd/bin/python"), "-m", "govd", "--version"],
                             capture_output=True, text=True, timeout=120)
    assert version.stdout.startswith("govd ")
    # offline fitting's scipy stays out of the service (numba imports it whenever it is there)
    scipy = subprocess.run([str(stage / "opt/govd/bin/python"), "-c", "import scipy"],
                           capture_output=True, text=True, timeout=120)
    assert scipy.returncode != 0 and "No module named 'scipy'" in scipy.stderr
    # the per-tick kernels are there for the installed sources (compiled at install, or taken
    # from this checkout's build of the same sources), and the build's numba cache went with it
    alone = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "GOVD_KERNELS")}
    kernels = subprocess.run([str(stage / "opt/govd/bin/python"), "-c",
                              "from govd.kernels import loader; print(loader.MODE_REASON)"],
                             capture_output=True, text=True, timeout=120, env=alone, cwd=tmp_path)
    assert kernels.stdout.startswith("compiled ahead of time"), kernels.stdout + kernels.stderr
    assert not list((stage / "opt/govd").rglob("*.nbi"))
    # ... and its bytecode beside its sources, though `make test` caches the tests' bytecode
    # elsewhere (PYTHONPYCACHEPREFIX): the service cannot write /opt, and would compile govd
    # at every start
    site = next((stage / "opt/govd/lib").glob("python3*/site-packages"))
    assert list((site / "govd/model/__pycache__").glob("*.pyc"))
    # The staged venv runs once in place at /opt/govd: no script points back into the stage.
    assert (stage / "opt/govd/bin/govd").read_text().startswith("#!/opt/govd/bin/python\n")
    assert not subprocess.run(["grep", "-rlI", str(staged_install.folder),
                               str(stage / "opt/govd/bin")],
                              capture_output=True, text=True).stdout
    assert conf.read_text() == EDITED_CONFIG  # never overwritten

    done = make("uninstall", stage)
    assert done.returncode == 0, done.stderr
    assert "kept" in done.stdout
    assert conf.exists()  # an edited configuration stays
    leftovers = sorted(str(p.relative_to(stage)) for p in stage.rglob("*") if p.is_file())
    assert leftovers == ["etc/govd/govd.yaml"]


def test_uninstall_removes_an_unedited_configuration(tmp_path: Path) -> None:
    stage = tmp_path / "stage"
    conf = stage / "etc/govd/govd.yaml"
    conf.parent.mkdir(parents=True)
    shutil.copy(REPO / "config/govd.yaml", conf)
    (stage / "opt/govd").mkdir(parents=True)  # as if installed
    done = make("uninstall", stage)
    assert done.returncode == 0, done.stderr
    assert not conf.exists() and not conf.parent.exists()


def test_install_refuses_a_python_the_service_cannot_see(tmp_path: Path) -> None:
    home_python = tmp_path / "root-python"
    home_python.write_text('#!/bin/sh\necho /root/.pyenv/versions/3.11.7\n')
    home_python.chmod(0o755)
    done = make("install", tmp_path / "stage", f"PYTHON={home_python}")
    assert done.returncode != 0
    assert "ProtectHome=yes" in done.stderr and "PYTHON=/usr/bin/python3" in done.stderr
    assert not (tmp_path / "stage/opt").exists()
