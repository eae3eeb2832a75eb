"""The metrics endpoint under hostile clients (issue 28 item 5): ~1 000 idle TCP connections took
a thread and a descriptor each, until govd could read no device, restore none, write no status
file and exited 1 with the device in ``userspace``. Connections and threads are bounded, idle
clients are cut, descriptors are kept back for the restore, and a reload that turns metrics off
does not wait out a poll interval."""

from __future__ import annotations

import contextlib
import resource
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("prometheus_client", reason="prometheus-client (govd[metrics]) not installed")

from govd.telemetry import metrics_http
from govd.telemetry.metrics import Metrics, MetricsServer, start_metrics_server
from tests.live_gpu import DEVICE, WAIT_S, govd_env, next_status, start_sim, wait_for
from tests.test_daemon_telemetry import free_port


@pytest.fixture
def server() -> Iterator[MetricsServer]:
    running = start_metrics_server(Metrics(), "127.0.0.1", port=0)
    yield running
    running.close()


def idle_clients(port: int, count: int) -> list[socket.socket]:
    """``count`` connections to ``port`` that send nothing (not waited for: those past the
    kernel's accept queue keep trying in the background)."""
    clients = []
    for _ in range(count):
        client = socket.socket()
        client.setblocking(False)
        client.connect_ex(("127.0.0.1", port))
        clients.append(client)
    return clients


