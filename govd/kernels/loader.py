"""Compiled kernels without numba at run time: ``njit`` for every kernel module of govd.

Each kernel module decorates its kernels with this `njit` instead of numba's. At import it gives

- the kernel compiled ahead of time, when `govd.kernels.build` exported it into the
  extension built from these very sources (``_aot_<digest>`` in govd/model beside them, the
  digest being `source_digest`'s): a plain C function, and numba and llvmlite are never
  imported (they cost the daemon ~40 MB of anonymous memory and ~0.3 s of start-up, issue #14);
- otherwise numba's ``njit`` with the same options (cache=True...), as before.

A kernel not in the extension (one the daemon does not call per tick: the evaluator's, the CSV
parser's, the nested ones) is a `LazyKernel` until its first call, which imports numba and puts
a numba dispatcher in place of every lazy and ahead-of-time kernel in the kernel modules'
globals, so that kernels calling kernels compile as they always did. Callers that bound an
ahead-of-time kernel keep it (same results to the bit: `tests/test_kernels_aot.py`).

``GOVD_KERNELS=jit`` forces numba, ``aot`` requires the extension (ImportError otherwise, so a
benchmark never measures the fallback by mistake), ``auto`` (default) takes it when it is fresh.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.machinery
import importlib.util
import json
import logging
import os
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any, TypeVar

import numpy as np

F = TypeVar("F", bound=Callable[..., Any])

MODE_ENV = "GOVD_KERNELS"
MODES = ("auto", "aot", "jit")
FOLDER = Path(__file__).resolve().parent.parent / "model"
"""Where the kernel sources the daemon calls per tick and their extension live (the installed
package's govd/model)."""
BUILD_FOLDER = Path(__file__).resolve().parent
"""This package: the loader, the build and the drive that finds the kernels' signatures."""
PREFIX = "_aot_"

_log = logging.getLogger(__name__)


def source_digest(folder: Path = FOLDER) -> str:
    """Digest of what the compiled kernels depend on: every ``*.py`` under ``folder`` (its
    subfolders included), every ``*.py`` of this package (the build and what it drives decide
    which kernels are exported, with which signatures), each by relative path and bytes in path
    order, and the NumPy version (the extension is built against its C API). 16 hex digits.
    Reading and hashing the files takes well under a millisecond."""
    h = hashlib.sha256(np.__version__.encode())
    for root, paths in ((folder, folder.rglob("*.py")), (BUILD_FOLDER, BUILD_FOLDER.glob("*.py"))):
        for path in sorted(paths):
            h.update(path.relative_to(root).as_posix().encode() + b"\0")
            h.update(path.read_bytes())
    return h.hexdigest()[:16]


def extension_name(digest: str) -> str:
    """The extension's module name for sources of ``digest`` (its file adds the platform's
    extension suffix, e.g. ``.cpython-311-x86_64-linux-gnu.so``)."""
    return PREFIX + digest


def export_name(module: str, name: str) -> str:
    """The symbol under which kernel ``name`` of ``module`` is exported
    (``govd.model.tick.model_tick`` -> ``govd_model_tick__model_tick``)."""
    return module.replace(".", "_") + "__" + name


@dataclass(frozen=True)
class ArraySpec:
    """The array an exported kernel's argument must be: an ahead-of-time function reads any
    array as the type it was built for (a float32 array read as float64 crashes the process),
    so `guarded` checks these before each call."""

    dtype: str
    """NumPy dtype name, e.g. ``float64``."""
    ndim: int
    contiguous: bool
    """C-contiguous required (numba layout ``C``)."""
    writable: bool
    """Writable required (the kernel writes it: numba's mutable array type)."""

    def to_json(self) -> dict[str, Any]:
        """The JSON the build writes beside the extension."""
        return {"dtype": self.dtype, "ndim": self.ndim, "contiguous": self.contiguous,
                "writable": self.writable}


def file_digest(path: Path) -> str:
    """SHA-256 of a file (hex): the table beside the extension holds the extension's, checked
    before loading it (a truncated or damaged shared object can crash the process that loads
    it, where a refused one only costs numba's JIT). ~1 ms for the ~1 MB extension."""
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _read_table(table_path: Path, extension: Path) -> dict[str, list[ArraySpec | None]]:
    """The argument table the build wrote beside ``extension``
    (``{"sha256": ..., "kernels": {symbol: [spec|null]}}``); ValueError when it does not
    describe that very file."""
    table = json.loads(table_path.read_text())
    if table.get("sha256") != file_digest(extension):
        raise ValueError("its checksum does not match the table beside it (damaged)")
    arrays = {symbol: [None if a is None else ArraySpec(str(a["dtype"]), int(a["ndim"]),
                                                         bool(a["contiguous"]),
                                                         bool(a["writable"]))
                       for a in args]
              for symbol, args in table["kernels"].items()}
    for symbol, specs in arrays.items():  # the checksum covers the extension, not the table
        for spec in specs:
            if spec is not None and (np.dtype(spec.dtype).kind not in "biuf" or spec.ndim < 1):
                raise ValueError(f"{symbol}: no array type a kernel takes: {spec}")
    return arrays


def guarded(compiled: Callable[..., Any], arrays: list[ArraySpec | None],
            otherwise: Callable[..., Any]) -> Callable[..., Any]:
    """``compiled`` behind a check of its array arguments (type, dtype, dimensions, layout,
    writability; ~0.1 µs an array): a call with other arrays goes to ``otherwise`` (numba's
    JIT, which compiles for them), as numba's own dispatcher would, instead of crashing."""
    checks = tuple((i, np.dtype(spec.dtype), spec.ndim, spec.contiguous, spec.writable)
                   for i, spec in enumerate(arrays) if spec is not None)
    ndarray = np.ndarray

    def call(*args: Any) -> Any:
        for i, dtype, ndim, contiguous, writable in checks:
            a = args[i]
            if a.__class__ is not ndarray or a.dtype is not dtype or a.ndim != ndim:
                return otherwise(*args)
            if contiguous or writable:  # one flags object: each costs ~40 ns
                flags = a.flags
                if (contiguous and not flags.c_contiguous) or (writable and not flags.writeable):
                    return otherwise(*args)
        return compiled(*args)

    return call


@dataclass(frozen=True)
class Extension:
    """A loaded extension: its exported functions and their array arguments."""

    module: ModuleType
    arrays: dict[str, list[ArraySpec | None]]
    """Per exported symbol, per argument: the array it must be, None for a scalar."""


def load_extension(folder: Path = FOLDER) -> tuple[Extension | None, str, bool]:
    """The extension built from ``folder``'s current sources, a line saying which one was
    loaded or why none was (not built, stale: built from other sources, unloadable), and
    whether that is a problem (an extension is there but cannot be used)."""
    suffix = importlib.machinery.EXTENSION_SUFFIXES[0]
    try:
        name = extension_name(source_digest(folder))
    except OSError as exc:
        return None, f"cannot read the kernel sources: {exc}", True
    path = folder / (name + suffix)
    if not path.exists():
        others = sorted(p.name for p in folder.glob(PREFIX + "*" + suffix))
        if others:
            return None, (f"the compiled kernels {others[0]} are stale (built from other "
                          "sources); python -m govd.kernels.build rebuilds them"), True
        return None, "no compiled kernels (python -m govd.kernels.build builds them)", False
    try:
        arrays = _read_table(folder / (name + ".json"), path)
        spec = importlib.util.spec_from_file_location(f"govd.model.{name}", path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        missing = [symbol for symbol in arrays if not hasattr(module, symbol)]
        if missing:
            raise ImportError(f"{', '.join(missing)} not exported")
    except Exception as exc:  # OSError, ValueError, KeyError, ImportError: a bad table or ELF
        return None, f"cannot load the compiled kernels {path.name}: {exc}", True
    return Extension(module, arrays), f"compiled ahead of time ({path.name})", False


@dataclass(eq=False)  # kept in sets and dicts by identity
class _Kernel:
    """One decorated kernel and what stands for it."""

    py_func: Callable[..., Any]
    options: dict[str, Any]
    given: Any = None
    """What the decorator returned (a guarded ahead-of-time function, a `LazyKernel` or a
    numba dispatcher)."""
    compiled: Any = None
    """The ahead-of-time compiled function, when the extension has this kernel."""
    dispatcher: Any = None
    """The numba dispatcher, once numba is in use."""


class LazyKernel:
    """A kernel the extension does not hold: its first call imports numba and compiles (or
    loads from numba's cache) as ``numba.njit`` would have. ``py_func`` is the Python function."""

    def __init__(self, kernel: _Kernel) -> None:
        self._kernel = kernel
        self.py_func = kernel.py_func
        functools.update_wrapper(self, kernel.py_func)

    def __call__(self, *args: Any) -> Any:
        if self._kernel.dispatcher is None:
            _use_numba()
        return self._kernel.dispatcher(*args)

    def __getattr__(self, name: str) -> Any:  # the dispatcher's (signatures, overloads...)
        if name.startswith("__"):
            raise AttributeError(name)
        if self._kernel.dispatcher is None:
            _use_numba()
        return getattr(self._kernel.dispatcher, name)


def _decide() -> tuple[Extension | None, str, bool]:
    mode = os.environ.get(MODE_ENV, "auto") or "auto"
    if mode not in MODES:
        raise ImportError(f"{MODE_ENV}={mode!r}: must be one of {', '.join(MODES)}")
    if mode == "jit":
        return None, f"numba's JIT ({MODE_ENV}=jit)", False
    extension, why, problem = load_extension()
    if extension is None and mode == "aot":
        raise ImportError(f"{MODE_ENV}=aot: {why}")
    return extension, why if extension is not None else f"numba's JIT: {why}", problem


_extension, MODE_REASON, MODE_PROBLEM = _decide()
"""The extension in use (None: numba's JIT), the line that says why, and whether an extension
is there but could not be used (stale, unloadable: worth a warning at the daemon's start)."""
_log.debug("kernels: %s", MODE_REASON)
_kernels: dict[int, _Kernel] = {}  # by id of what the decorator returned
_modules: set[str] = set()  # the modules that define kernels
_numba_in_use = _extension is None
_lock = threading.Lock()


def njit(*args: Any, **options: Any) -> Any:
    """``numba.njit`` for govd's kernel modules: ``@njit(cache=True)``, ``@njit``. Returns the
    ahead-of-time compiled kernel (behind `guarded`) when the fresh extension has it, else a
    `LazyKernel` while numba is not imported, else numba's dispatcher."""
    if args and callable(args[0]):
        return njit(**options)(args[0])

    def decorate(func: F) -> F:
        kernel = _Kernel(func, options)
        symbol = export_name(func.__module__, func.__name__)
        with _lock:
            _modules.add(func.__module__)
            arity = func.__code__.co_argcount
            if (_extension is not None and symbol in _extension.arrays
                    and len(_extension.arrays[symbol]) == arity):
                kernel.compiled = getattr(_extension.module, symbol)
                kernel.given = guarded(kernel.compiled, _extension.arrays[symbol],
                                       LazyKernel(kernel))
            elif _numba_in_use:
                kernel.given = kernel.dispatcher = _dispatcher(kernel)
                if _extension is not None:  # numba came in after the module's from-imports
                    _replace_in(sys.modules.get(func.__module__))
            else:
                kernel.given = LazyKernel(kernel)
            _kernels[id(kernel.given)] = kernel
        return kernel.given  # type: ignore[no-any-return]

    return decorate


def log_mode(log: logging.Logger) -> None:
    """Say once (the daemon, at start-up) how this process runs its kernels: info when
    compiled ahead of time or never built, a warning when an extension is there but stale or
    unloadable (govd then pays numba's memory and start-up)."""
    log.log(logging.WARNING if MODE_PROBLEM else logging.INFO, "kernels: %s", MODE_REASON)


def ahead_of_time(kernel: object) -> bool:
    """Whether ``kernel`` (a name a kernel module bound) runs the ahead-of-time compiled code."""
    entry = _kernels.get(id(kernel))
    return entry is not None and entry.compiled is not None and entry.given is kernel


def numba_in_use() -> bool:
    """Whether numba compiles kernels in this process (always so without the extension)."""
    return _numba_in_use


def _dispatcher(kernel: _Kernel) -> Any:
    import numba  # only here: the daemon with the extension never gets this far

    return numba.njit(**kernel.options)(kernel.py_func)


def _use_numba() -> None:
    """Give every kernel a numba dispatcher and put it in place of the lazy and ahead-of-time
    kernels in the kernel modules' globals, where nopython code looks up the kernels it calls."""
    global _numba_in_use
    with _lock:
        if _numba_in_use and all(k.dispatcher is not None for k in _kernels.values()):
            return
        _log.debug("kernels: a kernel outside the compiled extension was called; numba compiles")
        for kernel in list(_kernels.values()):
            if kernel.dispatcher is None:
                kernel.dispatcher = _dispatcher(kernel)
        _numba_in_use = True
        for module in sorted(_modules):
            _replace_in(sys.modules.get(module))


def _replace_in(module: ModuleType | None) -> None:
    if module is None:
        return
    names = vars(module)
    for key, value in list(names.items()):
        kernel = _kernels.get(id(value))
        if kernel is not None and kernel.given is value and kernel.dispatcher is not None:
            names[key] = kernel.dispatcher
