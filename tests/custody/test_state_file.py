"""The state file: atomic, 0600, restores every device, stale only when its owner is gone."""

from __future__ import annotations

import json
import os
import re
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from govd.custody.custody import restore_custody
from govd.custody.state_file import (
    SavedState,
    StateFileError,
    load_state,
    owner_alive,
    save_state,
)
from govd.device.devfreq import DevfreqDevice
from tests.sysfs_fixtures import adreno_msm, mali_panfrost


def _restored(path: Path) -> tuple[int, list[str]]:
    """What `govd restore` does with the state file ``path``: (devices in stale files, failures)."""
    done = restore_custody(path)
    return done.devices, done.failures


def dead_pid() -> int:
    child = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                           capture_output=True, text=True, check=True)
    return int(child.stdout)


SAVED = {"backend": "devfreq", "name": "x", "path": "class/devfreq/x",
         "state": {"governor": "simple_ondemand", "min_freq_hz": 1, "max_freq_hz": 2}}


def test_state_file_is_private_and_has_no_leftover_temporary(tmp_path):
    path = tmp_path / "run/govd/state.json"
    os.umask(0o022)
    save_state(path, SavedState([SAVED], "/sys"))
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert [p.name for p in path.parent.iterdir()] == ["state.json"]
    assert load_state(path) == SavedState([SAVED], "/sys", os.getpid())


def test_rewrite_replaces_the_whole_file(tmp_path):
    path = tmp_path / "state.json"
    save_state(path, SavedState([{"name": str(i)} for i in range(50)]))
    save_state(path, SavedState([{"name": "only"}]))
    assert json.loads(path.read_text())["devices"] == [{"name": "only"}]


def test_missing_file_is_nothing_to_restore(tmp_path):
    assert load_state(tmp_path / "absent.json") is None
    assert _restored(tmp_path / "absent.json") == (0, [])


@pytest.mark.parametrize("text", ["{", "[]", '{"version": 9, "pid": 1, "devices": []}',
                                  '{"version": 1, "pid": 1, "devices": [3]}'])
def test_garbage_is_refused_with_the_file_named(tmp_path, text):
    path = tmp_path / "state.json"
    path.write_text(text)
    with pytest.raises(StateFileError, match=str(path)):
        load_state(path)


def test_restore_from_a_crashed_run_puts_every_device_back_and_removes_the_file(tmp_path):
    mali_path, mali_kernel = mali_panfrost(tmp_path)
    adreno_path, adreno_kernel = adreno_msm(tmp_path)
    devices = [DevfreqDevice(mali_path, tmp_path, mali_kernel),
               DevfreqDevice(adreno_path, tmp_path, adreno_kernel)]
    state = SavedState([d.save() for d in devices], str(tmp_path), pid=dead_pid())
    path = tmp_path / "state.json"
    save_state(path, state)
    for device in devices:
        device.set_level(300)  # then the daemon crashed
    assert (mali_path / "governor").read_text().strip() == "userspace"
    assert _restored(path) == (2, [])
    for device_path in (mali_path, adreno_path):
        assert (device_path / "governor").read_text().strip() == "simple_ondemand"
    assert not path.exists()


def test_failed_restore_keeps_the_file_for_another_try(tmp_path):
    path = tmp_path / "state.json"
    saved = {"backend": "devfreq", "name": "gone", "path": "class/devfreq/gone",
             "state": {"governor": "simple_ondemand", "min_freq_hz": 1, "max_freq_hz": 2}}
    save_state(path, SavedState([saved], str(tmp_path), pid=dead_pid()))
    count, failures = _restored(path)
    assert count == 1 and len(failures) == 1 and failures[0].startswith("gone:")
    assert path.exists()


