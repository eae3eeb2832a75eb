"""The fuzz benchmark's command-line sections: every `govd` command run as a user would, with odd
arguments and odd files, each in its own process (a hang or a memory blow-up is then seen, and
stopped, rather than stopping the benchmark).

- ``state_files``: `govd restore`, `govd status` and `govd run` (which restores a stale state at
  start) on mangled state files and on special files (a FIFO, /dev/zero, a folder, ...);
- ``status_files``: `govd status` on mangled status files and special files;
- ``cli``: every command's arguments: out-of-range and non-numbers, special files as inputs,
  occupied or odd socket paths and metrics ports, sysfs trees whose device has no levels.

Each run must end by itself (``run`` is sent SIGTERM after `RUN_FOR_S`) with status 0, 1 or 2,
print no traceback and stay under `MAX_RSS_MB`; anything else is a crash, kept with its output.
State files name only devices under the benchmark's own fixture tree, so a restore writes nowhere
else.
"""

from __future__ import annotations

import json
import os
import random
import resource
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent

from tests.sysfs_fixtures import mali_panfrost  # noqa: E402

RUN_FOR_S = 6.0
"""A `govd run` that starts is stopped with SIGTERM after this long. Units: s."""
TIMEOUT_S = 30.0
"""A command still running this long after its start (or its SIGTERM) hangs. Units: s."""
MAX_RSS_MB = 1024.0
"""A command whose peak RSS passes this eats memory. Units: MB."""
ADDRESS_SPACE_BYTES = 4 << 30
"""RLIMIT_AS of each command: a runaway read fails there instead of taking the machine."""
MAX_KEPT = 5
QUICK_SPECIALS = ("fifo", "dev_zero")
"""The special files tried with ``--quick`` (all of `special_files` otherwise)."""
QUICK_CASES = 8
"""Command-line cases tried with ``--quick``, drawn from all of them."""
GPU = "fde60000.gpu"
FOUND_GOVERNOR = "simple_ondemand"
"""The fixture GPU's governor before govd: what every way out of `govd run` must leave."""
NUMBERS = ["nan", "inf", "-inf", "-1", "0", "1e309", "1e-320", "abc", "", "9" * 400, "0x10"]
JUNK: list[Any] = [None, True, -1, 0, 2**70, 1e308, "", "x", "userspace", [], {}, [1, "a"],
                   {"a": 1}, "é\x00"]


class Outcomes:
    """Counts per outcome, and the output of the first few crashes."""

    def __init__(self) -> None:
        self.counts: dict[str, int] = {"crashes": 0}
        self.crashes: list[str] = []

    def add(self, key: str) -> None:
        """Count one ``key``."""
        self.counts[key] = self.counts.get(key, 0) + 1

    def crash(self, what: str, detail: str) -> None:
        """Count a crash of ``what`` (its reason and output in ``detail``)."""
        self.add("crashes")
        command, _, reason = what.partition(": ")
        self.add(f"crash_{command}_{reason.split()[0] if reason else 'unknown'}")
        if len(self.crashes) < MAX_KEPT:
            self.crashes.append(detail[-3000:])

    def result(self, started_s: float) -> dict[str, Any]:
        """The section's record, as bench_fuzz's other sections write theirs."""
        return {"counts": dict(sorted(self.counts.items())), "tracebacks": self.crashes,
                "duration_s": round(time.monotonic() - started_s, 3)}


def _limits() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE_BYTES, ADDRESS_SPACE_BYTES))
    os.setsid()


def run_govd(args: list[str], cwd: Path, stop_after_s: float | None = None) -> dict[str, Any]:
    """Run ``python -m govd ARGS``; returns its exit status (negative: signal), output, peak RSS
    (MB), and whether it hung. With ``stop_after_s`` it is sent SIGTERM then, if still running."""
    out_path = cwd / ".out"
    with open(out_path, "wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "govd", *args], cwd=cwd, stdin=subprocess.DEVNULL,
            stdout=out, stderr=subprocess.STDOUT, preexec_fn=_limits,
            env={**os.environ, "PYTHONPATH": str(REPO), "NOTIFY_SOCKET": ""},
        )
    started = time.monotonic()
    termed = hung = False
    status, usage = 0, None
    while True:
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            break
        elapsed = time.monotonic() - started
        if stop_after_s is not None and not termed and elapsed > stop_after_s:
            os.kill(proc.pid, signal.SIGTERM)
            termed, started = True, time.monotonic()
        elif elapsed > TIMEOUT_S:
            hung = True
            os.killpg(proc.pid, signal.SIGKILL)
            _, status, usage = os.wait4(proc.pid, 0)
            break
        time.sleep(0.02)
    proc.returncode = os.waitstatus_to_exitcode(status)
    return {"rc": proc.returncode, "output": out_path.read_text(errors="replace"),
            "rss_mb": usage.ru_maxrss / 1024.0 if usage else 0.0, "hung": hung,
            "termed": termed}


