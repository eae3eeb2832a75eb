"""systemd socket activation: the sockets systemd passed us (sd_listen_fds(3)).

systemd sets ``LISTEN_PID`` (the pid the fds are meant for), ``LISTEN_FDS`` (how many, starting at
fd 3) and optionally ``LISTEN_FDNAMES`` (colon-separated, from ``FileDescriptorName=``).
"""

from __future__ import annotations

import contextlib
import logging
import os
import resource
import socket
from collections.abc import Mapping, MutableMapping
from dataclasses import dataclass

log = logging.getLogger(__name__)

SD_LISTEN_FDS_START = 3
"""First file descriptor systemd passes."""

_ENV_KEYS = ("LISTEN_PID", "LISTEN_FDS", "LISTEN_FDNAMES")


@dataclass(frozen=True, slots=True)
class ListenFd:
    """One file descriptor passed by systemd, with its name (``unknown`` when none was given)."""

    fd: int
    name: str


def listen_fds(
    env: Mapping[str, str] | None = None, pid: int | None = None, unset_environment: bool = False
) -> list[ListenFd]:
    """The fds passed for this process, as sd_listen_fds_with_names(3) finds them.

    Returns an empty list when nothing was passed, the variables are malformed, or they were meant
    for another process (``LISTEN_PID`` differs from ``pid``, default `os.getpid`). Like libsystemd
    it marks the fds close-on-exec so that children do not inherit them. With ``unset_environment``
    the three variables are removed from ``env`` (default `os.environ`) so children do not see
    them.
    """
    source = os.environ if env is None else env
    own_pid = os.getpid() if pid is None else pid
    try:
        fds = _parse(source, own_pid)
    finally:
        if unset_environment and isinstance(source, MutableMapping):
            for key in _ENV_KEYS:
                source.pop(key, None)
    for item in fds:
        # A stale or closed fd is not ours to complain about; the caller's checks will skip it.
        with contextlib.suppress(OSError):
            os.set_inheritable(item.fd, False)
    return fds


def _parse(env: Mapping[str, str], own_pid: int) -> list[ListenFd]:
    listen_pid = env.get("LISTEN_PID")
    if listen_pid is not None and (not listen_pid.isdigit() or int(listen_pid) != own_pid):
        return []
    count_text = env.get("LISTEN_FDS", "")
    if not count_text.isdigit():
        return []
    count = int(count_text)
    max_fds = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    if max_fds != resource.RLIM_INFINITY and SD_LISTEN_FDS_START + count > max_fds:
        # More than this process may hold open: not systemd's (a list that size was a
        # MemoryError at start).
        log.warning("LISTEN_FDS=%s: more file descriptors than this process may open (%d); "
                    "ignored", count_text[:20], max_fds)
        return []
    names = env.get("LISTEN_FDNAMES")
    name_list = names.split(":") if names else []
    if len(name_list) != count:
        # libsystemd rejects a mismatched list; we keep the fds and call them "unknown".
        name_list = ["unknown"] * count
    return [
        ListenFd(fd=SD_LISTEN_FDS_START + i, name=name_list[i] or "unknown") for i in range(count)
    ]


def _is_datagram_socket(fd: int) -> bool:
    try:
        sock = socket.socket(fileno=fd)
    except OSError:
        return False
    try:
        return sock.family == socket.AF_UNIX and sock.type == socket.SOCK_DGRAM
    finally:
        sock.detach()  # the fd stays open: it is systemd's, we only looked at it


def frames_fd(fds: list[ListenFd], name: str = "frames") -> int | None:
    """The fd to read frames from: the one called ``name`` if any (``FileDescriptorName=frames``),
    else the first Unix datagram socket, else None."""
    for item in fds:
        if item.name == name and _is_datagram_socket(item.fd):
            return item.fd
    for item in fds:
        if _is_datagram_socket(item.fd):
            return item.fd
    return None
