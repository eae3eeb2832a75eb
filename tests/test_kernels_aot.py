"""The per-tick kernels compiled ahead of time (`govd.kernels.loader`, `govd.kernels.build`):
the same results as numba's JIT to the bit, and a fall back to the JIT whenever the extension
cannot be trusted (stale, unloadable, other argument types)."""

from __future__ import annotations

import ast
import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from govd.kernels.loader import ArraySpec, guarded
from tests.kernels_built import MODEL, REPO, ensure_built, python


@pytest.fixture(scope="module")
def extension() -> Path:
    return ensure_built()


_DRIVE = """
import sys
import numpy as np
from govd.kernels import loader as kernels
from govd.kernels.drive import CONFIGURATIONS, drive
out = {}
for config in CONFIGURATIONS:
    for name, values in drive(config, 300, reset_at=150).items():
        out[config.name + "/" + name] = values
np.savez(sys.argv[1], **out)
print(repr((kernels.MODE_REASON, 'numba' in sys.modules, 'llvmlite' in sys.modules)))
"""


def test_compiled_kernels_give_the_jits_state_and_predictions_to_the_bit_in_every_configuration(
        extension: Path, tmp_path: Path) -> None:
    aot = python(_DRIVE, str(tmp_path / "aot.npz"), mode="aot").stdout.splitlines()[-1]
    jit = python(_DRIVE, str(tmp_path / "jit.npz"), mode="jit").stdout.splitlines()[-1]
    reason, numba, llvmlite = ast.literal_eval(aot)
    assert reason.startswith("compiled ahead of time") and not numba and not llvmlite
    assert ast.literal_eval(jit)[1]  # the other side really ran numba
    with np.load(tmp_path / "aot.npz") as a, np.load(tmp_path / "jit.npz") as j:
        assert sorted(a.files) == sorted(j.files) and len(a.files) >= 5 * 24
        differ = [name for name in a.files if not np.array_equal(a[name], j[name],
                                                                 equal_nan=True)]
        assert differ == []
        # the drive exercised the models: learned states, finite predictions
        states = [a[name] for name in a.files if name.endswith("/state")]
        assert all(np.isfinite(s).any() and np.any(s != 0) for s in states)
        assert all(np.isfinite(a[n][-1]).all() for n in a.files if n.endswith("/time_ms"))


def _package_copy(tmp_path: Path, extension: Path | None) -> Path:
    """govd copied under tmp_path (no compiled kernels), with ``extension``'s files if given."""
    root = tmp_path / "pkg"
    shutil.copytree(REPO / "govd", root / "govd",
                    ignore=shutil.ignore_patterns("__pycache__", "_aot_*", ".build-*"))
    if extension is not None:
        _add_extension(root, extension)
    return root


def _add_extension(root: Path, extension: Path) -> None:
    stem = extension.name.split(".")[0]
    for path in MODEL.glob(stem + "*"):
        shutil.copy(path, root / "govd" / "model" / path.name)


@pytest.fixture(scope="module")
def _one_copy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = _package_copy(tmp_path_factory.mktemp("copy"), None)
    # numba's cache of the checkout's kernels (`make setup` wrote it while building them), so
    # that the copy's JIT loads them instead of compiling them again (~13 s of CPU): numba
    # keys a cached kernel on its source file's mtime and size, which copytree kept.
    cache = root / "govd" / "model" / "__pycache__"
    cache.mkdir(exist_ok=True)
    for path in (MODEL / "__pycache__").glob("*.nb[ic]"):
        shutil.copy2(path, cache / path.name)
    return root


@pytest.fixture
def copied(_one_copy: Path) -> Path:
    """One package copy for the tests that damage or leave out the extension, its kernel
    sources never edited, with numba's cache of the checkout's kernels: those that fall back
    load the kernels from there (or compile them into it when the checkout has none). Each
    test finds it without an extension and its sources as copied."""
    for path in (_one_copy / "govd" / "model").glob("_aot_*"):
        path.unlink()
    return _one_copy


_TICK = """
import sys
import numpy as np
from govd.kernels import loader as kernels
from govd.model.online import OnlineModel
model = OnlineModel(np.array([300.0, 600.0, 900.0]))
for i in range(50):
    model.update(10.0 * 900.0 / (300.0 * (1 + i % 3)), 300.0 * (1 + i % 3), np.zeros(0), 30.0,
                 0.8, 0.5, 16.6)
print(repr((kernels.MODE_REASON, kernels.MODE_PROBLEM, 'numba' in sys.modules,
            [round(float(t), 6) for t in model.time_ms])))
"""


