"""Bad input at length, for what the third hostile round (issue 28) broke: MangoHud rows that
claim any number of frames, state files anybody may have written, a GPU replaced under its name,
and hostile clients of the metrics endpoint. Writes bench/results/fuzz-custody.json.

    .venv/bin/python bench/bench_fuzz_custody.py [--quick] [--seed 1] [--out FILE]

Each section counts its outcomes; anything raised where the code promises a counted refusal or
a one-line error is a crash, kept with its traceback. What each section checks besides:

- mangohud_rows: random rows (frame times, fps and elapsed gaps from plausible to absurd) appended
  to a followed log, drained at 50 ms of a fake clock and handed to telemetry as the daemon does
  (`_frame_counts`, the metrics histogram, the journal summary): the memory one tick allocates
  (tracemalloc peak) stays under `TICK_MEMORY_BYTES`, and the frames a drain claims under what
  the time the log has been followed allows;
- state_files: state files saying "powersave, lowest clock" with random owners and modes, in
  folders with random owners and modes (sticky or not, world-writable or not, a folder above
  another user's): `govd restore` writes the device exactly when nobody but root could have
  written or swapped the file, and refuses in one line otherwise;
- hotplug_identity: a state saved from one GPU, the tree then holding the same GPU again or a
  different one (slot, ids, serial) under the same name: nothing saved is ever written into a
  different GPU, and the same GPU is put back;
- metrics_endpoint: rounds of clients that connect and stay silent, send a request byte by byte,
  send garbage or a header that never ends, close half-way, or scrape properly: the endpoint
  keeps one thread and at most `MAX_CONNECTIONS` connections, answers a scrape after each
  round, and its thread never stops.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import platform
import random
import socket
import sys
import tempfile
import threading
import time
import tracemalloc
import urllib.request
from collections import Counter
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench.bench_fuzz import Tally  # noqa: E402
from govd.custody.custody import restore_custody  # noqa: E402
from govd.custody.state_file import SavedState, StateFileError, save_state  # noqa: E402
from govd.daemon.device_runner import _frame_counts  # noqa: E402
from govd.device.i915 import I915Device  # noqa: E402
from govd.sources.mangohud import SPAN_SLACK_S, MangoHudSource  # noqa: E402
from govd.sources.mangohud_log import MIN_FRAME_MS  # noqa: E402
from govd.telemetry import metrics_http  # noqa: E402
from govd.telemetry.metrics import Metrics, start_metrics_server  # noqa: E402
from govd.telemetry.summary import DeviceSummary  # noqa: E402
from govd.telemetry.tick import TickRecord  # noqa: E402
from tests.sysfs_fixtures import i915_gen9, mali_panfrost  # noqa: E402

FULL = {"mangohud_scripts": 300, "state_files": 300, "hotplug": 200, "metrics_rounds": 40}
QUICK = {"mangohud_scripts": 20, "state_files": 30, "hotplug": 20, "metrics_rounds": 4}
TICK_S = 0.05
TICK_MEMORY_BYTES = 4 << 20
"""What one tick's telemetry of a drain may allocate at most (a drain reads at most 64 KiB of
rows): a row claiming a million frames must cost a row's bytes, not a million floats'."""
NOBODY = 65534
PREAMBLE = "os,cpu,gpu,ram,kernel,driver\nLinux,x,y,z,6.1,mesa\n"


# -- MangoHud rows ------------------------------------------------------------------------------
def _row(rng: random.Random, elapsed_ns: list[float]) -> str:
    kind = rng.choice(["frame", "frame", "sampled", "claiming", "leap", "back", "junk"])
    fps = rng.choice(["60", "144", "99999", "1e308", "0", "-5", "nan", "100000", "240"])
    frametime = rng.choice(["16.6", "6.9", "0.0100001", "0.01", "1e-300", "9999", "-1", "x"])
    step = {"frame": 16.6e6, "sampled": 100e6, "claiming": 9.99e9, "leap": 9e18,
            "back": -5e9, "junk": 0.0}[kind] * rng.uniform(0.5, 1.5)
    elapsed_ns[0] = max(0.0, elapsed_ns[0] + step)
    if kind == "junk":
        return rng.choice(["", ",,,", "a" * rng.randint(1, 300), "60,16.6", "\x00" * 50])
    return f"{fps},{frametime},{elapsed_ns[0]:.0f}"


def fuzz_mangohud_rows(count: int, rng: random.Random, folder: Path) -> dict[str, Any]:
    """Random rows through a followed log and the daemon's telemetry of each tick."""
    started_s = time.monotonic()
    tally = Tally()
    metrics = Metrics()
    summary = DeviceSummary(logging.getLogger("govd.bench"), "card0", 10.0)
    most_bytes = 0
    for script in range(count):
        logs = folder / f"mangohud{script}"
        logs.mkdir()
        path = logs / "game_2024-01-02_03-04-05.csv"
        path.write_text(PREAMBLE + "fps,frametime,elapsed\n")
        clock = [1000.0]
        src = MangoHudSource(logs, rescan_s=0, clock=lambda c=clock: c[0])
        elapsed_ns = [0.0]
        followed_s = 0.0
        try:
            src.drain()
            for _ in range(rng.randint(1, 20)):
                with path.open("a") as f:
                    f.write("".join(_row(rng, elapsed_ns) + "\n"
                                    for _ in range(rng.randint(0, 400))))
                clock[0] += TICK_S
                followed_s += TICK_S
                tracemalloc.start()
                try:
                    frames = src.drain()
                    counts = _frame_counts(frames)
                    tick = TickRecord("card0", 500.0, [f.gpu_time_ms for f in frames], None,
                                      None, None, "energy", False, None, frame_counts=counts)
                    metrics.record_tick(tick)
                    summary.record_tick(clock[0], tick)
                    _, peak = tracemalloc.get_traced_memory()
                finally:
                    tracemalloc.stop()
                most_bytes = max(most_bytes, peak)
                claimed = sum(f.count for f in frames)
                allowed = (followed_s + SPAN_SLACK_S) * 1000.0 / MIN_FRAME_MS + len(frames)
                tally.counts["ticks"] += 1
                tally.counts["rows_as_frames"] += len(frames)
                if peak > TICK_MEMORY_BYTES:
                    tally.counts["ticks_over_memory"] += 1
                if claimed > allowed:
                    tally.counts["frames_out_of_limits"] += 1
        except Exception:
            tally.crash()
        finally:
            src.close()
    tally.counts["scripts"] = count
    tally.counts["tick_memory_peak_bytes"] = most_bytes
    return tally.result(started_s)


