"""The `govd` command line: the command table matches what the modules register, and a
command imports only its own module."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from govd.cli import COMMANDS, build_parser

REPO_ROOT = Path(__file__).resolve().parent.parent


def test_command_table_names_exactly_what_the_modules_register() -> None:
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    assert sorted(sub.choices) == sorted(COMMANDS)  # type: ignore[arg-type]


def test_each_command_alone_parses_its_own_arguments() -> None:
    for command, module in COMMANDS.items():
        parser = build_parser(command)
        sub = next(a for a in parser._actions if a.dest == "command")
        assert command in sub.choices, (command, module)  # type: ignore[operator]


def test_status_loads_no_compiled_kernels() -> None:
    """`govd status` must work for a user whom numba could not give a cache folder."""
    code = (
        "import sys\n"
        "from govd.cli import main\n"
        "rc = main(['status', '--state-file', '/nonexistent/state.json'])\n"
        "print(rc, 'numba' in sys.modules, 'sklearn' in sys.modules)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=env, timeout=60, check=False)
    assert done.stdout.split() == ["2", "False", "False"], done.stderr
    assert "no status file" in done.stderr


def test_help_lists_every_command() -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    done = subprocess.run([sys.executable, "-m", "govd", "--help"], capture_output=True,
                          text=True, env=env, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    for command in COMMANDS:
        assert command in done.stdout


def test_a_missing_optional_package_is_one_clear_line(monkeypatch) -> None:
    import importlib.util

    from govd.cli import main

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "sklearn" else real(name, *a))
    assert main(["fit-prior", "x.csv", "-o", "p.json"]) == 2


def test_version_and_help_need_no_optional_package() -> None:
    """The installed service has no scikit-learn or matplotlib: nothing imported at start-up
    may need them."""
    code = (
        "import sys, builtins\n"
        "real = builtins.__import__\n"
        "def guarded(name, *a, **k):\n"
        "    if name.split('.')[0] in ('sklearn', 'matplotlib', 'padasip'):\n"
        "        raise ModuleNotFoundError(name)\n"
        "    return real(name, *a, **k)\n"
        "builtins.__import__ = guarded\n"
        "from govd.cli import build_parser\n"
        "build_parser()\n"
        "print('ok')\n"
    )
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=env, timeout=120, check=False)
    assert done.stdout.strip() == "ok", done.stderr
