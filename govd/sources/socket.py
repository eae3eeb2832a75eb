"""Frames sent by applications over a Unix datagram socket (default ``/run/govd/frames.sock``).

Protocol (DESIGN.md §5): ASCII, one ``F <gpu_time_us> [key=value ...]`` line per frame, several
lines per datagram. Who sent a datagram comes from the kernel (``SO_PASSCRED``,
``SCM_CREDENTIALS``), never from its text. Defences, cheapest first:

- the socket file is ``0660 root:<group>``, so only root and the group can send at all;
- an optional uid/gid allow-list (the gid is the sender's effective gid; supplementary groups are
  not visible in SCM_CREDENTIALS);
- a token bucket per sender pid, so one process cannot starve the others;
- a bound on the frames held until `drain` (``max_queue``; lines past it are dropped and
  counted), and on the datagrams read per call, so a flood costs bounded time and memory; what is
  left stays in the kernel's receive queue, and when that is full senders get EAGAIN, never govd.

The kernel queues at most ``net.unix.max_dgram_qlen`` datagrams (10 by default) for a Unix
datagram socket, whatever its buffer size: read once per 50 ms tick, the socket would refuse
every frame past the tenth of each tick (a 240 FPS game alone sends 12). So the daemon calls
`receive` whenever the socket is readable between ticks, which parses the datagrams into the
queue there, and `drain` only hands the queue over (parsing at the tick kept the socket unread
for the whole parse: a quarter of a 20 000 frames/s load was refused).
"""

from __future__ import annotations

import contextlib
import errno
import grp
import logging
import os
import socket
import stat
import struct
import time
from collections import Counter
from collections.abc import Callable, Iterable
from pathlib import Path

from govd.sources.activation import frames_fd, listen_fds
from govd.sources.base import Frame, FrameSource
from govd.sources.frame_line import LineRejected, parse_frame_line
from govd.sources.senders import Senders

log = logging.getLogger(__name__)

DEFAULT_PATH = Path("/run/govd/frames.sock")
SOCKET_MODE = 0o660
_UCRED = struct.Struct("iII")  # struct ucred: pid_t pid; uid_t uid; gid_t gid


