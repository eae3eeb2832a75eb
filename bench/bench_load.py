"""Load: 64 senders flooding the frame socket of a real `govd run` while it governs the simulated
GPU.

Starts the live simulated GPU (`python -m govd.sim.live`, real time; its own frames go to a
socket nobody reads) and `govd run` on its tree with the devfreq backend and the socket source,
in its default configuration. Once READY, ``--processes`` sender processes, each with its share of
the 64 sockets, send ``F <gpu_time_us> app=load`` datagrams (one frame each) at ``--fps`` in total,
spread evenly over the sockets, for ``--duration-s``. Meanwhile, every 0.5 s, the daemon's RSS
(/proc) and its status file are sampled. Figures, from the daemon's own statistics:

- tick jitter p50/p99 (tick start minus its deadline; the status file keeps the last 4096 ticks,
  so a 60 s run's window holds the load and the few seconds before it), overruns;
- frames accepted and dropped (rate limit per sender, queue full, malformed) by the source's
  counters; datagrams the senders could not send (the kernel buffer full: EAGAIN);
- the longest gap between two ticks while the load ran (a stall shows there), from the run
  trace the daemon records (`govd run --record`, one row per tick; the load's window is from
  the first to the last tick that received frames), and the most frames one tick took;
- RSS at the start of the load, its maximum and the end.

Senders are processes with many sockets, not 64 processes: the machine has 2 cores. The rate
limit (2000 frames/s by default) applies per sending user, so each process sends as a user of
its own (uid 20000 + its index, group root, which may write the socket: the bench runs as root),
and the default 16 processes send 1250 frames/s each.

Writes `bench/results/load.json`.   python bench/bench_load.py [--duration-s 60] [--quick]

With ``--flood`` one sender process sends datagrams of the socket's maximum size (64 KiB of
``F 1`` lines, 16 384 frames each) as fast as the kernel takes them, for ``--duration-s``; the
targets are the same (the rate limit and per-tick budgets must keep the loop on time). Writes
`bench/results/load-flood.json`.   python bench/bench_load.py --flood --duration-s 20

With a longer kernel queue, in a network namespace of its own so the machine's setting stays:
    unshare -n sh -c 'echo 512 > /proc/sys/net/unix/max_dgram_qlen &&
                      python bench/bench_load.py --out bench/results/load-qlen512.json'
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import random
import socket
import subprocess
import time
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from daemon_setup import (
    NotifyListener,
    cpu_s,
    machine,
    rss_mb,
    scratch_dir,
    start_daemon,
    start_sim,
    stop,
    unit_nice,
    wait_for,
    write_result,
)

SENDERS = 64


def daemon_nice() -> int:
    """The unit's Nice= where this run may lower niceness (root), else 0."""
    return unit_nice() if os.geteuid() == 0 else 0


STALL_S = 0.1
"""A gap between two ticks longer than this lost a tick. Units: s."""
TARGETS = {"jitter_p99_us": 5000, "gap_max_us": 1e6 * STALL_S, "rss_growth_mb": 5.0}
"""A gap over two periods (100 ms) would mean a tick was lost: a stall."""
SEND_STEP_S = 0.002
SENDER_UID = 20000
"""The first uid the sender processes take (one each)."""
QLEN = Path("/proc/sys/net/unix/max_dgram_qlen")
"""The most datagrams the kernel queues on a Unix datagram socket (this network namespace)."""


def _send(conn: Connection, path: str, sockets: int, fps: float, duration_s: float,
          seed: int) -> None:
    """One sender process: ``sockets`` sockets sending ``fps`` frames/s in total between them,
    one frame per datagram, round robin, for ``duration_s``; reports (sent, refused)."""
    if os.geteuid() == 0:
        os.setuid(SENDER_UID + seed)  # a user of its own: the budget is per user
    rng = random.Random(seed)
    socks = [socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) for _ in range(sockets)]
    for sock in socks:
        sock.setblocking(False)
    lines = [f"F {rng.randint(6000, 16000)} app=load\n".encode() for _ in range(256)]
    sent = refused = due = 0
    start = time.monotonic()
    while (elapsed := time.monotonic() - start) < duration_s:
        target = int(elapsed * fps)
        while due < target:
            try:
                socks[due % sockets].sendto(lines[due % len(lines)], path)
                sent += 1
            except (BlockingIOError, ConnectionRefusedError, FileNotFoundError):
                refused += 1  # the daemon's receive buffer is full (or it is gone)
            due += 1
        time.sleep(SEND_STEP_S)
    for sock in socks:
        sock.close()
    conn.send((sent, refused))