def scrape_text(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
        return response.read().decode()


def test_a_thousand_idle_connections_hold_a_bounded_number_of_descriptors_and_one_thread(
        server: MetricsServer) -> None:
    threads = threading.active_count()
    clients = idle_clients(server.port, 1000)
    try:
        wait_for(lambda: server._server.counts["full"] >= 1, "every place to be taken")
        assert server._server.connections == metrics_http.MAX_CONNECTIONS
        assert threading.active_count() == threads  # no thread per connection
    finally:
        for client in clients:
            client.close()
    assert "govd_level_hertz" in scrape_text(server.port)  # once they leave, it answers


def test_an_idle_client_is_cut_after_the_request_timeout(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(metrics_http, "REQUEST_TIMEOUT_S", 0.2)
    running = start_metrics_server(Metrics(), "127.0.0.1", port=0)
    try:
        [client] = idle_clients(running.port, 1)
        client.setblocking(True)
        client.settimeout(WAIT_S)
        assert client.recv(1) == b""  # closed by the endpoint, not by the test's timeout
        assert running._server.counts["timed_out"] == 1
    finally:
        running.close()


@pytest.mark.parametrize(("request_line", "status"), [
    (b"GET /metrics HTTP/1.1", b"200"), (b"GET /other HTTP/1.1", b"404"),
    (b"POST /metrics HTTP/1.1", b"405"), (b"garbage", b"405")])
def test_requests_are_answered_then_closed(server: MetricsServer, request_line: bytes,
                                           status: bytes) -> None:
    with socket.create_connection(("127.0.0.1", server.port), timeout=WAIT_S) as client:
        client.sendall(request_line + b"\r\nHost: x\r\n\r\n")
        answer = b""
        while chunk := client.recv(65536):
            answer += chunk
    assert answer.split(b" ", 2)[1] == status and b"Connection: close" in answer


def test_a_request_that_never_ends_is_refused_at_its_bound(server: MetricsServer) -> None:
    with socket.create_connection(("127.0.0.1", server.port), timeout=WAIT_S) as client:
        with contextlib.suppress(OSError):  # closed while sending: refused all the same
            client.sendall(b"GET /metrics HTTP/1.1\r\nX: " + b"a" * 20000)
        answer = client.recv(4096)
    assert answer.startswith(b"HTTP/1.1 431")


def test_close_ends_the_thread_and_frees_the_port() -> None:
    running = start_metrics_server(Metrics(), "127.0.0.1", port=0)
    thread = running._server._thread
    running.close()
    assert not thread.is_alive()
    with socket.socket() as again:
        again.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        again.bind(("127.0.0.1", running.port))  # free


def test_metrics_that_fail_to_render_fail_one_scrape_not_the_endpoint() -> None:
    calls = []

    def exposition() -> bytes:
        calls.append(1)
        if len(calls) == 1:
            raise ValueError("a gauge holds nothing")
        return b"govd_up 1\n"

    endpoint = metrics_http.MetricsEndpoint(exposition, "127.0.0.1", 0)
    try:
        with pytest.raises(urllib.error.HTTPError) as failed:
            scrape_text(endpoint.port)
        assert failed.value.code == 500
        assert scrape_text(endpoint.port) == "govd_up 1\n"
        assert endpoint._thread.is_alive()
        assert endpoint.counts["failed"] == 1 and endpoint.counts["refused"] == 0
    finally:
        endpoint.close()


def test_close_returns_and_frees_the_port_after_the_thread_stopped_on_an_error(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The daemon closes the endpoint before it restores the clocks: a close that raised
    because the serving thread had already stopped (the custody fuzz met one: BrokenPipeError
    on the wake-up pipe) would have skipped the restore."""
    def broken(self: object, selector: object) -> None:
        raise RuntimeError("injected")

    monkeypatch.setattr(metrics_http.MetricsEndpoint, "_expire", broken)
    endpoint = metrics_http.MetricsEndpoint(lambda: b"", "127.0.0.1", 0)
    with socket.create_connection(("127.0.0.1", endpoint.port), timeout=5):
        endpoint._thread.join(timeout=5.0)  # the first event's batch ends in the error
    assert not endpoint._thread.is_alive()
    endpoint.close()
    endpoint.close()  # twice: still nothing raised
    with socket.socket() as again:
        again.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        again.bind(("127.0.0.1", endpoint.port))  # free


def test_restore_opens_what_it_needs_though_something_filled_the_open_files_limit(
        tmp_path: Path) -> None:
    script = f"""
import os, resource
from pathlib import Path
from govd.custody.custody import Custody
from govd.device.devfreq import DevfreqDevice
from tests.sysfs_fixtures import mali_panfrost
root = Path({str(tmp_path)!r}) / "sys"
path, kernel = mali_panfrost(root)
device = DevfreqDevice(path, root, kernel)
custody = Custody(Path({str(tmp_path)!r}) / "state.json", root)
custody.take(device)
device.set_level(400)
resource.setrlimit(resource.RLIMIT_NOFILE, (128, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))
hog = []
while True:
    try:
        hog.append(os.open(os.devnull, os.O_RDONLY))
    except OSError:
        break
print(custody.end(), (path / "governor").read_text().strip())
"""
    done = subprocess.run([sys.executable, "-c", script], env=govd_env(), capture_output=True,
                          text=True, timeout=WAIT_S)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["[]", "simple_ondemand"]


def test_idle_metrics_clients_past_the_open_files_limit_leave_the_daemon_restoring() -> None:
    """The daemon with a 256-descriptor limit and 600 idle clients: it keeps governing and
    writing its status, answers a scrape once they leave, and at SIGTERM puts the device back
    and exits 0."""
    work = Path(tempfile.mkdtemp(prefix="govd-fds-"))
    root = work / "gpu"
    sim = start_sim(root, work / "frames.sock")
    port = free_port()
    config = work / "govd.yaml"
    config.write_text(f"metrics: {{enabled: true, listen: '127.0.0.1:{port}'}}\n")
    config.chmod(0o600)
    found = (root / DEVICE / "governor").read_text().strip()

    def low_limit() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (256, 256))

    with open(work / "daemon.err", "ab") as err:
        daemon = subprocess.Popen(
            [sys.executable, "-m", "govd", "run", "--sysfs-root", str(root), "--socket",
             str(work / "frames.sock"), "--state-file", str(work / "state.json"), "--config",
             str(config)], env=govd_env(), stdout=subprocess.DEVNULL, stderr=err,
            preexec_fn=low_limit)
    clients: list[socket.socket] = []
    try:
        next_status(work, 0.0, daemon)
        clients = idle_clients(port, 600)
        after = time.time()
        status = next_status(work, after, daemon)  # still writing its status
        assert status["devices"][0]["state"] == "governed"
        for client in clients:
            client.close()
        assert "govd_level_hertz" in scrape_text(port)  # once they leave, it answers
        daemon.send_signal(signal.SIGTERM)
        assert daemon.wait(timeout=WAIT_S) == 0, (work / "daemon.err").read_text()
        assert (root / DEVICE / "governor").read_text().strip() == found
        assert "Too many open files" not in (work / "daemon.err").read_text()
    finally:
        for client in clients:
            client.close()
        if daemon.poll() is None:
            daemon.kill()
        sim.send_signal(signal.SIGTERM)
        sim.wait(timeout=30)
        shutil.rmtree(work, ignore_errors=True)
