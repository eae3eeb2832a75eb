"""The frame socket against hostile and careless senders: frame times that vanish in the unit
change, and bad input said in the journal, once in a while, never once per datagram."""

from __future__ import annotations

import array
import logging
import os
import socket
from pathlib import Path

import pytest

from govd.sources.frame_line import LineRejected, parse_frame_line
from govd.sources.senders import NAME_TTL_S
from govd.sources.socket import WARN_EVERY_S
from tests.sources import test_socket_source as over_a_socket
from tests.sources.test_socket_source import Clock, make, send

sock_dir = over_a_socket.sock_dir  # the fixture: a folder short enough for AF_UNIX paths


@pytest.fixture(autouse=True)
def _warnings(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="govd.sources.socket")


@pytest.mark.parametrize("raw", [b"F 4e-324", b"F 1e-310", b"F 0." + b"0" * 320 + b"1",
                                 b"F 0.0000001"])
def test_time_too_short_to_be_a_frame_is_rejected_not_made_zero_ms(raw: bytes) -> None:
    # 5e-324 us is positive, but 0.0 once in ms: a zero-time frame reached the model.
    with pytest.raises(LineRejected) as exc:
        parse_frame_line(raw)
    assert exc.value.reason == "too_small"


def _said(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "govd.sources.socket"]


def test_sender_off_the_allow_list_is_said_once_a_while_not_once_a_datagram(
        sock_dir: Path, caplog: pytest.LogCaptureFixture) -> None:
    clock = Clock()
    src = make(sock_dir, allow_uids=[os.getuid() + 1], clock=clock)
    for _ in range(5):
        send(sock_dir / "frames.sock", *[b"F 1000\n"] * 8)
        assert src.drain() == []
    said = _said(caplog)
    assert len(said) == 1 and "\n" not in said[0]
    assert f"uid {os.getuid()}" in said[0] and f"pid {os.getpid()}" in said[0]
    assert "allow_uids" in said[0]
    clock.now_s += WARN_EVERY_S + 1
    send(sock_dir / "frames.sock", b"F 1000\n")
    src.drain()
    said = _said(caplog)
    assert len(said) == 2 and "40 " in said[1]  # the 39 kept quiet and this one
    src.close()


def test_bad_lines_are_said_once_a_while_per_reason_and_good_ones_flow(
        sock_dir: Path, caplog: pytest.LogCaptureFixture) -> None:
    src = make(sock_dir, rate_fps=0)
    frames = []
    for _ in range(20):
        send(sock_dir / "frames.sock", b"F nan\nF 1000\n\xff\xfe\nF 2000 app=\n")
        frames += src.drain()
    assert len(frames) == 20
    said = _said(caplog)
    assert len(said) == 3 and all("\n" not in line for line in said)
    assert {"not_finite", "encoding", "bad_app"} == {
        reason for reason in ("not_finite", "encoding", "bad_app") for line in said
        if reason in line}
    src.close()


def test_flooding_sender_is_said_once_a_while(sock_dir: Path,
                                               caplog: pytest.LogCaptureFixture) -> None:
    src = make(sock_dir, rate_fps=10.0, burst=3.0, clock=Clock())
    for _ in range(10):
        send(sock_dir / "frames.sock", b"F 1000\n" * 50)
        src.drain()
    said = _said(caplog)
    assert len(said) == 1 and "rate" in said[0]
    src.close()


def test_process_name_with_a_line_break_gives_a_one_line_app(sock_dir: Path) -> None:
    # prctl(PR_SET_NAME) takes any bytes: the name must not split a journal or status line.
    proc = sock_dir / "proc" / str(os.getpid())
    proc.mkdir(parents=True)
    (proc / "comm").write_bytes(b"ga\nme\x1b[2J\xff\n")
    src = make(sock_dir, proc_root=sock_dir / "proc")
    send(sock_dir / "frames.sock", b"F 1000\n")
    [frame] = src.drain()
    assert frame.app.isprintable() and frame.app.startswith("ga")
    src.close()


def test_pid_reused_by_another_program_is_named_anew_within_a_second(sock_dir: Path) -> None:
    # A sender exits and its pid goes to another program, which sends too before the old one
    # is forgotten: its frames must not keep the old program's name (and its per-app target).
    proc = sock_dir / "proc" / str(os.getpid())
    proc.mkdir(parents=True)
    (proc / "comm").write_text("game\n")
    clock = Clock()
    src = make(sock_dir, proc_root=sock_dir / "proc", clock=clock)
    send(sock_dir / "frames.sock", b"F 1000\n")
    assert [f.app for f in src.drain()] == ["game"]
    (proc / "comm").write_text("miner\n")  # the same pid, another process
    clock.now_s += NAME_TTL_S + 0.1
    send(sock_dir / "frames.sock", b"F 1000\n")
    assert [f.app for f in src.drain()] == ["miner"]
    src.close()


def test_datagram_carrying_file_descriptors_is_said_as_without_credentials(
        sock_dir: Path, caplog: pytest.LogCaptureFixture) -> None:
    # The kernel cuts the ancillary data govd has room for (its credentials) and closes the
    # descriptors: none lands in govd, and the sender is unknown.
    src = make(sock_dir)
    before = len(os.listdir("/proc/self/fd"))
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as s, open("/dev/null") as null:
        fds = array.array("i", [null.fileno()] * 3)
        for _ in range(4):
            s.sendmsg([b"F 1000\n"], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, fds)], 0,
                      str(sock_dir / "frames.sock"))
        src.drain()
        assert len(os.listdir("/proc/self/fd")) == before + 2  # the sender and /dev/null
    assert src.stats()["no_credentials"] == 4
    said = [line for line in _said(caplog) if "credentials" in line]
    assert len(said) == 1
    src.close()
