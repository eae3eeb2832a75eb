"""Frames sent by applications over a Unix datagram socket (default ``/run/govd/frames.sock``).

Protocol (DESIGN.md §5): ASCII, one ``F <gpu_time_us> [key=value ...]`` line per frame, several
lines per datagram. Who sent a datagram comes from the kernel (``SO_PASSCRED``,
``SCM_CREDENTIALS``), never from its text. Defences, cheapest first:

- the socket file is ``0660 root:<group>``, so only root and the group can send at all;
- an optional uid/gid allow-list (the gid is the sender's effective gid; supplementary groups are
  not visible in SCM_CREDENTIALS);
- a token bucket per sender uid (`govd.sources.senders`: a user that forks a hundred senders
  has the budget of one), applied before parsing: a datagram's lines past its sender's budget
  are counted, never parsed, so one user cannot starve the others nor the loop; a datagram
  whose sender has no budget left is not even split (its newlines counted in C) and weighs a
  sixteenth in the tick's byte budget, so a flood is read out of the kernel's short queue
  (``net.unix.max_dgram_qlen``, 10 datagrams) fast enough to leave room for the others;
- per tick (between two `drain`), bounds on the frames held (``max_queue``), the lines parsed
  (twice that), the datagrams and the bytes read (``max_read_bytes``), and `receive` stops at a
  deadline, so a flood costs bounded time and memory; what is left stays in the kernel's receive
  queue, and when that is full senders get EAGAIN, never govd.

A frame naming a device govd does not govern (``device=``, `set_devices`) is dropped, counted
as ``dropped_unknown_device``, said once per name in the journal with the names govd governs,
and listed in `report` (so `govd status` shows it): it was counted as accepted and vanished.

The socket file is created with its mode (umask around bind) in a folder only root or govd may
write (a sticky folder such as /tmp is accepted: there nobody may rename or remove our file),
chowned without following links, and at close removed only if it is still the inode bound.

The kernel queues at most ``net.unix.max_dgram_qlen`` datagrams (10 by default) for a Unix
datagram socket, whatever its buffer size: read once per 50 ms tick, the socket would refuse
every frame past the tenth of each tick (a 240 FPS game alone sends 12). So the daemon calls
`receive` whenever the socket is readable between ticks, which parses the datagrams into the
queue there, and `drain` only hands the queue over (parsing at the tick kept the socket unread
for the whole parse: a quarter of a 20 000 frames/s load was refused).
"""

from __future__ import annotations

