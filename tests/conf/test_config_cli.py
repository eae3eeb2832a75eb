"""`govd check-config` and `govd config schema` as a user runs them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def govd(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-m", "govd", *args], env=env, capture_output=True, text=True
    )


def test_check_config_says_ok_for_the_shipped_file() -> None:
    shipped = ROOT / "config" / "govd.yaml"
    out = govd("check-config", "--insecure-config", str(shipped))
    assert (out.returncode, out.stdout) == (0, f"{shipped}: ok\n")


def test_check_config_prints_each_error_and_exits_1(tmp_path: Path) -> None:
    os.chmod(tmp_path, 0o755)
    bad = tmp_path / "bad.yaml"
    bad.write_text("period_ms: 1\nlogging:\n  levle: info\n")
    os.chmod(bad, 0o644)
    out = govd("check-config", str(bad))
    assert out.returncode == 1
    assert out.stderr.splitlines() == [
        f"{bad}:1: period_ms: Input should be greater than or equal to 10",
        f"{bad}:3: logging.levle: unknown key (allowed: level, summary_interval_s)",
    ]


def test_config_schema_is_json_schema_forbidding_unknown_keys() -> None:
    out = govd("config", "schema")
    schema = json.loads(out.stdout)
    assert out.returncode == 0
    assert schema["additionalProperties"] is False
    assert set(schema["properties"]) >= {"devices", "policy", "target", "frames", "state_file"}
