"""The installed daemon's memory: modules it never needs kept out, freed start-up heap given back.

numba imports SciPy whenever it is installed (for np.linalg in nopython code, which govd's jitted
code does not use): a development or system-wide SciPy would cost the daemon memory and start-up
time for nothing. Start-up (numba's compiler loading its cache, pydantic building validators)
frees most of what it allocates, but glibc keeps freed heap for reuse; `trim_heap` hands it back,
so the service's anonymous memory is what it really holds.
"""

from __future__ import annotations

import ctypes
import ctypes.util
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


def trim_heap() -> bool:
    """Give the heap that start-up freed back to the kernel (glibc ``malloc_trim(0)``); False
    where the C library has no such call (musl)."""
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name) if name else ctypes.CDLL(None)
        trim = libc.malloc_trim
    except (OSError, AttributeError):
        return False
    trim.argtypes = [ctypes.c_size_t]
    trim.restype = ctypes.c_int
    trim(0)
    return True
