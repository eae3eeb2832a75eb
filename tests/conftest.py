"""Fixtures shared across the suite."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest


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