@pytest.fixture(scope="module")
def jit_times() -> list[float]:
    """What `_TICK` predicts under numba's JIT from the checkout: the reference every fall back
    must give, computed once for the module."""
    times: list[float] = ast.literal_eval(python(_TICK, mode="jit").stdout.splitlines()[-1])[3]
    return times


def test_the_copied_package_with_its_extension_runs_compiled(extension: Path, copied: Path,
                                                             tmp_path: Path) -> None:
    # the control for the tests below: the copy itself is not what makes them fall back
    root = copied
    _add_extension(root, extension)
    reason, problem, numba, _ = ast.literal_eval(
        python(_TICK, pythonpath=root, cwd=tmp_path).stdout.splitlines()[-1])
    assert reason.startswith("compiled ahead of time") and not problem and not numba


def test_a_stale_extension_falls_back_to_the_jit(extension: Path, copied: Path,
                                                 tmp_path: Path, jit_times: list[float]) -> None:
    """Any source the extension was built from, edited: a kernel-free one here, so that numba
    loads the copy's cached kernels (the digest covers every source of govd/model)."""
    root = copied
    _add_extension(root, extension)
    edited = root / "govd" / "model" / "settings.py"
    source = edited.read_text()
    edited.write_text(source + "\n# edited after the build\n")
    try:
        reason, problem, numba, times = ast.literal_eval(
            python(_TICK, pythonpath=root, cwd=tmp_path).stdout.splitlines()[-1])
        assert "stale" in reason and problem and numba
        assert times == jit_times
        refused = python(_TICK, mode="aot", pythonpath=root, cwd=tmp_path, check=False)
        assert refused.returncode != 0
        assert "GOVD_KERNELS=aot: the compiled kernels" in refused.stderr
    finally:
        edited.write_text(source)


@pytest.mark.parametrize("damage", ["garbage", "no table", "truncated", "table edited"])
def test_an_unloadable_extension_falls_back_to_the_jit(extension: Path, copied: Path,
                                                       tmp_path: Path, damage: str,
                                                       jit_times: list[float]) -> None:
    root = copied
    _add_extension(root, extension)
    copied = root / "govd" / "model" / extension.name
    if damage == "garbage":
        copied.write_bytes(b"\x7fELF not really")
    elif damage == "no table":
        copied.with_name(extension.name.split(".")[0] + ".json").unlink()
    elif damage == "table edited":  # the checksum covers the extension, not its table
        table_path = copied.with_name(extension.name.split(".")[0] + ".json")
        table = json.loads(table_path.read_text())
        for specs in table["kernels"].values():
            for spec in specs:
                if spec is not None:
                    spec["dtype"] = "object"
        table_path.write_text(json.dumps(table))
    else:
        copied.write_bytes(copied.read_bytes()[:4096])
    reason, problem, numba, times = ast.literal_eval(
        python(_TICK, pythonpath=root, cwd=tmp_path).stdout.splitlines()[-1])
    assert "cannot load" in reason and problem and numba
    assert times == jit_times


def test_a_table_that_does_not_match_a_kernels_arguments_leaves_that_kernel_to_the_jit(
        extension: Path, copied: Path, tmp_path: Path, jit_times: list[float]) -> None:
    """One spec short, the guard would let an argument reach compiled code unchecked: that
    kernel goes to numba's JIT instead, with the same results."""
    root = copied
    _add_extension(root, extension)
    copied = root / "govd" / "model" / extension.name
    table_path = copied.with_name(extension.name.split(".")[0] + ".json")
    table = json.loads(table_path.read_text())
    table["kernels"]["govd_model_tick__model_tick"].pop()
    table_path.write_text(json.dumps(table))
    reason, _, numba, times = ast.literal_eval(
        python(_TICK, pythonpath=root, cwd=tmp_path).stdout.splitlines()[-1])
    assert reason.startswith("compiled ahead of time") and numba
    assert times == jit_times


