"""Compile the kernels the daemon calls per tick ahead of time (``numba.pycc``), so that
``govd run`` imports neither numba nor llvmlite (`govd.kernels.loader`).

    python -m govd.kernels.build

The kernels and their signatures are not listed by hand (a table would drift when a kernel
changes): a Governor is driven through every configuration the daemon can run
(`govd.kernels.drive.CONFIGURATIONS`) under numba's JIT, then driven again with each
kernel in the modules' namespaces replaced by a recorder. What the second pass records is what
Python calls, with the argument types of those calls (nopython callers reach their callees
without the namespaces, compiled in the first pass). Each such kernel must have one signature
(a read-only and a writable array of the same type count as one: the read-only one, since the
JIT compiled it so); otherwise the build fails and says which.

Writes ``_aot_<digest>`` + the platform's extension suffix and ``_aot_<digest>.json`` (the
array arguments `govd.kernels.loader.guarded` checks) beside the kernel sources, then removes
the extensions of other digests. Exit status 1 with one line on stderr when it fails; govd
then keeps using numba's JIT.
"""

from __future__ import annotations

import importlib.machinery
import json
import os
import shutil
import sys
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

MODE_ENV = "GOVD_KERNELS"  # kernels.MODE_ENV: kernels must not be imported before it is set


class BuildError(Exception):
    """The kernels cannot be compiled ahead of time (the message says why)."""


def _kernels_module() -> Any:
    """`govd.kernels.loader`, imported under numba's JIT when it was not imported yet."""
    if "govd.kernels.loader" not in sys.modules:
        before = os.environ.get(MODE_ENV)
        os.environ[MODE_ENV] = "jit"
        try:
            from govd.kernels import loader as kernels
        finally:  # not for the processes this one starts
            if before is None:
                del os.environ[MODE_ENV]
            else:
                os.environ[MODE_ENV] = before
    from govd.kernels import loader as kernels

    if not kernels.numba_in_use() or any(kernels.ahead_of_time(k.given)
                                         for k in kernels._kernels.values()):
        raise BuildError(f"the kernels were imported compiled ahead of time; run the build "
                         f"with {MODE_ENV}=jit")
    return kernels


