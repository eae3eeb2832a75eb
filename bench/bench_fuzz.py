"""Bad input, at length: adversarial frame datagrams through a real socket, generated YAML
configurations, mangled MangoHud logs, sweep tables and run traces, and every command of the
`govd` command line on mangled state and status files, special files and odd arguments
(`fuzz_cli`). Writes bench/results/fuzz.json.

    .venv/bin/python bench/bench_fuzz.py [--quick] [--seed 1] [--out bench/results/fuzz.json]

Every input either works or is refused the documented way (a counted rejection, `ConfigError`,
`SweepFormatError`, `TraceFormatError`, whose lines name file and line); anything else is a
crash, recorded with its traceback. Exit status 1 when there was a crash or an error message
that does not name its file and line.
"""

from __future__ import annotations

import argparse
import errno
import json
import logging
import math
import os
import platform
import random
import re
import shutil
import socket
import sys
import tempfile
import time
import traceback
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

import numpy as np  # noqa: E402
import yaml  # noqa: E402

from bench import fuzz_cli  # noqa: E402
from govd.conf import ConfigError, load_config  # noqa: E402
from govd.formats.sweep import SweepFormatError, read_sweep  # noqa: E402
from govd.formats.trace import TraceFormatError, read_trace  # noqa: E402
from govd.sources.frame_line import MAX_GPU_TIME_US, REASONS  # noqa: E402
from govd.sources.mangohud import MAX_FRAME_MS, MangoHudSource  # noqa: E402
from govd.sources.socket import SocketSource  # noqa: E402

FULL = {"datagrams": 100_000, "configs": 10_000, "mangohud_scripts": 400, "tables": 3_000,
        "state_files": 60, "status_files": 60}
QUICK = {"datagrams": 2_000, "configs": 200, "mangohud_scripts": 10, "tables": 100,
         "state_files": 3, "status_files": 3}
MAX_TRACEBACKS = 5
SHIPPED_CONFIG = (REPO / "config" / "govd.yaml").read_text()
NASTY_NUMBERS = ["nan", "NaN", "-nan", "inf", "-inf", "Infinity", "1e999", "-1e999", "0", "-0",
                 "0.0", "-1", "-5e-324", "1_000", "0x10", "１０", "١٢٣", "1e", ".", "--1", "+7",
                 "10000001", "9" * 400]
APP_NAMES = ["game", "", "日本", "a" * 200, "x\x01", "a\u2028b"]
UNICODE = ["é", "日本", "\u202e", "\u2028", "\ufeff", "\x00", "\x7f", "🎮", "\u00a0", "\ud7ff"]


class Tally:
    """Outcome counters for one section, plus the first few tracebacks of crashes."""

    def __init__(self) -> None:
        self.counts: Counter[str] = Counter()
        self.tracebacks: list[str] = []

    def crash(self) -> None:
        """Count the exception being handled as a crash and keep its traceback."""
        self.counts["crashes"] += 1
        if len(self.tracebacks) < MAX_TRACEBACKS:
            self.tracebacks.append(traceback.format_exc())

    def result(self, started_s: float) -> dict[str, Any]:
        """The section's record: counts, crash tracebacks and wall time (s)."""
        counts = dict(sorted(self.counts.items()))
        counts.setdefault("crashes", 0)
        return {"counts": counts, "tracebacks": self.tracebacks,
                "duration_s": round(time.monotonic() - started_s, 3)}


# -- frame datagrams --------------------------------------------------------------------------
def _frame_line(rng: random.Random) -> str:
    time_us = rng.choice([f"{rng.uniform(1, 50_000):.1f}", str(rng.randint(1, 10_000_000)),
                          rng.choice(NASTY_NUMBERS)])
    keys = [rng.choice(["app=" + rng.choice(APP_NAMES),
                        f"target_fps={rng.choice([*NASTY_NUMBERS, '60', '1000', '1001'])}",
                        "pid=1", "uid=0", "policy=performance", "=", "junk", "k="])
            for _ in range(rng.randint(0, 3))]
    tag = rng.choice(["F"] * 8 + ["f", "G", "", "F\x00"])
    return " ".join([tag, time_us, *keys])


