"""Fixtures shared across the suite."""

from __future__ import annotations

import logging
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest


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
