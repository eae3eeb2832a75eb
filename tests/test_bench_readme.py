"""bench/README.md's tables are the committed results (issue #26: the policies table quoted
1.074 / 1.075 where policies.json held 1.079 / 1.096)."""

from __future__ import annotations

import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[1] / "bench"
sys.path.insert(0, str(BENCH))

import readme_tables  # noqa: E402


def test_every_generated_table_is_what_the_committed_json_gives() -> None:
    assert readme_tables.main(["--check"]) == 0


def test_a_table_that_drifted_from_its_json_is_found(tmp_path: Path, monkeypatch) -> None:
    stale = readme_tables.README.read_text().replace("| energy <= 1.02 x oracle", "| energy "
                                                     "<= 1.02 x oracle (edited)", 1)
    monkeypatch.setattr(readme_tables, "README", tmp_path / "README.md")
    (tmp_path / "README.md").write_text(stale)
    assert readme_tables.main(["--check"]) == 1
    assert readme_tables.main([]) == 0
    assert readme_tables.main(["--check"]) == 0


def test_the_readmes_status_example_is_the_committed_demo_runs_last_line() -> None:
    import json

    root = BENCH.parent
    line = json.loads((root / "bench/results/demo.json").read_text())["saving"][0]["status_line"]
    assert line.startswith("govd-sim0: energy (60 FPS)")
    assert f"\n  ```\n    {line}\n  ```\n" in (root / "README.md").read_text()