DATAGRAM_KINDS: dict[str, Callable[[random.Random], bytes]] = {
    "valid": lambda rng: f"F {rng.randint(100, 40_000)} app=game\n".encode(),
    "protocol_like": lambda rng: "\n".join(
        _frame_line(rng) for _ in range(rng.randint(1, 6))).encode("utf-8", "surrogatepass"),
    "random_bytes": lambda rng: rng.randbytes(rng.randint(0, 300)),
    "non_finite_or_non_positive": lambda rng: (
        f"F {rng.choice(['nan', 'inf', '-inf', '-1', '0', '-0', '1e999', 'NaN', '-5'])}\n"
        f"F 1000 target_fps={rng.choice(['nan', 'inf', '0', '-60', '1e999'])}\n").encode(),
    "unicode": lambda rng: (
        f"F {rng.randint(1, 9999)} app={''.join(rng.choices(UNICODE, k=rng.randint(1, 8)))}\n"
        f"{rng.choice(UNICODE)}F 1000{rng.choice(UNICODE)}\n").encode("utf-8", "surrogatepass"),
    "huge": lambda rng: b"F 1000 app=" + b"a" * rng.randint(70_000, 150_000) + b"\nF 1000\n",
    "long_line": lambda rng: b"F 1000 " + b"k=v " * rng.randint(1000, 8000) + b"\n",
    "empty": lambda rng: rng.choice([b"", b"\n", b"\n\n\n", b" \t\r\n"]),
    "flood": lambda rng: b"F 1000\n" * rng.randint(500, 5000),
}
_KIND_WEIGHTS = {"valid": 20, "protocol_like": 30, "random_bytes": 20,
                 "non_finite_or_non_positive": 10, "unicode": 10, "huge": 0.3, "long_line": 1,
                 "empty": 3, "flood": 2}


def fuzz_datagrams(count: int, rng: random.Random, folder: Path) -> dict[str, Any]:
    """Send ``count`` datagrams to a `SocketSource`, draining every few as the daemon's ticks do;
    the clock advances 1 ms per datagram, so floods meet the per-sender rate limit."""
    started_s = time.monotonic()
    tally = Tally()
    clock_s = [0.0]
    src = SocketSource(folder / "frames.sock", group=None, clock=lambda: clock_s[0])
    kinds = list(_KIND_WEIGHTS)
    weights = list(_KIND_WEIGHTS.values())
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as out:
        out.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 1 << 20)
        for i in range(count):
            kind = rng.choices(kinds, weights)[0]
            payload = DATAGRAM_KINDS[kind](rng)
            tally.counts[f"sent_{kind}"] += 1
            while True:
                try:
                    out.sendto(payload, socket.MSG_DONTWAIT, str(src.path))
                    break
                except BlockingIOError:
                    _drain(src, tally)  # the kernel's queue is full: a tick empties it
                except OSError as exc:
                    name = errno.errorcode.get(exc.errno or 0, str(exc.errno))
                    tally.counts[f"send_error_{name}"] += 1
                    break
            clock_s[0] += 0.001
            if i % 8 == 7:
                _drain(src, tally)
        _drain(src, tally)
    stats = src.stats()
    src.close()
    tally.counts["sent"] = count
    tally.counts.update({f"source_{k}": v for k, v in stats.items()})
    outcomes = ["accepted", "rate_limited", "queue_full", "over_budget",
                *(f"dropped_{r}" for r in REASONS)]
    # Every line the source saw must be accepted or counted under exactly one reason.
    tally.counts["unaccounted_lines"] = stats.get("lines", 0) - sum(stats.get(k, 0)
                                                                    for k in outcomes)
    return tally.result(started_s)


def _drain(src: SocketSource, tally: Tally) -> None:
    try:
        frames = src.drain()
    except Exception:
        tally.crash()
        return
    tally.counts["frames_received"] += len(frames)
    tally.counts["frames_out_of_limits"] += sum(
        not (0 < f.gpu_time_ms <= MAX_GPU_TIME_US / 1000)
        or (f.target_fps is not None and not 0 < f.target_fps <= 1000) for f in frames)


# -- configurations ---------------------------------------------------------------------------
def _yaml_value(rng: random.Random, depth: int = 0) -> Any:
    choice = rng.randrange(9 if depth < 3 else 6)
    if choice == 0:
        return None
    if choice == 1:
        return rng.choice([True, False])
    if choice == 2:
        return rng.choice([0, -1, 1, 2**64, -(2**63), 50, 10_000])
    if choice == 3:
        return rng.choice([math.nan, math.inf, -math.inf, 0.0, -0.5, 1e308, 60.0, 1e-300])
    if choice in (4, 5):
        return "".join(rng.choices(["a", "1", " ", ":", "#", "é", "\t", "{", "-", "*"],
                                   k=rng.randint(0, 10)))
    if choice in (6, 7):
        return [_yaml_value(rng, depth + 1) for _ in range(rng.randint(0, 4))]
    return {str(_yaml_value(rng, depth + 1)): _yaml_value(rng, depth + 1)
            for _ in range(rng.randint(0, 4))}


