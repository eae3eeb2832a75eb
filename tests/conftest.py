"""Fixtures shared across the suite, and how `make test` spreads it over pytest-xdist workers.

`make test` runs the suite on one worker per CPU (`-n auto --dist loadgroup`), so every test
may run beside any other, in another process: a test keeps what it writes under its own
`tmp_path` (or a folder it makes with `tempfile`), binds port 0 or a socket in its own folder,
and changes the environment, logging or a module's globals only through `monkeypatch`/`caplog`.
Tests that must share something expensive between them (the staged `make install`, the
containers booted from it) are one xdist group, run by one worker in order.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.installing import StagedInstall, stage_install

INSTALLED_GROUP = "installed"
"""The xdist group of every test that uses `staged_install`: one worker runs them all, so the
install is staged once per run (about 100 s of CPU, mostly compiling the kernels)."""


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Put every test that needs the staged install in one xdist group (before xdist reads the
    groups), and run the tests marked `slow` first: xdist hands tests out in this order, so the
    long ones start while the other worker still has short ones left to even the end out."""
    for item in items:
        if "staged_install" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.xdist_group(INSTALLED_GROUP))
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)


@pytest.fixture(scope="session")
def staged_install(tmp_path_factory: pytest.TempPathFactory) -> StagedInstall:
    """`stage_install`, once per session: tests/test_install.py checks the layout, tests/pid1
    boots containers from it. Its users must leave it as it is (see `StagedInstall.copy`)."""
    return stage_install(tmp_path_factory.mktemp("stage"))


@pytest.fixture
def whole_drains(monkeypatch: pytest.MonkeyPatch) -> None:
    """`SocketSource.drain` reads every datagram waiting (within its other budgets) however
    slowly the machine runs: tests that count what one drain took would otherwise fail whenever
    a loaded machine preempts the drain past its 4 ms wall-clock budget (`DRAIN_BUDGET_S`,
    which keeps a real tick short; `test_receive_stops_at_its_deadline` pins that budget)."""
    monkeypatch.setattr("govd.sources.socket.DRAIN_BUDGET_S", 60.0)


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
