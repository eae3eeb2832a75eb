"""Frames from games through MangoHud's CSV logs: every live log in one folder, followed at once.

MangoHud (≥ 0.6.9, ``autostart_log``, ``log_interval=0``) writes one
``<program>_<YYYY-MM-DD_HH-MM-SS>.csv`` per process into its ``output_folder`` and appends a row
per present while the program runs (the format: `govd.sources.mangohud_log`). Several programs
log at once (MangoHud enabled globally: the game and its launcher), so every log that grows is
followed from its own byte offset, its frames carry the program name from the file name, and no
row is ever delivered twice. Rows already in the folder at govd's first look that works are history.

What goes wrong in practice, and what govd says about it (journal once, `govd status` while it
lasts, a counter in `stats`):

- the folder is missing or govd cannot read it (the unit hides ``$HOME`` and ``/tmp``):
  ``folder_unreadable`` counts the failed looks;
- MangoHud ≤ 0.6.8 keeps the rows in memory and writes the whole file when logging stops (and
  never, without ``log_duration``): a log whose version line or µs frame times say so, or that
  appears holding rows that span more time than passed since the folder was last listed without
  it (`WHOLE_SLACK_S` allowed), is reported and all its rows are dropped as ``stale_rows`` (they
  are not this tick's frames; the real 0.6.8 takes several drains to write one out);
- sampled logs (``log_interval`` ≠ 0): each row counts for the frames it stands for (`Frame.count`),
  but a log's rows never stand for frames over more ``elapsed`` time than the log has been
  followed (`SPAN_SLACK_S` allowed; past it a row is one frame, counted as ``impossible_gaps``):
  whoever writes the folder cannot make a drain's rows stand for millions of frames;
- whoever writes the folder is not trusted: links (symbolic or hard) are not followed, the folder
  is listed a bounded step per drain (`govd.sources.mangohud_folder`: thousands of junk entries
  delay the listing a few drains and hide no live log), at most `MAX_TRACKED_LOGS` logs are
  followed, and thousands of growing logs cost a bounded number of open files (`MAX_OPEN_LOGS`)
  and reads per drain (`MAX_LOGS_PER_DRAIN`);
- a log truncated or replaced under its name (not what MangoHud does: it starts a new file per
  launch) is read on from its end as it is then: its rows were delivered once already.

`live` says whether a log delivered frames lately; while none does the daemon falls back to busy
time.
"""

from __future__ import annotations

import logging
import math
import time
from collections import Counter, deque
from collections.abc import Callable
from pathlib import Path
from typing import Any

from govd.sources.base import Frame, FrameSource, one_line
from govd.sources.mangohud_folder import STEP_ENTRIES, FolderScan, Listing
from govd.sources.mangohud_log import MAX_FRAME_MS, MangoHudLog, app_of_log

__all__ = ["MAX_FRAME_MS", "MangoHudSource", "app_of_log"]

log = logging.getLogger(__name__)

LIVE_S = 2.0
"""No frame for this long: the source is not live (the daemon uses busy time). Units: s."""
IDLE_CLOSE_S = 30.0
"""A log not grown for this long is closed (reopened at its offset when it grows). Units: s."""
WHOLE_SLACK_S = 0.5
"""How much more than the time since the folder was last listed a new log's rows may span and
still be live (MangoHud's start, govd's own delay). Units: s."""
HISTORY_READ_BYTES = 1 << 20
"""Bytes of history (rows from before govd's first look: counted, never parsed) read per drain
over all logs, beside ``max_read_bytes``: hours of a game's log at govd's start pass in a few
drains, at a split's cost (~1 ms a MiB). Units: bytes."""
MAX_OPEN_LOGS = 32
"""Logs kept open between drains; past that each is closed after its read (and reopened at its
offset): whoever writes the folder must not exhaust govd's open-files limit."""
MAX_LOGS_PER_DRAIN = 64
"""Logs read per drain; the others wait their turn (round robin), so thousands of growing logs
cost a tick a bounded time."""
MAX_PROBLEMS = 10
"""Problems with logs said per `PROBLEMS_EVERY_S` (the rest counted and summed up in one line)
and kept for `govd status` (the latest): a folder of broken logs must not flood either."""
PROBLEMS_EVERY_S = 60.0
"""The window of `MAX_PROBLEMS`. Units: s."""
MAX_PROBLEM_CHARS = 300
"""Longest problem line; longer ones (a header echoed) are cut."""
MAX_APPS_SHOWN = 16
"""Programs `report` names (those with most frames): a folder of thousands of logs must not make
a status line of thousands of names."""
SPAN_SLACK_S = MAX_FRAME_MS / 1000.0
"""How much more ``elapsed`` than the time a log has been followed its sampled rows may span:
the first row read may stand for a sample interval begun before govd looked. Units: s."""
MAX_TRACKED_LOGS = 4096
"""Logs followed at most (a week of a busy player's logs is hundreds): in a folder holding more,
those written most recently are followed, and the rest said to be old."""
SETUP_HINT = "see the README, 'Frames from games (MangoHud)'"