def _mutated_config(rng: random.Random) -> bytes:
    lines = SHIPPED_CONFIG.split("\n")
    for _ in range(rng.randint(1, 5)):
        at = rng.randrange(len(lines))
        op = rng.randrange(6)
        if op == 0:
            del lines[at]
        elif op == 1:
            lines.insert(at, lines[rng.randrange(len(lines))])
        elif op == 2 and ":" in lines[at]:
            key = lines[at].split(":", 1)[0]
            value = yaml.safe_dump(_yaml_value(rng), default_flow_style=True).strip()
            lines[at] = f"{key}: {value.removesuffix('...').strip()}"
        elif op == 3:
            lines.insert(at, "".join(rng.choices(":-[]{}#&*!|>'\"\t ,?%@`abe0129.", k=20)))
        elif op == 4:
            lines[at] = " " * rng.randint(0, 5) + lines[at].lstrip()
        else:
            lines[at] = lines[at][: rng.randint(0, len(lines[at]))]
    return "\n".join(lines).encode()


CONFIG_KINDS: dict[str, Callable[[random.Random], bytes]] = {
    "mutated_shipped": _mutated_config,
    "random_document": lambda rng: yaml.safe_dump(_yaml_value(rng), allow_unicode=True).encode(),
    "random_sections": lambda rng: yaml.safe_dump(
        {rng.choice(["devices", "policy", "target", "apps", "period_ms", "model", "frames",
                     "power", "logging", "metrics", "state_file", "x"]): _yaml_value(rng)
         for _ in range(rng.randint(1, 4))}, allow_unicode=True).encode(),
    "random_bytes": lambda rng: rng.randbytes(rng.randint(0, 200)),
    "alias_bomb": lambda rng: ("a: &a [" + ",".join(["x"] * 9) + "]\n" + "".join(
        f"{c}: &{c} [" + ",".join([f"*{p}"] * 9) + "]\n"
        for p, c in zip("abcdefg", "bcdefgh", strict=True))).encode(),
    # Nesting that exhausts Python's recursion limit (~2000 levels) costs PyYAML about 1.7 s
    # before it is refused, whatever the depth; shallower keeps the run short.
    "deep_nesting": lambda rng: ("[" * rng.randint(50, 1000)).encode(),
    "tags": lambda rng: rng.choice([b"!!python/object/apply:os.system ['true']\n",
                                    b"a: !!python/name:os.system\n", b"a: !!binary ***\n",
                                    b"period_ms: !!int 2024-13-45\n", b"a: !custom 1\n"]),
}


def fuzz_configs(count: int, rng: random.Random, folder: Path) -> dict[str, Any]:
    """Load ``count`` generated files with `load_config`: a Config or a ConfigError whose every
    line is one ``file:line: message`` line."""
    started_s = time.monotonic()
    tally = Tally()
    path = folder / "govd.yaml"
    error_line = re.compile(rf"^{re.escape(str(path))}:\d+: \S[^\n]*$")
    kinds = list(CONFIG_KINDS)
    for _ in range(count):
        kind = rng.choice(kinds)
        path.write_bytes(CONFIG_KINDS[kind](rng))
        os.chmod(path, 0o600)
        tally.counts[f"generated_{kind}"] += 1
        try:
            load_config(path)
            tally.counts["accepted"] += 1
        except ConfigError as exc:
            tally.counts["rejected"] += 1
            if not exc.errors or not all(error_line.match(line) for line in exc.errors):
                tally.counts["bad_messages"] += 1
        except Exception:
            tally.crash()
    tally.counts["generated"] = count
    return tally.result(started_s)


# -- MangoHud logs ----------------------------------------------------------------------------
MANGO_PREAMBLE = "os,cpu,gpu,ram,kernel,driver,cpuscheduler\nDebian,Ryzen,Radeon,32768,6.1,,\n"
MANGO_HEADERS = ["fps,frametime,cpu_load,gpu_load,elapsed\n", "fps,elapsed\n", "frametime\n",
                 "cpu_load,gpu_load\n", "elapsed,frametime,fps\n", ",\n", "fps,,frametime,fps\n"]