def test_file_of_a_running_daemon_is_not_stale(tmp_path):
    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)", "govd"])
    try:
        # between fork and exec the child's cmdline is still the parent's: wait for the exec
        cmdline = Path(f"/proc/{live.pid}/cmdline")
        for _ in range(500):
            if b"time.sleep(30)" in cmdline.read_bytes():
                break
            time.sleep(0.01)
        assert owner_alive(SavedState([], pid=live.pid))
        path = tmp_path / "state.json"
        save_state(path, SavedState([], pid=live.pid))
        with pytest.raises(StateFileError, match="is running"):
            _restored(path)
    finally:
        live.kill()
        live.wait()
    assert not owner_alive(SavedState([], pid=live.pid))


def _with(**change: object) -> dict[str, object]:
    return {**SAVED, **change}


@pytest.mark.parametrize(("devices", "why"), [
    ([_with(backend="warp")], "unknown backend 'warp'"),
    ([_with(name=7)], "without a name"),
    ([_with(path=["class"])], "path must be a string"),
    ([_with(state=[])], "state must be an object"),
    ([_with(state={**SAVED["state"], "bounds": 1})], "unknown keys bounds"),  # type: ignore
    ([_with(state={"governor": "userspace", "min_freq_hz": 1})], "lacks 'max_freq_hz'"),
    ([_with(state={**SAVED["state"], "min_freq_hz": "1"})], "'min_freq_hz' is '1'"),  # type: ignore
    ([_with(state={**SAVED["state"], "max_freq_hz": True})], "'max_freq_hz' is True"),  # type: ignore
])
def test_malformed_device_entry_is_refused_in_one_line(tmp_path, devices, why):
    path = tmp_path / "state.json"
    path.write_text(json.dumps({"version": 1, "pid": 1, "sysfs_root": "/sys",
                                "devices": devices}))
    with pytest.raises(StateFileError, match=re.escape(why)) as caught:
        load_state(path)
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize("top", [
    {"pid": "1"}, {"pid": 0}, {"pid": True}, {"sysfs_root": "sys"}, {"sysfs_root": 3},
    {"devices": {}}, {"extra": 1}, {"version": True},
])
def test_malformed_top_level_is_refused(tmp_path, top):
    path = tmp_path / "state.json"
    path.write_text(json.dumps({"version": 1, "pid": 1, "sysfs_root": "/sys", "devices": [],
                                **top}))
    with pytest.raises(StateFileError, match="not a govd state file"):
        load_state(path)


def _pointing_elsewhere(tmp_path: Path, how: str) -> tuple[str, Path]:
    """A state file's device path that leads out of the devices discovery finds, and the
    file a restore through it would write."""
    victim = tmp_path / "victim"  # beside the sysfs root, outside it
    victim.mkdir()
    for name in ("governor", "min_freq", "max_freq", "cur_freq"):
        (victim / name).write_text("1\n")  # readable as a device: only the path check stops it
    if how == "absolute":
        return str(victim), victim / "governor"
    if how == "dotdot":
        return "class/devfreq/../../../victim", victim / "governor"
    if how == "symlink":
        link = tmp_path / "sys/class/devfreq/fake.gpu"
        link.symlink_to(victim)  # found by a walk of class/devfreq, but leads out of the tree
        return "class/devfreq/fake.gpu", victim / "governor"
    raise AssertionError(how)


@pytest.mark.parametrize("how", ["absolute", "dotdot", "symlink"])
def test_restore_never_writes_outside_a_found_device(tmp_path, how):
    mali_panfrost(tmp_path / "sys")
    rel, victim = _pointing_elsewhere(tmp_path, how)
    saved = _with(path=rel, name="fake.gpu",
                  state={"governor": "performance", "min_freq_hz": 1, "max_freq_hz": 2})
    path = tmp_path / "state.json"
    save_state(path, SavedState([saved], str(tmp_path / "sys"), pid=dead_pid()))
    count, failures = _restored(path)
    assert count == 1 and len(failures) == 1
    assert re.match(r"fake.gpu: path .* (must be relative|is not a devfreq device found)",
                    failures[0])
    assert victim.read_text() == "1\n"
    assert path.exists()