def judge(tally: Outcomes, what: str, args: list[str], ran: dict[str, Any]) -> None:
    """Count one command's outcome: ok (0), refused (1 or 2, no traceback), or a crash."""
    text = f"$ govd {' '.join(args)}\n{ran['output']}"
    if ran["hung"]:
        tally.crash(f"{what}: hang", f"hung ({TIMEOUT_S:g} s)\n{text}")
    elif ran["rss_mb"] > MAX_RSS_MB:
        tally.crash(f"{what}: memory", f"peak RSS {ran['rss_mb']:.0f} MB\n{text}")
    elif "Traceback (most recent call last)" in ran["output"]:
        tally.crash(f"{what}: traceback", text)
    elif ran["rc"] not in (0, 1, 2):
        tally.crash(f"{what}: exit {ran['rc']}", text)
    else:
        tally.add(f"{what}_{'ok' if ran['rc'] == 0 else 'refused'}")


# -- files --------------------------------------------------------------------------------------
def special_files(folder: Path) -> dict[str, Path]:
    """Paths a user might pass by mistake where a file is wanted."""
    fifo = folder / "fifo"
    if not fifo.exists():
        os.mkfifo(fifo)
    loop = folder / "loop"
    if not loop.is_symlink():
        loop.symlink_to(loop)
    (folder / "empty").write_bytes(b"")
    (folder / "binary").write_bytes(bytes(range(256)) * 4)
    big = folder / "big"
    with open(big, "wb") as f:
        f.truncate(1 << 30)  # sparse: 1 GiB of zeros, no disk
    return {"fifo": fifo, "dev_zero": Path("/dev/zero"), "folder": folder, "missing":
            folder / "missing" / "file", "empty": folder / "empty", "binary": folder / "binary",
            "big": big, "link_loop": loop, "dev_null": Path("/dev/null")}


def mutate_json(rng: random.Random, doc: Any, keep: frozenset[str] = frozenset()) -> Any:
    """``doc`` with 1-3 values replaced by junk, keys deleted or lists emptied (never the keys in
    ``keep`` at the top level)."""
    doc = json.loads(json.dumps(doc))
    for _ in range(rng.randint(1, 3)):
        holder, key = _pick(rng, doc, keep)
        if holder is None:
            return rng.choice(JUNK)
        if rng.random() < 0.3 and isinstance(holder, dict):
            del holder[key]
        else:
            holder[key] = rng.choice(JUNK)
    return doc


def _pick(rng: random.Random, doc: Any, keep: frozenset[str]) -> tuple[Any, Any]:
    holders: list[tuple[Any, Any]] = []

    def walk(node: Any, top: bool) -> None:
        items = (node.items() if isinstance(node, dict)
                 else enumerate(node) if isinstance(node, list) else [])
        for key, value in list(items):
            if not (top and key in keep):
                holders.append((node, key))
            walk(value, False)

    walk(doc, True)
    return rng.choice(holders) if holders else (None, None)


def file_texts(rng: random.Random, valid: dict[str, Any], count: int,
               keep: frozenset[str] = frozenset()) -> Iterator[tuple[str, bytes]]:
    """``count`` (kind, content) pairs: mutated JSON, cut JSON, not JSON at all."""
    text = json.dumps(valid)
    for _ in range(count):
        kind = rng.choices(["mutated", "cut", "bytes", "valid"], [6, 2, 1, 1])[0]
        if kind == "mutated":
            yield kind, json.dumps(mutate_json(rng, valid, keep)).encode()
        elif kind == "cut":
            yield kind, text[: rng.randrange(len(text))].encode()
        elif kind == "bytes":
            yield kind, rng.randbytes(rng.randint(0, 100))
        else:
            yield kind, text.encode()


# -- sections -----------------------------------------------------------------------------------
@contextmanager
def fixture_tree(folder: Path, name: str, levels_hz: str | None = None) -> Iterator[Path]:
    """A devfreq tree with one Mali GPU under ``folder/name`` (``levels_hz`` replaces its
    available_frequencies); removed afterwards."""
    root = folder / name
    devfreq, _ = mali_panfrost(root, governor=FOUND_GOVERNOR)
    if levels_hz is not None:
        (devfreq / "available_frequencies").write_text(levels_hz)
    try:
        yield root
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _specials(folder: Path, quick: bool) -> dict[str, Path]:
    files = special_files(folder)
    return {k: files[k] for k in QUICK_SPECIALS} if quick else files


