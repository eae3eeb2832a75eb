"""Listing the MangoHud folder a bounded step at a time: whoever may write there (every member of
its group) may fill it with thousands of entries, and govd must still find the live logs among
them without a tick ever paying for the whole folder.

A `FolderScan` is one pass over the folder, spread over as many drains as it needs, each looking
at `STEP_ENTRIES` entries at most; the listing it makes counts only once the pass is over. What
is in it:

- logs: regular ``*.csv`` files (``*_summary.csv`` excluded) with one link, by path, with their
  inode, size and when they last changed;
- links: symbolic links and hard links named ``*.csv``, never read: govd runs as root, and either
  could point it at a file the folder's users may not read (a hard link to ``/etc/shadow`` where
  ``fs.protected_hardlinks`` is 0);
- how many entries there were in all.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass, field
from pathlib import Path

STEP_ENTRIES = 2000
"""Folder entries looked at per step (per drain): a listing of 100 000 files cost 0.72 s on the
2-core build machine, these 2000 about 15 ms; a folder of 20 000 junk entries is listed in ten
drains, and the live logs among them are found."""


@dataclass
class Listing:
    """What one whole pass over the MangoHud folder found."""

    logs: dict[Path, tuple[int, int]] = field(default_factory=dict)
    """Each log → (inode, size in bytes)."""
    changed_s: dict[Path, float] = field(default_factory=dict)
    """Each log → when it was last written (st_mtime, s since the epoch)."""
    links: list[Path] = field(default_factory=list)
    """``*.csv`` symbolic links, not followed."""
    hard_links: list[Path] = field(default_factory=list)
    """``*.csv`` files with more than one link, not read."""
    entries: int = 0
    """Every entry of the folder, logs or not."""


class FolderScan:
    """One pass over ``folder``, a `step` at a time. Raises OSError when the folder cannot be
    listed (at the start, or at a step)."""

    def __init__(self, folder: Path, started_s: float) -> None:
        self.folder = folder
        self.started_s = started_s
        """When the pass began (the caller's clock, s)."""
        self.steps = 0
        self.listing = Listing()
        self._entries = os.scandir(folder)

    def step(self, max_entries: int = STEP_ENTRIES) -> bool:
        """Look at the next ``max_entries`` entries; True when the pass is over (the scan is
        closed then)."""
        self.steps += 1
        listing = self.listing
        try:
            for _ in range(max_entries):
                entry = next(self._entries, None)
                if entry is None:
                    self.close()
                    return True
                listing.entries += 1
                _classify(entry, listing)
        except OSError:
            self.close()
            raise
        return False

    def close(self) -> None:
        """Stop the pass (its folder descriptor released)."""
        self._entries.close()


def _classify(entry: os.DirEntry[str], listing: Listing) -> None:
    name = entry.name
    if not name.endswith(".csv") or name.endswith("_summary.csv"):
        return
    path = Path(entry.path)
    try:
        if entry.is_symlink():
            listing.links.append(path)
            return
        st = entry.stat(follow_symlinks=False)
    except OSError:
        return  # removed meanwhile
    if not stat.S_ISREG(st.st_mode):
        return
    if st.st_nlink != 1:
        listing.hard_links.append(path)
        return
    listing.logs[path] = (st.st_ino, st.st_size)
    listing.changed_s[path] = st.st_mtime
