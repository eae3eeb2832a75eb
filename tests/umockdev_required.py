"""Whether the umockdev tests may skip: only where umockdev is missing and nobody asked for them.

`make test` sets ``GOVD_REQUIRE_UMOCKDEV=1`` (its setup installs umockdev), so there a missing
umockdev fails the run instead of quietly skipping the udev paths."""

from __future__ import annotations

import os
import shutil

import pytest

MISSING = shutil.which("umockdev-run") is None
REQUIRED = os.environ.get("GOVD_REQUIRE_UMOCKDEV") == "1"

needs_umockdev = pytest.mark.skipif(MISSING and not REQUIRED,
                                    reason="umockdev-run not installed")
