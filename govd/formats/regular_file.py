"""Reading a file a user names (configuration, state, status, prior) without hanging on a FIFO
or filling memory from /dev/zero: only a regular file, and only up to a size."""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from pathlib import Path

MAX_TABLE_BYTES = 256 << 20
"""The largest sweep table or run trace read (measured tables take under 1 MiB; a run trace
about 40 bytes a tick, so this holds three days at 20 ticks/s). Units: bytes."""


def read_regular(path: str | os.PathLike[str], max_bytes: int) -> bytes:
    """The bytes of the regular file at ``path`` (links followed). Raises OSError (with
    ``strerror`` saying why) when it cannot be read, is not a regular file (a FIFO, a device,
    a folder), or is larger than ``max_bytes`` (bytes)."""
    # O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer, for ever.
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            kind = "a folder" if stat.S_ISDIR(st.st_mode) else "a special file"
            raise OSError(errno.EINVAL, f"not a regular file ({kind})", str(path))
        if st.st_size > max_bytes:  # said before reading; the read below bounds a growing file
            raise OSError(errno.EFBIG, f"larger than {max_bytes} bytes", str(path))
        chunks = []
        left = max_bytes + 1
        while left > 0 and (chunk := os.read(fd, min(left, 1 << 20))):
            chunks.append(chunk)
            left -= len(chunk)
    finally:
        os.close(fd)
    data = b"".join(chunks)
    if len(data) > max_bytes:
        raise OSError(errno.EFBIG, f"larger than {max_bytes} bytes", str(path))
    return data


def read_regular_text(path: str | os.PathLike[str], max_bytes: int) -> str:
    """`read_regular` decoded as UTF-8; raises OSError as it does, ValueError for bad UTF-8."""
    return read_regular(Path(path), max_bytes).decode("utf-8")


def write_atomically(path: Path, text: str, mode: int, durable: bool = True) -> None:
    """Replace ``path`` by ``text`` with permissions ``mode``: written to a temporary file in the
    same folder (created afresh with ``mode``, never wider, never a file or link someone put
    there under that name), flushed to disk (``durable``: fsync of the file and its folder, so a
    power cut keeps it), then renamed over."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC | os.O_NOFOLLOW
    try:
        fd = os.open(tmp, flags, mode)
    except FileExistsError:  # left by a crash of this pid's predecessor, or planted: not used
        tmp.unlink()
        fd = os.open(tmp, flags, mode)
    try:
        os.fchmod(fd, mode)  # the umask may have narrowed it; never widened beyond `mode`
        with os.fdopen(fd, "w") as f:
            f.write(text)
            f.flush()
            if durable:
                os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
        raise
    if not durable:
        return
    with contextlib.suppress(OSError):
        dir_fd = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)