FLOOD_DATAGRAM = b"F 1\n" * (65536 // 4)
"""The flood: a datagram of the socket's maximum size (SocketSource.max_datagram_bytes), every
line a valid frame, so that all of it would be parsed were the rate limit applied after."""


def _flood(conn: Connection, path: str, duration_s: float) -> None:
    """One sender process sending `FLOOD_DATAGRAM` as fast as the kernel takes it (blocking
    sends: it waits only when govd's queue is full); reports (lines sent, datagrams refused)."""
    sent = refused = 0
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 1 << 20)
        sock.settimeout(0.1)
        start = time.monotonic()
        while time.monotonic() - start < duration_s:
            try:
                sock.sendto(FLOOD_DATAGRAM, path)
                sent += len(FLOOD_DATAGRAM) // 4
            except (TimeoutError, ConnectionRefusedError, FileNotFoundError):
                refused += 1
    conn.send((sent, refused))


def _status(path: Path) -> dict[str, Any] | None:
    try:
        status: dict[str, Any] = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return status


def _status_after(path: Path, unix_s: float, daemon: subprocess.Popen[bytes]) -> dict[str, Any]:
    """The first status file written after ``unix_s`` (wall clock, s)."""
    status: dict[str, Any] = {}

    def fresh() -> bool:
        status.clear()
        status.update(_status(path) or {})
        return float(status.get("written_unix_s", 0.0)) > unix_s

    wait_for(fresh, "a new status file", daemon)
    return status


def _trace_window(path: Path) -> dict[str, Any]:
    """Tick gaps and frames per tick over the ticks from the first to the last with frames."""
    rows = [line.split(",") for line in path.read_text().splitlines()[1:]]
    times_s = [float(r[0]) for r in rows]
    counts = [int(r[2]) for r in rows]
    with_frames = [i for i, n in enumerate(counts) if n > 0]
    if not with_frames:
        return {"trace_ticks": len(rows), "gap_max_us": None, "frames_per_tick_max": 0}
    first, last = with_frames[0], with_frames[-1]
    gaps = [b - a for a, b in zip(times_s[first:last], times_s[first + 1:last + 1], strict=True)]
    late = [(round(times_s[first + i] - times_s[first], 2), round(gap * 1e3, 1))
            for i, gap in enumerate(gaps) if gap > STALL_S]
    return {"trace_ticks": last - first + 1,
            "gap_max_us": round(max(gaps) * 1e6, 1) if gaps else None,
            "gaps_over_100ms_at_s_ms": late[:20], "gaps_over_100ms": len(late),
            "frames_per_tick_max": max(counts)}