# -- state files --------------------------------------------------------------------------------
def _hostile_entry(root: Path, device: Path) -> dict[str, Any]:
    return {"backend": "devfreq", "name": device.name, "path": str(device.relative_to(root)),
            "state": {"governor": "powersave", "min_freq_hz": 200_000_000,
                      "max_freq_hz": 200_000_000}}


def fuzz_state_files(count: int, rng: random.Random, folder: Path) -> dict[str, Any]:
    """State files of random ownership and modes in folders of random ownership and modes."""
    started_s = time.monotonic()
    tally = Tally()
    wrong: list[str] = []
    for i in range(count):
        case = folder / f"state{i}"
        root = case / "sys"
        devfreq, _ = mali_panfrost(root)
        above = case / "above"
        own = above / "run"
        own.mkdir(parents=True)
        above_uid, above_mode = rng.choice([0, NOBODY]), rng.choice([0o755, 0o777, 0o1777])
        own_uid, own_mode = rng.choice([0, 0, NOBODY]), rng.choice([0o755, 0o700, 0o777, 0o1777])
        file_uid, file_mode = rng.choice([0, 0, NOBODY]), rng.choice([0o600, 0o644, 0o666])
        state = own / "state.json"
        state.write_text(json.dumps({"version": 1, "pid": 2**22 - 1, "sysfs_root": str(root),
                                     "devices": [_hostile_entry(root, devfreq)]}))
        os.chown(state, file_uid, file_uid)
        state.chmod(file_mode)
        os.chown(own, own_uid, own_uid)
        own.chmod(own_mode)
        os.chown(above, above_uid, above_uid)
        above.chmod(above_mode)
        # What StrictModes allows: root's file, folder and folder above, none writable by
        # others, the one above only with the sticky bit (nobody renames root's folder there).
        trusted = bool(file_uid == 0 and not file_mode & 0o022 and own_uid == 0
                       and not own_mode & 0o022 and above_uid == 0
                       and (not above_mode & 0o022 or above_mode & 0o1000))
        try:
            restore_custody(state)
            outcome = "applied"
        except StateFileError as exc:
            outcome = "refused"
            if "\n" in str(exc) or "unsafe" not in str(exc):
                tally.counts["bad_messages"] += 1
        except Exception:
            tally.crash()
            continue
        written = (devfreq / "governor").read_text().strip() == "powersave"
        tally.counts[f"{'trusted' if trusted else 'untrusted'}_{outcome}"] += 1
        if written != trusted or (outcome == "applied") != trusted:
            tally.counts["wrong_verdicts"] += 1
            if len(wrong) < 5:
                wrong.append(f"file uid {file_uid} {file_mode:o}, folder uid {own_uid} "
                             f"{own_mode:o}, above uid {above_uid} {above_mode:o}: {outcome}, "
                             f"written {written}")
    return {**tally.result(started_s), "wrong_verdicts": wrong}


