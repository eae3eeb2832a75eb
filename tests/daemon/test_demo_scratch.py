"""Where `govd run --sim` keeps its simulated GPUs' trees: in memory unless the user said
otherwise, so that their renames every tick never reach a disk."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from govd.daemon import demo
from govd.daemon.demo import scratch_parent


def test_a_tmpdir_the_user_set_is_honoured(monkeypatch: pytest.MonkeyPatch,
                                          tmp_path: Path) -> None:
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
    assert scratch_parent() is None  # tempfile's choice: $TMPDIR


def test_without_tmpdir_the_runtime_folder_is_taken(monkeypatch: pytest.MonkeyPatch,
                                                    tmp_path: Path) -> None:
    monkeypatch.delenv("TMPDIR", raising=False)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
    assert scratch_parent() == str(tmp_path)


def test_a_missing_or_unwritable_runtime_folder_gives_way_to_shared_memory(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("TMPDIR", raising=False)
    shm = tmp_path / "shm"
    shm.mkdir()
    monkeypatch.setattr(demo, "SHARED_MEMORY", str(shm))
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path / "gone"))
    assert scratch_parent() == str(shm)
    if os.geteuid() != 0:  # root may write anywhere
        locked = tmp_path / "locked"
        locked.mkdir(mode=0o500)
        monkeypatch.setenv("XDG_RUNTIME_DIR", str(locked))
        assert scratch_parent() == str(shm)
    monkeypatch.delenv("XDG_RUNTIME_DIR")
    assert scratch_parent() == str(shm)


def test_with_no_memory_folder_tempfile_chooses(monkeypatch: pytest.MonkeyPatch,
                                                tmp_path: Path) -> None:
    monkeypatch.delenv("TMPDIR", raising=False)
    monkeypatch.delenv("XDG_RUNTIME_DIR", raising=False)
    monkeypatch.setattr(demo, "SHARED_MEMORY", str(tmp_path / "no-shm"))
    assert scratch_parent() is None
    (tmp_path / "no-shm").write_text("")  # a file, not a folder
    assert scratch_parent() is None


def test_on_this_machine_the_choice_is_a_tmpfs_when_one_is_mounted(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TMPDIR", raising=False)
    monkeypatch.delenv("XDG_RUNTIME_DIR", raising=False)
    chosen = scratch_parent()
    if chosen is None:
        pytest.skip("no writable /dev/shm here")
    mounts = [line.split() for line in Path("/proc/self/mounts").read_text().splitlines()]
    fs = max((m for m in mounts if chosen == m[1] or chosen.startswith(m[1].rstrip("/") + "/")),
             key=lambda m: len(m[1]))[2]
    assert fs == "tmpfs"
