"""The frame socket, over a real Unix datagram socket with real SCM_CREDENTIALS."""

from __future__ import annotations

import os
import socket
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from govd.sources.socket import SocketSetupError, SocketSource


@pytest.fixture
def sock_dir() -> Iterator[Path]:
    # AF_UNIX paths are limited to 108 bytes: pytest's tmp_path can be longer.
    with tempfile.TemporaryDirectory(prefix="govd-", dir="/tmp") as d:
        yield Path(d)


class Clock:
    def __init__(self) -> None:
        self.now_s = 100.0

    def __call__(self) -> float:
        return self.now_s


def send(path: Path, *payloads: bytes) -> None:
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as s:
        for payload in payloads:
            s.sendto(payload, str(path))


def make(sock_dir: Path, **options: object) -> SocketSource:
    """A source whose drain reads every datagram waiting, however loaded the machine: these
    tests count what one drain read, and a drain preempted past the 4 ms wall-clock budget
    (`DRAIN_BUDGET_S`, pinned by test_socket_flood) would leave some to the next."""
    options.setdefault("drain_budget_s", None)
    return SocketSource(sock_dir / "frames.sock", group=None, **options)  # type: ignore[arg-type]


def test_frames_carry_kernel_credentials_not_text(sock_dir: Path) -> None:
    src = make(sock_dir)
    send(sock_dir / "frames.sock", b"F 16600 pid=1 uid=0\n")
    [frame] = src.drain()
    assert frame.gpu_time_ms == pytest.approx(16.6)
    assert (frame.pid, frame.uid) == (os.getpid(), os.getuid())
    src.close()


def test_several_frames_per_datagram_in_order(sock_dir: Path) -> None:
    src = make(sock_dir)
    send(sock_dir / "frames.sock", b"F 1000\nF 2000 app=game target_fps=60\r\nF 3000", b"F 4000\n")
    frames = src.drain()
    assert [f.gpu_time_ms for f in frames] == [1.0, 2.0, 3.0, 4.0]
    assert frames[1].app == "game" and frames[1].target_fps == 60.0
    assert frames[0].target_fps is None
    assert src.drain() == []
    assert src.stats()["accepted"] == 4 and src.stats()["datagrams"] == 2
    src.close()


def test_app_defaults_to_process_name_from_proc(sock_dir: Path) -> None:
    proc = sock_dir / "proc" / str(os.getpid())
    proc.mkdir(parents=True)
    (proc / "comm").write_text("mygame\n")
    src = make(sock_dir, proc_root=sock_dir / "proc")
    send(sock_dir / "frames.sock", b"F 1000\nF 1000 app=named\n")
    assert [f.app for f in src.drain()] == ["mygame", "named"]
    src.close()


def test_a_training_step_of_ten_minutes_is_a_frame(sock_dir: Path) -> None:
    src = make(sock_dir)
    send(sock_dir / "frames.sock", b"F 600000000 app=train\nF 10000001\n")
    assert [f.gpu_time_ms for f in src.drain()] == [600_000.0, 10_000.001]
    assert "dropped_too_large" not in src.stats()
    src.close()


