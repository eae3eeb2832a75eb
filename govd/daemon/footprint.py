"""The daemon's memory and start-up: modules it never needs are kept out of `govd run`.

numba imports SciPy whenever it is installed (for np.linalg in nopython code, which govd's jitted
code does not use): a development or system-wide SciPy would cost the daemon memory and start-up
time for nothing. (Giving start-up's freed heap back with glibc's ``malloc_trim`` was tried: it
returned 0.05 MB of 60, so it is not done.)
"""

from __future__ import annotations

import sys

UNNEEDED = ("scipy",)
"""Modules `govd run` never uses that its dependencies import when they are installed."""


def keep_out(names: tuple[str, ...] = UNNEEDED) -> list[str]:
    """Make ``import name`` fail with ImportError for each of ``names`` not imported yet (the
    importers fall back as when the package is not installed); returns those kept out. Call
    before the first import of numba."""
    kept = [name for name in names if name not in sys.modules]
    for name in kept:
        sys.modules[name] = None  # type: ignore[assignment]  # import raises ImportError
    return kept