def test_without_an_extension_the_jit_runs_and_it_is_no_problem(copied: Path,
                                                                tmp_path: Path) -> None:
    root = copied
    reason, problem, numba, _ = ast.literal_eval(
        python(_TICK, pythonpath=root, cwd=tmp_path).stdout.splitlines()[-1])
    assert "no compiled kernels" in reason and not problem and numba


def test_an_unknown_kernel_mode_is_refused_with_the_modes() -> None:
    done = python("import govd.model.tick", mode="fast", check=False)
    assert done.returncode != 0
    assert "GOVD_KERNELS='fast': must be one of auto, aot, jit" in done.stderr


_OTHER_ARRAYS = """
import sys
import numpy as np
from govd.model import tick as k
from govd.model.online import OnlineModel
from govd.model.settings import ModelSettings
model = OnlineModel(np.array([300.0, 600.0, 900.0]), ModelSettings(counters=("a", "b")))
x = np.array([2.0e6, 3.0e4])
wide = np.zeros(4)
wide[::2] = x
states = [model.state.copy() for _ in range(3)]
flags = [[], [], []]
for i in range(30):
    f = 300.0 * (1 + i % 3)
    args = (4000.0 / f + 1.0, f, 30.0, 0.8, 0.5, 16.6)
    flags[0].append(k.model_tick(states[0], x, *args))
    if i == 0:
        before = 'numba' in sys.modules
    # the compiled code would read these as contiguous float64: garbage or a crash
    flags[1].append(k.model_tick(states[1], wide[::2], *args))
    flags[2].append(k.model_tick(states[2], x.astype(np.float32), *args))
print(repr((before, 'numba' in sys.modules, flags[0] == flags[1] == flags[2],
            all(np.array_equal(s, states[0], equal_nan=True) for s in states),
            bool(np.array_equal(states[0], model.state, equal_nan=True)))))
"""


def test_arrays_of_other_types_go_to_the_jit_instead_of_crashing(extension: Path) -> None:
    before, after, same_flags, same_state, unchanged = ast.literal_eval(
        python(_OTHER_ARRAYS, mode="aot").stdout.splitlines()[-1])
    assert not before and after  # the strided and the float32 calls compiled with numba
    assert same_flags and same_state and not unchanged


_OUTSIDE = """
import sys
import numpy as np
from govd.kernels import loader as kernels
from govd.model import online
from govd.model import tick as k
from govd.research.arnlms import arnlms_update, arnlms_update_ref
model = online.OnlineModel(np.array([300.0, 600.0]))
assert 'numba' not in sys.modules
views = k.unpack(model.state)            # numba now, calling the exported _matrix from nopython
same_views = all(np.array_equal(v, r, equal_nan=True)
                 for v, r in zip(views, k.unpack.py_func(model.state), strict=True))
w, h = np.full(4, 0.1), np.arange(4.0)
w2, h2 = w.copy(), h.copy()
y = arnlms_update(w, h, 12.0, 0.5, 1e-3)
y2 = arnlms_update_ref(w2, h2, 12.0, 0.5, 1e-3)
model.update(10.0, 300.0, np.zeros(0), 30.0, 0.8, 0.5, 16.6)  # its bound model_tick, compiled
print(repr(('numba' in sys.modules, same_views, y == y2, bool(np.array_equal(w, w2)),
            kernels.ahead_of_time(online.model_tick), kernels.ahead_of_time(k.model_tick),
            model.stats_dict() != {})))
"""


def test_a_kernel_outside_the_extension_compiles_with_the_kernels_it_calls(
        extension: Path) -> None:
    numba, same_views, same_y, same_w, bound_aot, module_aot, ran = ast.literal_eval(
        python(_OUTSIDE, mode="aot").stdout.splitlines()[-1])
    assert numba and same_views and same_y and same_w and ran
    # callers that bound the compiled kernel keep it; nopython code sees numba's dispatcher
    assert bound_aot and not module_aot


def _routes(spec: ArraySpec, value: object) -> str:
    call = guarded(lambda a, x: "compiled", [spec, None], lambda a, x: "jit")
    return str(call(value, 1.0))