def load(duration_s: float, fps: float, processes: int, flood: bool = False) -> dict[str, Any]:
    """Run the load (with ``flood``, one `_flood` sender instead); returns the figures."""
    ctx = multiprocessing.get_context("fork")
    with scratch_dir("govd-load-") as tmp_name:
        tmp = Path(tmp_name)
        tmp.chmod(0o755)  # the senders, users of their own, reach the socket in it
        root = tmp / "gpu"
        sim = start_sim(root, tmp / "nobody.sock")
        notify = NotifyListener(tmp / "notify.sock")
        daemon = None
        try:
            # as the service runs it: at the unit's Nice= (needs root to go below 0)
            daemon = start_daemon(tmp, root, notify.path, "--record", str(tmp / "trace.csv"),
                                  nice=daemon_nice())
            notify.wait_ready(daemon)
            notify.drain_in_background()
            status_file = tmp / "status.json"
            before = _status_after(status_file, time.time(), daemon)
            per_process = [SENDERS // processes + (i < SENDERS % processes)
                           for i in range(processes)]
            pipes, workers = [], []
            for i, sockets in enumerate([1] if flood else per_process):
                ours, theirs = ctx.Pipe()
                work: Any = (_flood, (theirs, str(tmp / "frames.sock"), duration_s)) if flood \
                    else (_send, (theirs, str(tmp / "frames.sock"), sockets,
                                  fps * sockets / SENDERS, duration_s, i))
                worker = ctx.Process(target=work[0], args=work[1], daemon=True)
                worker.start()
                pipes.append(ours)
                workers.append(worker)
            cpu0, wall0 = cpu_s(daemon.pid), time.monotonic()
            samples = []
            while any(w.is_alive() for w in workers):
                status = _status(status_file) or {}
                samples.append((round(time.monotonic() - wall0, 2), round(rss_mb(daemon.pid), 2),
                                status.get("loop", {}).get("ticks")))
                time.sleep(0.5)
            wall_s = time.monotonic() - wall0
            cpu1 = cpu_s(daemon.pid)
            counts = [pipe.recv() for pipe in pipes]
            # A status written after the load's end, and a tick later: every frame drained.
            after = _status_after(status_file, time.time() + 0.1, daemon)
            rss_end = rss_mb(daemon.pid)
            exit_status = stop(daemon)
            daemon = None
            trace = _trace_window(tmp / "trace.csv")
        finally:
            if daemon is not None:
                daemon.kill()
                daemon.wait()
            notify.close()
            sim.terminate()
            sim.wait(timeout=60)
    loop, frames = after.get("loop", {}), after.get("frames", {})
    frames_before = before.get("frames", {})
    ticks = trace["trace_ticks"]
    rss_values = [mb for _, mb, _ in samples] + [rss_end]
    sent = sum(c[0] for c in counts)
    dropped = {k: v - frames_before.get(k, 0) for k, v in frames.items()
               if k.startswith("dropped_")
               or k in ("rate_limited", "queue_full", "truncated", "over_budget")}
    return {
        "load_wall_s": round(wall_s, 2), "senders": 1 if flood else SENDERS,
        "processes": 1 if flood else processes,
        "max_dgram_qlen": int(QLEN.read_text()),
        "frames_sent": sent, "frames_sent_per_s": round(sent / wall_s, 1),
        "datagrams_refused_by_kernel": sum(c[1] for c in counts),
        "frames_accepted": frames.get("accepted", 0) - frames_before.get("accepted", 0),
        "frames_dropped": dropped,
        "ticks_per_s": round(ticks / wall_s, 2),
        "overruns": loop.get("overruns"),
        "jitter_p50_us": loop.get("jitter_p50_us"), "jitter_p99_us": loop.get("jitter_p99_us"),
        **trace,
        "cpu_per_tick_us": round((cpu1 - cpu0) / max(ticks, 1) * 1e6, 1),
        "rss_mb_start": rss_values[0], "rss_mb_max": max(rss_values), "rss_mb_end": rss_end,
        "rss_growth_mb": round(max(rss_values) - rss_values[0], 2),
        "samples_s_rss_ticks": samples[:: max(1, len(samples) // 40)],
        "daemon_exit_status": exit_status,
    }


def main() -> None:
    """Run the load benchmark and write the JSON."""
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--duration-s", type=float, default=60.0, help="load time, wall s")
    parser.add_argument("--fps", type=float, default=20000.0, help="frames/s, all senders")
    parser.add_argument("--processes", type=int, default=16, help="sender processes")
    parser.add_argument("--quick", action="store_true", help="3 s at 2000 frames/s (tests)")
    parser.add_argument("--flood", action="store_true",
                        help="one sender of 64 KiB datagrams of 'F 1' lines, as fast as it can "
                             "(writes bench/results/load-flood.json)")
    parser.add_argument("--out", type=Path, default=None,
                        help="result file (default bench/results/load.json)")
    args = parser.parse_args()
    if args.quick:
        args.duration_s, args.fps, args.processes = 3.0, 2000.0, 4
    if not 1 <= args.processes <= SENDERS:
        parser.error(f"--processes must be 1..{SENDERS}")
    figures = load(args.duration_s, args.fps, args.processes, args.flood)
    met = {k: figures[k] is not None and figures[k] <= v for k, v in TARGETS.items()}
    met["daemon_stopped_cleanly"] = figures["daemon_exit_status"] == 0
    senders = ("one sender of 64 KiB datagrams of 'F 1' lines, as fast as it can" if args.flood
               else "64 senders flooding the frame socket")
    command = (f"python bench/bench_load.py --flood --duration-s {args.duration_s:g}"
               if args.flood else f"python bench/bench_load.py --duration-s {args.duration_s:g} "
               f"--fps {args.fps:g} --processes {args.processes}")
    write_result("load-flood" if args.flood else "load", {
        "benchmark": "load: govd run (devfreq backend, socket source, default configuration) on "
                     f"the live simulated GPU, {senders}",
        "command": command,
        "load_average": [round(x, 2) for x in os.getloadavg()],
        "measured": figures, "targets": TARGETS, "met": met, "daemon_nice": daemon_nice(),
        "notes": "jitter p50/p99 cover the daemon's last 4096 ticks (the load and the seconds "
                 "before it); gap_max_us is the longest time between two ticks in the run "
                 "trace over the load; frames_dropped are the socket source's counters over "
                 "the load; datagrams_refused_by_kernel are sends that got EAGAIN.",
        "machine": machine(),
    }, args.out)


if __name__ == "__main__":
    main()
