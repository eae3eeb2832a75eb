"""Running the Makefile's install targets from tests (tests/test_install.py, tests/pid1)."""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
import sys
import threading
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
"""What /etc/govd/govd.yaml holds in the stage before `make install` runs over it."""


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


class SharedStage:
    """One staged install for every pytest-xdist worker of a run, built in the background.

    ``base`` is a folder all the workers share (the parent of their base temporary folders).
    The first process to call `start` takes an exclusive lock on base/stage.lock and, in a
    thread, runs `make install DESTDIR=base/stage` (about 100 s of CPU, most of it compiling
    the kernels) while its tests go on; it writes the outcome to base/stage.json and drops the
    lock. `result` waits for that lock (in any process) and reads the outcome. So the install
    is staged once per run, and its cost overlaps the tests that do not need it."""

    def __init__(self, base: Path) -> None:
        self.folder = base / "stage"
        self.outcome = base / "stage.json"
        self.lock_path = base / "stage.lock"
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """Start staging unless another process is staging or has staged already."""
        fd = os.open(self.lock_path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:  # another worker stages it now
            os.close(fd)
            return
        if self.outcome.exists():  # staged before this worker came
            os.close(fd)
            return
        self._thread = threading.Thread(target=self._stage, args=(fd,), name="stage-install")
        self._thread.start()

    def _stage(self, fd: int) -> None:
        try:
            conf = self.folder / "etc/govd/govd.yaml"
            conf.parent.mkdir(parents=True, exist_ok=True)
            conf.write_text(EDITED_CONFIG)
            try:
                done = make("install", self.folder)
            except subprocess.TimeoutExpired as exc:
                done = subprocess.CompletedProcess(exc.cmd, -1, str(exc.stdout or ""),
                                                   f"make install timed out: {exc}")
            except Exception as exc:  # the waiting tests say why; never leave them hanging
                done = subprocess.CompletedProcess(["make", "install"], -1, "", repr(exc))
            self.outcome.write_text(json.dumps(
                {"args": done.args, "returncode": done.returncode, "stdout": done.stdout,
                 "stderr": done.stderr}))
        finally:
            os.close(fd)  # drops the lock: the waiting workers read the outcome

    def result(self) -> StagedInstall:
        """The staged install, staging it here first when no process has (or one that did
        died before it finished)."""
        for _ in range(2):
            if self._thread is None and not self.outcome.exists():
                self.start()
            if self._thread is not None:
                self._thread.join()
            fd = os.open(self.lock_path, os.O_RDWR | os.O_CREAT, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_SH)  # waits while another worker stages
            finally:
                os.close(fd)
            if self.outcome.exists():
                break
        done = json.loads(self.outcome.read_text())
        return StagedInstall(self.folder, subprocess.CompletedProcess(
            done["args"], done["returncode"], done["stdout"], done["stderr"]))
