"""How govd's modules depend on each other: no import cycle, the command line on top (no layer
imports `govd.cli` or `govd.commands`), and no research code in what `govd run` imports.

The graph is read from the source with `ast`: imports at module level and inside functions
alike (a function-level import is a cycle deferred, not removed); imports under
``if TYPE_CHECKING:`` are left out, as they never run. Each check is a function of an edge
list, tested on a bad graph too, so that it cannot pass by finding nothing.
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PACKAGE = REPO / "govd"
FACE = ("govd.cli", "govd.commands", "govd.__main__")
"""The command line (``python -m govd`` too): only these modules may import these modules."""


def module_files(package: Path = PACKAGE) -> dict[str, Path]:
    """Dotted module name -> file, for every module of ``package`` (a package by its
    ``__init__``)."""
    found = {}
    for path in package.rglob("*.py"):
        parts = path.relative_to(package.parent).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


def _type_checking_only(node: ast.AST) -> bool:
    return isinstance(node, ast.If) and (
        (isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING")
        or (isinstance(node.test, ast.Attribute) and node.test.attr == "TYPE_CHECKING"))


def _imports(tree: ast.AST) -> Iterable[ast.Import | ast.ImportFrom]:
    """Every import statement that runs: at module level, in functions and classes, in
    ``try``/``if`` blocks; not those under ``if TYPE_CHECKING:``."""
    stack = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
        if _type_checking_only(node):
            stack.extend(node.orelse)  # type: ignore[attr-defined]
            continue
        stack.extend(ast.iter_child_nodes(node))


def import_edges(modules: Mapping[str, Path]) -> dict[str, set[str]]:
    """Module -> the modules of ``modules`` it imports (``from a import b`` names ``a.b`` when
    that is a module, else ``a``)."""
    edges: dict[str, set[str]] = {}
    for name, path in modules.items():
        is_package = path.name == "__init__.py"
        targets: set[str] = set()
        for node in _imports(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    target = alias.name
                    while target and target not in modules:
                        target = target.rpartition(".")[0]
                    if target:
                        targets.add(target)
                continue
            base = node.module or ""
            if node.level:
                parent = name.split(".") if is_package else name.split(".")[:-1]
                parent = parent[:len(parent) - (node.level - 1)]
                base = ".".join([*parent, *([base] if base else [])])
            for alias in node.names:
                full = f"{base}.{alias.name}"
                if full in modules:
                    targets.add(full)
                elif base in modules:
                    targets.add(base)
        targets.discard(name)
        edges[name] = targets
    return edges


def cycles(edges: Mapping[str, Iterable[str]]) -> list[list[str]]:
    """Each group of modules that import each other, directly or not (Tarjan's strongly
    connected components of more than one module), sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    graph = {node: list(targets) for node, targets in edges.items()}
    for targets in list(graph.values()):
        for target in targets:
            graph.setdefault(target, [])

    for root in graph:
        if root in index:
            continue
        # iterative: the graph of a package is deep enough to exhaust the recursion limit
        work = [(root, 0)]
        while work:
            node, child = work.pop()
            if child == 0:
                index[node] = low[node] = len(index)
                stack.append(node)
                on_stack.add(node)
            targets = graph[node]
            if child < len(targets):
                work.append((node, child + 1))
                target = targets[child]
                if target not in index:
                    work.append((target, 0))
                elif target in on_stack:
                    low[node] = min(low[node], index[target])
                continue
            if low[node] == index[node]:
                group = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    group.append(member)
                    if member == node:
                        break
                if len(group) > 1:
                    found.append(sorted(group))
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
    return sorted(found)


def face_imports(edges: Mapping[str, Iterable[str]]) -> list[str]:
    """``importer -> imported`` for each module below the command line that imports it."""
    def is_face(name: str) -> bool:
        return any(name == face or name.startswith(face + ".") for face in FACE)

    return sorted(f"{src} -> {dst}" for src, targets in edges.items() if not is_face(src)
                  for dst in targets if is_face(dst))


def test_the_import_graph_of_govd_has_no_cycle() -> None:
    edges = import_edges(module_files())
    assert "govd.daemon.daemon" in edges["govd.commands.run"]  # a function-level import, read
    assert cycles(edges) == []


def test_the_cycle_check_finds_direct_indirect_and_separate_cycles() -> None:
    bad = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"e"}, "e": {"d"}, "f": {"a"}, "g": set()}
    assert cycles(bad) == [["a", "b", "c"], ["d", "e"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_the_graph_counts_function_level_imports_and_skips_type_checking_ones(
        tmp_path: Path) -> None:
    pkg = tmp_path / "govd"
    (pkg / "daemon").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "daemon" / "__init__.py").write_text("")
    (pkg / "daemon" / "run.py").write_text(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from govd.daemon import status\n"
        "def later():\n    from . import demo\n")
    (pkg / "daemon" / "demo.py").write_text("from govd.daemon.run import later\n")
    (pkg / "daemon" / "status.py").write_text("import govd.daemon.run\n")
    edges = import_edges(module_files(pkg))
    assert edges["govd.daemon.run"] == {"govd.daemon.demo"}
    assert cycles(edges) == [["govd.daemon.demo", "govd.daemon.run"]]


def test_no_layer_imports_the_command_line() -> None:
    assert face_imports(import_edges(module_files())) == []


def test_the_command_line_check_names_a_layer_that_imports_it() -> None:
    bad = {"govd.cli": {"govd.commands.run"}, "govd.commands.run": {"govd.daemon.demo"},
           "govd.daemon.demo": {"govd.commands.options", "govd.errors"},
           "govd.device.base": {"govd.cli"}}
    assert face_imports(bad) == ["govd.daemon.demo -> govd.commands.options",
                                 "govd.device.base -> govd.cli"]


RESEARCH = "govd.research"


def research_modules(modules: Iterable[str]) -> list[str]:
    """The research modules among ``modules``."""
    return sorted(m for m in modules if m == RESEARCH or m.startswith(RESEARCH + "."))


def _imported_by(code: str) -> list[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run([sys.executable, "-c", code + "\nprint('\\n'.join(sys.modules))"],
                          env=env, capture_output=True, text=True, timeout=300, check=True,
                          cwd=REPO)
    return done.stdout.split()


def test_govd_run_and_its_sim_demo_import_no_research_module() -> None:
    """The modules `govd run` and `govd run --sim` load: the command, the daemon, the demo and
    the simulated GPU it drives."""
    modules = _imported_by(
        "import sys\n"
        "from govd.cli import build_parser\n"
        "build_parser('run')\n"
        "import govd.commands.run, govd.daemon.daemon, govd.daemon.demo, govd.sim.clock, "
        "govd.sim.gpu, govd.sim.live\n")
    assert "govd.daemon.demo" in modules and "govd.commands.run" in modules
    assert research_modules(modules) == []


def test_the_research_check_finds_a_research_module() -> None:
    assert research_modules(["govd.daemon.daemon", "govd.research.selection", "govd.research",
                             "govd.researcher"]) == ["govd.research", "govd.research.selection"]
