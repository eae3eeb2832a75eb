"""Fixtures shared across the suite, and how `make test` spreads it over pytest-xdist workers.

`make test` runs the suite on one worker per CPU (`-n auto`), so every test
may run beside any other, in another process: a test keeps what it writes under its own
`tmp_path` (or a folder it makes with `tempfile`), binds port 0 or a socket in its own folder,
and changes the environment, logging or a module's globals only through `monkeypatch`/`caplog`.
The one thing the workers share is the staged `make install` (`staged_install`), built once
per run; its users run on one worker, first, and where the containers can run `-n auto` starts
one worker more than there are CPUs for them (`pytest_xdist_make_scheduler`,
`pytest_xdist_auto_num_workers`).
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.installing import SharedStage, StagedInstall

STAGE_USERS = ("tests/pid1/", "tests/test_install.py::")
"""Where the tests that use `staged_install` live (what `StageFirst` knows of them: the
controller sees test ids only, never their fixtures)."""
STAGE_UNIT = "staged_install"
"""The one unit of work `StageFirst` makes of them."""


def _uses_the_stage(item: pytest.Item) -> bool:
    return "staged_install" in getattr(item, "fixturenames", ())


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Without `StageFirst` (plain `pytest -n N --dist load`), run the tests that need the
    staged install last, so that it is staged in the background while the others run."""
    items.sort(key=_uses_the_stage)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """`make test`'s `-n auto` (xdist's --dist load) as `StageFirst` schedules it."""
    if config.getvalue("dist") != "load":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class StageFirst(LoadScopeScheduling):
        """Each module one unit of work (its module fixtures, a daemon run or a fuzz run of
        ~15 s, then run once, not once per worker that gets one of its tests), except the
        staged install's users: one unit, handed out first (the largest unit goes first), so
        one worker stages the install and then runs them in order, one container at a time,
        while the other workers run everything else. (xdist's own --dist loadgroup would do
        it, but with pytest 9.2 it no longer groups, silently: it renames test ids through a
        field pytest dropped.)"""

        def _split_scope(self, nodeid: str) -> str:
            return STAGE_UNIT if nodeid.startswith(STAGE_USERS) else nodeid.split("::")[0]

        def _assign_work_unit(self, node: Any) -> None:
            # xdist orders the units by their number of tests, and a dozen modules have more
            # than the stage's users: first means first, not where its size puts it.
            if STAGE_UNIT in self.workqueue:
                self.workqueue.move_to_end(STAGE_UNIT, last=False)
            super()._assign_work_unit(node)

    return StageFirst(config, log)


@pytest.hookimpl(tryfirst=True)
def pytest_xdist_auto_num_workers(config: pytest.Config) -> int | None:
    """`-n auto`: one worker per CPU, and one more for the worker that boots the containers
    (tests/pid1) when they can run here: for its ~140 s it mostly waits on systemd in them,
    and a CPU-bound suite then has a CPU idle. PYTEST_XDIST_AUTO_NUM_WORKERS still decides."""
    if os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS") or config.option.numprocesses != "auto":
        return None
    from tests.pid1.container import why_no_container

    cpus = len(os.sched_getaffinity(0))
    return cpus + 1 if why_no_container() is None else None


@pytest.fixture(scope="session")
def _shared_stage(tmp_path_factory: pytest.TempPathFactory) -> SharedStage:
    # the parent of a worker's base folder is the run's, shared by every worker
    base = tmp_path_factory.getbasetemp()
    return SharedStage(base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base)


@pytest.fixture(scope="session", autouse=True)
def _stage_in_the_background(request: pytest.FixtureRequest,
                             _shared_stage: SharedStage) -> None:
    """As a worker starts, begin staging the install when some collected test needs it."""
    if any(_uses_the_stage(item) for item in request.session.items):
        _shared_stage.start()


@pytest.fixture(scope="session")
def staged_install(_shared_stage: SharedStage) -> StagedInstall:
    """`make install DESTDIR=...` over an edited configuration, once per run for all the
    workers: tests/test_install.py checks the layout, tests/pid1 boots containers from it. Its
    users must leave it as it is (see `StagedInstall.copy`)."""
    return _shared_stage.result()


@pytest.fixture(autouse=True)
def _logging_as_found() -> Iterator[None]:
    """Each test leaves the root and govd loggers as it found them: `govd.cli.main` sets up a
    handler on the sys.stderr of its test (pytest's capture, closed afterwards), and a later
    test's log record then printed "--- Logging error ---" into that test's own stderr."""
    root, govd = logging.getLogger(), logging.getLogger("govd")
    handlers, levels = list(root.handlers), (root.level, govd.level)
    govd_handlers = list(govd.handlers)
    yield
    root.handlers[:] = handlers
    govd.handlers[:] = govd_handlers
    root.setLevel(levels[0])
    govd.setLevel(levels[1])


@pytest.fixture
def umockdev_tmpdir() -> Iterator[Path]:
    """A short TMPDIR for a umockdev test bed, removed afterwards: the bed lives in
    $TMPDIR/umockdev.XXXXXX and is left behind when the process ends without freeing it (its
    sockets need a short path, so not pytest's tmp_path)."""
    folder = Path(tempfile.mkdtemp(prefix="govd-um-", dir="/tmp"))
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)