# -- hot-plug identity --------------------------------------------------------------------------
def fuzz_hotplug(count: int, rng: random.Random, folder: Path) -> dict[str, Any]:
    """A state saved from one card0, then card0 unplugged and the same or another GPU in."""
    started_s = time.monotonic()
    tally = Tally()
    for i in range(count):
        root = folder / f"hot{i}" / "sys"
        i915_gen9(root, min_mhz=400, max_mhz=1000)
        card = root / "class/drm/card0"
        device = I915Device(card, root)
        entry = {**device.save(), "identity": device.identity()}
        save_state(root.parent / "state.json", SavedState([entry], str(root), pid=2**22 - 1))
        (root / "devices/pci0000:00/0000:00:02.0").rename(root.parent / "gone")
        for link in (root / "class/drm").iterdir():
            if not link.exists():
                link.unlink()
        same = rng.random() < 0.4
        bdf, device_id = ("0000:00:02.0", 0x1912) if same else rng.choice(
            [("0000:03:00.0", 0x1912), ("0000:00:02.0", 0x56A0), ("0000:04:00.0", 0x56A0)])
        low, high = (300, 1150) if same else (100, 600)
        i915_gen9(root, rpn=low, rp0=high, min_mhz=low, max_mhz=high, act_mhz=low, bdf=bdf,
                  device_id=device_id)
        try:
            done = restore_custody(root.parent / "state.json")
        except Exception:
            tally.crash()
            continue
        bounds = ((card / "gt_min_freq_mhz").read_text().strip(),
                  (card / "gt_max_freq_mhz").read_text().strip())
        tally.counts["same_gpu" if same else "other_gpu"] += 1
        if same and (bounds != ("400", "1000") or done.failures):
            tally.counts["same_not_restored"] += 1
        if not same and (bounds != (str(low), str(high)) or not done.failures):
            tally.counts["written_into_another_gpu"] += 1
    return tally.result(started_s)


# -- metrics endpoint ---------------------------------------------------------------------------
def _client(port: int, behaviour: str, rng: random.Random) -> socket.socket | None:
    sock = socket.socket()
    sock.setblocking(False)
    sock.connect_ex(("127.0.0.1", port))
    with contextlib.suppress(OSError):
        if behaviour == "garbage":
            sock.send(rng.randbytes(rng.randint(1, 3000)) + b"\r\n\r\n")
        elif behaviour == "endless_header":
            sock.send(b"GET /metrics HTTP/1.1\r\nX: " + b"a" * rng.randint(9000, 30000))
        elif behaviour == "trickle":
            sock.send(b"GET /met")
        elif behaviour == "half_close":
            sock.send(b"GET /metrics HTTP/1.1\r\n")
            sock.shutdown(socket.SHUT_WR)
        elif behaviour == "reset":
            sock.close()
            return None
    return sock


