"""One MangoHud CSV log, followed from its own byte offset: parse what was appended, once.

What MangoHud writes (src/logging.cpp, read at every tag; real logs in ``../shared/data/mangohud``):

- with ``log_versioning``: ``v1``, the version (``v0.6.8``), a ``---SYSTEM INFO---`` separator;
- ``os,cpu,gpu,ram,kernel,driver[,cpuscheduler]`` and its values (system information);
- with ``log_versioning``: a ``---FRAME METRICS---`` separator;
- the header, e.g. ``fps,frametime,cpu_load,...,gpu_core_clock,...,gpu_power,...,elapsed``
  (columns vary by version; 0.4 wrote no header at all);
- rows. ``frametime`` is the interval between two presents (not GPU time): ms from 0.6.9, µs up
  to 0.6.8. ``elapsed`` is ns since logging began. With ``log_interval=0`` (the default from 0.6.9)
  every present is a row; with ``log_interval=N`` a row is the latest frame sampled at most every
  N ms, so one row stands for all the frames presented since the previous row.

How rows become frames:

- Units: the header does not say, so the unit is decided once per log from its first usable row:
  with an ``fps`` column, ``frametime · fps`` is about 1000 for ms and about 10⁶ for µs (threshold:
  their geometric mean); without one, a value of 500 or more is µs (500 ms frames are not a game).
  A header without ``frametime`` but with ``fps`` uses ``1000 / fps`` ms.
- Per-frame or sampled, from ``elapsed``: in a per-frame log the time between two rows *is* the
  frame time (measured ratio 0.95–1.05 on the real logs); in a sampled one it is the log interval,
  many frame times (ratio ≈ 24 at 240 FPS and 100 ms). A row whose ``Δelapsed / frametime`` is
  below `SAMPLED_RATIO` is one frame; above it the row stands for the frames presented in
  ``Δelapsed`` (``Δelapsed · fps``, or ``Δelapsed / frametime`` without an ``fps`` column), so a
  sampled log never counts its samples as frames. A ``Δelapsed`` over `MAX_FRAME_MS` is a pause,
  one frame; frame times under `MIN_FRAME_MS` and ``fps`` over its inverse are garbage, so a row
  never stands for more than ``MAX_FRAME_MS / MIN_FRAME_MS`` frames.

Robustness: a partial last line waits for its newline; a row with the wrong number of fields or an
unusable frame time is skipped and counted; a log replaced (new inode) or truncated has what it
holds then taken as history (its header read again, its rows not delivered: they were, once),
and only rows appended after count; the file is closed while it does not grow and reopened at
the same offset; a file with several links (a hard link to a file the folder's users may not
read) is never read, and nothing of a file's content but a few characters of a bad row is
quoted in a problem (problems reach the world-readable status file).
"""

from __future__ import annotations

import contextlib
import grp
import math
import os
import re
import stat
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

from govd.sources.base import Frame, one_line

MAX_FRAME_MS = 10_000.0
"""Longest frame time accepted, and the longest gap between two rows that stands for frames
(a longer one is a pause: the game stopped, its clock jumped). Units: ms."""
MIN_FRAME_MS = 0.01
"""Shortest frame time accepted: 100 000 presents a second is beyond any display path, even an
uncapped glxgears; shorter is garbage, and would make a sampled row stand for frames without
bound. ``fps`` above its inverse is unusable. Units: ms."""
MAX_LINE_BYTES = 65536
"""A line longer than this without a newline is garbage and is dropped."""
SAMPLED_RATIO = 1.5
"""``Δelapsed / frametime`` above which a row is a sample standing for several frames."""
FIRST_STREAMING = (0, 6, 9)
"""The first MangoHud version that writes rows while logging (≤ 0.6.8 writes the file at stop)."""
_MS_US_THRESHOLD = math.sqrt(1e3 * 1e6)  # frametime·fps: ~1e3 when in ms, ~1e6 when in µs
_FILE_NAME = re.compile(r"(?P<app>.+)_\d{4}-\d{2}-\d{2}_\d{2}-\d{2}-\d{2}\.csv", re.DOTALL)
_VERSION = re.compile(r"v?(\d+)\.(\d+)\.(\d+)")


def app_of_log(path: Path) -> str:
    """The program name in a MangoHud log's file name (the whole stem when it does not match),
    printable (see `one_line`)."""
    match = _FILE_NAME.fullmatch(path.name)
    return one_line(match["app"] if match else path.stem)