import contextlib
import grp
import logging
import math
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
DRAIN_BUDGET_S = 0.004
"""The most `drain` spends reading the kernel queue, inside the tick. Units: s."""
MAX_UNKNOWN_DEVICES = 16
"""Device names kept (and said) for frames naming a device govd does not govern: a sender
inventing names must not grow the report or the journal."""
WARN_EVERY_S = 60.0
"""Each kind of bad input is said in the journal at most once this often (with how many came
since): a hostile sender must not flood the journal. Units: s of the source's clock."""
_SAY = {
    "rejected_sender": "datagram(s) refused: the sender is in neither frames.socket.allow_uids "
                       "nor allow_gids",
    "no_credentials": "datagram(s) without whole credentials (other ancillary data beside them, "
                      "e.g. file descriptors, which are not taken): sender unknown",
    "truncated": "datagram(s) longer than {size} bytes, cut (their last line dropped)",
    "rate_limited": "line(s) past the sending user's budget (frames.socket.rate_fps, burst), "
                    "not parsed",
    "queue_full": "frame(s) past frames.socket.max_queue in one tick, dropped",
    "over_budget": "line(s) past one tick's parse budget, not parsed",
}
"""What each counter means, for the journal line; ``dropped_<reason>`` is said from its reason."""
_UCRED = struct.Struct("iII")  # struct ucred: pid_t pid; uid_t uid; gid_t gid
DISCARD_WEIGHT = 16
"""A datagram whose sender has no budget left costs a copy and a count, no split nor parse:
it takes 1/16 of its size from the tick's byte budget."""
# Plain ints: socket.MSG_* are IntFlag members, whose ``&`` runs in Python (three calls a test,
# two tests a datagram).
_MSG_TRUNC = int(socket.MSG_TRUNC)
_MSG_CTRUNC = int(socket.MSG_CTRUNC)
_SOL_SOCKET = int(socket.SOL_SOCKET)
_SCM_CREDENTIALS = int(socket.SCM_CREDENTIALS)


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
    kernel receive buffer (SO_RCVBUF); ``max_read_bytes`` the bytes read per tick;
    ``proc_root`` where process names are read; ``clock`` the monotonic clock used by the rate
    limit (seconds).
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
        max_read_bytes: int = 1 << 20,
        proc_root: str | Path = "/proc",
        clock: Callable[[], float] = time.monotonic,
        sock: socket.socket | None = None,
        drain_budget_s: float | None = DRAIN_BUDGET_S,
    ) -> None:
        self.path = Path(path)
        self.drain_budget_s = drain_budget_s
        """The most `drain` spends reading the kernel's queue (s of wall time); None: only the
        tick's count and byte budgets bound it (the simulated GPU in lockstep, which waits for
        the tick: a frame left to the next tick by a preempted drain would make the run
        depend on the machine's load)."""
        self.allow_uids = frozenset(allow_uids)
        self.allow_gids = frozenset(allow_gids)
        self.max_queue = max_queue
        self.max_datagram_bytes = max_datagram_bytes
        self.max_read_bytes = max_read_bytes
        self._clock = clock
        self._refill_budgets()
        self._senders = Senders(rate_fps, burst, Path(proc_root))
        self._counts: Counter[str] = Counter()
        self._unsaid: Counter[str] = Counter()
        """Bad input of each kind since its last journal line."""
        self._quiet_until: dict[str, float] = {}
        """Kind of bad input → when it may be said again (s, the source's clock)."""
        self._queue: list[Frame] = []
        self._devices: frozenset[str] | None = None
        """The governed devices' names (`set_devices`); None: every ``device=`` taken."""
        self._unknown_devices: Counter[str] = Counter()
        self._bound: tuple[int, int] | None = None
        """(st_dev, st_ino) of the socket file this source created; only that inode is removed."""
        if sock is None:
            sock, self._bound = _bind(self.path, group)
        self._sock = sock
        self._sock.setblocking(False)
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)
        with contextlib.suppress(OSError):  # the kernel caps it at net.core.rmem_max anyway
            self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, recv_buffer_bytes)
        self._cmsg_bytes = socket.CMSG_SPACE(_UCRED.size)
        self._peek = bytearray(1)
        self._flooded = False
        """The last datagram read came from a user with no budget left: look before reading."""

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

    def set_limits(self, *, allow_uids: Iterable[int], allow_gids: Iterable[int],
                   rate_fps: float, burst: float, max_queue: int) -> None:
        """Apply new sender limits (a configuration reload); parameters as for the constructor.
        Budgets already granted keep their tokens, capped at the new burst."""
        self.allow_uids = frozenset(allow_uids)
        self.allow_gids = frozenset(allow_gids)
        self.max_queue = max_queue
        self._senders.set_rate(rate_fps, burst)

    def set_devices(self, names: Iterable[str]) -> None:
        """The devices govd governs now: frames naming another are dropped and counted."""
        self._devices = frozenset(names)

    def fileno(self) -> int:
        """The socket's fd, for callers that want to poll it."""
        return self._sock.fileno()

    @property
    def backlog_full(self) -> bool:
        """True when `receive` reads nothing more until the next `drain`: the queue holds
        ``max_queue`` frames, or this tick's budget of datagrams, bytes or parsed lines is spent.
        Datagrams wait in the kernel meanwhile (its senders get EAGAIN, never govd), so stop
        polling `fileno`."""
        return (len(self._queue) >= self.max_queue or self._datagrams_left <= 0
                or self._bytes_left <= 0 or self._parse_left <= 0)

    def receive(self, max_datagrams: int | None = None, until_s: float | None = None) -> int:
        """Read the datagrams waiting in the kernel and queue their frames, until `backlog_full`,
        ``max_datagrams`` were read, or the monotonic clock (`time.monotonic`, s) passes
        ``until_s``; returns the datagrams read. Call it whenever `fileno` is readable.

        Its cost is bounded whatever arrives: a datagram costs a copy and a split, and at most
        its sender's rate budget of parsed lines (the rest is counted, never parsed)."""
        limit = self._datagrams_left if max_datagrams is None else max_datagrams
        moved = 0
        now_s = self._clock()
        queue, max_queue = self._queue, self.max_queue
        recvmsg, size, cmsg_bytes = self._sock.recvmsg, self.max_datagram_bytes, self._cmsg_bytes
        # `backlog_full`, written out: this loop runs once per datagram.
        while (moved < limit and len(queue) < max_queue and self._datagrams_left > 0
               and self._bytes_left > 0 and self._parse_left > 0):
            if until_s is not None and moved and time.monotonic() >= until_s:
                break
            try:
                if self._flooded and self._dropped_unread(now_s):
                    self._datagrams_left -= 1
                    self._bytes_left -= 1
                    moved += 1
                    continue
                data, ancdata, flags, _ = recvmsg(size, cmsg_bytes)
            except (BlockingIOError, InterruptedError):
                break
            except OSError as exc:
                self._counts["receive_errors"] += 1
                log.warning("frame socket %s: receive failed: %s", self.path, exc)
                break
            self._datagrams_left -= 1
            parsed = self._take(data, ancdata, flags, now_s, queue)
            if parsed:
                self._flooded = False
            self._bytes_left -= len(data) if parsed else len(data) // DISCARD_WEIGHT + 1
            moved += 1
        return moved

    def _dropped_unread(self, now_s: float) -> bool:
        """While datagrams of users with no budget left come one after another (a flood): look
        at the next one's sender without reading it (MSG_PEEK, one byte) and, when it is such a
        user again, drop it unread (the kernel frees it without copying it). A flood of 64 KiB
        datagrams is so emptied out of the kernel's short queue at a fraction of a read's cost,
        leaving room for the other senders' datagrams. Raises OSError as a receive does."""
        _, ancdata, flags, _ = self._sock.recvmsg_into([self._peek], self._cmsg_bytes,
                                                       socket.MSG_PEEK)
        _, uid, gid = _credentials(ancdata, flags)
        allow_uids, allow_gids = self.allow_uids, self.allow_gids
        if (allow_uids or allow_gids) and uid not in allow_uids and gid not in allow_gids:
            return False  # refused the ordinary way, counted as such
        if self._senders.allowance(uid, now_s) >= 1:
            self._flooded = False
            return False
        self._sock.recv_into(self._peek, 1)  # the rest of the datagram is discarded
        counts = self._counts
        counts["datagrams"] += 1
        counts["rate_limited_datagrams"] += 1  # said with the flood's lines ("rate_limited")
        return True

    def drain(self) -> list[Frame]:
        """Every frame received since the last call (at most ``max_queue``), oldest first; reads
        what waits in the kernel for at most ``drain_budget_s`` first. Starts the next tick's
        budgets."""
        budget_s = self.drain_budget_s
        self.receive(until_s=None if budget_s is None else time.monotonic() + budget_s)
        frames, self._queue = self._queue, []
        self._senders.forget_idle(self._clock())
        self._refill_budgets()
        return frames

    def _refill_budgets(self) -> None:
        self._datagrams_left = 4 * self.max_queue + 16
        self._bytes_left = self.max_read_bytes
        self._parse_left = 2 * self.max_queue

    def _take(
        self,
        data: bytes,
        ancdata: list[tuple[int, int, bytes]],
        flags: int,
        now_s: float,
        frames: list[Frame],
    ) -> bool:
        """Queue the frames of one datagram; returns whether any of its lines was parsed (a
        datagram of a sender with no budget left is only counted)."""
        counts = self._counts
        counts["datagrams"] += 1
        # `_credentials`, its usual case written out (one call less per datagram): the kernel's
        # one SCM_CREDENTIALS message, whole.
        if len(ancdata) == 1 and not flags & _MSG_CTRUNC and ancdata[0][0] == _SOL_SOCKET \
                and ancdata[0][1] == _SCM_CREDENTIALS and len(ancdata[0][2]) >= _UCRED.size:
            pid, uid, gid = _UCRED.unpack_from(ancdata[0][2])
        else:
            pid, uid, gid = _credentials(ancdata, flags)
        if pid == 0:
            counts["no_credentials"] += 1
            self._say("no_credentials", 1, pid, uid, now_s)
        allow_uids, allow_gids = self.allow_uids, self.allow_gids
        if (allow_uids or allow_gids) and uid not in allow_uids and gid not in allow_gids:
            counts["rejected_sender"] += 1
            self._say("rejected_sender", 1, pid, uid, now_s)
            return False
        if flags & _MSG_TRUNC:
            counts["truncated"] += 1
            self._say("truncated", 1, pid, uid, now_s)
            data = data[: data.rfind(b"\n") + 1]  # the cut line is incomplete; drop it
        senders = self._senders
        allowance = senders.allowance(uid, now_s)
        if allowance < 1 or self._parse_left < 1 or len(frames) >= self.max_queue:
            # Nothing of it can be taken: its lines counted in C (empty ones too), no split.
            total = data.count(b"\n") + (bool(data) and not data.endswith(b"\n"))
            reason = ("rate_limited" if allowance < 1 else
                      "queue_full" if len(frames) >= self.max_queue else "over_budget")
            self._flooded = allowance < 1
            counts["lines"] += total
            counts[reason] += total
            self._say(reason, total, pid, uid, now_s)
            return False
        # Split in C only as far as the sender may send now and this tick may still parse (a
        # few empty lines aside), and count the rest's newlines in C: a 64 KiB datagram of
        # 16 000 lines costs what its sender's budget allows, not a split of 16 000 lines.
        budget = min(allowance, self._parse_left)
        parts = data.split(b"\n", budget) if budget < 4096 else data.split(b"\n")
        rest = parts.pop() if len(parts) > budget else b""
        total = len(parts) - parts.count(b"") + rest.count(b"\n") + (
            bool(rest) and not rest.endswith(b"\n"))
        counts["lines"] += total
        max_queue = self.max_queue
        parsed = accepted = 0
        name: str | None = None
        for raw in parts:
            if parsed >= budget or len(frames) >= max_queue:
                break
            if not raw:
                continue
            parsed += 1
            try:
                line = parse_frame_line(raw)
            except LineRejected as exc:
                counts[f"dropped_{exc.reason}"] += 1
                self._say(f"dropped_{exc.reason}", 1, pid, uid, now_s)
                continue
            if line.device is not None and self._devices is not None \
                    and line.device not in self._devices:
                self._unknown_device(line.device, pid, uid)
                continue
            app = line.app
            if app is None:  # the process name, looked up once a datagram
                if name is None:
                    name = senders.name(pid, now_s)
                app = name
            frames.append(Frame(line.gpu_time_ms, pid, uid, app, line.target_fps, line.device))
            accepted += 1
        if accepted:
            counts["accepted"] += accepted
        senders.spend(uid, parsed)
        self._parse_left -= parsed
        left = total - parsed
        if left:
            reason = ("queue_full" if len(frames) >= self.max_queue
                      else "rate_limited" if parsed >= allowance else "over_budget")
            counts[reason] += left
            self._say(reason, left, pid, uid, now_s)
        return True

    def _unknown_device(self, name: str, pid: int, uid: int) -> None:
        """Count a frame for device ``name``, which govd does not govern; the first for each
        name (of `MAX_UNKNOWN_DEVICES`) is said in the journal."""
        self._counts["dropped_unknown_device"] += 1
        unknown = self._unknown_devices
        if name in unknown:
            unknown[name] += 1
        elif len(unknown) < MAX_UNKNOWN_DEVICES:
            unknown[name] = 1
            governed = ", ".join(sorted(self._devices or ())) or "none"
            log.warning("frame socket %s: frames for device=%s, which govd does not govern (it "
                        "governs %s; `govd devices` lists the names), from pid %d uid %d: "
                        "dropped, counted in `govd status`", self.path, name, governed, pid,
                        uid)

    def report(self) -> dict[str, object]:
        """``unknown_devices``: frames per device name govd does not govern (at most
        `MAX_UNKNOWN_DEVICES` names), and the names it governs."""
        if not self._unknown_devices:
            return {}
        return {"unknown_devices": dict(self._unknown_devices),
                "devices": sorted(self._devices or ())}

    def _say(self, kind: str, count: int, pid: int, uid: int, now_s: float) -> None:
        """Count ``count`` of bad input ``kind`` (a `stats` key) from ``pid``/``uid`` for the
        journal, and say it in one line when that kind was not said in the last `WARN_EVERY_S`
        (with how many came since): one line a minute per kind, whatever a sender sends."""
        self._unsaid[kind] += count
        if now_s < self._quiet_until.get(kind, -math.inf):
            return
        self._quiet_until[kind] = now_s + WARN_EVERY_S
        what = (f"line(s) dropped: {kind.removeprefix('dropped_')} (the protocol: "
                "F <gpu_time_us> [key=value ...])" if kind.startswith("dropped_")
                else _SAY[kind].format(size=self.max_datagram_bytes))
        log.warning("frame socket %s: %d %s; the last from pid %d (%s) uid %d; said again in "
                    "%g s at the earliest, counted in `govd status` meanwhile", self.path,
                    self._unsaid.pop(kind), what, pid, self._senders.name(pid, now_s) or "?",
                    uid, WARN_EVERY_S)

    def stats(self) -> dict[str, int]:
        """Counters: ``datagrams``, ``lines``, ``accepted``, ``dropped_<reason>`` (see
        `govd.sources.frame_line.REASONS`), ``rejected_sender``, ``rate_limited``,
        ``rate_limited_datagrams`` (dropped unread during a flood: lines unknown), ``queue_full``,
        ``truncated``, ``no_credentials``, ``receive_errors``, ``over_budget`` (lines left
        unparsed because the tick's parse budget was spent). ``lines`` counts the non-empty
        newline-separated lines, parsed or not."""
        return dict(self._counts)

    def close(self) -> None:
        """Close the socket, and remove its file if this source created it and it is still
        the same inode (what another process put there since is not ours to remove)."""
        self._sock.close()
        if self._bound is not None and _inode(self.path) == self._bound:
            with contextlib.suppress(FileNotFoundError):
                self.path.unlink()


