"""Whether a file govd reads as root may be trusted: sshd's StrictModes, every folder up to ``/``.

govd acts on what its configuration and its state file say (which device to write, what to
write into it), so nobody but root and govd's own user may be able to change either: not by
writing the file, not by replacing it in its folder, and not by renaming a folder anywhere above
it and putting their own in its place. So the file and every folder the path traverses (the
folders holding symbolic links on the way too) must be owned by root or the running user, and
none may be writable by group or others; a folder above the file's own may be, with the sticky
bit (as ``/tmp``): there nobody may rename or remove an entry they do not own, and each entry on
the way is checked to be root's or the user's.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

_WRITABLE_BY_OTHERS = stat.S_IWGRP | stat.S_IWOTH


def _folders_traversed(path: Path) -> list[Path]:
    """Every folder a lookup of ``path`` passes through, links followed: the folders of its
    absolute path as written, and of where each of them leads. Innermost first."""
    absolute = Path(os.path.abspath(path))
    found: dict[Path, None] = {}
    for lexical in (absolute.parent, *absolute.parent.parents):
        real = Path(os.path.realpath(lexical))
        found.setdefault(lexical, None)
        for folder in (real, *real.parents):
            found.setdefault(folder, None)
    return list(found)


def trust_problems(path: str | os.PathLike[str], what: str = "file") -> list[str]:
    """Why ``path`` (a ``what``: "configuration", "state file") may not be trusted, one line each;
    empty when it may. The file itself is judged only where it exists (a state file not written
    yet); its own folder may not be writable by group or others at all, the folders above it
    only with the sticky bit. Raises nothing: a folder that cannot be examined is a problem."""
    path = Path(path)
    problems = []
    own_folder = Path(os.path.realpath(Path(os.path.abspath(path)).parent))
    try:
        st = os.stat(path)
    except FileNotFoundError:
        st = None
    except OSError as exc:
        return [f"{path}: cannot examine the {what}: {exc.strerror}"]
    euid = os.geteuid()
    if st is not None:
        problems += _judge(path, st, "file", euid, sticky_ok=False)
    for folder in _folders_traversed(path):
        try:
            folder_st = os.stat(folder)
        except OSError as exc:
            if st is None and isinstance(exc, FileNotFoundError):
                continue  # a state file's folder not made yet: created root's, 0755
            problems.append(f"{folder}: cannot examine this folder above the {what}: "
                            f"{exc.strerror}")
            continue
        problems += _judge(folder, folder_st, "folder", euid, sticky_ok=folder != own_folder)
    return problems


def _judge(item: Path, st: os.stat_result, what: str, euid: int, sticky_ok: bool) -> list[str]:
    problems = []
    if st.st_uid not in (0, euid):
        problems.append(f"{item}: {what} is owned by uid {st.st_uid}, not root or the user")
    if st.st_mode & _WRITABLE_BY_OTHERS and not (
            sticky_ok and stat.S_ISDIR(st.st_mode) and st.st_mode & stat.S_ISVTX):
        mode = stat.S_IMODE(st.st_mode)
        problems.append(f"{item}: {what} is writable by group or others (mode {mode:04o})")
    return problems
