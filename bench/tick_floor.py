"""The floor under the daemon's CPU per tick on this machine: what the least a 50 ms tick of
Python must do costs, with none of govd's work around it.

Each variant runs as its own loop in this process for ``--seconds``, waking on absolute 50 ms
deadlines through `select` (as the daemon's loop does), and its whole-process CPU time
(`time.process_time`: user and system, the kernel's side of the wake-up included) is divided by
the ticks. Cumulative variants:

- ``wake``: the wait alone (select on a pipe, as the daemon's signal pipe);
- ``+ socket``: and the frames of a 60 FPS game read from a Unix datagram socket with
  credentials (`recvmsg` until EAGAIN; a child process sends one datagram per frame);
- ``+ sysfs``: and five attribute files read with `pread` on descriptors held open (what govd
  reads a tick on the real /sys: clock, busy, energy, governor, request);
- ``+ model``: and one call of the model's per-tick kernel (numba, on a state array);
- ``wake, C``: the same wait as ``wake`` from a C loop (built with ``cc`` when there is one):
  the kernel's and the machine's share of a wake-up, without the interpreter.

Writes ``bench/results/tick_floor.json``.

    python bench/tick_floor.py [--seconds 10] [--rounds 3]
"""

from __future__ import annotations

import argparse
import os
import select
import shutil
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
from daemon_setup import machine, scratch_dir, write_result

from govd.model.online import OnlineModel
from govd.model.tick import model_tick

PERIOD_S = 0.05
SENDER = """
import socket, sys, time
sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
next_s = time.monotonic()
while True:
    next_s += 1 / 60
    time.sleep(max(0.0, next_s - time.monotonic()))
    try:
        sock.sendto(b"F 8000 app=game\\n", sys.argv[1])
    except OSError:
        pass
"""

WAKE_C = r"""
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <sys/select.h>
static long long ns(clockid_t id) {
    struct timespec t; clock_gettime(id, &t); return t.tv_sec * 1000000000LL + t.tv_nsec;
}
int main(int argc, char **argv) {
    int ticks = atoi(argv[1]);
    long long start = ns(CLOCK_MONOTONIC), cpu0 = ns(CLOCK_PROCESS_CPUTIME_ID);
    for (int k = 1; k <= ticks; k++) {
        long long wait = start + k * 50000000LL - ns(CLOCK_MONOTONIC);
        if (wait > 0) {
            struct timeval tv = {wait / 1000000000LL, (wait % 1000000000LL) / 1000};
            select(0, NULL, NULL, NULL, &tv);
        }
    }
    printf("%.1f\n", (ns(CLOCK_PROCESS_CPUTIME_ID) - cpu0) / 1000.0 / ticks);
    return 0;
}
"""


def _c_wake(folder: Path) -> Callable[[float], float] | None:
    """The C loop of ``wake``, built in ``folder``: seconds → CPU per tick (µs); None without
    a C compiler."""
    cc = shutil.which("cc")
    if cc is None:
        return None
    (folder / "wake.c").write_text(WAKE_C)
    built = subprocess.run([cc, "-O2", "-o", str(folder / "wake"), str(folder / "wake.c")],
                           capture_output=True, check=False)
    if built.returncode:
        return None

    def run(seconds: float) -> float:
        out = subprocess.run([str(folder / "wake"), str(round(seconds / PERIOD_S))],
                             capture_output=True, text=True, check=True).stdout
        return float(out)
    return run


def _loop(seconds: float, body: Callable[[], None]) -> float:
    """Tick every `PERIOD_S` on absolute deadlines for ``seconds``, running ``body`` each tick;
    returns the process CPU time per tick. Units: µs."""
    read_fd, write_fd = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        ticks = round(seconds / PERIOD_S)
        start_s = time.monotonic()
        cpu0 = time.process_time()
        for k in range(1, ticks + 1):
            wait_s = start_s + k * PERIOD_S - time.monotonic()
            if wait_s > 0:
                select.select([read_fd], [], [], wait_s)
            body()
        return (time.process_time() - cpu0) / ticks * 1e6
    finally:
        os.close(read_fd)
        os.close(write_fd)


def main() -> None:
    """Run the variants, interleaved over the rounds, and write the JSON."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    with scratch_dir("govd-floor-") as tmp_name:
        tmp = Path(tmp_name)
        path = str(tmp / "frames.sock")
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        sock.bind(path)
        sock.setblocking(False)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)
        cmsg_bytes = socket.CMSG_SPACE(12)
        fds = []
        for i in range(5):
            (tmp / f"attr{i}").write_text(f"{1000000 * (i + 1)}\n")
            fds.append(os.open(tmp / f"attr{i}", os.O_RDONLY))

        def drain() -> None:
            while True:
                try:
                    sock.recvmsg(65536, cmsg_bytes)
                except BlockingIOError:
                    return

        def read() -> None:
            for fd in fds:
                float(os.pread(fd, 8192, 0))

        model = OnlineModel(np.linspace(300.0, 1800.0, 9))
        no_counters = np.zeros(0)

        def kernel() -> None:
            model_tick(model.state, no_counters, 8.0, 1200.0, 20.0, 0.5, np.nan, 16.6)

        kernel()  # compiled (or loaded) before timing
        variants: dict[str, Callable[[], None]] = {
            "wake": lambda: None,
            "+ socket": drain,
            "+ sysfs": lambda: (drain(), read()),
            "+ model": lambda: (drain(), read(), kernel()),
        }
        c_wake = _c_wake(tmp)
        sender = subprocess.Popen([sys.executable, "-c", SENDER, path])
        try:
            time.sleep(0.5)
            figures: dict[str, list[float]] = {name: [] for name in variants}
            for _ in range(args.rounds):
                for name, body in variants.items():
                    drain()
                    figures[name].append(round(_loop(args.seconds, body), 1))
                if c_wake is not None:
                    figures.setdefault("wake, C", []).append(round(c_wake(args.seconds), 1))
        finally:
            sender.kill()
            sender.wait()
            sock.close()
            for fd in fds:
                os.close(fd)
    write_result("tick_floor", {
        "benchmark": "the least a 50 ms tick of Python does (wake, frames, sysfs, model), "
                     "whole-process CPU per tick",
        "seconds": args.seconds, "rounds": args.rounds,
        "cpu_per_tick_us": {name: statistics.median(v) for name, v in figures.items()},
        "rounds_us": figures,
        "notes": "process_time (user + system) per tick over each loop; variants cumulative, "
                 "interleaved over the rounds; the frames of a 60 FPS sender, one datagram "
                 "each (~3 a tick)",
        "machine": machine(),
    }, args.out)


if __name__ == "__main__":
    main()
