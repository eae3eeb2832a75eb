"""govd installed by `make install` into a container booted by a real systemd, governing the
simulated devfreq GPU (see container.py for how the container is made).

One container for the tests of this folder: the staged install is built once (`make install
DESTDIR=...`, the `staged_install` fixture, shared with tests/test_install.py), the container
boots in about a second, and each test starts from govd active under the shipped units plus
the simulator drop-in, with the test configuration and no other drop-in.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import yaml

from tests.installing import REPO, StagedInstall, install_python
from tests.pid1.container import Container, why_no_container

UNITS = Path(__file__).resolve().parent / "units"
SIM_ROOT = "/srv/govd-sim"
SIM_DEVICE = f"{SIM_ROOT}/class/devfreq/govd-sim0"
CONFIG = "/etc/govd/govd.yaml"
DROPINS = "/etc/systemd/system/govd.service.d"
SOURCE = "/run/govd-source"
"""Where the repository is bound (read-only) in the container, for its Makefile."""
SUMMARY_INTERVAL_S = 1.0
"""The test configuration's journal summary period, s (the shipped 60 s would slow the suite)."""

REASON = why_no_container()
pytestmark = pytest.mark.skipif(REASON is not None, reason=REASON or "")


@pytest.fixture(scope="session")
def stage(staged_install: StagedInstall) -> Path:
    """The session's staged `make install` (tests/conftest.py), read-only: the containers
    overlay it."""
    if REASON is not None:
        pytest.skip(REASON)
    if install_python() is None:
        pytest.skip("no system python3 in /usr/bin to build /opt/govd's venv on")
    done = staged_install.done
    assert done.returncode == 0, done.stdout + done.stderr
    return staged_install.folder


def config_text(**logging: object) -> str:
    """The shipped /etc/govd/govd.yaml with a short journal summary period (and `logging`)."""
    document = yaml.safe_load((REPO / "config/govd.yaml").read_text())
    document["logging"] = {**document["logging"], "summary_interval_s": SUMMARY_INTERVAL_S,
                           **logging}
    return yaml.safe_dump(document, sort_keys=False)


def installed(stage: Path, log_path: Path) -> Container:
    """Boot a container, put the staged install in place and do what the README's install
    section does after the files: `make install-system` (the rest of `make install`: the group,
    daemon-reload), then `systemctl enable --now govd.socket govd.service`. The test
    additions: the simulator unit, its drop-in, the test configuration."""
    box = Container(stage, log_path, binds=((UNITS, "/run/govd-test-units"),
                                            (REPO, SOURCE)))
    try:
        box.sh(f"cp /run/govd-test-units/govd-sim.service /etc/systemd/system/ && "
               f"mkdir -p {DROPINS} && cp /run/govd-test-units/sim.conf {DROPINS}/")
        box.write(CONFIG, config_text())
        box.run("make", "-s", "-C", SOURCE, "install-system")
        box.run("systemctl", "enable", "--now", "govd.socket", "govd.service", timeout=120)
    except BaseException:
        box.halt()
        raise
    return box


@pytest.fixture(scope="package")
def machine(stage: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Container]:
    """The booted container with govd installed and the simulator running, halted after the
    last test of tests/pid1: not at the end of the session, or its govd and simulator tick on
    for the rest of the worker's run (~10 s of CPU in a `make test`)."""
    box = installed(stage, tmp_path_factory.mktemp("container") / "console.log")
    try:
        yield box
    finally:
        box.halt()


def main_pid(box: Container) -> int:
    """govd.service's MainPID inside the container (0: not running)."""
    return int(show(box, "MainPID"))


def show(box: Container, prop: str, unit: str = "govd.service") -> str:
    """One property of a unit, as `systemctl show -P` prints it."""
    return box.run("systemctl", "show", "-P", prop, unit).stdout.strip()


def wait_for(what: str, probe: Callable[[], object], timeout_s: float = 60.0,
             box: Container | None = None) -> object:
    """Poll `probe` until it returns something truthy; fail with `what` (and govd's journal)."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = probe()
        if value:
            return value
        if time.monotonic() > deadline:
            journal = box.run("journalctl", "-u", "govd", "--no-pager", "-n", "40",
                              check=False).stdout if box else ""
            pytest.fail(f"timed out after {timeout_s} s waiting for {what}\n{journal}")
        time.sleep(0.1)


def sim_files(box: Container) -> dict[str, str]:
    """The simulated GPU's files govd writes (governor, bounds), as they read now."""
    text = box.sh(f"cd {SIM_DEVICE} && for f in governor min_freq max_freq; do "
                  f'printf "%s=%s\\n" $f "$(cat $f)"; done')
    return dict(line.split("=", 1) for line in text.splitlines())


def journal(box: Container, *args: str) -> list[dict[str, str]]:
    """`journalctl -u govd -o json ARGS` inside the container, one dict per entry."""
    out = box.run("journalctl", "-u", "govd", "-o", "json", "--no-pager", *args).stdout
    return [json.loads(line) for line in out.splitlines() if line.strip()]


@pytest.fixture
def govd(machine: Container) -> Iterator[Container]:
    """govd active under the shipped units, the simulator drop-in and the test configuration;
    drop-ins a test adds are removed and the configuration put back afterwards, and govd is
    restarted, unless the test left the very daemon it was given as it was given it."""
    ready(machine)
    handed = daemons(machine)
    yield machine
    if daemons(machine) == handed and as_configured(machine):
        return  # same processes, running, same configuration: nothing a restart would undo
    machine.sh(f"find {DROPINS} -type f ! -name sim.conf -delete")
    machine.write(CONFIG, config_text())
    machine.run("systemctl", "daemon-reload")
    # A restart (about a second) rather than a reload: a test may leave govd stopped, stopped
    # by SIGSTOP, or under a drop-in (WatchdogSec) that only a new start undoes.
    machine.run("systemctl", "kill", "-s", "CONT", "govd.service", check=False)
    machine.run("systemctl", "restart", "govd.service", timeout=120)


def daemons(box: Container) -> tuple[str, ...]:
    """govd's and the simulator's main PIDs, and each one's process state (R, S, T: stopped)
    and state of the unit: what tells the daemon a test was given from any other."""
    pids = [main_pid(box), int(show(box, "MainPID", "govd-sim.service"))]
    states = box.sh("for p in " + " ".join(map(str, pids)) + "; do "
                    "grep ^State: /proc/$p/status 2>/dev/null || echo gone; done").split()
    return (*map(str, pids), *states, show(box, "ActiveState"),
            show(box, "ActiveState", "govd-sim.service"))


def as_configured(box: Container) -> bool:
    """The test configuration in place and no drop-in but the simulator's."""
    return (box.sh(f"cat {CONFIG}") == config_text()
            and box.sh(f"find {DROPINS} -type f ! -name sim.conf").strip() == "")


def ready(box: Container) -> None:
    """Bring govd to active (starting it when it is not), with the simulator running."""
    box.run("systemctl", "start", "govd-sim.service", timeout=60)
    if show(box, "ActiveState") != "active":
        box.run("systemctl", "reset-failed", "govd.service", check=False)
        box.run("systemctl", "restart", "govd.service", timeout=120)
    wait_for("govd active", lambda: show(box, "ActiveState") == "active", box=box)