class MangoHudLog:
    """One log file: `read` returns the frames of the rows appended since the previous call.

    ``skip_to`` is a byte offset: rows ending before it were written before govd looked and are
    not delivered; ``inode`` is the file's when govd looked (another one there later is a
    replacement, read from its start). ``report`` receives one-line problems (the caller
    de-duplicates them).
    """

    def __init__(self, path: Path, skip_to: int, report: Callable[[str], None],
                 inode: int | None = None) -> None:
        self.path = path
        self.app = app_of_log(path)
        self._report = report
        self.counts: Counter[str] = Counter()
        self.version: tuple[int, int, int] | None = None
        """The MangoHud version from the log-versioning line, when the log has one."""
        self.sampled = False
        """Whether a row stood for several frames (``log_interval`` ≠ 0)."""
        self.first_elapsed_ns: float | None = None
        self.last_elapsed_ns: float | None = None
        self.span_allowed_ms = math.inf
        """How much ``elapsed`` time all the rows that stand for several frames may add up to:
        the follower sets it to how long the log has been followed (and a gap's slack) before
        each read. A log cannot have presented frames for longer than it existed; a row past
        it stands for one frame (counted as ``impossible_gaps``), so whatever rows say, the
        frames of a drain are bounded by the time that passed."""
        self._counted_ms = 0.0
        self._file: BinaryIO | None = None
        self._inode = inode
        self._restart(skip_to)

    # -- the file --------------------------------------------------------------------------------
    def _restart(self, skip_to: int = 0) -> None:
        """Parse the file again from its first byte (rows before ``skip_to`` not delivered)."""
        self._offset = 0
        self._skip_to = skip_to
        self._partial = b""
        self._dropping = False
        self._said_bad_row = False
        """Inside a line longer than `MAX_LINE_BYTES`: bytes up to its newline are dropped."""
        self._columns: list[str] | None = None
        self._usable = True
        self._after_os_line = False
        self._scale_to_ms: float | None = None
        self._prev_elapsed_ns: float | None = None
        if self._file is not None:
            self._file.seek(0)

    @property
    def offset(self) -> int:
        """Bytes consumed so far (complete lines and the partial one). Units: bytes."""
        return self._offset + len(self._partial)

    def skip_to(self, offset: int) -> None:
        """Deliver no row ending at or before byte ``offset`` (rows govd must not count)."""
        self._skip_to = max(self._skip_to, offset)

    def close(self) -> None:
        """Close the file; the next `read` reopens it at the same offset."""
        if self._file is not None:
            self._file.close()
            self._file = None

    def _opened(self) -> BinaryIO | None:
        """The open file, reopened (or read again from the start when replaced or truncated)."""
        try:
            on_disk = os.lstat(self.path)
        except OSError:
            return self._file  # removed: read what is left in the open file
        # Replaced under its name (a copy put in its place) or cut shorter: not what MangoHud
        # does (a new file per launch). Read again from the start, every row would be counted
        # twice; so what the file holds now is history, and only what is appended counts.
        if self._inode is not None and on_disk.st_ino != self._inode:
            self.close()
            self.counts["reopened"] += 1
            self._restart(on_disk.st_size)
        elif on_disk.st_size < self.offset:
            self.counts["truncated"] += 1
            self._restart(on_disk.st_size)
        if self._file is None:
            try:
                self._file = _open_regular(self.path)
            except OSError as exc:
                self._report(f"{self.path}: cannot open: {unreadable_why(self.path, exc)}")
                return None
            self._inode = os.fstat(self._file.fileno()).st_ino
            # On from the partial line kept: a line longer than one read must not start over
            # at each reopen (logs are closed after each read when many grow at once).
            self._file.seek(self.offset)
        return self._file

    # -- rows ------------------------------------------------------------------------------------
    def read(self, max_bytes: int, history_bytes: int = 0) -> list[Frame]:
        """Frames of the complete rows appended since the last call (at most ``max_bytes`` read,
        and up to ``history_bytes`` more while rows before ``skip_to`` are left: those are only
        counted, which costs a split, not a parse)."""
        file = self._opened()
        if file is None:
            return []
        if self._columns is not None:
            max_bytes += max(0, min(history_bytes, self._skip_to - self.offset))
        try:
            chunk = file.read(max_bytes)
        except OSError as exc:
            self._report(f"{self.path}: read failed: {exc.strerror}")
            return []
        data = self._partial + chunk
        if self._dropping:  # the rest of an overlong line: its tail is no row either
            end = data.find(b"\n")
            self._offset += len(data) if end < 0 else end + 1
            self._partial = b""
            if end < 0:
                return []
            data, self._dropping = data[end + 1:], False
        lines = data.split(b"\n")
        self._partial = lines.pop()  # incomplete until its newline arrives
        frames: list[Frame] = []
        for raw in lines:
            self._offset += len(raw) + 1
            if self._columns is not None and self._offset <= self._skip_to:
                self.counts["skipped_rows"] += 1  # written before govd could use it
                continue
            frame = self._line(raw.rstrip(b"\r").decode("utf-8", "replace").strip())
            if frame is not None:
                frames.append(frame)
        # After the complete lines: `_offset` must count them before the dropped bytes.
        if len(self._partial) > MAX_LINE_BYTES:
            self.counts["bad_rows"] += 1
            self._offset += len(self._partial)
            self._partial = b""
            self._dropping = True
        return frames

    def _line(self, text: str) -> Frame | None:
        if not text:
            return None
        if self._columns is None:
            self._preamble_or_header(text)
            return None
        if not self._usable:
            return None
        self.counts["rows"] += 1
        fields = text.split(",")
        frame = self._frame(fields)
        if frame is None:
            self.counts["bad_rows"] += 1
            # Said once per log, from its second bad row: MangoHud's first frametime counts
            # from the program's start (seconds), a bad row in every real log.
            if not self._said_bad_row and self.counts["bad_rows"] >= 2:
                self._said_bad_row = True
                self._report(f"{self.path}: rows govd cannot use are skipped (counted as "
                             f"bad_rows), e.g. {self._why_bad(fields)}")
        return frame

    def _why_bad(self, fields: list[str]) -> str:
        assert self._columns is not None
        if len(fields) != len(self._columns):
            return f"{len(fields)} fields where the header has {len(self._columns)}"
        values = dict(zip(self._columns, fields, strict=True))
        return (f"frametime {values.get('frametime', '')[:20]!r}, fps "
                f"{values.get('fps', '')[:20]!r}: no frame time from {MIN_FRAME_MS:g} to "
                f"{MAX_FRAME_MS:g} ms")

    def _preamble_or_header(self, text: str) -> None:
        if self._after_os_line:  # the system-information values under "os,cpu,..."
            self._after_os_line = False
            return
        if "," not in text:  # log-versioning lines and separators
            if self.version is None and (match := _VERSION.fullmatch(text)):
                self.version = (int(match[1]), int(match[2]), int(match[3]))
            return
        if text.startswith("-"):
            return
        if text.startswith("os,"):
            self._after_os_line = True
            return
        columns = [c.strip() for c in text.split(",")]
        self._columns = columns
        if all(_number(c) is not None for c in columns):
            self._usable = False
            self.counts["bad_header"] += 1
            self._report(f"{self.path}: no column header (MangoHud older than 0.5); "
                         "install MangoHud 0.6.9 or newer")
        elif "frametime" not in columns and "fps" not in columns:
            self._usable = False
            self.counts["bad_header"] += 1
            # The line itself is not quoted: problems reach the world-readable status file.
            self._report(f"{self.path}: header has neither a frametime nor an fps column "
                         f"({len(columns)} columns)")
        elif "frametime" not in columns:
            self._report(f"{self.path}: no frametime column; using 1000/fps as the frame time")

    def _frame(self, fields: list[str]) -> Frame | None:
        assert self._columns is not None
        if len(fields) != len(self._columns):
            return None
        values = dict(zip(self._columns, fields, strict=True))
        fps = _number(values.get("fps"))
        if fps is not None and not 0 < fps <= 1000.0 / MIN_FRAME_MS:
            fps = None  # garbage (1e308 would make a sampled row stand for infinite frames)
        frametime = _number(values.get("frametime"))
        if frametime is None:
            if "frametime" in values or fps is None:
                return None
            frame_ms = 1000.0 / fps
        else:
            if frametime <= 0:
                return None
            if self._scale_to_ms is None:
                self._scale_to_ms = _scale_to_ms(frametime, fps)
            frame_ms = frametime * self._scale_to_ms
        if not (MIN_FRAME_MS <= frame_ms <= MAX_FRAME_MS):
            return None
        return Frame(gpu_time_ms=frame_ms, app=self.app,
                     count=self._frames_in_row(_number(values.get("elapsed")), frame_ms, fps))

    def _frames_in_row(self, elapsed_ns: float | None, frame_ms: float, fps: float | None) -> float:
        """How many frames one row stands for (1 in a per-frame log; see the module docstring)."""
        if elapsed_ns is None:
            return 1.0
        previous, self._prev_elapsed_ns = self._prev_elapsed_ns, elapsed_ns
        if self.first_elapsed_ns is None:
            self.first_elapsed_ns = elapsed_ns
        self.last_elapsed_ns = elapsed_ns
        if previous is None or elapsed_ns <= previous:
            return 1.0
        gap_ms = (elapsed_ns - previous) / 1e6
        # A gap longer than any frame or sample interval is a pause (or a clock that leapt):
        # the frames in it, if any, are not this row's. Bounded so, with frame_ms and fps
        # bounded by MIN_FRAME_MS, a row stands for at most MAX_FRAME_MS / MIN_FRAME_MS frames.
        if gap_ms / frame_ms < SAMPLED_RATIO or gap_ms > MAX_FRAME_MS:
            return 1.0
        if self._counted_ms + gap_ms > self.span_allowed_ms:
            self.counts["impossible_gaps"] += 1
            return 1.0
        self._counted_ms += gap_ms
        self.sampled = True
        return gap_ms * fps / 1000.0 if fps is not None else gap_ms / frame_ms

    @property
    def writes_at_stop(self) -> bool:
        """Whether the log comes from a MangoHud that writes its log only when it stops: its
        version line says so, or its frame times are in µs (0.6.9 changed both)."""
        if self.version is not None:
            return self.version < FIRST_STREAMING
        return self._scale_to_ms == 1e-3