def test_the_guard_sends_only_the_exported_array_type_to_the_compiled_kernel() -> None:
    spec = ArraySpec("float64", 1, contiguous=True, writable=True)
    ok = np.zeros(3)
    read_only = np.zeros(3)
    read_only.flags.writeable = False
    assert _routes(spec, ok) == "compiled"
    assert _routes(spec, np.zeros(3, dtype=np.float32)) == "jit"
    assert _routes(spec, np.zeros((3, 1))) == "jit"
    assert _routes(spec, np.zeros(6)[::2]) == "jit"
    assert _routes(spec, read_only) == "jit"  # the kernel writes it
    assert _routes(spec, np.zeros(3).astype(">f8")) == "jit"  # byte order
    assert _routes(spec, [0.0, 0.0]) == "jit"
    reading = ArraySpec("float64", 1, contiguous=True, writable=False)
    assert _routes(reading, read_only) == "compiled" and _routes(reading, ok) == "compiled"


def _two_calls(first: np.ndarray, second: np.ndarray) -> tuple[object, set[tuple[object, ...]]]:
    import numba

    from govd.kernels.loader import _Kernel

    def first_cell(a):  # type: ignore[no-untyped-def]
        return a[0]

    dispatcher = numba.njit(first_cell)
    dispatcher(first)
    dispatcher(second)
    calls = {(dispatcher.typeof_pyval(first),), (dispatcher.typeof_pyval(second),)}
    return _Kernel(first_cell, {}, dispatcher=dispatcher), calls


def test_the_build_refuses_a_kernel_called_with_two_signatures() -> None:
    from govd.kernels.build import BuildError, signature

    kernel, calls = _two_calls(np.zeros(2), np.zeros(2, dtype=np.int64))
    with pytest.raises(BuildError, match=r"first_cell is called with 2 signatures \(.*int64"):
        signature(kernel, calls)


def test_a_read_only_and_a_writable_array_of_one_type_export_as_the_read_only_one() -> None:
    from govd.kernels.build import signature

    read_only = np.zeros(2)
    read_only.flags.writeable = False
    kernel, calls = _two_calls(np.zeros(2), read_only)
    sig = signature(kernel, calls)
    assert len(sig.args) == 1 and not sig.args[0].mutable and str(sig.return_type) == "float64"


def test_a_failed_build_says_why_in_one_line_and_exits_1() -> None:
    done = python("import govd.kernels.build as b\n"
                  "b.entry_calls = lambda ticks: {}\n"
                  "raise SystemExit(b.main([]))\n", mode="jit", check=False)
    assert done.returncode == 1
    assert done.stderr.splitlines() == [
        "govd kernels build: no kernel was called from Python while driving the governors"]


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
def test_make_goes_on_with_the_jit_when_the_kernels_do_not_build() -> None:
    import subprocess

    done = subprocess.run(["make", "-s", "kernels", "PY=false"], cwd=REPO, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "kernels not compiled ahead of time; govd uses numba's JIT" in done.stdout


_REUSE = """
import sys
from pathlib import Path
from govd.kernels.build import main, reuse
if sys.argv[2] == "main":
    raise SystemExit(main(["--reuse", sys.argv[1]]))
print(repr(str(reuse(Path(sys.argv[1])))))
"""


def test_an_install_takes_the_extension_its_checkout_built_from_the_same_sources(
        extension: Path, copied: Path, tmp_path: Path) -> None:
    """`make install` passes the checkout's govd/model: an extension of the same digest is
    copied and loads, instead of ~100 s of CPU compiling it again."""
    done = python(_REUSE, str(MODEL), "main", mode="jit", pythonpath=copied, cwd=tmp_path)
    assert f"taken from {MODEL}" in done.stdout
    assert (copied / "govd" / "model" / extension.name).is_file()
    reason, problem, numba, _ = ast.literal_eval(
        python(_TICK, pythonpath=copied, cwd=tmp_path).stdout.splitlines()[-1])
    assert reason.startswith("compiled ahead of time") and not problem and not numba


def test_an_extension_that_does_not_load_is_not_taken_and_nothing_is_left(
        extension: Path, copied: Path, tmp_path: Path) -> None:
    source = tmp_path / "checkout-model"
    source.mkdir()
    stem = extension.name.split(".")[0]
    (source / extension.name).write_bytes(b"\x7fELF not really")
    shutil.copy(MODEL / (stem + ".json"), source / (stem + ".json"))
    done = python(_REUSE, str(source), "reuse", mode="jit", pythonpath=copied, cwd=tmp_path)
    assert ast.literal_eval(done.stdout.splitlines()[-1]) == "None"
    assert not list((copied / "govd" / "model").glob("_aot_*"))