def _drive_all(ticks: int) -> None:
    from govd.kernels.drive import CONFIGURATIONS, drive

    for config in CONFIGURATIONS:
        drive(config, ticks, reset_at=ticks // 2)


def entry_calls(ticks: int = 40) -> dict[Any, set[tuple[Any, ...]]]:
    """Per kernel record (`govd.kernels.loader._Kernel`) the daemon calls from Python, the
    numba types of the argument tuples it was called with."""
    kernels = _kernels_module()
    _drive_all(ticks)  # compiles (or loads from numba's cache) everything reachable
    calls: dict[Any, set[tuple[Any, ...]]] = {}
    by_dispatcher = {id(k.dispatcher): k for k in kernels._kernels.values()}

    class Recorder:
        """Stands for a dispatcher in the namespaces: notes the types of each Python call."""

        def __init__(self, kernel: Any) -> None:
            self.kernel = kernel

        def __call__(self, *args: Any) -> Any:
            dispatcher = self.kernel.dispatcher
            calls.setdefault(self.kernel, set()).add(tuple(map(dispatcher.typeof_pyval, args)))
            return dispatcher(*args)

        def __getattr__(self, name: str) -> Any:  # py_func, signatures...
            return getattr(self.kernel.dispatcher, name)

    swapped: list[tuple[dict[str, Any], str, Any]] = []
    recorders = {key: Recorder(k) for key, k in by_dispatcher.items()}
    for name, module in list(sys.modules.items()):
        if module is None or not name.startswith("govd"):
            continue
        names = vars(module)
        for key, value in list(names.items()):
            if id(value) in recorders and by_dispatcher[id(value)].dispatcher is value:
                swapped.append((names, key, value))
                names[key] = recorders[id(value)]
    try:
        _drive_all(ticks)
    finally:
        for names, key, value in swapped:
            names[key] = value
    return calls


def signature(kernel: Any, arg_types: set[tuple[Any, ...]]) -> Any:
    """The one numba signature to export ``kernel`` with (BuildError when its calls need
    more than one)."""
    from numba import types

    def merged(tuples: set[tuple[Any, ...]]) -> set[tuple[Any, ...]]:
        # A read-only and a writable array of one type: export the read-only type.
        out = set()
        for args in tuples:
            out.add(tuple(a.copy(readonly=True) if isinstance(a, types.Array) and any(
                isinstance(o[i], types.Array) and not o[i].mutable and o[i].copy(readonly=False)
                == a for o in tuples) else a for i, a in enumerate(args)))
        return out

    name = f"{kernel.py_func.__module__}.{kernel.py_func.__name__}"
    unique = merged(arg_types)
    if len(unique) != 1:
        listed = "; ".join("(" + ", ".join(map(str, args)) + ")"
                           for args in sorted(unique, key=str))
        raise BuildError(f"{name} is called with {len(unique)} signatures ({listed}): an "
                         "ahead-of-time kernel has one; pass it one type per argument")
    args = unique.pop()
    for a in args:
        if isinstance(a, types.Array) and (a.layout == "F" and a.ndim > 1):
            raise BuildError(f"{name}: Fortran-ordered array arguments are not supported")
        if not isinstance(a, (types.Array, types.Float, types.Integer, types.Boolean)):
            raise BuildError(f"{name}: argument type {a} cannot be exported")
    overload = kernel.dispatcher.overloads.get(args)
    if overload is None:  # the merged read-only variant was not compiled itself
        overload = next(kernel.dispatcher.overloads[t] for t in arg_types)
    return overload.signature.return_type(*args)


def _array_specs(sig: Any) -> list[dict[str, Any] | None]:
    from numba import types

    from govd.kernels.loader import ArraySpec

    return [ArraySpec(str(a.dtype), a.ndim, a.layout == "C", a.mutable).to_json()
            if isinstance(a, types.Array) else None for a in sig.args]


def build(ticks: int = 40) -> Path:
    """Compile the per-tick kernels into the extension beside the sources; returns its path."""
    kernels = _kernels_module()
    folder = kernels.FOLDER
    digest = kernels.source_digest(folder)
    calls = entry_calls(ticks)
    if not calls:
        raise BuildError("no kernel was called from Python while driving the governors")
    with warnings.catch_warnings():
        from numba.core.errors import NumbaPendingDeprecationWarning
        warnings.simplefilter("ignore", NumbaPendingDeprecationWarning)  # pycc: deprecated
        from numba.pycc import CC  # type: ignore[attr-defined]
    name = kernels.extension_name(digest)
    table: dict[str, list[dict[str, Any] | None]] = {}
    with tempfile.TemporaryDirectory(prefix=".build-", dir=folder) as scratch:
        cc = CC(name)
        cc.output_dir = scratch
        cc.target_cpu = "host"  # as numba's JIT: the same code, bit for bit
        cc.verbose = False
        for kernel, arg_types in sorted(calls.items(), key=lambda kv: kv[0].py_func.__name__):
            sig = signature(kernel, arg_types)
            symbol = kernels.export_name(kernel.py_func.__module__, kernel.py_func.__name__)
            cc.export(symbol, sig)(kernel.py_func)
            table[symbol] = _array_specs(sig)
        cc.compile()
        suffix = importlib.machinery.EXTENSION_SUFFIXES[0]
        built = Path(scratch) / (name + suffix)
        if not built.exists():
            raise BuildError(f"numba.pycc wrote no {built.name}")
        # The table first: an extension without its table is refused as unloadable.
        content = {"sha256": kernels.file_digest(built), "kernels": table}
        (Path(scratch) / (name + ".json")).write_text(json.dumps(content, indent=1) + "\n")
        os.replace(Path(scratch) / (name + ".json"), folder / (name + ".json"))
        os.replace(built, folder / built.name)
    if kernels.source_digest(folder) != digest:
        raise BuildError("the kernel sources changed during the build; build again")
    for old in folder.glob(kernels.PREFIX + "*"):
        if not old.name.startswith(name):
            old.unlink(missing_ok=True)
    return folder / built.name


def reuse(source: Path) -> Path | None:
    """Take the extension already built from these very kernel sources in ``source`` (a
    checkout's govd/model after `make setup`, when `make install` installs from it): the same
    digest (sources and NumPy version) and this Python's extension suffix; both files are
    copied beside this package's kernel sources and loaded as govd loads them. Returns the
    copy, or None, leaving nothing behind, when there is none or it does not load. It was
    compiled for this machine's processor (``target_cpu = "host"``), as a build here would."""
    kernels = _kernels_module()
    folder = kernels.FOLDER
    name = kernels.extension_name(kernels.source_digest(folder))
    found = [source / (name + importlib.machinery.EXTENSION_SUFFIXES[0]),
             source / (name + ".json")]
    if source.resolve() == folder.resolve() or not all(path.is_file() for path in found):
        return None
    copies = [folder / path.name for path in found]
    for path, copy in zip(found, copies, strict=True):
        shutil.copyfile(path, copy)
    if kernels.load_extension(folder)[0] is None:
        for copy in copies:
            copy.unlink(missing_ok=True)
        return None
    return copies[0]


def main(argv: list[str] | None = None) -> int:
    """``python -m govd.kernels.build``: build, print what was built; 1 on failure."""
    import argparse

    parser = argparse.ArgumentParser(prog="python -m govd.kernels.build",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--ticks", type=int, default=40,
                        help="ticks per configuration while finding the kernels (default 40)")
    parser.add_argument("--reuse", type=Path, default=None, metavar="DIR",
                        help="take the extension from DIR when it was built from the same "
                             "sources (`make install` passes the checkout's govd/model)")
    args = parser.parse_args(argv)
    start = time.perf_counter()
    if args.reuse is not None and (taken := reuse(args.reuse)) is not None:
        print(f"govd kernels build: {taken}: taken from {args.reuse}, built there from the "
              "same sources")
        return 0
    try:
        path = build(args.ticks)
    except BuildError as exc:
        print(f"govd kernels build: {exc}", file=sys.stderr)
        return 1
    except Exception as exc:  # a compiler or linker failure: govd keeps numba's JIT
        print(f"govd kernels build: compiling failed: {type(exc).__name__}: {exc}",
              file=sys.stderr)
        return 1
    table = json.loads(path.with_name(path.name.split(".")[0] + ".json").read_text())
    exported = table["kernels"]
    print(f"govd kernels build: {path} ({', '.join(sorted(exported))}) in "
          f"{time.perf_counter() - start:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
