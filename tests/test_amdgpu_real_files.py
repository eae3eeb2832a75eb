"""`govd devices` on every real AMD GPU in ``../shared/data/sysfs-amd/``: as the README there says
the hardware allows (issue 25's test of done).

Each GPU's files are laid out, byte for byte, in a temporary tree (`tests.amdgpu_cards.from_data`;
missing files written in the kernel's format) with one card per GPU, and `govd devices --json`
runs on it as a user would. What each GPU is comes from the data README (`EXPECTED`); the numbers
checked (ranges, levels, the clock running) come from the GPU's own files, read here with a
parser of this test's own. Skipped where the data folder is absent.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from govd.device.amdgpu_modes import MAX_OD_LEVELS
from tests.amdgpu_cards import DATA, REAL_FACTS, from_data, real_folders

REPO = Path(__file__).resolve().parents[1]

FINE, DISCRETE, NEEDS_OVERDRIVE, NO_OD_SCLK, OFFSET = (
    "fine", "discrete", "needs overdrive", "no OD_SCLK", "offset")
EXPECTED = {
    # what the README says each is (the classes in its last section)
    "amdgpu-sysfs-rs/rx580": DISCRETE, "amdgpu-sysfs-rs/vega56": DISCRETE,
    "pastes-rocm-legacy-rocm-build-606/vega64": DISCRETE,
    "amdgpu-sysfs-rs/rx5500xt": FINE, "amdgpu-sysfs-rs/rx5700xt": FINE,
    "amdgpu-sysfs-rs/rx6700xt": FINE, "amdgpu-sysfs-rs/rx6800": FINE,
    "amdgpu-sysfs-rs/rx6900xt": FINE, "pastes-amdgpu-clocks-issue-32/rx6900xt": FINE,
    "pastes-powerupp-issue-21/rx6800xt": FINE, "pastes-lact-issue-376/rx7900gre": FINE,
    "amdgpu-sysfs-rs/rx7800xt": FINE, "amdgpu-sysfs-rs/rx7900xt": FINE,
    "amdgpu-sysfs-rs/rx7900xtx": FINE,
    "amdgpu-sysfs-rs/vangogh": FINE, "amdgpu-sysfs-rs/internal-7840u": FINE,
    "pastes-simpledeckytdp-issue-62/apu-unspecified-200-2200": FINE,
    "pastes-simpledeckytdp-issue-62/steamdeck-lcd-oled-auto": FINE,
    "amdgpu-sysfs-rs/rx6950xt": NEEDS_OVERDRIVE, "amdgpu-sysfs-rs/rx7600s": NEEDS_OVERDRIVE,
    "amdgpu-sysfs-rs/rx7700s": NEEDS_OVERDRIVE,
    "pastes-lact-issue-322/rx6700s": NO_OD_SCLK, "pastes-upp-issue-25/radeon-pro-w6600": NO_OD_SCLK,
    "amdgpu-sysfs-rs/rx9070xt": OFFSET, "amdgpu-sysfs-rs/rx9070xt-history-94cd569": OFFSET,
    "pastes-amdgpu-clocks-pr65/rx9070xt": OFFSET,
    "pastes-kernel-commit-a8047a291f/rx9070xt-linux6.12-6.13-format": OFFSET,
    "pastes-kernel-commit-a8047a291f/rx9070xt-linux6.14-format": OFFSET,
}
SAYS = {NEEDS_OVERDRIVE: ("amdgpu.ppfeaturemask=0xfff7ffff", "0x4000", "6.13"),
        NO_OD_SCLK: ("offers no OD_SCLK",), OFFSET: ("OD_SCLK_OFFSET", "caps no clock")}

pytestmark = pytest.mark.skipif(not DATA.is_dir(), reason=f"no data folder {DATA}")


def _read(folder: str, prefix: str) -> str:
    files = sorted((DATA / folder).glob(f"{prefix}*"))
    return files[0].read_bytes().replace(b"\0", b"").decode() if files else ""


def _od_values(folder: str) -> tuple[list[int], list[int] | None]:
    """OD_SCLK's two clocks and OD_RANGE's SCLK pair, parsed here from the data file."""
    text = _read(folder, "pp_od_clk_voltage")
    section = re.search(r"OD_SCLK:\s*\n\s*0:\s*(\d+)\s*mhz\s*\n\s*1:\s*(\d+)\s*mhz", text,
                        re.IGNORECASE)
    span = re.search(r"^\s*SCLK:\s*(\d+)\s*mhz\s+(\d+)\s*mhz", text, re.IGNORECASE | re.MULTILINE)
    return ([int(v) for v in section.groups()] if section else [],
            [int(v) for v in span.groups()] if span else None)


def _marked_mhz(folder: str) -> tuple[bool, float | None]:
    """(whether pp_dpm_sclk was captured, the clock it marks: an ``S:`` line's, else the one
    starred line's; None when none or two different are marked)."""
    text = _read(folder, "pp_dpm_sclk")
    if not text:
        return False, None
    marked = re.findall(r"^\s*(\w+):\s*(\d+)\s*mhz\s*\*", text, re.IGNORECASE | re.MULTILINE)
    sleep = [float(mhz) for tag, mhz in marked if tag.upper() == "S"]
    clocks = sleep or sorted({float(mhz) for _, mhz in marked})
    return True, clocks[0] if len(clocks) == 1 else None


@pytest.fixture(scope="module")
def listed(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, object]]:
    """`govd devices --json` on one tree holding every GPU of the data folder, by folder."""
    root = tmp_path_factory.mktemp("sysfs-amd")
    folders = real_folders()
    models = {}
    for i, folder in enumerate(folders):
        _, _, models[folder] = from_data(root, folder, card=f"card{i}",
                                         bdf=f"0000:{i + 1:02x}:00.0")
    done = subprocess.run([sys.executable, "-m", "govd", "devices", "--json", "--sysfs-root",
                           str(root)], cwd=REPO, capture_output=True, text=True, timeout=120,
                          env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stderr
    rows = {row["name"]: row for row in json.loads(done.stdout)}
    return {folder: {**rows[f"card{i}"], "model": models[folder]}
            for i, folder in enumerate(folders)}


def test_every_gpu_of_the_data_folder_has_an_expected_class():
    """A GPU added to the folder gets its class here, from the README, before it passes."""
    assert set(real_folders()) == set(EXPECTED)


@pytest.mark.parametrize("folder", sorted(EXPECTED))
def test_devices_says_what_the_hardware_allows(listed, folder):
    row = listed[folder]
    reason = str(row["reason"])
    assert "\n" not in reason and reason.isprintable() and len(reason) < 400
    kind = EXPECTED[folder]
    if kind == FINE:
        found, span = _od_values(folder)
        if REAL_FACTS.get(folder, {}).get("apu"):
            low, high = span or REAL_FACTS[folder]["apu_range_mhz"]  # type: ignore[misc]
        else:  # within OD_RANGE and the soft range found: no overclocking
            low, high = max(span[0], found[0]), min(span[1], found[1])  # type: ignore[index]
        assert row["controllable"], reason
        assert (row["min_mhz"], row["max_mhz"]) == (low, high)
        assert 8 <= row["levels"] <= MAX_OD_LEVELS
    elif kind == DISCRETE:
        assert row["controllable"], reason
        assert row["levels"] == 8
    else:
        assert not row["controllable"]
        for words in SAYS[kind]:
            assert words in reason


@pytest.mark.parametrize("folder", sorted(EXPECTED))
def test_no_clock_is_misread(listed, folder):
    """The clock shown running is the one the GPU's pp_dpm_sclk marks (an ``S:`` deep-sleep
    line, a starred level or current line), nothing when it marks none or two that differ."""
    captured, marked = _marked_mhz(folder)
    row = listed[folder]
    if captured:
        assert row.get("current_mhz") == marked
    else:  # written by the fixture from OD_SCLK: the clock it runs at
        model = row["model"]
        expected = model.running_mhz() if model.levels else None  # type: ignore[attr-defined]
        assert row.get("current_mhz") == expected