def fuzz_metrics(rounds: int, rng: random.Random, folder: Path) -> dict[str, Any]:
    """Rounds of hostile clients, each followed by a scrape once they are gone."""
    started_s = time.monotonic()
    tally = Tally()
    errors: list[str] = []

    class Caught(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            errors.append(record.getMessage())

    caught = Caught(logging.ERROR)
    logging.getLogger("govd.telemetry.metrics_http").addHandler(caught)
    server = start_metrics_server(Metrics(), "127.0.0.1", 0)
    threads = threading.active_count()
    behaviours = ["idle", "garbage", "endless_header", "trickle", "half_close", "reset"]
    try:
        for _ in range(rounds):
            clients = [_client(server.port, rng.choice(behaviours), rng)
                       for _ in range(rng.randint(10, 300))]
            time.sleep(0.2)
            tally.counts["connections"] += len(clients)
            held = server._server.connections
            if held > metrics_http.MAX_CONNECTIONS:
                tally.counts["connections_over_bound"] += 1
            if threading.active_count() != threads:
                tally.counts["threads_changed"] += 1
            for client in clients:
                if client is not None:
                    client.close()
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{server.port}/metrics",
                                            timeout=10) as answer:
                    answered = b"govd_level_hertz" in answer.read()
                tally.counts["scrapes_answered" if answered else "scrapes_failed"] += 1
            except OSError:
                tally.counts["scrapes_failed"] += 1
            if not server._server._thread.is_alive():
                tally.counts["thread_stopped"] += 1
                break
    except Exception:
        tally.crash()
    finally:
        server.close()
        logging.getLogger("govd.telemetry.metrics_http").removeHandler(caught)
    tally.counts["rounds"] = rounds
    tally.counts["endpoint_errors_logged"] = len(errors)
    tally.counts.update({f"endpoint_{k}": v for k, v in server._server.counts.items()})
    return tally.result(started_s)


BAD = ("crashes", "bad_messages", "frames_out_of_limits", "ticks_over_memory",
       "wrong_verdicts", "same_not_restored", "written_into_another_gpu",
       "connections_over_bound", "threads_changed", "scrapes_failed", "thread_stopped",
       "endpoint_errors_logged")
"""Counts that must all be 0."""


def main(argv: list[str] | None = None) -> int:
    """Run every section; write the JSON; 1 when any count in `BAD` is not 0."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small counts, for a smoke test")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--out", type=Path,
                        default=REPO / "bench" / "results" / "fuzz-custody.json")
    args = parser.parse_args(argv)
    logging.getLogger("govd").setLevel(logging.ERROR)  # the warnings are expected, by design
    sizes = QUICK if args.quick else FULL
    rng = random.Random(args.seed)
    started_s = time.monotonic()
    sections: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="govd-fuzz3-", dir="/tmp") as tmp:
        folder = Path(tmp)
        sections["mangohud_rows"] = fuzz_mangohud_rows(sizes["mangohud_scripts"], rng, folder)
        sections["state_files"] = fuzz_state_files(sizes["state_files"], rng, folder)
        sections["hotplug_identity"] = fuzz_hotplug(sizes["hotplug"], rng, folder)
        sections["metrics_endpoint"] = fuzz_metrics(sizes["metrics_rounds"], rng, folder)
    totals: Counter[str] = Counter()
    for section in sections.values():
        for key in BAD:
            totals[key] += section["counts"].get(key, 0)
    result = {
        "command": " ".join(["python", "bench/bench_fuzz_custody.py", *(argv or sys.argv[1:])]),
        "environment": {"python": platform.python_version(), "machine": platform.machine(),
                        "system": platform.platform(), "cpus": os.cpu_count()},
        "seed": args.seed, "quick": args.quick, "totals": dict(totals),
        "duration_s": round(time.monotonic() - started_s, 3), "sections": sections,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1, ensure_ascii=False) + "\n")
    for name, section in sections.items():
        print(f"{name:17s} {section['duration_s']:8.1f} s  crashes {section['counts']['crashes']}")
    print("totals:", json.dumps(result["totals"]), "->", args.out)
    return 0 if not any(totals.values()) else 1


if __name__ == "__main__":
    raise SystemExit(main())
