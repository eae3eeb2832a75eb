"""Set-up shared by the daemon benchmarks: the simulated GPU's tree, `govd run` processes, the
NOTIFY_SOCKET they report to, /proc figures, and the result files.

The benchmarks run as scripts (``python bench/bench_*.py``) and are imported by the tests, so
this module is imported as ``daemon_setup`` with ``bench/`` on ``sys.path``; importing it puts
the repository first on ``sys.path``, so the benchmarks measure this checkout's govd.
"""

from __future__ import annotations

import json
import os
import platform
import re
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))  # this checkout's govd, not an installed one
RESULTS = REPO / "bench" / "results"
DEVICE = "class/devfreq/govd-sim0"
TREE_READY = f"{DEVICE}/device/hwmon/hwmon0/power1_average"
START_TIMEOUT_S = 120.0
"""Generous: the machine is shared; a cold numba cache alone takes seconds."""

GOVERNED_FILES = ("governor", "min_freq", "max_freq", "userspace/set_freq")
"""The devfreq files govd may write (DevfreqDevice.set_level, _restore_state)."""


def scratch_dir(prefix: str) -> tempfile.TemporaryDirectory[str]:
    """A temporary folder on tmpfs (/dev/shm) where there is one: sysfs and /run, which it
    stands for, live in memory, and on a disk file system every rename-over of the simulated
    device's files costs a journal flush (~1 ms on ext4), which would be measured instead."""
    shm = Path("/dev/shm")
    where = str(shm) if shm.is_dir() and os.access(shm, os.W_OK) else None
    return tempfile.TemporaryDirectory(prefix=prefix, dir=where)


def env(notify: Path | None = None, repo: bool = True) -> dict[str, str]:
    """The environment of a govd process started from the repository (``repo``; else the govd
    installed beside its interpreter) and its NOTIFY_SOCKET."""
    extra = {"NOTIFY_SOCKET": str(notify)} if notify is not None else {}
    base = {k: v for k, v in os.environ.items() if repo or k != "PYTHONPATH"}
    path = {"PYTHONPATH": str(REPO)} if repo else {}
    return {**base, **path, "PYTHONUNBUFFERED": "1", **extra}


def cpu_s(pid: int) -> float:
    """utime + stime of process ``pid``. Units: s."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rss_mb(pid: int | str = "self") -> float:
    """Resident set size (VmRSS) of process ``pid``. Units: MiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def memory_mb(pid: int) -> dict[str, float]:
    """Process ``pid``'s memory from ``/proc/PID/smaps_rollup`` after a sync (dirty file pages
    written back): ``anon_mb`` (Anonymous: what it really costs), ``private_dirty_mb``,
    ``pss_mb`` and ``rss_mb`` (which count the clean library pages the kernel can drop).
    Units: MiB."""
    os.sync()
    fields = {}
    for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines()[1:]:
        name, _, rest = line.partition(":")
        fields[name] = int(rest.split()[0]) / 1024
    return {"anon_mb": round(fields["Anonymous"], 1),
            "private_dirty_mb": round(fields["Private_Dirty"], 1),
            "pss_mb": round(fields["Pss"], 1), "rss_mb": round(fields["Rss"], 1)}


def task_totals(pid: int) -> tuple[float, int]:
    """(CPU time in s, voluntary context switches: the times it went to sleep and was woken)
    of every thread of process ``pid``, from /proc/PID/task/*/schedstat and status."""
    cpu_ns = switches = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            cpu_ns += int((task / "schedstat").read_text().split()[0])
            status = (task / "status").read_text()
        except (FileNotFoundError, ProcessLookupError):
            continue  # a thread that just ended
        switches += int(status.split("\nvoluntary_ctxt_switches:")[1].split()[0])
    return cpu_ns / 1e9, switches