def fuzz_state_files(count: int, rng: random.Random, folder: Path,
                     quick: bool = False) -> dict[str, Any]:
    """`restore`, `status` and `run` on ``count`` mangled state files, then on special files."""
    started = time.monotonic()
    tally = Outcomes()
    with fixture_tree(folder, "sys-state") as root:
        valid = {"version": 1, "pid": 2**22 + 1, "sysfs_root": str(root), "devices": [
            {"backend": "devfreq", "name": GPU, "path": f"class/devfreq/{GPU}",
             "state": {"governor": "simple_ondemand", "min_freq_hz": 200_000_000,
                       "max_freq_hz": 800_000_000}}]}
        state = folder / "state.json"
        cases = [(kind, text) for kind, text in file_texts(rng, valid, count,
                                                            frozenset({"sysfs_root"}))]
        for i, (kind, text) in enumerate(cases):
            state.write_bytes(text)
            command = ["restore", "status", "run"][i % 3]
            args = [command, "--state-file", str(state)]
            if command == "run":
                args += ["--sysfs-root", str(root), "--socket", str(folder / "s.sock")]
            tally.add(f"generated_{kind}")
            judge(tally, f"state_{command}", args,
                  run_govd(args, folder, RUN_FOR_S if command == "run" else None))
        for name, path in _specials(folder, quick).items():
            for command in ("restore", "status"):
                args = [command, "--state-file", str(path)]
                tally.add(f"special_{name}")
                judge(tally, f"state_{command}", args, run_govd(args, folder))
    return tally.result(started)


def fuzz_status_files(count: int, rng: random.Random, folder: Path,
                      quick: bool = False) -> dict[str, Any]:
    """`status` (table and --json) on ``count`` mangled status files, then special files."""
    started = time.monotonic()
    tally = Outcomes()
    place = folder / "status-case"
    place.mkdir(exist_ok=True)
    device = {"device": "card0", "state": "governing", "policy": "energy", "target": "60 FPS",
              "level_mhz": 600.0, "fps": 59.9, "frame_ms": 16.6, "predicted_frame_ms": 16.0,
              "power_w": 5.0, "energy_j": 12.0, "paused_reason": None}
    valid = {"pid": 1, "written_unix_s": time.time(), "loop_time_s": 1.0, "period_ms": 50,
             "loop": {"ticks": 10, "overruns": 0}, "frames": {}, "devices": [device]}
    status = place / "status.json"
    for i, (kind, text) in enumerate(file_texts(rng, valid, count)):
        status.write_bytes(text)
        args = ["status", "--state-file", str(place / "state.json"), *(["--json"] * (i % 2))]
        tally.add(f"generated_{kind}")
        judge(tally, "status", args, run_govd(args, folder))
    for name, path in _specials(folder, quick).items():
        if status.exists() or status.is_symlink():
            status.unlink()
        if path != folder / "missing" / "file":
            status.symlink_to(path)  # the status file is found beside the state file
        tally.add(f"special_{name}")
        args = ["status", "--state-file", str(place / "state.json")]
        judge(tally, "status", args, run_govd(args, folder))
    return tally.result(started)


