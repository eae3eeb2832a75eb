"""The frame socket's file: made with its mode, never through a link, removed only if ours."""

from __future__ import annotations

import os
import socket
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from govd.sources.socket import SOCKET_MODE, SocketSetupError, SocketSource


@pytest.fixture
def sock_dir() -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix="govd-", dir="/tmp") as d:
        yield Path(d)


def test_socket_file_has_its_mode_from_bind_without_chmod(
    sock_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    modes = []
    real_bind = socket.socket.bind

    def bind_and_look(self: socket.socket, address: object) -> None:
        real_bind(self, address)  # type: ignore[arg-type]
        modes.append(stat.S_IMODE(os.lstat(str(address)).st_mode))

    monkeypatch.setattr(socket.socket, "bind", bind_and_look)
    monkeypatch.setattr(os, "chmod", lambda *a, **k: pytest.fail("chmod follows links"))
    src = SocketSource(sock_dir / "frames.sock", group=None)
    assert modes == [SOCKET_MODE]
    src.close()


def test_link_swapped_in_after_bind_is_refused_and_its_target_untouched(
    sock_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    victim = sock_dir / "victim"
    victim.write_text("x")
    victim.chmod(0o600)
    path = sock_dir / "frames.sock"
    real_bind = socket.socket.bind

    def bind_then_swap(self: socket.socket, address: object) -> None:
        real_bind(self, address)  # type: ignore[arg-type]
        os.unlink(str(address))  # what someone who may write the folder could do
        os.symlink(victim, str(address))

    monkeypatch.setattr(socket.socket, "bind", bind_then_swap)
    with pytest.raises(SocketSetupError, match="replaced"):
        SocketSource(path, group="root")
    assert stat.S_IMODE(victim.stat().st_mode) == 0o600
    assert victim.read_text() == "x"


def test_close_leaves_a_file_that_replaced_the_socket(sock_dir: Path) -> None:
    path = sock_dir / "frames.sock"
    src = SocketSource(path, group=None)
    other = sock_dir / "other"
    other.write_text("someone else's")
    os.replace(other, path)
    src.close()
    assert path.read_text() == "someone else's"


def test_close_removes_the_socket_it_created(sock_dir: Path) -> None:
    path = sock_dir / "frames.sock"
    SocketSource(path, group=None).close()
    assert not path.exists()


def test_folder_writable_by_others_is_refused(sock_dir: Path) -> None:
    folder = sock_dir / "open"
    folder.mkdir()
    folder.chmod(0o777)
    with pytest.raises(SocketSetupError, match="writable by group or others"):
        SocketSource(folder / "frames.sock", group=None)
    assert list(folder.iterdir()) == []


def test_sticky_shared_folder_is_accepted(sock_dir: Path) -> None:
    folder = sock_dir / "sticky"
    folder.mkdir()
    folder.chmod(0o1777)
    SocketSource(folder / "frames.sock", group=None).close()


@pytest.mark.skipif(os.geteuid() != 0, reason="chown to another user needs root")
def test_folder_owned_by_another_user_is_refused(sock_dir: Path) -> None:
    folder = sock_dir / "theirs"
    folder.mkdir(mode=0o755)
    os.chown(folder, 65534, 65534)
    with pytest.raises(SocketSetupError, match="owned by uid 65534"):
        SocketSource(folder / "frames.sock", group=None)