def test_frames_for_a_device_govd_does_not_govern_are_counted_said_once_and_reported(
        sock_dir: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level("WARNING", logger="govd.sources.socket")
    src = make(sock_dir)
    src.set_devices(["card0"])
    for _ in range(3):
        send(sock_dir / "frames.sock", b"F 1000 device=card0\nF 1000 device=nvidia0\n")
    assert [f.device for f in src.drain()] == ["card0"] * 3
    assert src.stats()["dropped_unknown_device"] == 3
    said = [r.getMessage() for r in caplog.records if "nvidia0" in r.getMessage()]
    assert len(said) == 1 and "which govd does not govern (it governs card0;" in said[0]
    assert src.report()["unknown_devices"] == {"nvidia0": 3}
    src.close()


def test_unknown_device_names_kept_for_the_report_are_bounded(sock_dir: Path) -> None:
    src = make(sock_dir)
    src.set_devices(["card0"])
    for k in range(100):
        send(sock_dir / "frames.sock", f"F 1000 device=gpu{k}\n".encode())
        src.drain()
    assert src.stats()["dropped_unknown_device"] == 100
    assert len(src.report()["unknown_devices"]) == 16
    src.close()


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        (b"\xff\xfe 1000", "encoding"),
        (b"G 1000", "tag"),
        (b"F", "missing_time"),
        (b"F abc", "not_numeric"),
        (b"F 1_000", "not_numeric"),
        (b"F nan", "not_finite"),
        (b"F -inf", "not_finite"),
        (b"F -5", "non_positive"),
        (b"F 0", "non_positive"),
        (b"F 3600000001", "too_large"),
        (b"F 1e999", "too_large"),
        (b"F 1000 junk", "malformed_key"),
        (b"F 1000 target_fps=nan", "bad_target_fps"),
        (b"F 1000 target_fps=0", "bad_target_fps"),
        (b"F 1000 app=", "bad_app"),
    ],
)
def test_malformed_line_is_dropped_and_counted_by_reason(
    sock_dir: Path, line: bytes, reason: str
) -> None:
    src = make(sock_dir)
    send(sock_dir / "frames.sock", line + b"\nF 500 future_key=1\n")
    frames = src.drain()
    assert [f.gpu_time_ms for f in frames] == [0.5]  # the good line in the same datagram survives
    assert src.stats()[f"dropped_{reason}"] == 1
    src.close()


def test_sender_outside_allow_list_is_rejected(sock_dir: Path) -> None:
    src = make(sock_dir, allow_uids=[os.getuid() + 1], allow_gids=[os.getgid() + 1])
    send(sock_dir / "frames.sock", b"F 1000\n")
    assert src.drain() == []
    assert src.stats()["rejected_sender"] == 1
    src.close()


def test_sender_in_allow_list_by_gid_is_accepted(sock_dir: Path) -> None:
    src = make(sock_dir, allow_uids=[os.getuid() + 1], allow_gids=[os.getgid()])
    send(sock_dir / "frames.sock", b"F 1000\n")
    assert len(src.drain()) == 1
    src.close()


def test_rate_limit_per_sender_refills_with_time(sock_dir: Path) -> None:
    clock = Clock()
    src = make(sock_dir, rate_fps=10.0, burst=3.0, clock=clock)
    send(sock_dir / "frames.sock", b"F 1000\n" * 5)
    assert len(src.drain()) == 3
    assert src.stats()["rate_limited"] == 2
    clock.now_s += 0.2  # 10 frames/s for 0.2 s: two more tokens
    send(sock_dir / "frames.sock", b"F 1000\n" * 5)
    assert len(src.drain()) == 2
    src.close()


def test_queue_bound_drops_and_counts_excess(sock_dir: Path) -> None:
    src = make(sock_dir, max_queue=4, rate_fps=0)
    send(sock_dir / "frames.sock", b"F 1000\n" * 3, b"F 2000\n" * 3)
    frames = src.drain()
    assert [f.gpu_time_ms for f in frames] == [1.0, 1.0, 1.0, 2.0]
    assert src.stats()["queue_full"] == 2
    src.close()


def test_oversized_datagram_is_counted_and_cut_line_dropped(sock_dir: Path) -> None:
    src = make(sock_dir, max_datagram_bytes=16)
    send(sock_dir / "frames.sock", b"F 1000\nF 2000\nF 3000\n")  # 21 bytes, cut at 16
    assert [f.gpu_time_ms for f in src.drain()] == [1.0, 2.0]
    assert src.stats()["truncated"] == 1
    src.close()


def test_socket_file_is_0660_and_removed_on_close(sock_dir: Path) -> None:
    path = sock_dir / "sub" / "frames.sock"
    src = SocketSource(path, group=None)
    assert stat.S_IMODE(path.stat().st_mode) == 0o660
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o755
    src.close()
    assert not path.exists()


def test_stale_socket_file_is_replaced(sock_dir: Path) -> None:
    path = sock_dir / "frames.sock"
    old = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    old.bind(str(path))
    old.close()  # the file stays, nobody listens
    src = make(sock_dir)
    send(path, b"F 1000\n")
    assert len(src.drain()) == 1
    src.close()


