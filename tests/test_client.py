"""govd.client: frame and step times from any Python program to govd's frame socket."""

from __future__ import annotations

import logging
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

import govd.client
from govd.client import Reporter
from govd.sources.socket import SocketSource


@pytest.fixture
def source(monkeypatch: pytest.MonkeyPatch) -> Iterator[SocketSource]:
    # AF_UNIX paths are limited to 108 bytes: pytest's tmp_path can be longer.
    with tempfile.TemporaryDirectory(prefix="govd-", dir="/tmp") as d:
        src = SocketSource(Path(d) / "frames.sock", group=None)
        monkeypatch.setenv(govd.client.SOCKET_ENV, str(src.path))
        yield src
        src.close()


def test_importing_the_client_loads_neither_numpy_nor_the_rest_of_govd() -> None:
    code = ("import sys, govd.client; "
            "print(sorted(m for m in sys.modules if m == 'numpy' or m.startswith('govd.')))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True)
    assert done.stdout.strip() == "['govd.client']"


def test_a_step_reports_the_time_the_block_took(source: SocketSource) -> None:
    with govd.client.step(app="train", device="card0"):
        pass
    [frame] = source.drain()
    assert (frame.app, frame.device) == ("train", "card0")
    assert 0 < frame.gpu_time_ms < 1000


def test_a_step_that_failed_reports_nothing(source: SocketSource) -> None:
    with pytest.raises(RuntimeError), govd.client.step(app="train"):
        raise RuntimeError("out of memory")
    assert source.drain() == []


def test_a_ten_minute_step_reaches_govd_whole(source: SocketSource) -> None:
    assert govd.client.send(600.0, app="train")
    [frame] = source.drain()
    assert frame.gpu_time_ms == pytest.approx(600_000.0)
    assert "dropped_too_large" not in source.stats()


def test_names_are_made_what_the_protocol_carries(source: SocketSource) -> None:
    with Reporter(app="my game\n" + "x" * 100) as reporter:
        assert reporter.send(0.016)
    [frame] = source.drain()
    assert frame.app == "my_game_" + "x" * 56  # one line, no spaces, 64 characters


def test_without_govd_a_report_is_dropped_counted_and_said_once(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="govd.client")
    reporter = Reporter(app="train", path=str(tmp_path / "nobody.sock"))
    assert [reporter.send(0.01) for _ in range(3)] == [False] * 3
    assert reporter.dropped == {"no frame socket (is govd running?)": 3}
    assert len(caplog.records) == 1 and "is govd running?" in caplog.records[0].getMessage()
    assert not reporter.send(float("nan")) and not reporter.send(-1.0)


def test_a_full_socket_queue_never_blocks_the_program(source: SocketSource) -> None:
    reporter = Reporter(app="flood")
    results = [reporter.send(0.001) for _ in range(5000)]  # the kernel queues ~10 datagrams
    assert sum(results) == reporter.sent < 5000
    assert reporter.dropped["the frame socket's queue is full (govd is behind)"] > 0
