"""How long the README's test command takes: `make test` (ruff, then the whole pytest suite),
timed from the outside, with the CPU time it used and how busy the machine was meanwhile.
Appends one record to bench/results/suite.json.

    python3 bench/bench_suite.py                 # `make test` in this checkout
    python3 bench/bench_suite.py --clone         # in a fresh clone of HEAD: `make setup` timed
                                                 # apart, then `make test` (what CI runs)
    python3 bench/bench_suite.py --per-test      # also each test's CPU time (bench/suite_cpu.py)
    python3 bench/bench_suite.py --label quiet --runs 3

Standard library only, so any python3 runs it; `make test` installs what the suite needs.

What a record holds (times in s): `wall_s` of `make test`; `cpu_s`, the user + system CPU time
of `make test` and every process it waited for (containers included: they are reaped when
halted); `others_cpu_s`, the CPU time the rest of the machine used meanwhile (all CPUs' busy
time from /proc/stat less ours: near 0 on a quiet machine); `load_before`/`load_after`
(/proc/loadavg's 1-minute figure); the test counts from pytest's JUnit XML; `returncode`.
Wall time depends on load: compare runs only with similar `others_cpu_s`. CPU time depends far
less on it (caches and frequency still do a little).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
OUT = REPO / "bench" / "results" / "suite.json"
TOP_TESTS = 40
"""How many of the most expensive tests (by CPU time) a --per-test record lists."""


def busy_jiffies() -> tuple[int, int]:
    """(busy, total) clock ticks of all CPUs so far, from /proc/stat's first line."""
    fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = fields[3] + fields[4]  # idle + iowait
    total = sum(fields[:8])  # guest time is already inside user
    return total - idle, total


def load_1min() -> float:
    """The 1-minute load average."""
    return float(Path("/proc/loadavg").read_text().split()[0])


def timed(command: list[str], cwd: Path, env: dict[str, str]) -> dict[str, Any]:
    """Run ``command`` and measure it: wall time, its (and its reaped children's) CPU time, the
    CPU time the rest of the machine used meanwhile, the load before and after."""
    ticks_s = 1.0 / os.sysconf("SC_CLK_TCK")
    load_before = load_1min()
    busy_before, _ = busy_jiffies()
    start_s = time.monotonic()
    proc = subprocess.Popen(command, cwd=cwd, env=env)
    _, status, usage = os.wait4(proc.pid, 0)
    wall_s = time.monotonic() - start_s
    busy_after, _ = busy_jiffies()
    cpu_s = usage.ru_utime + usage.ru_stime
    return {"command": " ".join(command), "returncode": os.waitstatus_to_exitcode(status),
            "wall_s": round(wall_s, 2), "cpu_s": round(cpu_s, 2),
            "user_s": round(usage.ru_utime, 2), "sys_s": round(usage.ru_stime, 2),
            "others_cpu_s": round(max(0.0, (busy_after - busy_before) * ticks_s - cpu_s), 1),
            "load_before": load_before, "load_after": load_1min()}


def junit_counts(path: Path) -> dict[str, Any]:
    """Tests, failures, errors, skipped from pytest's JUnit XML (empty when it is missing)."""
    if not path.exists():
        return {}
    counts = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    pytest_s = 0.0
    for suite in ET.parse(path).getroot().iter("testsuite"):
        for key in counts:
            counts[key] += int(suite.get(key, 0))
        pytest_s = max(pytest_s, float(suite.get("time", 0)))
    return {**counts, "passed": counts["tests"] - counts["failures"] - counts["errors"]
            - counts["skipped"], "pytest_s": round(pytest_s, 2)}


def per_test(base: Path) -> dict[str, Any]:
    """The CPU time of each test (bench/suite_cpu.py's logs, one per worker): the total and the
    most expensive ones."""
    records = []
    for log in sorted(base.parent.glob(base.name + ".*")):
        records += [json.loads(line) for line in log.read_text().splitlines() if line]
    records.sort(key=lambda r: r["cpu_s"], reverse=True)
    by_worker: dict[str, float] = {}
    for r in records:
        by_worker[r["worker"]] = by_worker.get(r["worker"], 0.0) + r["wall_s"]
    return {"tests_cpu_s": round(sum(r["cpu_s"] for r in records), 1),
            "busy_wall_s_by_worker": {k: round(v, 1) for k, v in sorted(by_worker.items())},
            "top_cpu": records[:TOP_TESTS]}