def _mango_rows(rng: random.Random) -> bytes:
    rows = []
    for _ in range(rng.randint(0, 10)):
        frame_ms = rng.uniform(0.5, 100)
        row = rng.choice([f"{1000 / frame_ms:.1f},{frame_ms:.3f},12,95,{rng.randint(0, 10**12)}",
                          f"{1000 / frame_ms:.1f},{int(frame_ms * 1000)},12,95,0",
                          ",".join(rng.choices(NASTY_NUMBERS, k=rng.randint(1, 6)))])
        rows.append(row[: rng.randint(0, len(row))] if rng.random() < 0.1 else row)
    text = "\n".join(rows) + rng.choice(["\n", "\n", "", "\r\n"])
    return text.encode() if rng.random() < 0.9 else text.encode() + rng.randbytes(20)


def fuzz_mangohud(scripts: int, rng: random.Random, folder: Path) -> dict[str, Any]:
    """Follow ``scripts`` logs, each appended to, cut, truncated, replaced, rotated or removed
    between drains: `drain` never raises and only gives frame times in (0, 10 s]."""
    started_s = time.monotonic()
    tally = Tally()
    for n in range(scripts):
        logs = folder / f"mango{n}"
        logs.mkdir()
        current = logs / "game_2024-01-02_03-04-05.csv"
        current.write_text(MANGO_PREAMBLE + rng.choice(MANGO_HEADERS))
        src = MangoHudSource(logs, rescan_s=0)
        for step in range(rng.randint(5, 40)):
            current = _mango_step(rng, logs, current, step, tally)
            try:
                frames = src.drain()
            except Exception:
                tally.crash()
                break
            tally.counts["drains"] += 1
            tally.counts["frames"] += len(frames)
            tally.counts["frames_out_of_limits"] += sum(
                not 0 < f.gpu_time_ms <= MAX_FRAME_MS for f in frames)
        tally.counts.update({f"source_{k}": v for k, v in src.stats().items()})
        src.close()
        shutil.rmtree(logs)
    tally.counts["scripts"] = scripts
    return tally.result(started_s)


def _mango_step(rng: random.Random, logs: Path, current: Path, step: int, tally: Tally) -> Path:
    action = rng.choices(["append", "header", "truncate", "replace", "rotate", "remove", "fifo"],
                         [60, 5, 8, 8, 8, 3, 1])[0]
    tally.counts[f"action_{action}"] += 1
    if current.exists() and not current.is_file():
        current.unlink()  # a FIFO left by the previous step: writing to it would block the bench
    if action in ("append", "header"):
        with open(current, "ab") as f:
            f.write(_mango_rows(rng) if action == "append" else rng.choice(MANGO_HEADERS).encode())
    elif action == "truncate" and current.exists():
        os.truncate(current, rng.randint(0, current.stat().st_size))
    elif action == "replace":
        part = logs / "part.tmp"
        part.write_text(MANGO_PREAMBLE + rng.choice(MANGO_HEADERS))
        os.replace(part, current)
    elif action == "rotate":
        current = logs / f"game{step}_2024-01-02_03-04-{step % 60:02d}.csv"
        current.write_text(MANGO_PREAMBLE + rng.choice(MANGO_HEADERS))
        stamp_ns = 2_000_000_000_000_000_000 + step * 1_000_000_000
        os.utime(current, ns=(stamp_ns, stamp_ns))
    elif action in ("remove", "fifo"):
        current.unlink(missing_ok=True)
        if action == "fifo":
            os.mkfifo(current)  # must not block the follower
    return current


# -- sweep tables and run traces --------------------------------------------------------------
SWEEP = "# source: fuzz\nunit,freq_mhz,time_ms,power_w,busy,alu\n" + "".join(
    f"{u},{f},{1 + u + f / 1000:.3f},{10 + f / 100:g},0.5,{u * 3}\n"
    for u in range(3) for f in (300, 600, 900))
TRACE = "time_s,frame_time_ms,frame_count,freq_mhz,power_w,alu\n" + "".join(
    f"{t * 0.05:.2f},{'16.6' if t % 3 else ''},1,600,5.0,{t}\n" for t in range(8))
CELLS = [b"", b",", b"\n", b"\r\n", b"\x00", b"\xff", b"#", b'"', b"  ", b"-", b"\xc3",
         *(n.encode() for n in NASTY_NUMBERS)]


