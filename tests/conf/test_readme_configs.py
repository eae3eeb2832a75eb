"""Every configuration example in README.md passes `govd check-config`."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import pytest

from govd.commands.check_config import check_config
from govd.conf.schema import Config

README = Path(__file__).resolve().parents[2] / "README.md"
TEXT = README.read_text()
BLOCKS = re.findall(r"^ *```yaml\n(.*?)^ *```", TEXT, flags=re.M | re.S)


def test_readme_has_configuration_examples() -> None:
    assert len(BLOCKS) >= 2


@pytest.mark.parametrize("block", BLOCKS)
def test_readme_configuration_example_passes_check_config(
    block: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "example.yaml"
    path.write_text(block)
    (tmp_path / "sys").mkdir()
    args = argparse.Namespace(file=str(path), insecure_config=True, sysfs_root=tmp_path / "sys")
    assert check_config(args) == 0, capsys.readouterr().err


def test_inline_code_never_shows_configuration_outside_a_checked_block() -> None:
    """A top-level key written inline (`devices: - match: ...`) is not checked: examples go in
    a yaml block, where the test above runs them."""
    spans = re.findall(r"`([^`\n]+)`", re.sub(r"```.*?```", "", TEXT, flags=re.S))
    keys = set(Config.model_fields)
    inline = [s for s in spans if s.split(":", 1)[0] in keys and ":" in s]
    assert inline == []
