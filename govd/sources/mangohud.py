"""Frame times from MangoHud's CSV logs, followed as they grow (like ``tail -F`` on a folder).

MangoHud writes ``<program>_<YYYY-MM-DD_HH-MM-SS>.csv`` into its ``output_folder``: optional
log-versioning lines (``v1``, the version, ``---...---`` separators), the preamble
``os,cpu,gpu,ram,kernel,driver,cpuscheduler`` and its values, then a header such as
``fps,frametime,cpu_load,...,elapsed`` and one row per log interval (``elapsed`` in ns).

What the numbers mean, and how govd uses them:

- ``frametime`` is the CPU-side interval between presents, not GPU time. A GPU-bound game presents
  as fast as the GPU finishes, so the interval tracks GPU time; a CPU-bound or frame-capped one
  does not. govd uses it as the frame-time signal only when no better source (the frame socket)
  exists, and each row is a sample of the frame time at one log interval, not every frame.
- Units: old builds logged ``frametime`` in µs (an integer), newer ones in ms. The header does not
  say, so the unit is decided once per file from its first usable row: when an ``fps`` column is
  there, ``frametime · fps`` is about 1000 for ms and about 10⁶ for µs (the threshold is their
  geometric mean, 31 623); without one, a value of 500 or more is taken as µs (500 ms frames are
  not a game being played).
- A header without ``frametime`` but with ``fps`` is used as ``1000 / fps`` ms; a header with
  neither is reported once and the file is skipped until a newer one appears.

Robustness: a partial last line is kept until its newline arrives; a row with the wrong number of
fields or an unusable frame time is skipped and counted; a newer file in the folder is switched to
(rotation); a file replaced (new inode) or truncated (size below what was read) is reopened from
its start. When govd starts, rows already in the newest file are history and are skipped.
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import re
import stat
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

from govd.sources.base import Frame, FrameSource

log = logging.getLogger(__name__)

MAX_FRAME_MS = 10_000.0
"""Longest frame time accepted. Units: ms."""
MAX_LINE_BYTES = 65536
"""A line longer than this without a newline is garbage and is dropped."""
_MS_US_THRESHOLD = math.sqrt(1e3 * 1e6)  # frametime·fps: ~1e3 when in ms, ~1e6 when in µs
_FILE_NAME = re.compile(r"(?P<app>.+)_\d{4}-\d{2}-\d{2}_\d{2}-\d{2}-\d{2}\.csv")


def app_of_log(path: Path) -> str:
    """The program name in a MangoHud log's file name (the whole stem when it does not match)."""
    match = _FILE_NAME.fullmatch(path.name)
    return match["app"] if match else path.stem


def newest_log(folder: Path) -> Path | None:
    """The most recently modified MangoHud log in ``folder`` (``*_summary.csv`` excluded)."""
    best: tuple[int, str] | None = None
    found: Path | None = None
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return None
    for entry in entries:
        if not entry.name.endswith(".csv") or entry.name.endswith("_summary.csv"):
            continue
        try:
            if not entry.is_file():
                continue
            key = (entry.stat().st_mtime_ns, entry.name)
        except OSError:
            continue
        if best is None or key > best:
            best, found = key, Path(entry.path)
    return found