def _cli_cases(folder: Path, files: dict[str, Path], trees: dict[str, Path],
               ports: dict[str, int], sweep: Path) -> list[tuple[str, list[str]]]:
    """(command, arguments) for every command; ``run`` cases govern ``trees['ok']``."""
    tree = str(trees["ok"])
    cases: list[tuple[str, list[str]]] = []
    for number in NUMBERS:
        cases += [
            ("run", ["run", "--sim", "--speed", number, "--duration-s", "5"]),
            ("run", ["run", "--sim", "--speed", "1000", "--duration-s", number]),
            ("eval", ["eval", "--sweep", str(sweep), "--target-fps", number]),
            ("eval", ["eval", "--sweep", str(sweep), "--max-slowdown", number]),
            ("eval", ["eval", "--sweep", str(sweep), "--target-fps", "60", "--mu", number]),
            ("replay", ["replay", str(sweep), "--forgetting", number]),
            ("sim", ["sim", "sweep", "--scenario", "art3", "--minutes", number,
                     "-o", str(folder / "out.csv")]),
            ("select-features", ["select-features", str(sweep), "--folds", number]),
            ("fit-prior", ["fit-prior", str(sweep), "-o", str(folder / "p.json"),
                           "--clusters", number]),
        ]
    for path in files.values():
        p = str(path)
        cases += [
            ("check-config", ["check-config", "--insecure-config", p]),
            ("run", ["run", "--config", p, "--insecure-config", "--sysfs-root", tree,
                     "--socket", str(folder / "s.sock"), "--state-file", str(folder / "st.json")]),
            ("eval", ["eval", "--sweep", p, "--target-fps", "60"]),
            ("replay", ["replay", p]),
            ("select-features", ["select-features", p]),
            ("fit-prior", ["fit-prior", p, "-o", str(folder / "p.json")]),
            ("devices", ["devices", "--sysfs-root", p]),
            ("run", ["run", "--sysfs-root", p, "--socket", str(folder / "s.sock"),
                     "--state-file", str(folder / "st.json")]),
            ("sim", ["sim", "from-nvdvfs", "--gpu", "v100", "--data", p, "--minutes", "1",
                     "-o", str(folder / "out.csv")]),
            ("run", ["run", "--sysfs-root", tree, "--socket", p,
                     "--state-file", str(folder / "st.json")]),
        ]
    long_socket = folder / ("s" * 120)
    open_folder = folder / "open"
    open_folder.mkdir(exist_ok=True)
    open_folder.chmod(0o777)
    for sock in (long_socket, open_folder / "f.sock", folder / "taken.sock", folder,
                 folder / "x" / "y" / "f.sock"):
        cases.append(("run", ["run", "--sysfs-root", tree, "--socket", str(sock),
                              "--state-file", str(folder / "st.json")]))
    for root in trees.values():
        cases += [("devices", ["devices", "--sysfs-root", str(root)]),
                  ("run", ["run", "--sysfs-root", str(root), "--socket", str(folder / "s.sock"),
                           "--state-file", str(folder / "st.json")])]
    for listen in (f"127.0.0.1:{ports['taken']}", "[::1]:9", "localhost:65535", "10.0.0.1:9"):
        config = folder / f"metrics-{len(cases)}.yaml"
        config.write_text(json.dumps({"metrics": {"enabled": True, "listen": listen},
                                      "policy": {"name": "performance"}}))
        cases += [("check-config", ["check-config", "--insecure-config", str(config)]),
                  ("run", ["run", "--config", str(config), "--insecure-config", "--sysfs-root",
                           tree, "--socket", str(folder / "s.sock"),
                           "--state-file", str(folder / "st.json")])]
    return cases


def fuzz_cli(quick: bool, rng: random.Random, folder: Path) -> dict[str, Any]:
    """Every command with odd arguments and files (a sample of them with ``quick``)."""
    started = time.monotonic()
    tally = Outcomes()
    files = special_files(folder)
    sweep = folder / "sweep.csv"
    sweep.write_text("unit,freq_mhz,time_ms,power_w\n" + "".join(
        f"{u},{f},{1 + u + f / 1000:.3f},{10 + f / 100:g}\n" for u in range(4)
        for f in (300, 600, 900)))
    taken_port = socket.socket()
    taken_port.bind(("127.0.0.1", 0))
    taken_port.listen()
    taken_sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    taken_sock.bind(str(folder / "taken.sock"))
    try:
        with fixture_tree(folder, "sys-ok") as ok, \
             fixture_tree(folder, "sys-nolevels", "") as none, \
             fixture_tree(folder, "sys-onelevel", "400000000") as one, \
             fixture_tree(folder, "sys-junk", "x y -1 nan") as junk:
            trees = {"ok": ok, "no_levels": none, "one_level": one, "junk_levels": junk}
            cases = _cli_cases(folder, files, trees, {"taken": taken_port.getsockname()[1]},
                               sweep)
            if quick:
                cases = rng.sample(cases, QUICK_CASES)
            for command, args in cases:
                tally.add(f"ran_{command}")
                ran = run_govd(args, folder, RUN_FOR_S if command == "run" else None)
                judge(tally, command, args, ran)
                if command == "run":  # a run that started restored its device, or must have
                    _check_restored(tally, trees, args, ran)
    finally:
        taken_port.close()
        taken_sock.close()
    return tally.result(started)


def _check_restored(tally: Outcomes, trees: dict[str, Path], args: list[str],
                    ran: dict[str, Any]) -> None:
    """Every fixture device is as found (`FOUND_GOVERNOR`) after a run, however it ended."""
    for root in trees.values():
        governor = root / f"devices/platform/{GPU}/devfreq/{GPU}/governor"
        found = governor.read_text().strip() if governor.exists() else "gone"
        if found != FOUND_GOVERNOR:
            tally.crash("run: not restored", f"$ govd {' '.join(args)}\n{ran['output']}\n"
                        f"{governor}: {found}")
            governor.write_text(FOUND_GOVERNOR)  # the next case starts from the same state


SECTIONS: dict[str, Callable[[int, random.Random, Path, bool], dict[str, Any]]] = {
    "state_files": fuzz_state_files,
    "status_files": fuzz_status_files,
}