def machine() -> dict[str, Any]:
    """Where a result was measured, and from which commit of govd."""
    try:
        load = os.getloadavg()[0]
    except OSError:
        load = float("nan")
    try:
        commit = subprocess.run(["git", "-C", str(REPO), "describe", "--always", "--dirty"],
                                capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        commit = ""
    return {"python": platform.python_version(), "processor": platform.machine(),
            "cpus": os.cpu_count(), "load_1min_at_end": round(load, 2),
            "commit": commit or None}


def write_result(name: str, result: dict[str, Any], out: Path | None = None) -> Path:
    """Write ``result`` as ``bench/results/<name>.json`` (or ``out``) and print it."""
    path = out or RESULTS / f"{name}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))
    return path


def wait_for(condition: Any, what: str, process: subprocess.Popen[bytes] | None = None,
             timeout_s: float = START_TIMEOUT_S) -> None:
    """Poll ``condition()`` every 20 ms; RuntimeError when ``process`` exits or time is up."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        if process is not None and process.poll() is not None:
            raise RuntimeError(f"process exited ({process.returncode}) waiting for {what}")
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out waiting for {what}")
        time.sleep(0.02)


def start_sim(root: Path, frames: Path, speed: float = 1.0,
              scenario: str = "game-medium", *extra: str) -> subprocess.Popen[bytes]:
    """`python -m govd.sim.live` keeping a devfreq tree under ``root``, sending its frames to
    ``frames`` (``extra``: more of its options); returns once the tree is laid out."""
    sim = subprocess.Popen(
        [sys.executable, "-m", "govd.sim.live", "--root", str(root), "--socket", str(frames),
         "--scenario", scenario, "--speed", str(speed), *extra],
        env=env(), stdout=subprocess.DEVNULL,
    )
    wait_for(lambda: (root / TREE_READY).exists(), "the simulated tree", sim)
    return sim


def governed_state(root: Path) -> dict[str, str]:
    """The governed files of the simulated device, as text."""
    return {name: (root / DEVICE / name).read_text().strip() for name in GOVERNED_FILES}


def set_found_state(root: Path, state: dict[str, str]) -> None:
    """Write ``state`` (file → text) into the simulated device, as another tool would."""
    for name, text in state.items():
        (root / DEVICE / name).write_text(text + "\n")


def restored_as_found(found: dict[str, str], now: dict[str, str]) -> list[str]:
    """The governed files that differ from what was found (``userspace/set_freq`` only counts
    when the governor found was userspace: the kernel removes that file with the governor)."""
    names = [n for n in GOVERNED_FILES
             if n != "userspace/set_freq" or found["governor"] == "userspace"]
    return [f"{n}: found {found[n]!r}, now {now[n]!r}" for n in names if found[n] != now[n]]


_STATE_KEYS = {"governor": "governor", "min_freq": "min_freq_hz", "max_freq": "max_freq_hz",
               "userspace/set_freq": "set_freq_hz"}


def saved_as_found(found: dict[str, str], saved: dict[str, Any] | None) -> list[str]:
    """Where a state-file device entry (`Device.save()`) differs from the governed files found
    (same rule for ``userspace/set_freq`` as `restored_as_found`)."""
    if saved is None:
        return ["no device in the state file"]
    state = saved.get("state", {})
    as_files = {name: str(state.get(key)) for name, key in _STATE_KEYS.items()}
    if found["governor"] != "userspace":
        as_files["userspace/set_freq"] = found["userspace/set_freq"]
    return restored_as_found(found, as_files)


class NotifyListener:
    """A NOTIFY_SOCKET bound at ``path`` that reads what govd reports, as systemd would."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(str(path))

    def wait_ready(self, process: subprocess.Popen[bytes],
                   timeout_s: float = START_TIMEOUT_S) -> None:
        """Block until READY=1; RuntimeError when ``process`` exits first or time is up."""
        deadline = time.monotonic() + timeout_s
        self.sock.settimeout(0.1)
        while True:
            try:
                if b"READY=1" in self.sock.recv(4096):
                    return
            except TimeoutError:
                pass
            if process.poll() is not None:
                raise RuntimeError(f"govd run exited ({process.returncode}) before READY")
            if time.monotonic() > deadline:
                raise RuntimeError("govd run did not report READY in time")

    def drain_in_background(self) -> None:
        """Keep reading STATUS= lines: a full socket would block the daemon."""
        self.sock.settimeout(None)

        def drain() -> None:
            try:
                while self.sock.recv(4096):
                    pass
            except OSError:
                pass

        threading.Thread(target=drain, daemon=True).start()

    def close(self) -> None:
        """Close the socket."""
        self.sock.close()


def unit_nice() -> int:
    """The niceness `systemd/govd.service` gives the daemon (0 when it sets none)."""
    unit = (REPO / "systemd" / "govd.service").read_text()
    found = re.search(r"^Nice=(-?\d+)$", unit, re.MULTILINE)
    return int(found.group(1)) if found else 0


def start_daemon(tmp: Path, root: Path, notify: Path, *extra: str,
                 nice: int = 0, python: str | None = None) -> subprocess.Popen[bytes]:
    """`govd run` on the tree under ``root`` with socket, state and status files in ``tmp``
    (stderr appended to ``tmp/daemon.err``), at niceness ``nice`` (see `unit_nice`); with
    ``python`` (an installed venv's interpreter), the govd installed there, else this checkout."""
    with open(tmp / "daemon.err", "ab") as stderr:
        return subprocess.Popen(
            [python or sys.executable, "-m", "govd", "run", "--sysfs-root", str(root), "--socket",
             str(tmp / "frames.sock"), "--state-file", str(tmp / "state.json"), *extra],
            env=env(notify, repo=python is None), stdout=subprocess.DEVNULL, stderr=stderr,
            preexec_fn=(lambda: os.nice(nice)) if nice else None,
            # `python -m` puts the working folder first on sys.path: from the repository, an
            # installed interpreter would run this checkout's govd instead of its own
            cwd=None if python is None else tmp,
        )


def stop(process: subprocess.Popen[bytes], timeout_s: float = 60.0) -> int:
    """SIGTERM, then wait; returns the exit status."""
    process.send_signal(signal.SIGTERM)
    return process.wait(timeout=timeout_s)