def _credentials(ancdata: list[tuple[int, int, bytes]], flags: int) -> tuple[int, int, int]:
    """(pid, uid, gid) from SCM_CREDENTIALS; (0, -1, -1) when the kernel sent none."""
    if flags & _MSG_CTRUNC:
        return 0, -1, -1
    for level, kind, payload in ancdata:
        is_ucred = level == _SOL_SOCKET and kind == _SCM_CREDENTIALS
        if is_ucred and len(payload) >= _UCRED.size:
            pid, uid, gid = _UCRED.unpack_from(payload)
            return pid, uid, gid
    return 0, -1, -1


class SocketSetupError(Exception):
    """The frame socket cannot be created safely (one clear line)."""


def _inode(path: Path) -> tuple[int, int] | None:
    try:
        st = path.lstat()
    except OSError:
        return None
    return (st.st_dev, st.st_ino) if stat.S_ISSOCK(st.st_mode) else None


def check_folder(folder: Path) -> None:
    """Raise SocketSetupError unless only root or this user may add, rename or remove files in
    ``folder``: owned by one of them, and writable by group or others only with the sticky bit
    (as /tmp), where nobody may rename or remove another's file. Elsewhere whoever may write
    there could swap the socket file for a link between bind and chown, or before the unlink."""
    st = folder.stat()
    if not stat.S_ISDIR(st.st_mode):
        raise SocketSetupError(f"{folder}: not a folder; cannot create the frame socket there")
    if st.st_uid not in (0, os.geteuid()):
        raise SocketSetupError(f"{folder}: owned by uid {st.st_uid}, not root or govd's user; "
                               "refusing to create the frame socket there")
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH) and not st.st_mode & stat.S_ISVTX:
        raise SocketSetupError(f"{folder}: writable by group or others without the sticky bit "
                               f"(mode {stat.S_IMODE(st.st_mode):04o}); refusing to create the "
                               "frame socket there")


