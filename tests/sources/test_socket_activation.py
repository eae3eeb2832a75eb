"""Parsing systemd's LISTEN_FDS hand-over (sd_listen_fds(3))."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

from govd.sources.activation import ListenFd, frames_fd, listen_fds


def test_fds_start_at_three_with_names() -> None:
    env = {"LISTEN_PID": "42", "LISTEN_FDS": "2", "LISTEN_FDNAMES": "ctl:frames"}
    assert listen_fds(env, pid=42) == [ListenFd(3, "ctl"), ListenFd(4, "frames")]


def test_fds_meant_for_another_pid_are_ignored() -> None:
    assert listen_fds({"LISTEN_PID": "41", "LISTEN_FDS": "1"}, pid=42) == []


def test_malformed_count_gives_nothing_and_names_default_to_unknown() -> None:
    assert listen_fds({"LISTEN_PID": "42", "LISTEN_FDS": "x"}, pid=42) == []
    assert listen_fds({"LISTEN_FDS": "1", "LISTEN_FDNAMES": "a:b"}, pid=42) == [
        ListenFd(3, "unknown")
    ]


def test_unset_environment_removes_the_variables() -> None:
    env = {"LISTEN_PID": "42", "LISTEN_FDS": "0", "LISTEN_FDNAMES": "", "HOME": "/"}
    listen_fds(env, pid=42, unset_environment=True)
    assert env == {"HOME": "/"}


def test_frames_fd_skips_non_datagram_fds() -> None:
    stream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    dgram = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    fds = [ListenFd(stream.fileno(), "frames"), ListenFd(dgram.fileno(), "other")]
    assert frames_fd(fds) == dgram.fileno()
    assert frames_fd([ListenFd(stream.fileno(), "x")]) is None
    stream.close()
    dgram.close()


_CHILD = """
import socket
from govd.sources.socket import SocketSource
src = SocketSource.from_systemd(group=None)
sender = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
sender.sendto(b"F 2500 app=child\\n", str(src.path))
print([(f.gpu_time_ms, f.app) for f in src.drain()])
"""


def test_socket_activated_child_reads_from_fd_three() -> None:
    with tempfile.TemporaryDirectory(prefix="govd-", dir="/tmp") as d:
        path = Path(d) / "frames.sock"
        bound = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        bound.bind(str(path))
        # The child gets the socket as fd 3 and LISTEN_PID set to its own pid, as systemd does.
        script = f"import os; os.environ['LISTEN_PID'] = str(os.getpid())\n{_CHILD}"
        env = {
            **os.environ,
            "PYTHONPATH": str(Path(__file__).resolve().parents[2]),
            "LISTEN_FDS": "1",
            "LISTEN_FDNAMES": "frames",
        }
        out = subprocess.run(
            [sys.executable, "-c", script],
            env=env,
            close_fds=False,
            preexec_fn=_as_fd_three(bound.fileno()),
            capture_output=True,
            text=True,
            check=True,
        )
        bound.close()
        assert out.stdout.strip() == "[(2.5, 'child')]"


def _as_fd_three(fd: int) -> Callable[[], None]:
    def child() -> None:
        if fd != 3:
            os.dup2(fd, 3)
        os.set_inheritable(3, True)

    return child


def test_count_beyond_the_open_files_limit_is_malformed_not_a_memory_error() -> None:
    huge = str(10**17)
    assert listen_fds({"LISTEN_PID": "42", "LISTEN_FDS": huge}, pid=42) == []
    assert listen_fds({"LISTEN_FDS": huge}, pid=42) == []