def mangle(rng: random.Random, text: str) -> bytes:
    """``text`` with 1-5 bytes, cells or lines deleted, replaced, duplicated or cut off."""
    data = bytearray(text.encode())
    for _ in range(rng.randint(1, 5)):
        op = rng.randrange(6)
        at = rng.randint(0, len(data))
        if op == 0:
            del data[at : at + rng.randint(1, 20)]
        elif op == 1:
            data[at:at] = rng.choice(CELLS)
        elif op == 2 and at < len(data):
            data[at] = rng.randrange(256)
        elif op == 3:
            del data[at:]
        else:
            lines = bytes(data).split(b"\n")
            i = rng.randrange(len(lines))
            if op == 4:
                lines.insert(i, lines[rng.randrange(len(lines))])
            else:
                cells = lines[i].split(b",")
                cells[rng.randrange(len(cells))] = rng.choice(CELLS)
                lines[i] = b",".join(cells)
            data = bytearray(b"\n".join(lines))
    return bytes(data)


def fuzz_tables(count: int, rng: random.Random, folder: Path) -> dict[str, Any]:
    """Read ``count`` mangled sweep tables and as many mangled traces: each reads, or raises its
    format error naming file and line."""
    started_s = time.monotonic()
    tally = Tally()
    for kind, base, reader, error in (("sweep", SWEEP, read_sweep, SweepFormatError),
                                      ("trace", TRACE, read_trace, TraceFormatError)):
        path = folder / f"{kind}.csv"
        names_line = re.compile(rf"^{re.escape(str(path))}:\d+: \S")
        for _ in range(count):
            path.write_bytes(mangle(rng, base))
            try:
                reader(path)
                tally.counts[f"{kind}_read"] += 1
            except error as exc:
                tally.counts[f"{kind}_rejected"] += 1
                if not names_line.match(str(exc)):
                    tally.counts["bad_messages"] += 1
            except Exception:
                tally.crash()
    tally.counts["generated"] = 2 * count
    return tally.result(started_s)


def main(argv: list[str] | None = None) -> int:
    """Run every section; write the JSON; 1 when anything crashed or named no file:line."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small counts, for a smoke test")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--out", type=Path, default=REPO / "bench" / "results" / "fuzz.json")
    args = parser.parse_args(argv)
    logging.getLogger("govd").setLevel(logging.ERROR)  # the warnings are expected here, by design
    sizes = QUICK if args.quick else FULL
    rng = random.Random(args.seed)
    started_s = time.monotonic()
    sections: dict[str, Any] = {}
    # Short path: AF_UNIX socket paths are limited to 108 bytes.
    with tempfile.TemporaryDirectory(prefix="govd-fuzz-", dir="/tmp") as tmp:
        folder = Path(tmp)
        sections["datagrams"] = fuzz_datagrams(sizes["datagrams"], rng, folder)
        sections["configs"] = fuzz_configs(sizes["configs"], rng, folder)
        sections["mangohud"] = fuzz_mangohud(sizes["mangohud_scripts"], rng, folder)
        sections["tables"] = fuzz_tables(sizes["tables"], rng, folder)
        for name, section in fuzz_cli.SECTIONS.items():
            sections[name] = section(sizes[name], rng, folder, args.quick)
        sections["cli"] = fuzz_cli.fuzz_cli(args.quick, rng, folder)
    totals: Counter[str] = Counter()
    for section in sections.values():
        counts = section["counts"]
        for key in ("crashes", "bad_messages", "frames_out_of_limits", "unaccounted_lines"):
            totals[key] += counts.get(key, 0)
    result = {
        "command": " ".join(["python", "bench/bench_fuzz.py", *(argv or sys.argv[1:])]),
        "environment": {"python": platform.python_version(), "numpy": np.__version__,
                        "pyyaml": yaml.__version__, "machine": platform.machine(),
                        "system": platform.platform(), "cpus": os.cpu_count()},
        "seed": args.seed,
        "quick": args.quick,
        "totals": {"crashes": totals["crashes"], "bad_messages": totals["bad_messages"],
                   "frames_out_of_limits": totals["frames_out_of_limits"],
                   "unaccounted_lines": totals["unaccounted_lines"]},
        "duration_s": round(time.monotonic() - started_s, 3),
        "sections": sections,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1, ensure_ascii=False) + "\n")
    for name, section in sections.items():
        print(f"{name:10s} {section['duration_s']:8.1f} s  crashes {section['counts']['crashes']}")
    print("totals:", json.dumps(result["totals"]), "->", args.out)
    return 0 if not any(result["totals"].values()) else 1


if __name__ == "__main__":
    raise SystemExit(main())