def _remove_stale(path: Path) -> None:
    try:
        mode = path.lstat().st_mode
    except FileNotFoundError:
        return
    if not stat.S_ISSOCK(mode):
        raise SocketSetupError(f"{path} exists and is not a socket; refusing to remove it")
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC)
    try:
        probe.connect(str(path))
    except ConnectionRefusedError:
        path.unlink()  # nobody listens: a leftover of a previous run
        return
    except OSError as exc:
        raise SocketSetupError(f"{path}: cannot probe the old socket: {exc.strerror}") from None
    finally:
        probe.close()
    raise SocketSetupError(f"another process is receiving on {path}")


def _bind(path: Path, group: str | None) -> tuple[socket.socket, tuple[int, int]]:
    """A datagram socket bound at ``path`` with mode `SOCKET_MODE` from the start, and the
    (st_dev, st_ino) of its file. Raises SocketSetupError."""
    parent = path.parent
    try:
        if not parent.exists():
            parent.mkdir(mode=0o755, parents=True)
        check_folder(parent)
        _remove_stale(path)
    except SocketSetupError:
        raise
    except OSError as exc:
        raise SocketSetupError(f"{parent}: {exc.strerror or exc}") from None
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC)
    # The kernel creates the file with 0777 & ~umask: the mode is right from the first instant,
    # no chmod (which would follow a link swapped in meanwhile) is needed. Start-up is
    # single-threaded, so the process-wide umask change is safe here.
    old_umask = os.umask(0o777 & ~SOCKET_MODE)
    try:
        sock.bind(str(path))
    except OSError as exc:
        sock.close()
        raise SocketSetupError(f"{path}: cannot bind the frame socket: {exc.strerror or exc}") \
            from None
    finally:
        os.umask(old_umask)
    bound = _inode(path)
    if bound is None:
        sock.close()
        raise SocketSetupError(f"{path}: replaced by something else than our socket right after "
                               "bind; refusing to use it")
    if group and os.geteuid() == 0:
        try:
            gid = grp.getgrnam(group).gr_gid
        except KeyError:
            log.info("frame socket %s: group %r does not exist; left as root:root", path, group)
        else:
            os.chown(path, 0, gid, follow_symlinks=False)
            if _inode(path) != bound:  # swapped between our lstat and chown: not ours now
                sock.close()
                raise SocketSetupError(f"{path}: replaced while being set up; refusing to use it")
    return sock, bound
