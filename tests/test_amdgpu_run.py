"""`govd run` as a process on a machine with one GPU of each class, the kernel's rules applied
to its writes (`tests.kernel_driver`): it governs the ones that can be governed, leaves the others
untouched, and puts every file back byte for byte on SIGTERM, and after SIGKILL + `govd restore`.

Two machines: one with a card of each class written here (always run), one with real GPUs' files
from ``../shared/data/sysfs-amd/`` (skipped where absent): Polaris, RDNA2 with overdrive, RDNA2
without, Phoenix, two Steam Decks (one found pinned in manual, one in auto whose overdrive file
reads empty), RDNA4; both with an Intel xe GT.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.amdgpu_cards import DATA, from_data, hand_written
from tests.amdgpu_kernel import CardModel
from tests.sysfs_fixtures import xe_lunarlake

REPO = Path(__file__).resolve().parents[1]
WAIT_S = 90.0  # generous: the machine is shared; nothing here asserts on speed
CONFIG = ("policy: {name: fixed, params: {freq_mhz: 1000}}\n"
          "logging: {summary_interval_s: 0}\n")
GOVERNED = ("polaris", "rdna2_od", "phoenix", "deck")
LEFT_ALONE = {"rdna2": "ppfeaturemask", "rdna4": "OD_SCLK_OFFSET"}
REAL = {  # class -> data folder
    "polaris": "amdgpu-sysfs-rs/rx580", "rdna2_od": "amdgpu-sysfs-rs/rx6900xt",
    "rdna2": "amdgpu-sysfs-rs/rx6950xt", "phoenix": "amdgpu-sysfs-rs/internal-7840u",
    "deck": "amdgpu-sysfs-rs/vangogh",
    "deck_auto": "pastes-simpledeckytdp-issue-62/steamdeck-lcd-oled-auto",
    "rdna4": "amdgpu-sysfs-rs/rx9070xt",
}


def hand_written_machine(root: Path) -> dict[str, CardModel]:
    cards = {}
    for i, kind in enumerate((*GOVERNED, *LEFT_ALONE)):
        _, _, cards[kind] = hand_written(root, kind, card=f"card{i + 1}",
                                         bdf=f"0000:{i + 3:02x}:00.0")
    return cards


def real_machine(root: Path) -> dict[str, CardModel]:
    cards = {}
    for i, (kind, folder) in enumerate(REAL.items()):
        _, _, cards[kind] = from_data(root, folder, card=f"card{i + 1}",
                                      bdf=f"0000:{i + 3:02x}:00.0")
    return cards


MACHINES: dict[str, Callable[[Path], dict[str, CardModel]]] = {
    "written-here": hand_written_machine,
    "real-files": real_machine,
}


def snapshot(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file() and not p.is_symlink()}


def differences(before: dict[str, bytes], after: dict[str, bytes]) -> list[str]:
    return [f"{name}: {before.get(name, b'')[:80]!r} -> {after.get(name, b'')[:80]!r}"
            for name in sorted(set(before) | set(after)) if before.get(name) != after.get(name)]


def govd(root: Path, work: Path, *args: str) -> list[str]:
    return [sys.executable, "-m", "tests.kernel_driver", str(root), *args]


def start(root: Path, work: Path) -> subprocess.Popen[bytes]:
    config = work / "govd.yaml"
    config.write_text(CONFIG)
    config.chmod(0o600)
    with open(work / "daemon.err", "ab") as err:
        return subprocess.Popen(
            govd(root, work, "run", "--sysfs-root", str(root), "--socket",
                 str(work / "f.sock"), "--state-file", str(work / "state.json"), "--config",
                 str(config)),
            cwd=REPO, env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin",
                           "PYTHONUNBUFFERED": "1"},
            stdout=subprocess.DEVNULL, stderr=err)


def governing(root: Path, cards: dict[str, CardModel], xe_min: Path, xe_max: Path) -> bool:
    """Every card that can be governed is pinned (the xe GT too)."""
    for kind, model in cards.items():
        state = CardModel.load_all(root)
        if kind in LEFT_ALONE:
            continue
        [now] = [m for m in state if m.dev == model.dev]
        if now.state.perf != "manual" or (
                now.od_kind == "sclk" and now.state.committed != [1000, 1000]):
            return False
    return xe_min.read_text() == xe_max.read_text() == "1000\n"


def wait(condition: Callable[[], bool], process: subprocess.Popen[bytes], work: Path) -> None:
    deadline = time.monotonic() + WAIT_S
    while not condition():
        if process.poll() is not None:
            pytest.fail(f"govd exited {process.returncode}: {(work / 'daemon.err').read_text()}")
        if time.monotonic() > deadline:
            pytest.fail(f"govd did not govern every card: {(work / 'daemon.err').read_text()}")
        time.sleep(0.1)


@pytest.mark.timeout(600)
@pytest.mark.parametrize("machine", list(MACHINES))
def test_run_governs_each_class_it_can_and_restores_every_file_byte_for_byte(tmp_path, machine):
    if machine == "real-files" and not DATA.is_dir():
        pytest.skip(f"no data folder {DATA}")
    root, work = tmp_path / "sys", tmp_path / "work"
    work.mkdir()
    cards = MACHINES[machine](root)
    xe, _ = xe_lunarlake(root, card="card0")
    freq0 = xe / "device/tile0/gt0/freq0"
    found = snapshot(root)

    daemon = start(root, work)
    wait(lambda: governing(root, cards, freq0 / "min_freq", freq0 / "max_freq"), daemon, work)
    saved = json.loads((work / "state.json").read_text())
    assert len(saved["devices"]) == len(cards) - sum(k in LEFT_ALONE for k in cards) + 1
    daemon.send_signal(signal.SIGTERM)
    assert daemon.wait(timeout=WAIT_S) == 0, (work / "daemon.err").read_text()
    assert differences(found, snapshot(root)) == []
    log = (work / "daemon.err").read_text()
    for says in LEFT_ALONE.values():  # the journal says why those are not governed
        assert says in log

    daemon = start(root, work)
    wait(lambda: governing(root, cards, freq0 / "min_freq", freq0 / "max_freq"), daemon, work)
    daemon.kill()
    daemon.wait(timeout=WAIT_S)
    assert differences(found, snapshot(root)) != []  # nothing ran after SIGKILL
    restore = subprocess.run(govd(root, work, "restore", "--state-file",
                                  str(work / "state.json")),
                             cwd=REPO, env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"},
                             capture_output=True, text=True, timeout=WAIT_S)
    assert restore.returncode == 0, restore.stderr
    assert differences(found, snapshot(root)) == []
