"""Who may talk to govd: the socket's file mode and allow-list, per-sender rate limits, what a
sender's keys can and cannot change, the configuration's permissions, and no evaluated input."""

from __future__ import annotations

import errno
import logging
import os
import re
import socket
import stat
import subprocess
import sys
import tempfile
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from govd.conf import ConfigError, load_config
from govd.custody.state_file import SavedState, save_state
from govd.daemon.device_runner import DeviceRunner, RunnerSettings
from govd.device.devfreq import DevfreqDevice
from govd.governor import Governor
from govd.policy.registry import make_policy
from govd.sources.base import Frame
from govd.sources.socket import SocketSource
from govd.target import Target
from govd.telemetry.log import EpisodeLimiter
from tests.sysfs_fixtures import mali_panfrost

REPO = Path(__file__).resolve().parents[2]
NOBODY = 65534
needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="needs root to run a child as nobody")


@pytest.fixture
def sock_dir() -> Iterator[Path]:
    # Short path (AF_UNIX's 108 bytes), traversable by the unprivileged child.
    with tempfile.TemporaryDirectory(prefix="govd-", dir="/tmp") as d:
        os.chmod(d, 0o755)
        yield Path(d)


def in_child(action: Callable[[], None], as_uid: int | None = None) -> int:
    """Run ``action`` in a forked child (as ``as_uid`` and its gid when given); its exit status:
    0 when it returned, the errno of an OSError, 99 for anything else."""
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child's coverage is not collected
        code = 99
        try:
            if as_uid is not None:
                os.setgroups([])
                os.setgid(as_uid)
                os.setuid(as_uid)
            action()
            code = 0
        except OSError as exc:
            code = exc.errno or 98
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status)


def sender(path: Path, payload: bytes, times: int = 1) -> Callable[[], None]:
    # Never waits: the kernel queues at most net.unix.max_dgram_qlen (10) datagrams per socket,
    # and a sender finding it full would block the test; it exits with EAGAIN instead.
    def send() -> None:
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as s:
            for _ in range(times):
                s.sendto(payload, socket.MSG_DONTWAIT, str(path))

    return send


@needs_root
def test_socket_file_keeps_out_users_outside_its_group(sock_dir: Path) -> None:
    src = SocketSource(sock_dir / "frames.sock", group=None)
    assert in_child(sender(src.path, b"F 1000\n"), as_uid=NOBODY) == errno.EACCES
    assert src.drain() == []
    src.close()


@needs_root
def test_sender_not_on_the_allow_list_is_rejected_and_counted(sock_dir: Path) -> None:
    src = SocketSource(sock_dir / "frames.sock", group=None, allow_uids=[0])
    os.chmod(src.path, 0o666)  # let the kernel pass it, so that the allow-list is what decides
    assert in_child(sender(src.path, b"F 1000\nF 2000\n"), as_uid=NOBODY) == 0
    assert in_child(sender(src.path, b"F 3000\n")) == 0
    src.receive()  # every datagram, however loaded the machine (the drain reads for 4 ms)
    frames = src.drain()
    assert [(f.gpu_time_ms, f.uid) for f in frames] == [(3.0, 0)]
    assert src.stats()["rejected_sender"] == 1 and src.stats()["accepted"] == 1
    src.close()


@needs_root
def test_flooding_user_does_not_starve_another(sock_dir: Path) -> None:
    src = SocketSource(sock_dir / "frames.sock", group=None, rate_fps=100, burst=20,
                       max_queue=64, clock=lambda: 50.0)
    os.chmod(src.path, 0o666)  # another user may send
    assert in_child(sender(src.path, b"F 1000\n" * 250, times=8)) == 0  # 2000 frames at once
    assert in_child(sender(src.path, b"F 2000\n" * 5), as_uid=NOBODY) == 0
    src.receive()
    by_user = Counter(f.gpu_time_ms for f in src.drain())
    assert by_user == {1.0: 20, 2.0: 5}  # the flooder gets its burst, the other everything
    stats = src.stats()
    # two of the flood's datagrams read (their lines counted), six dropped unread
    assert stats["rate_limited"] + 250 * stats["rate_limited_datagrams"] == 2000 - 20
    assert stats["accepted"] == 25 and "queue_full" not in stats
    src.close()


def test_a_second_process_of_the_same_user_shares_its_budget(sock_dir: Path) -> None:
    src = SocketSource(sock_dir / "frames.sock", group=None, rate_fps=100, burst=20,
                       max_queue=64, clock=lambda: 50.0)
    assert in_child(sender(src.path, b"F 1000\n" * 15)) == 0
    assert in_child(sender(src.path, b"F 2000\n" * 15)) == 0  # another pid, the same uid
    src.receive()
    assert Counter(f.gpu_time_ms for f in src.drain()) == {1.0: 15, 2.0: 5}
    src.close()