def test_live_socket_and_regular_file_are_not_removed(sock_dir: Path) -> None:
    first = make(sock_dir)
    with pytest.raises(SocketSetupError, match="another process"):
        make(sock_dir)
    first.close()
    (sock_dir / "frames.sock").write_text("precious")
    with pytest.raises(SocketSetupError, match="not a socket"):
        make(sock_dir)
    assert (sock_dir / "frames.sock").read_text() == "precious"


def test_from_fd_wraps_an_already_bound_socket(sock_dir: Path) -> None:
    path = sock_dir / "act.sock"
    bound = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    bound.bind(str(path))
    src = SocketSource.from_fd(bound.detach())
    assert src.path == path
    send(path, b"F 1000\n")
    [frame] = src.drain()
    assert frame.pid == os.getpid()
    src.close()
    assert path.exists()  # systemd's socket file is systemd's to remove


def test_from_fd_refuses_a_stream_socket() -> None:
    stream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    with pytest.raises(ValueError, match="not a Unix datagram socket"):
        SocketSource.from_fd(stream.fileno())
    stream.close()


@pytest.fixture(scope="module")
def shared_source() -> Iterator[tuple[SocketSource, Path]]:
    with tempfile.TemporaryDirectory(prefix="govd-", dir="/tmp") as d:
        src = SocketSource(Path(d) / "frames.sock", group=None, rate_fps=0)
        yield src, Path(d) / "frames.sock"
        src.close()


@settings(
    max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    payload=st.one_of(
        st.binary(max_size=300),
        st.lists(
            st.sampled_from([b"F", b"1000", b"-1", b"nan", b"app=x", b"=", b"\x00", b"\xc3", b" "]),
            max_size=12,
        ).map(b" ".join),
    )
)
def test_random_datagrams_never_raise(
    shared_source: tuple[SocketSource, Path], payload: bytes
) -> None:
    src, path = shared_source
    send(path, payload)
    for frame in src.drain():
        assert 0 < frame.gpu_time_ms <= 10_000


def _send_nonblocking(path: Path, count: int) -> int:
    """Send ``count`` one-frame datagrams; returns how many the kernel took."""
    taken = 0
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as s:
        s.setblocking(False)
        for _ in range(count):
            try:
                s.sendto(b"F 1000\n", str(path))
                taken += 1
            except BlockingIOError:
                pass
    return taken


def test_receive_between_ticks_takes_more_datagrams_than_the_kernel_queues(
    sock_dir: Path,
) -> None:
    src = make(sock_dir, rate_fps=0)
    qlen = int(Path("/proc/sys/net/unix/max_dgram_qlen").read_text())
    taken = 0
    for _ in range(3):
        taken += _send_nonblocking(sock_dir / "frames.sock", qlen + 5)
        assert src.receive() > 0
    assert taken > qlen + 1  # the kernel alone would have refused these
    assert len(src.drain()) == taken
    src.close()


def test_full_queue_stops_reading_until_drained(sock_dir: Path) -> None:
    src = make(sock_dir, max_queue=4, rate_fps=0)
    send(sock_dir / "frames.sock", b"F 1000\n" * 3, b"F 2000\n" * 3)
    assert src.receive() == 2
    assert src.backlog_full and src.stats()["queue_full"] == 2
    assert _send_nonblocking(sock_dir / "frames.sock", 1) == 1
    assert src.receive() == 0  # left in the kernel: its sender sees EAGAIN, not govd
    assert [f.gpu_time_ms for f in src.drain()] == [1.0, 1.0, 1.0, 2.0]
    assert not src.backlog_full
    assert len(src.drain()) == 1  # the datagram that waited in the kernel
    src.close()


def test_receive_reads_at_most_the_datagrams_asked_for(sock_dir: Path) -> None:
    src = make(sock_dir, rate_fps=0)
    send(sock_dir / "frames.sock", *[b"F 1000\n"] * 5)
    assert src.receive(2) == 2
    assert src.receive(2) == 2
    assert len(src.drain()) == 5
    src.close()
