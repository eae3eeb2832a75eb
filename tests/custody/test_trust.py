"""Files govd acts on as root are trusted only when nobody but root and govd's user could have
written or swapped them (issue 28 items 4 and 6): the state file, its folder and every folder
above it, and the configuration through every folder up to ``/``, as sshd's StrictModes."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from govd.conf.load import ConfigError, load_config
from govd.custody.custody import restore_custody
from govd.custody.state_file import SavedState, StateFileError, load_state, save_state
from govd.daemon.daemon import Daemon, Options
from govd.device.devfreq import DevfreqDevice
from tests.custody.test_state_file import dead_pid
from tests.sysfs_fixtures import mali_panfrost

NOBODY = 65534


def hostile_state(root: Path, device: Path) -> dict[str, object]:
    """What a local user would write: the GPU held at its lowest clock under powersave."""
    return {"version": 1, "pid": dead_pid(), "sysfs_root": str(root), "devices": [{
        "backend": "devfreq", "name": device.name,
        "path": str(device.relative_to(root)),
        "state": {"governor": "powersave", "min_freq_hz": 200_000_000,
                  "max_freq_hz": 200_000_000}}]}


@pytest.fixture
def sticky_world(tmp_path: Path) -> Path:
    """A folder anyone may write in, sticky as /tmp (root's)."""
    folder = tmp_path / "shared"
    folder.mkdir()
    folder.chmod(0o1777)
    return folder


def test_a_state_file_another_user_wrote_is_never_applied_by_govd_restore(
        tmp_path: Path, sticky_world: Path) -> None:
    root = tmp_path / "sys"
    mali, _ = mali_panfrost(root)
    state = sticky_world / "state.json"
    state.write_text(json.dumps(hostile_state(root, mali)))
    os.chown(state, NOBODY, NOBODY)  # as if that user created it before govd did
    with pytest.raises(StateFileError, match=f"{state}: refusing an unsafe state file: .*"
                                             f"owned by uid {NOBODY}"):
        restore_custody(state)
    assert (mali / "governor").read_text().strip() == "simple_ondemand"
    assert (mali / "max_freq").read_text().strip() == "800000000"


def test_a_state_file_in_a_folder_others_may_write_is_refused_even_if_root_owns_it(
        tmp_path: Path, sticky_world: Path) -> None:
    state = sticky_world / "state.json"
    state.write_text(json.dumps({"version": 1, "pid": dead_pid(), "devices": []}))
    with pytest.raises(StateFileError, match="folder is writable by group or others"):
        load_state(state)
    with pytest.raises(StateFileError, match="folder is writable by group or others"):
        save_state(sticky_world / "other.json", SavedState([]))
    assert not (sticky_world / "other.json").exists()


def test_the_daemon_refuses_to_start_on_a_state_file_another_user_wrote(
        tmp_path: Path) -> None:
    root = tmp_path / "sys"
    mali, _ = mali_panfrost(root)
    run = tmp_path / "run"
    run.mkdir()
    state = run / "state.json"
    state.write_text(json.dumps(hostile_state(root, mali)))
    os.chown(state, NOBODY, NOBODY)
    config = {"period_ms": 10, "state_file": str(state),
              "frames": {"source": "socket", "socket": {"path": str(run / "f.sock"),
                                                        "group": None}}}
    from govd.conf.schema import Config

    daemon = Daemon(Options(Config.model_validate(config), sysfs_root=root,
                            should_stop=lambda: True))
    with pytest.raises(StateFileError, match=f"owned by uid {NOBODY}"):
        daemon.run()
    assert (mali / "governor").read_text().strip() == "simple_ondemand"
    assert json.loads(state.read_text())["devices"][0]["state"]["governor"] == "powersave"


def test_a_state_file_below_a_folder_another_user_owns_is_refused(tmp_path: Path) -> None:
    theirs = tmp_path / "theirs"
    (theirs / "run").mkdir(parents=True)
    os.chown(theirs, NOBODY, NOBODY)  # they may rename run/ and put their own in its place
    root = tmp_path / "sys"
    mali, _ = mali_panfrost(root)
    device = DevfreqDevice(mali, root)
    with pytest.raises(StateFileError, match=f"{theirs}: folder is owned by uid {NOBODY}"):
        save_state(theirs / "run" / "state.json", SavedState([device.save()], str(root)))


def test_a_configuration_below_a_world_writable_grandparent_is_refused(tmp_path: Path) -> None:
    ww = tmp_path / "ww"
    sub = ww / "sub"
    sub.mkdir(parents=True)
    ww.chmod(0o777)  # not sticky: anyone may rename sub/ and link their own folder there
    config = sub / "govd.yaml"
    config.write_text("period_ms: 50\n")
    config.chmod(0o600)
    with pytest.raises(ConfigError, match=f"{ww}: folder is writable by group or others"):
        load_config(config)
    # what the attack would then do: rename sub/ and link a folder of their own
    (ww / "sub").rename(ww / "old")
    mine = tmp_path / "mine"
    shutil.copytree(ww / "old", mine)
    (ww / "sub").symlink_to(mine)
    with pytest.raises(ConfigError, match="writable by group or others"):
        load_config(config)


def test_a_configuration_through_a_link_is_judged_along_both_paths(tmp_path: Path) -> None:
    real = tmp_path / "etc" / "govd"
    real.mkdir(parents=True)
    (real / "govd.yaml").write_text("period_ms: 50\n")
    (real / "govd.yaml").chmod(0o600)
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    os.chown(theirs, NOBODY, NOBODY)
    (theirs / "link").symlink_to(real)  # the link's folder is theirs: they may repoint it
    with pytest.raises(ConfigError, match=f"{theirs}: folder is owned by uid {NOBODY}"):
        load_config(theirs / "link" / "govd.yaml")
    assert load_config(real / "govd.yaml").period_ms == 50


def test_a_sticky_world_writable_folder_above_the_configurations_own_is_accepted(
        tmp_path: Path, sticky_world: Path) -> None:
    """As /tmp: nobody may rename an entry they do not own there, and each entry is checked."""
    own = sticky_world / "etc"
    own.mkdir()
    (own / "govd.yaml").write_text("period_ms: 50\n")
    (own / "govd.yaml").chmod(0o600)
    assert load_config(own / "govd.yaml").period_ms == 50
    os.chown(own, NOBODY, NOBODY)  # their folder in the sticky one: they may swap its content
    with pytest.raises(ConfigError, match=f"{own}: folder is owned by uid {NOBODY}"):
        load_config(own / "govd.yaml")