class SocketSource(FrameSource):
    """Frames from the govd frame socket.

    Either binds ``path`` itself (removing a stale socket file left by a previous run, refusing to
    remove anything that is not a socket or a socket someone still listens on), or wraps an
    already-bound socket (``sock``, see `from_fd` and `from_systemd`).

    Parameters: ``group`` owns the socket file when it exists and govd runs as root; ``allow_uids``
    / ``allow_gids`` is the allow-list (both empty: anyone who can open the socket);
    ``rate_fps`` / ``burst`` the per-sender token bucket (frames/s, frames; 0 disables);
    ``max_queue`` the most frames one `drain` returns; ``max_datagram_bytes`` the receive size
    (longer datagrams are cut by the kernel and counted as ``truncated``); ``recv_buffer_bytes`` the
    kernel receive buffer (SO_RCVBUF); ``proc_root`` where process names are read; ``clock``
    the monotonic clock used by the rate limit (seconds).
    """

    def __init__(
        self,
        path: str | Path = DEFAULT_PATH,
        *,
        group: str | None = "govd",
        allow_uids: Iterable[int] = (),
        allow_gids: Iterable[int] = (),
        rate_fps: float = 2000.0,
        burst: float = 500.0,
        max_queue: int = 4096,
        max_datagram_bytes: int = 65536,
        recv_buffer_bytes: int = 1 << 20,
        proc_root: str | Path = "/proc",
        clock: Callable[[], float] = time.monotonic,
        sock: socket.socket | None = None,
    ) -> None:
        self.path = Path(path)
        self.allow_uids = frozenset(allow_uids)
        self.allow_gids = frozenset(allow_gids)
        self.max_queue = max_queue
        self.max_datagram_bytes = max_datagram_bytes
        self._clock = clock
        self._senders = Senders(rate_fps, burst, Path(proc_root))
        self._counts: Counter[str] = Counter()
        self._queue: list[Frame] = []
        self._owns_path = sock is None
        self._sock = _bind(self.path, group) if sock is None else sock
        self._sock.setblocking(False)
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)
        with contextlib.suppress(OSError):  # the kernel caps it at net.core.rmem_max anyway
            self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, recv_buffer_bytes)
        self._cmsg_bytes = socket.CMSG_SPACE(_UCRED.size)

    @classmethod
    def from_fd(cls, fd: int, **options: object) -> SocketSource:
        """Wrap an already-bound Unix datagram socket (e.g. passed by systemd); ``options`` as for
        the constructor. Raises ValueError when ``fd`` is not a Unix datagram socket."""
        sock = socket.socket(fileno=fd)
        if sock.family != socket.AF_UNIX or sock.type != socket.SOCK_DGRAM:
            sock.detach()
            raise ValueError(f"fd {fd} is not a Unix datagram socket")
        name = sock.getsockname()
        path = name if isinstance(name, str) and name else DEFAULT_PATH
        return cls(path, sock=sock, **options)  # type: ignore[arg-type]

    @classmethod
    def from_systemd(cls, **options: object) -> SocketSource | None:
        """The socket systemd passed (the fd named ``frames``, else the first datagram socket), or
        None when govd was not socket-activated."""
        fd = frames_fd(listen_fds(unset_environment=True))
        return None if fd is None else cls.from_fd(fd, **options)

    def fileno(self) -> int:
        """The socket's fd, for callers that want to poll it."""
        return self._sock.fileno()

    @property
    def backlog_full(self) -> bool:
        """True when the queue holds ``max_queue`` frames: `receive` reads nothing more until
        the next `drain` (datagrams wait in the kernel meanwhile), so stop polling `fileno`."""
        return len(self._queue) >= self.max_queue

    def receive(self, max_datagrams: int | None = None) -> int:
        """Read the datagrams waiting in the kernel and queue their frames, until the queue is
        full or ``max_datagrams`` were read (default ``4 * max_queue + 16``); returns the
        datagrams read. Call it whenever `fileno` is readable."""
        limit = 4 * self.max_queue + 16 if max_datagrams is None else max_datagrams
        moved = 0
        now_s = self._clock()
        while not self.backlog_full and moved < limit:
            try:
                data, ancdata, flags, _ = self._sock.recvmsg(
                    self.max_datagram_bytes, self._cmsg_bytes
                )
            except (BlockingIOError, InterruptedError):
                break
            except OSError as exc:
                self._counts["receive_errors"] += 1
                log.warning("frame socket %s: receive failed: %s", self.path, exc)
                break
            self._take(data, ancdata, flags, now_s, self._queue)
            moved += 1
        return moved

    def drain(self) -> list[Frame]:
        """Every frame received since the last call (at most ``max_queue``), oldest first."""
        self.receive()
        frames, self._queue = self._queue, []
        self._senders.forget_idle(self._clock())
        return frames

    def _take(
        self,
        data: bytes,
        ancdata: list[tuple[int, int, bytes]],
        flags: int,
        now_s: float,
        frames: list[Frame],
    ) -> None:
        counts = self._counts
        counts["datagrams"] += 1
        pid, uid, gid = _credentials(ancdata, flags)
        if pid == 0:
            counts["no_credentials"] += 1
        if not self._allowed(uid, gid):
            counts["rejected_sender"] += 1
            return
        if flags & socket.MSG_TRUNC:
            counts["truncated"] += 1
            data = data[: data.rfind(b"\n") + 1]  # the cut line is incomplete; drop it
        for raw in data.split(b"\n"):
            if not raw.strip():
                continue
            counts["lines"] += 1
            try:
                line = parse_frame_line(raw)
            except LineRejected as exc:
                counts[f"dropped_{exc.reason}"] += 1
                continue
            if not self._senders.admit(pid, now_s):
                counts["rate_limited"] += 1
                continue
            if len(frames) >= self.max_queue:
                counts["queue_full"] += 1
                continue
            frames.append(
                Frame(
                    gpu_time_ms=line.gpu_time_ms,
                    pid=pid,
                    uid=uid,
                    app=line.app if line.app is not None else self._senders.name(pid, now_s),
                    target_fps=line.target_fps,
                    device=line.device,
                )
            )
            counts["accepted"] += 1

    def _allowed(self, uid: int, gid: int) -> bool:
        if not self.allow_uids and not self.allow_gids:
            return True
        return uid in self.allow_uids or gid in self.allow_gids

    def stats(self) -> dict[str, int]:
        """Counters: ``datagrams``, ``lines``, ``accepted``, ``dropped_<reason>`` (see
        `govd.sources.frame_line.REASONS`), ``rejected_sender``, ``rate_limited``, ``queue_full``,
        ``truncated``, ``no_credentials``, ``receive_errors``."""
        return dict(self._counts)

    def close(self) -> None:
        """Close the socket, and remove its file if this source created it."""
        self._sock.close()
        if self._owns_path:
            with contextlib.suppress(FileNotFoundError):
                self.path.unlink()


def _credentials(ancdata: list[tuple[int, int, bytes]], flags: int) -> tuple[int, int, int]:
    """(pid, uid, gid) from SCM_CREDENTIALS; (0, -1, -1) when the kernel sent none."""
    if flags & socket.MSG_CTRUNC:
        return 0, -1, -1
    for level, kind, payload in ancdata:
        is_ucred = level == socket.SOL_SOCKET and kind == socket.SCM_CREDENTIALS
        if is_ucred and len(payload) >= _UCRED.size:
            pid, uid, gid = _UCRED.unpack_from(payload)
            return pid, uid, gid
    return 0, -1, -1


def _remove_stale(path: Path) -> None:
    try:
        mode = path.lstat().st_mode
    except FileNotFoundError:
        return
    if not stat.S_ISSOCK(mode):
        raise FileExistsError(f"{path} exists and is not a socket; refusing to remove it")
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC)
    try:
        probe.connect(str(path))
    except ConnectionRefusedError:
        path.unlink()  # nobody listens: a leftover of a previous run
        return
    finally:
        probe.close()
    raise OSError(errno.EADDRINUSE, f"another process is receiving on {path}")


def _bind(path: Path, group: str | None) -> socket.socket:
    parent = path.parent
    if not parent.exists():
        parent.mkdir(parents=True)
        os.chmod(parent, 0o755)
    _remove_stale(path)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC)
    # Until the chmod below the file must not be writable by others; a umask of 0 would allow it.
    # Start-up is single-threaded, so the process-wide umask change is safe here.
    old_umask = os.umask(0o177)
    try:
        sock.bind(str(path))
    except OSError:
        sock.close()
        raise
    finally:
        os.umask(old_umask)
    os.chmod(path, SOCKET_MODE)
    if group and os.geteuid() == 0:
        try:
            gid = grp.getgrnam(group).gr_gid
        except KeyError:
            log.info("frame socket %s: group %r does not exist; left as root:root", path, group)
        else:
            os.chown(path, 0, gid)
    return sock
