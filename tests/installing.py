"""Running the Makefile's install targets from tests (tests/test_install.py, tests/pid1)."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def install_python() -> str | None:
    """The interpreter `make install` builds /opt/govd's venv on: the system's python3. The
    Makefile refuses one under /root or /home (pyenv, a user's own build): the unit's
    ProtectHome=yes hides it from the service."""
    for candidate in ("/usr/bin/python3", "/bin/python3"):
        if os.access(candidate, os.X_OK):
            return candidate
    return None


def make(target: str, destdir: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    """`make -s TARGET DESTDIR=destdir` with the system python3 and this test run's venv as the
    development venv (so `setup` is already done when the tests run under `make test`)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MAKE")}
    # As in a developer's shell that points Python at this checkout: the install must still
    # build the installed package's kernels (test_install checks they are there), not these.
    env["PYTHONPATH"] = str(REPO)
    python = install_python()
    variables = [f"DESTDIR={destdir}", f"VENV={sys.prefix}",
                 *([f"PYTHON={python}"] if python else []), *extra]
    # -o: the venv running these tests is set up already; never reinstall it from a test.
    keep = ["-o", f"{sys.prefix}/.govd-installed"]
    return subprocess.run(["make", "-s", *keep, target, *variables], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=600)


EDITED_CONFIG = "# edited by the administrator\n"
"""What /etc/govd/govd.yaml holds in a stage before `stage_install` runs `make install`."""


@dataclass(frozen=True)
class StagedInstall:
    """`make install DESTDIR=folder` over a configuration an administrator had edited."""

    folder: Path
    done: subprocess.CompletedProcess[str]

    def copy(self, to: Path) -> Path:
        """The stage copied to ``to`` as hard links (a second or so for its ~300 MB): a test may
        remove files from the copy (`make uninstall`) and the stage stays whole."""
        subprocess.run(["cp", "-al", str(self.folder), str(to)], check=True, timeout=120)
        return to


def stage_install(folder: Path) -> StagedInstall:
    """Write `EDITED_CONFIG` as folder/etc/govd/govd.yaml, then `make install DESTDIR=folder`
    (about 100 s of CPU, most of it compiling the kernels)."""
    conf = folder / "etc/govd/govd.yaml"
    conf.parent.mkdir(parents=True)
    conf.write_text(EDITED_CONFIG)
    return StagedInstall(folder, make("install", folder))