def clone(into: Path) -> Path:
    """A fresh clone of this checkout's HEAD under ``into``, with the shared data folder beside
    it as the tests look for it (``REPO.parent / "shared"``)."""
    into.chmod(0o755)  # tests run govd as nobody from the clone's venv: it must be readable
    repo = into / "govd"
    subprocess.run(["git", "clone", "-q", "--no-hardlinks", str(REPO), str(repo)], check=True)
    subprocess.run(["git", "-C", str(repo), "checkout", "-q",
                    subprocess.run(["git", "-C", str(REPO), "rev-parse", "HEAD"],
                                   capture_output=True, text=True, check=True).stdout.strip()],
                   check=True)
    shared = REPO.parent / "shared"
    if shared.exists():
        (into / "shared").symlink_to(shared)
    return repo


def one_run(repo: Path, args: argparse.Namespace, scratch: Path) -> dict[str, Any]:
    """Time `make setup` (with --clone) and `make test` in ``repo`` once."""
    junit = scratch / "junit.xml"
    cpu_log = scratch / "cpu.jsonl"
    addopts = [os.environ.get("PYTEST_ADDOPTS", ""), f"--junitxml={junit}"]
    env = {**os.environ}
    if args.per_test:
        addopts.append("-p bench.suite_cpu")
        env["GOVD_SUITE_CPU_LOG"] = str(cpu_log)
    env["PYTEST_ADDOPTS"] = " ".join(a for a in addopts if a)
    record: dict[str, Any] = {}
    if args.clone:
        record["setup"] = timed(["make", "setup"], repo, env)
    record["test"] = timed(["make", "test"], repo, env)
    record["counts"] = junit_counts(junit)
    if args.per_test:
        record["per_test"] = per_test(cpu_log)
    for path in [junit, *scratch.glob(cpu_log.name + ".*")]:
        path.unlink(missing_ok=True)
    return record


def main(argv: list[str] | None = None) -> int:
    """Parse the arguments, run, append the record(s); exit status 1 when a run failed."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clone", action="store_true",
                        help="run in a fresh clone of HEAD (make setup timed apart)")
    parser.add_argument("--per-test", action="store_true", help="record each test's CPU time")
    parser.add_argument("--runs", type=int, default=1, help="how many runs in a row")
    parser.add_argument("--label", default="", help="a name for the record(s)")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    commit = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"],
                            capture_output=True, text=True).stdout.strip()
    failed = False
    with tempfile.TemporaryDirectory(prefix="govd-bench-suite-") as tmp:
        scratch = Path(tmp)
        repo = clone(scratch) if args.clone else REPO
        for run in range(args.runs):
            record = {"label": args.label, "run": run + 1, "commit": commit,
                      "date": datetime.datetime.now().isoformat(timespec="seconds"),
                      "clone": args.clone, "machine": platform.machine(),
                      "cpus": os.cpu_count(), "python": platform.python_version(),
                      "pytest_addopts": os.environ.get("PYTEST_ADDOPTS", ""),
                      **one_run(repo, args, scratch)}
            failed |= record["test"]["returncode"] != 0
            records = json.loads(args.out.read_text()) if args.out.exists() else []
            records.append(record)
            args.out.parent.mkdir(parents=True, exist_ok=True)
            args.out.write_text(json.dumps(records, indent=1) + "\n")
            test, counts = record["test"], record["counts"]
            print(f"bench_suite: run {run + 1}: make test {test['wall_s']:.0f} s wall, "
                  f"{test['cpu_s']:.0f} s CPU (others {test['others_cpu_s']:.0f} s, load "
                  f"{test['load_before']} -> {test['load_after']}), "
                  f"{counts.get('tests', '?')} tests, {counts.get('failures', '?')} failed, "
                  f"rc {test['returncode']}", flush=True)
        if args.clone:
            shutil.rmtree(repo, ignore_errors=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