class MangoHudSource(FrameSource):
    """Frames from every MangoHud log growing in ``folder``.

    ``rescan_s``: how often the folder is listed (s; 0 = every `drain`); ``max_read_bytes``: bytes
    read per `drain` over all logs, shared evenly between the logs read (a real log grows a few
    kB a tick; a sparse terabyte or dozens of big logs must not cost a tick megabytes);
    ``clock``: a monotonic clock (s).
    """

    def __init__(
        self,
        folder: str | Path,
        *,
        rescan_s: float = 1.0,
        max_read_bytes: int = 1 << 16,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.folder = Path(folder)
        self.rescan_s = rescan_s
        self.max_read_bytes = max_read_bytes
        self._clock = clock
        self._next_scan_s = -math.inf
        self._logs: dict[Path, MangoHudLog] = {}
        self._sizes: dict[Path, tuple[int, int]] = {}
        self._active: dict[Path, float] = {}
        """Logs read at every drain → when they last grew (s)."""
        self._since: dict[Path, float] = {}
        """Each log → since when its rows may stand for frames (s): govd's first look at it,
        or, for a log that appeared later, the last listing of the folder without it."""
        self._new: dict[Path, float] = {}
        """Logs that appeared after start and showed no row yet → when the folder was last
        listed without them (s): a log written while logging cannot span more than since."""
        self._stale: set[Path] = set()
        """Logs written whole at stop: none of their rows is delivered."""
        self._listed_s = math.nan
        """When the last whole pass over the folder began (s)."""
        self._scanning: FolderScan | None = None
        self._counts: Counter[str] = Counter()
        self._frames_by_app: dict[str, float] = {}
        self._last_frame_s = -math.inf
        self._turn = 0
        """Where the next drain starts in the active logs when it cannot read them all."""
        self._folder_problem: str | None = None
        self._reported: dict[str, None] = {}
        """Problems said, in order (a bounded set: the oldest are forgotten past its size)."""
        self.errors: deque[str] = deque(maxlen=MAX_PROBLEMS)
        """The latest problems with logs, each once (also logged as warnings)."""
        self._window_s = -math.inf
        self._said = self._unsaid = 0

    # -- problems --------------------------------------------------------------------------------
    def _report(self, message: str) -> None:
        """Say a problem once, at most `MAX_PROBLEMS` a `PROBLEMS_EVERY_S` (what whoever writes
        the folder puts in a log's header must not flood the journal: each is cut short too)."""
        message = one_line(message)  # file names are whoever writes the folder's choice
        if len(message) > MAX_PROBLEM_CHARS:
            message = message[:MAX_PROBLEM_CHARS - 1] + "…"
        if message in self._reported:
            return
        self._reported[message] = None
        if len(self._reported) > 64 * MAX_PROBLEMS:
            del self._reported[next(iter(self._reported))]
        self.errors.append(message)
        now_s = self._clock()
        if now_s >= self._window_s + PROBLEMS_EVERY_S:
            if self._unsaid:
                log.warning("%d more problems with MangoHud logs were not said (at most %d "
                            "every %g s); the latest are in `govd status`", self._unsaid,
                            MAX_PROBLEMS, PROBLEMS_EVERY_S)
            self._window_s, self._said, self._unsaid = now_s, 0, 0
        if self._said < MAX_PROBLEMS:
            self._said += 1
            log.warning("%s", message)
        else:
            self._unsaid += 1

    def _folder_failed(self, exc: OSError) -> None:
        self._counts["folder_unreadable"] += 1
        if isinstance(exc, FileNotFoundError):
            why = "does not exist"
        elif isinstance(exc, PermissionError):
            why = "cannot be read by govd (permission denied)"
        elif isinstance(exc, NotADirectoryError):
            why = "is not a folder"
        else:
            why = f"cannot be listed ({exc.strerror or exc})"
        problem = (f"MangoHud folder {self.folder} {why}: no frames from games until it can be "
                   f"read; {SETUP_HINT}")
        if problem != self._folder_problem:
            self._folder_problem = problem
            log.error("%s", problem)  # loud: without it the source is silent forever

    # -- the folder ------------------------------------------------------------------------------
    def _look(self, now_s: float) -> None:
        """A step of the pass over the folder (a new pass when one is due); the listing counts
        once the pass is over."""
        if self._scanning is None:
            if now_s < self._next_scan_s:
                return
            self._next_scan_s = now_s + self.rescan_s
            try:
                self._scanning = FolderScan(self.folder, now_s)
            except OSError as exc:
                self._folder_failed(exc)
                return
        scan = self._scanning
        try:
            done = scan.step(STEP_ENTRIES)
        except OSError as exc:
            self._scanning = None
            self._folder_failed(exc)
            return
        if done:
            self._scanning = None
            self._next_scan_s = now_s + self.rescan_s
            self._apply(scan.listing, scan.started_s, scan.steps)

    def _apply(self, listing: Listing, started_s: float, steps: int) -> None:
        """Take the logs of a whole pass that began at ``started_s`` (s) and took ``steps``
        drains."""
        now_s = started_s
        for link in listing.links:
            self._report(f"{link}: a symbolic link, not followed: govd reads only regular files "
                         "in the MangoHud folder")
        for link in listing.hard_links:
            self._report(f"{link}: a file with several links (a hard link), not read: govd "
                         "reads only files made in the MangoHud folder")
        found = listing.logs
        if len(found) > MAX_TRACKED_LOGS:
            newest = sorted(found, key=listing.changed_s.__getitem__)[-MAX_TRACKED_LOGS:]
            found = {path: found[path] for path in newest}
            self._report(f"MangoHud folder {self.folder} holds {len(listing.logs)} logs: govd "
                         f"follows the {MAX_TRACKED_LOGS} written last; remove old logs")
        if steps > 5 and len(listing.logs) < listing.entries // 2:
            self._report(f"MangoHud folder {self.folder} holds {listing.entries} entries, "
                         f"{len(listing.logs)} of them MangoHud logs: listing it takes {steps} "
                         "ticks; keep only MangoHud's logs there")
        if self._folder_problem is not None:
            log.info("MangoHud folder %s can be read again", self.folder)
            self._folder_problem = None
        first_look = math.isnan(self._listed_s)
        for path, (inode, size) in found.items():
            if path not in self._logs:
                # At the first look that works every row is history (also when the folder
                # could not be read at start); later a new log is read from its first byte.
                self._logs[path] = MangoHudLog(path, size if first_look else 0, self._report,
                                               inode)
                self._counts["logs"] += 1
                self._since[path] = now_s if first_look else self._listed_s
                if not first_look:
                    self._new[path] = self._listed_s
                    self._active[path] = now_s
            elif self._sizes.get(path) != (inode, size):
                self._active.setdefault(path, now_s)
        removed = set(self._logs) - set(found)
        for path in removed:
            gone = self._logs.pop(path)
            gone.close()
            self._counts.update(gone.counts)
            self._active.pop(path, None)
            self._new.pop(path, None)
            self._since.pop(path, None)
            self._stale.discard(path)
        if removed:  # programs whose every log is gone are forgotten
            alive = {mango.app for mango in self._logs.values()}
            for app in [app for app in self._frames_by_app if app not in alive]:
                del self._frames_by_app[app]
        self._sizes = found
        self._listed_s = now_s

    def drain(self) -> list[Frame]:
        """Rows appended to any log since the last call, as frames: each log's in order, the
        logs one after the other."""
        now_s = self._clock()
        self._look(now_s)
        frames: list[Frame] = []
        active = list(self._active)
        if len(active) > MAX_LOGS_PER_DRAIN:  # round robin: each log gets its turn
            start = self._turn % len(active)
            active = (active[start:] + active[:start])[:MAX_LOGS_PER_DRAIN]
            self._turn = start + MAX_LOGS_PER_DRAIN
        keep_open = len(self._active) <= MAX_OPEN_LOGS
        share = max(1, self.max_read_bytes // max(1, len(active)))
        history_share = HISTORY_READ_BYTES // max(1, len(active))
        for path in active:
            mango = self._logs[path]
            before = mango.offset
            mango.span_allowed_ms = (now_s - self._since[path] + SPAN_SLACK_S) * 1000.0
            got = mango.read(share, history_share)
            if path in self._new and (mango.counts["rows"] or mango.version is not None):
                self._judge(mango, now_s - self._new.pop(path))
            if path in self._stale:
                self._counts["stale_rows"] += len(got)
                got = []
            if mango.offset != before:
                self._active[path] = now_s
            elif now_s - self._active[path] > IDLE_CLOSE_S:
                mango.close()
                del self._active[path]
            if not keep_open:
                mango.close()
            frames.extend(got)
        for frame in frames:
            self._frames_by_app[frame.app] = self._frames_by_app.get(frame.app, 0.0) + frame.count
        if frames:
            self._last_frame_s = now_s
        self._counts["accepted"] += len(frames)
        return frames

    def _judge(self, mango: MangoHudLog, listed_ago_s: float) -> None:
        """Mark a log that appeared after start as stale when it was written whole when logging
        stopped (MangoHud ≤ 0.6.8), and say what to change."""
        span_s = (mango.last_elapsed_ns or 0.0) / 1e9
        if not mango.writes_at_stop and not span_s > listed_ago_s + WHOLE_SLACK_S:
            return
        self._stale.add(mango.path)
        self._counts["written_at_stop"] += 1
        if mango.version is not None:
            said = f"says MangoHud {'.'.join(map(str, mango.version))}"
        elif mango.writes_at_stop:
            said = "frame times in µs"
        else:
            said = f"appeared holding {span_s:.1f} s of rows"
        self._report(
            f"{mango.path.name}: written whole when logging stopped ({said}): MangoHud 0.6.8 "
            "and older write the log only at stop, so govd gets no live frames and uses busy "
            f"time; install MangoHud 0.6.9 or newer; {SETUP_HINT}")

    # -- what it tells ---------------------------------------------------------------------------
    @property
    def live(self) -> bool:
        """Whether some log delivered frames in the last `LIVE_S` seconds."""
        return self._clock() - self._last_frame_s <= LIVE_S

    def problems(self) -> list[str]:
        """What the user must change, one line each (the folder first, while it is unreadable)."""
        return ([self._folder_problem] if self._folder_problem else []) + list(self.errors)

    def report(self) -> dict[str, Any]:
        """For `govd status`: problems, whether frames are live, frames per program (rounded;
        a sampled log's rows count for the frames they stand for; the `MAX_APPS_SHOWN` with
        most) and which logs are sampled."""
        return {
            "problems": self.problems(),
            "live": self.live,
            "frames_by_app": {app: round(n) for app, n in sorted(
                self._frames_by_app.items(), key=lambda item: -item[1])[:MAX_APPS_SHOWN]},
            "sampled": sorted({m.app for m in self._logs.values() if m.sampled})[:MAX_APPS_SHOWN],
        }

    def stats(self) -> dict[str, int]:
        """Counters: ``logs`` (seen), ``rows``, ``accepted`` (rows delivered), ``bad_rows``,
        ``bad_header``, ``skipped_rows`` (history), ``stale_rows`` and ``written_at_stop`` (logs
        written whole at stop), ``reopened`` (replaced), ``truncated``, ``folder_unreadable``,
        ``impossible_gaps`` (rows claiming more time than the log existed)."""
        counts = Counter(self._counts)
        for mango in self._logs.values():
            counts.update(mango.counts)
        return dict(counts)

    def close(self) -> None:
        """Close every log (and a pass over the folder under way)."""
        if self._scanning is not None:
            self._scanning.close()
            self._scanning = None
        for mango in self._logs.values():
            mango.close()