def unreadable_why(path: Path, exc: OSError) -> str:
    """Why a log cannot be opened, with the fix where it is the log's mode: govd reads the
    folder's logs as a member of the group ``govd`` (the unit's SupplementaryGroups; it has no
    CAP_DAC_OVERRIDE), and MangoHud creates them with the player's umask."""
    why = exc.strerror or str(exc)
    if not isinstance(exc, PermissionError):
        return why
    try:
        st = os.lstat(path)
    except OSError:
        return why
    found = (f"{why} (mode {stat.S_IMODE(st.st_mode):04o}, owner uid {st.st_uid}, group gid "
             f"{st.st_gid})")
    if st.st_mode & stat.S_IRGRP and st.st_gid not in [*os.getgroups(), os.getegid()]:
        try:
            group = grp.getgrgid(st.st_gid).gr_name
        except KeyError:
            group = str(st.st_gid)
        if group == "govd":
            return (f"{found}: govd is not in the group govd, which may read it: the unit "
                    "lacks SupplementaryGroups=govd (one older than this govd: make install)")
    return (f"{found}: govd reads MangoHud's logs as a member of the group govd, so a log "
            "must be readable by that group, or by all; the folder gives new logs the group, "
            "the player's umask sets their mode (umask 022 or 002, not 077)")


def _open_regular(path: Path) -> BinaryIO:
    """``path`` opened for reading; OSError unless it is a regular file. Opened non-blocking and
    checked after opening: a FIFO put in the log's place would otherwise block `read` until
    someone writes to it. A symbolic link is refused (ELOOP): whoever writes the folder could
    point govd, which runs as root, at any file."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOFOLLOW)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise OSError("not a regular file")
        if st.st_nlink != 1:  # checked on what was opened: a link made after the listing too
            raise OSError("a hard link (several names): not read")
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def _number(text: str | None) -> float | None:
    if text is None:
        return None
    with contextlib.suppress(ValueError):
        value = float(text)
        if math.isfinite(value):
            return value
    return None


def _scale_to_ms(frametime: float, fps: float | None) -> float:
    """1.0 when ``frametime`` is in ms, 1e-3 when it is in µs (see the module docstring)."""
    if fps is not None and fps > 0:
        return 1e-3 if frametime * fps > _MS_US_THRESHOLD else 1.0
    return 1e-3 if frametime >= 500.0 else 1.0
