"""`bench/bench_seed.py` at a tiny size: every section runs and records its command."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_every_seed_report_section_has_results_and_its_command(tmp_path: Path) -> None:
    out = tmp_path / "seed.json"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, str(ROOT / "bench" / "bench_seed.py"), "--minutes",
                           "0.05", "--out", str(out)], capture_output=True, text=True, env=env,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    sections = json.loads(out.read_text())["sections"]
    assert list(sections) == ["methods", "offline_vs_online", "feature_selection", "mu_sweep",
                              "prior", "two_domains"]
    for section in sections.values():
        assert section["command"] and all(c.startswith("govd ") for c in section["command"])
    assert set(sections["methods"]["summary"]) == {"rls", "dcd", "arnlms"}
    assert len(sections["mu_sweep"]["values"]) == 49
    assert [r["ratio"] for r in sections["offline_vs_online"]["ratios"]] == [0.1, 0.3, 0.5, 0.7,
                                                                             0.9]