class MangoHudSource(FrameSource):
    """Frames from the newest MangoHud log in ``folder``.

    ``rescan_s`` is how often the folder is listed for a newer log (s; 0 = every `drain`),
    ``max_read_bytes`` bounds the bytes read per `drain`, ``clock`` is a monotonic clock (s).
    """

    def __init__(
        self,
        folder: str | Path,
        *,
        rescan_s: float = 1.0,
        max_read_bytes: int = 1 << 20,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.folder = Path(folder)
        self.rescan_s = rescan_s
        self.max_read_bytes = max_read_bytes
        self._clock = clock
        self._next_scan_s = -math.inf
        self._counts: Counter[str] = Counter()
        self._reported: set[str] = set()
        self.errors: list[str] = []
        """Problems reported so far, each once (also logged as warnings)."""
        self._path: Path | None = None
        self._file: BinaryIO | None = None
        self._started = False

    def _report(self, message: str) -> None:
        if message not in self._reported:
            self._reported.add(message)
            self.errors.append(message)
            log.warning("%s", message)

    def _open(self, path: Path, skip_existing: bool) -> None:
        self._close_file()
        try:
            self._file = _open_regular(path)
        except OSError as exc:
            self._report(f"{path}: cannot open: {exc.strerror or exc}")
            self._path = None
            return
        self._path = path
        opened = os.fstat(self._file.fileno())
        self._inode = opened.st_ino
        self._app = app_of_log(path)
        self._restart(skip_to=opened.st_size if skip_existing else 0)

    def _restart(self, skip_to: int = 0) -> None:
        """Read the current file again from its first byte (rows before ``skip_to`` not emitted)."""
        assert self._file is not None
        self._file.seek(0)
        self._offset = 0
        self._skip_to = skip_to
        self._partial = b""
        self._columns: list[str] | None = None
        self._usable = True
        self._after_os_line = False
        self._scale_to_ms: float | None = None

    def _close_file(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None

    def _follow(self) -> None:
        """Switch to a newer log, or reopen a log replaced or truncated under us."""
        now_s = self._clock()
        if now_s >= self._next_scan_s:
            self._next_scan_s = now_s + self.rescan_s
            newest = newest_log(self.folder)
            if newest is not None and newest != self._path:
                if self._path is not None:
                    self._counts["rotated"] += 1
                self._open(newest, skip_existing=not self._started)
        self._started = True
        if self._file is None or self._path is None:
            return
        try:
            on_disk = os.stat(self._path)
        except OSError:
            return  # removed (or its folder): keep what is open until a newer log appears
        if on_disk.st_ino != self._inode:
            self._counts["reopened"] += 1
            self._open(self._path, skip_existing=False)
        elif on_disk.st_size < self._offset + len(self._partial):
            self._counts["truncated"] += 1
            self._restart()

    def drain(self) -> list[Frame]:
        """Rows appended to the followed log since the last call, as frames, oldest first."""
        self._follow()
        frames: list[Frame] = []
        if self._file is None:
            return frames
        try:
            chunk = self._file.read(self.max_read_bytes)
        except OSError as exc:
            self._report(f"{self._path}: read failed: {exc.strerror}")
            return frames
        data = self._partial + chunk
        lines = data.split(b"\n")
        self._partial = lines.pop()  # incomplete until its newline arrives
        if len(self._partial) > MAX_LINE_BYTES:
            self._counts["bad_rows"] += 1
            self._offset += len(self._partial)
            self._partial = b""
        for raw in lines:
            self._offset += len(raw) + 1
            if self._columns is not None and self._offset <= self._skip_to:
                continue  # a row written before govd started following the log
            frame = self._line(raw.rstrip(b"\r"))
            if frame is not None:
                frames.append(frame)
                self._counts["accepted"] += 1
        return frames

    def _line(self, raw: bytes) -> Frame | None:
        text = raw.decode("utf-8", "replace").strip()
        if not text:
            return None
        if self._columns is None:
            self._preamble_or_header(text)
            return None
        if not self._usable:
            return None
        self._counts["rows"] += 1
        frame_ms = self._frame_ms(text.split(","))
        if frame_ms is None:
            self._counts["bad_rows"] += 1
            return None
        return Frame(gpu_time_ms=frame_ms, app=self._app)

    def _preamble_or_header(self, text: str) -> None:
        if self._after_os_line:  # the system-information values under "os,cpu,..."
            self._after_os_line = False
            return
        if text.startswith("-") or "," not in text:  # versioning lines and separators
            return
        if text.startswith("os,"):
            self._after_os_line = True
            return
        columns = [c.strip() for c in text.split(",")]
        self._columns = columns
        if "frametime" not in columns and "fps" not in columns:
            self._usable = False
            self._counts["bad_header"] += 1
            self._report(f"{self._path}: header has neither a frametime nor an fps column: {text}")
        elif "frametime" not in columns:
            self._report(f"{self._path}: no frametime column; using 1000/fps as the frame time")

    def _frame_ms(self, fields: list[str]) -> float | None:
        assert self._columns is not None
        if len(fields) != len(self._columns):
            return None
        values = dict(zip(self._columns, fields, strict=True))
        fps = _number(values.get("fps"))
        frametime = _number(values.get("frametime"))
        if frametime is None:
            if "frametime" in values or fps is None or fps <= 0:
                return None
            frame_ms = 1000.0 / fps
        else:
            if frametime <= 0:
                return None
            if self._scale_to_ms is None:
                self._scale_to_ms = _scale_to_ms(frametime, fps)
            frame_ms = frametime * self._scale_to_ms
        if not (0 < frame_ms <= MAX_FRAME_MS):
            return None
        return frame_ms

    def stats(self) -> dict[str, int]:
        """Counters: ``rows``, ``accepted``, ``bad_rows``, ``bad_header``, ``rotated`` (switched
        to a newer log), ``reopened`` (file replaced), ``truncated`` (file cut, read again)."""
        return dict(self._counts)

    def close(self) -> None:
        """Close the followed log."""
        self._close_file()


def _open_regular(path: Path) -> BinaryIO:
    """``path`` opened for reading; OSError unless it is a regular file. Opened non-blocking and
    checked after opening: a FIFO put in the log's place would otherwise block `drain` until
    someone writes to it."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError("not a regular file")
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
