"""What keeps the installed daemon small: SciPy kept out of `govd run`."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def _python(code: str) -> str:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=env, timeout=300, cwd=REPO)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_govd_run_keeps_scipy_out_and_the_governor_still_imports(tmp_path):
    # `govd run` on an empty tree stops at "no device" after importing the whole daemon
    out = _python(
        "import sys\n"
        "from govd.cli import build_parser\n"
        "from govd.commands.run import run_daemon\n"
        f"args = build_parser('run').parse_args(['run', '--sysfs-root', '{tmp_path}', "
        f"'--state-file', '{tmp_path}/state.json'])\n"
        "status = run_daemon(args)\n"
        "import govd.governor, numba\n"
        "print(status, 'scipy' in sys.modules and sys.modules['scipy'] is None)\n"
    )
    assert out.splitlines()[-1] == "1 True"


def test_kept_out_modules_fail_to_import_like_missing_ones():
    out = _python(
        "from govd.daemon.footprint import keep_out\n"
        "print(keep_out(('os',)))\n"  # imported already: left alone
        "print(keep_out(('scipy',)))\n"
        "try:\n    import scipy\nexcept ImportError:\n    print('refused')\n"
    )
    assert out.splitlines() == ["[]", "['scipy']", "refused"]