def test_sender_target_fps_moves_neither_bounds_nor_target_nor_policy(tmp_path: Path) -> None:
    path, kernel = mali_panfrost(tmp_path, busy_percent=90, energy_uj=1_000_000)
    device = DevfreqDevice(path, tmp_path, kernel)
    device.save()
    policy = make_policy("energy")
    target = Target(fps=60)
    governor = Governor(device.levels_mhz, policy, target, bounds_mhz=(300.0, 700.0))
    settings = RunnerSettings("energy", target, {"game": Target(fps=30)})
    runner = DeviceRunner(device, governor, settings, EpisodeLimiter(logging.getLogger("t")))
    greedy = [Frame(45.0, app="game", target_fps=1000.0), Frame(0.01, app="x", target_fps=1000)]
    for k in range(60):
        runner.tick(k * 0.05, 0.05, [greedy[k % 2]] * 3)
        assert governor.target in (Target(fps=60), Target(fps=30))  # only the config's targets
    assert governor.policy is policy
    written = [int(v) // 1_000_000 for p, v in kernel.writes if p.endswith("set_freq")]
    assert written and all(300 <= f <= 700 for f in written)
    device.restore()


def test_state_file_is_0600_even_under_a_permissive_umask(tmp_path: Path) -> None:
    old = os.umask(0)
    try:
        save_state(tmp_path / "state.json", SavedState([{"backend": "devfreq", "name": "x"}]))
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "state.json").stat().st_mode) == 0o600


def govd(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, "-m", "govd", *args], capture_output=True, text=True,
                          env=env, timeout=60)


@pytest.fixture(params=["file", "folder"])
def unsafe_config(request: pytest.FixtureRequest, tmp_path: Path) -> Path:
    folder = tmp_path / "etc"
    folder.mkdir()
    path = folder / "govd.yaml"
    path.write_text("period_ms: 50\n")
    os.chmod(path, 0o664 if request.param == "file" else 0o644)
    os.chmod(folder, 0o755 if request.param == "file" else 0o777)
    return path


def test_check_config_refuses_a_writable_config_unless_insecure(unsafe_config: Path) -> None:
    refused = govd("check-config", str(unsafe_config))
    assert refused.returncode == 1 and "Traceback" not in refused.stderr
    assert re.search(rf"^{re.escape(str(unsafe_config))}:1: refusing an unsafe configuration: "
                     r".*writable by group or others.*--insecure-config$", refused.stderr, re.M)
    accepted = govd("check-config", "--insecure-config", str(unsafe_config))
    assert accepted.returncode == 0 and accepted.stdout == f"{unsafe_config}: ok\n"


def test_daemon_refuses_to_start_with_a_writable_config_unless_insecure(
    unsafe_config: Path, tmp_path: Path
) -> None:
    common = ("run", "--config", str(unsafe_config), "--sysfs-root", str(tmp_path),
              "--state-file", str(tmp_path / "state.json"))
    refused = govd(*common)
    assert refused.returncode == 2 and "Traceback" not in refused.stderr
    problem = [line for line in refused.stderr.splitlines() if "refusing" in line]
    assert len(problem) == 1 and "--insecure-config" in problem[0]
    assert not (tmp_path / "state.json").exists()
    # With the override the configuration is taken; the run then stops for want of a device.
    accepted = govd(*common, "--insecure-config")
    assert "refusing" not in accepted.stderr and "no device to govern" in accepted.stderr


FORBIDDEN = [
    (re.compile(r"shell\s*=\s*True"), "a shell"),
    (re.compile(r"\bos\.(system|popen)\s*\("), "a shell"),
    (re.compile(r"(?<![\w.])eval\s*\("), "evaluated text"),
    (re.compile(r"(?<![\w.])exec\s*\("), "executed text"),
    (re.compile(r"\byaml\.(load|load_all|unsafe_load|full_load)\s*\((?![^)]*SafeLoader)"),
     "a YAML loader that builds objects"),
    (re.compile(r"\byaml\.(Unsafe|Full)?Loader\b"), "a YAML loader that builds objects"),
    (re.compile(r"\bpickle\.loads?\s*\("), "unpickled input"),
]


def test_no_shell_eval_or_unsafe_yaml_anywhere_in_govd() -> None:
    found = []
    for path in sorted((REPO / "govd").rglob("*.py")):
        for number, line in enumerate(path.read_text().splitlines(), 1):
            for pattern, what in FORBIDDEN:
                if pattern.search(line):
                    found.append(f"{path.relative_to(REPO)}:{number}: {what}: {line.strip()}")
    assert found == []


def test_the_forbidden_patterns_catch_what_they_are_for() -> None:
    bad = ["subprocess.run(cmd, shell=True)", "os.system('x')", "eval(text)", "exec(code)",
           "yaml.load(f)", "yaml.load(f, Loader=yaml.Loader)", "pickle.loads(b)"]
    good = ["yaml.safe_load(f)", "yaml.load(f, Loader=yaml.SafeLoader)", "model.eval()",
            "x.exec()", "evaluate(text)"]
    assert all(any(p.search(line) for p, _ in FORBIDDEN) for line in bad)
    assert not any(p.search(line) for p, _ in FORBIDDEN for line in good)


def test_link_in_a_writable_folder_to_a_safe_config_is_refused(tmp_path: Path) -> None:
    safe, shared = tmp_path / "etc", tmp_path / "shared"
    safe.mkdir(mode=0o755)
    shared.mkdir()
    os.chmod(shared, 0o777)  # anyone may swap the link for one to their own file
    (safe / "govd.yaml").write_text("period_ms: 50\n")
    os.chmod(safe / "govd.yaml", 0o644)
    (shared / "govd.yaml").symlink_to(safe / "govd.yaml")
    with pytest.raises(ConfigError, match=f"{shared}: folder is writable by group or others"):
        load_config(shared / "govd.yaml")
    assert load_config(safe / "govd.yaml").period_ms == 50
