"""`make test` runs the udev paths: umockdev is installed by its setup, and required."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.umockdev_required import MISSING, REQUIRED

MAKEFILE = Path(__file__).resolve().parents[1] / "Makefile"


def test_setup_installs_umockdev_and_make_test_requires_it() -> None:
    text = MAKEFILE.read_text()
    assert re.search(r"command -v umockdev-run .*missing=\"\$\$missing umockdev libumockdev0\"",
                     text)
    assert "GOVD_REQUIRE_UMOCKDEV=1 $(PY) -m pytest" in text


@pytest.mark.skipif(not REQUIRED, reason="GOVD_REQUIRE_UMOCKDEV not set (make test sets it)")
def test_umockdev_is_there_when_required() -> None:
    assert not MISSING, "umockdev-run missing: run `make setup` as root or apt-get install " \
                        "umockdev libumockdev0"
