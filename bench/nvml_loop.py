"""govd's whole loop on a real NVIDIA GPU (root, torch with CUDA): sweep a real training job with
`govd measure`, then run the same job three ways and compare energy per step and step time.

    sudo PYTHONPATH=. python3 bench/nvml_loop.py [--every 8] [--run-s 40] [--phase-s 5]

1. `govd measure --frames` sweeps every ``--every``-th graphics clock (and the lowest and
   highest) under each work of `bench/gpu_work.py` (``train``: transformer training steps,
   ``stream``: memory-bound steps), writing ``sweep-<gpu>-<work>.csv``.
2. From the two sweeps together, `govd.eval.reference.static_reference_level` picks the one
   fixed clock a user would pin for this job under a 10 % slowdown target.
3. The ``phased`` job (the two works alternating every ``--phase-s`` s) then runs ``--run-s``
   seconds each: at the driver's own clocks (``default``), at that fixed clock (``fixed``), and
   under ``govd run`` with the energy policy and ``max_slowdown: 0.1`` for the job, steps sent
   to govd's frame socket (``govd``; its trace is recorded). ``--policy NAME`` (repeated) runs
   the daemon once per named policy instead: ``energy`` is the run called ``govd``, another name
   the run ``govd-NAME``. A design the daemon does not ship by name (``energy-model``: the
   energy policy without its memory) is offered to the daemon as a plugin would be, through an
   entry point written into ``--work-dir``.

``--rounds N`` sweeps each work N times up and down (`govd measure --rounds`);
``--sweeps-only`` stops after the sweeps (``nvml-sweeps-<gpu>.json``: their files and the fixed
clock they give).

Writes ``nvml-loop-<gpu>.json`` (and the sweeps and the trace) into ``--out``: per run and work,
steps, median step time and energy per step from the NVML energy counter, and govd's slowdown
and energy against ``default``. Every device is restored on every way out (govd's own custody
for `govd measure` and `govd run`: the fixed clock too is `govd run` with the fixed policy; the
H200 runs of 26 Nov set it through `NvmlDevice` directly). Exits 0 with a
message when there is no NVIDIA GPU, no root or no CUDA torch.
"""

from __future__ import annotations

import argparse
import datetime
import importlib.util
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np

from govd.device.nvml import NvmlDevice, discover_nvml
from govd.eval.reference import static_reference_level
from govd.formats.sweep import SweepTable, read_sweep
from govd.target import Target

REPO = Path(__file__).resolve().parent.parent
SLOWDOWN = 0.10
WORKS = ("train", "stream")
READY_WAIT_S = 300.0
"""govd compiles its kernels before READY where no ahead-of-time build is installed."""
RESEARCH = {"energy-model": "govd.policy.energy:EnergyPolicy"}
"""Designs the daemon does not ship by name, run here as a third party's policy would be:
``energy-model`` is the energy policy without its memory (`memory: false`), on the model alone."""
_EXTRA_PATH: list[str] = []
NEEDED = ("pydantic", "yaml", "numba")
"""What `govd measure` and `govd run` import beyond what this script does: checked before the
GPU is touched (an H200's image once lacked pydantic, and the loop failed only at its first
sweep, after torch had started)."""


def _slug(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")


def _env() -> dict[str, str]:
    path = os.pathsep.join(p for p in (str(REPO), *_EXTRA_PATH, os.environ.get("PYTHONPATH"))
                           if p)
    return {**os.environ, "PYTHONPATH": path, "PYTHONUNBUFFERED": "1"}


PREWARM = """
import sys
from govd.conf.load import load_config
from govd.from_config import governor_from_config, warm_up
from govd.target import Target
config = load_config(sys.argv[1], allow_insecure=True)
levels = [float(x) for x in sys.argv[2].split(',')]
warm_up(governor_from_config(config, levels), [Target(max_slowdown=0.1), Target(fps=60.0)])
"""


def _prewarm(config: Path, levels_mhz: np.ndarray) -> subprocess.Popen[str]:
    """Compile govd's kernels into numba's cache (NUMBA_CACHE_DIR) in the background while the
    sweeps run, where no ahead-of-time build matches this Python: `govd run` then loads them
    instead of compiling before READY."""
    return subprocess.Popen([sys.executable, "-c", PREWARM, str(config),
                             ",".join(f"{f:g}" for f in levels_mhz)], env=_env(), text=True)


DRY = False
"""--dry: bench/gpu_work.py sleeps instead of using the GPU (the plumbing against a fake NVML)."""


def _start_work(work: str, seconds: float, phase_s: float, sock: Path | None,
                stats: Path | None) -> subprocess.Popen[str]:
    """Start bench/gpu_work.py."""
    cmd = [sys.executable, str(REPO / "bench" / "gpu_work.py"), "--work", work,
           "--duration-s", str(seconds), "--phase-s", str(phase_s)] + (["--dry"] if DRY else [])
    cmd += ["--socket", str(sock)] if sock else []
    cmd += ["--stats", str(stats)] if stats else []
    return subprocess.Popen(cmd, env=_env(), text=True)


def _missing(names: tuple[str, ...] = NEEDED) -> list[str]:
    """The modules among ``names`` this Python cannot import."""
    return [name for name in names if importlib.util.find_spec(name) is None]


def _offer_research(folder: Path, names: list[str]) -> None:
    """Make the research designs among ``names`` selectable by the daemon: an entry point in
    govd's policy group (a distribution's metadata in ``folder``, put on the children's path)."""
    wanted = {name: RESEARCH[name] for name in names if name in RESEARCH}
    if not wanted:
        return
    dist = folder / "entry-points" / "govd_bench_research-0.dist-info"
    dist.mkdir(parents=True, exist_ok=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: govd-bench-research\n"
                                   "Version: 0\n")
    (dist / "entry_points.txt").write_text(
        "[govd.policies]\n" + "".join(f"{n} = {t}\n" for n, t in wanted.items()))
    _EXTRA_PATH.append(str(dist.parent))


def _kind(policy: str) -> str:
    return "govd" if policy == "energy" else f"govd-{policy}"


def _config(folder: Path, counters: list[str], fixed_mhz: float | None = None,
            policy_name: str = "energy") -> Path:
    """The daemon's configuration: the policy ``policy_name``, or the one clock ``fixed_mhz``
    (MHz) with the fixed policy."""
    path = folder / (f"{_kind(policy_name)}.yaml" if fixed_mhz is None else "govd-fixed.yaml")
    policy = (f"{{name: {policy_name}, params: {{}}}}" if fixed_mhz is None
              else f"{{name: fixed, params: {{freq_mhz: {fixed_mhz:g}}}}}")
    path.write_text(f"""devices:
  - backend: nvml
    memory_clock: "off"
policy: {policy}
target: {{max_slowdown: {SLOWDOWN}}}
apps: {{train: {{max_slowdown: {SLOWDOWN}}}}}
period_ms: 50
model: {{counters: {json.dumps(counters)}}}
frames:
  source: socket
  socket: {{path: {folder / 'frames.sock'}, group: null}}
idle: {{enabled: false}}
logging: {{level: info, summary_interval_s: 10}}
state_file: {folder / 'state.json'}
""")
    path.chmod(0o600)
    return path


def sweep(work: str, device: NvmlDevice, folder: Path, out: Path, every: int,
          frames: int, config: Path, rounds: int = 1, level_s: float = 2.0
          ) -> tuple[Path, float]:
    """`govd measure` under one work; the sweep table's path and the wall time it took."""
    sock = folder / f"measure-{work}.sock"
    table = out / f"sweep-{_slug(device.product)}-{work}.csv"
    worker = _start_work(work, 3600, 3600, sock, None)
    try:
        time.sleep(2 if DRY else 20)  # torch's start and first steps, before govd listens
        start = time.monotonic()
        subprocess.run([sys.executable, "-m", "govd", "measure", "--device", device.name,
                        "--frames", str(sock), "--frames-per-level", str(frames),
                        "--every", str(every), "--settle-s", "0.3", "--idle-s", "1",
                        "--rounds", str(rounds), "--level-s", f"{level_s:g}",
                        "--config", str(config),
                        "-o", str(table)], env=_env(), check=True, timeout=300)
        return table, time.monotonic() - start
    finally:
        worker.terminate()
        worker.wait(30)


def _joined(tables: list[SweepTable]) -> SweepTable:
    """The units of several sweeps of one device over the same levels, as one table."""
    first = tables[0]
    for other in tables[1:]:
        if not np.array_equal(other.levels_mhz, first.levels_mhz):
            raise SystemExit("nvml_loop: the sweeps cover different levels")
    counters = {name: np.concatenate([t.counters[name] for t in tables])
                for name in first.counters if all(name in t.counters for t in tables)}
    return SweepTable(levels_mhz=first.levels_mhz,
                      time_ms=np.concatenate([t.time_ms for t in tables]),
                      power_w=np.concatenate([t.power_w for t in tables]),
                      counters=counters, mem_levels_mhz=first.mem_levels_mhz, meta=first.meta)


def _wait_ready(notify: socket.socket, daemon: subprocess.Popen[str]) -> float:
    start = time.monotonic()
    notify.settimeout(1.0)
    while time.monotonic() - start < READY_WAIT_S:
        if daemon.poll() is not None:
            raise SystemExit(f"nvml_loop: govd run exited {daemon.returncode} before READY")
        try:
            if b"READY=1" in notify.recv(4096):
                return time.monotonic() - start
        except TimeoutError:
            continue
    raise SystemExit("nvml_loop: govd run was not READY in time")


def live(kind: str, device: NvmlDevice, folder: Path, out: Path, run_s: float,
         phase_s: float, fixed_mhz: float | None = None) -> dict[str, Any]:
    """Run the phased job once: 'default' (no govd), 'fixed' (`govd run` with the fixed
    policy at fixed_mhz: the clock goes through govd's custody too) or 'govd' / 'govd-NAME'
    (the energy policy or policy NAME, its configuration in ``folder/<kind>.yaml``, steps sent
    to its socket, the run recorded)."""
    stats = folder / f"stats-{kind}.json"
    result: dict[str, Any] = {}
    daemon = notify = log = None
    sock = None
    try:
        if kind != "default":
            notify_path = folder / "notify.sock"
            notify_path.unlink(missing_ok=True)
            notify = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
            notify.bind(str(notify_path))
            governed = kind.startswith("govd")
            config = (folder / f"{kind}.yaml" if governed
                      else _config(folder, [], fixed_mhz or 0.0))
            record = (["--record", str(out / f"trace-{_slug(device.product)}-{kind}.csv")]
                      if governed else [])
            # govd's own lines (its journal summaries: the saving it estimates) kept beside
            # the trace, for the governed runs
            log = (out / f"log-{_slug(device.product)}-{kind}.txt").open("w") if governed \
                else None
            daemon = subprocess.Popen(
                [sys.executable, "-m", "govd", "run", "--config", str(config), *record],
                env={**_env(), "NOTIFY_SOCKET": str(notify_path)}, text=True, stderr=log)
            result["ready_after_s"] = round(_wait_ready(notify, daemon), 1)
            sock = folder / "frames.sock" if governed else None
        worker = _start_work("phased", run_s, phase_s, sock, stats)
        worker.wait(run_s + 120)
        if worker.returncode != 0:
            raise SystemExit(f"nvml_loop: gpu_work.py exited {worker.returncode}")
    finally:
        if daemon is not None:
            daemon.send_signal(signal.SIGTERM)
            result["govd_exit"] = daemon.wait(60)
            if log is not None:
                log.close()
        if notify is not None:
            notify.close()
    result.update(json.loads(stats.read_text()))
    return result


def _per_work(run: dict[str, Any]) -> dict[str, dict[str, float]]:
    """Steps, median step time (ms) and energy per step (J) per work over a run's segments."""
    out: dict[str, dict[str, float]] = {}
    for work in WORKS:
        segments = [s for s in run["segments"] if s["work"] == work and s.get("steps")]
        steps = sum(s["steps"] for s in segments)
        if not steps:
            continue
        out[work] = {"steps": steps,
                     "median_ms": float(np.median([s["median_ms"] for s in segments])),
                     "mean_ms": sum(s["busy_s"] for s in segments) / steps * 1000,
                     "j_per_step": sum(s["energy_j"] for s in segments) / steps}
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--every", type=int, default=8)
    parser.add_argument("--frames", type=int, default=25, help="frames per swept level")
    parser.add_argument("--run-s", type=float, default=40.0)
    parser.add_argument("--phase-s", type=float, default=5.0)
    parser.add_argument("--out", type=Path, default=REPO / "bench" / "results")
    parser.add_argument("--work-dir", type=Path, default=Path("/tmp/govd-nvml-loop"))
    parser.add_argument("--policy", action="append", dest="policies", metavar="NAME",
                        help="the daemon's policy for a governed run (repeat for several; "
                        "default energy)")
    parser.add_argument("--rounds", type=int, default=1,
                        help="`govd measure --rounds`: sweeps up then down in turn")
    parser.add_argument("--level-s", type=float, default=2.0,
                        help="`govd measure --level-s`: seconds read per level and round")
    parser.add_argument("--sweeps-only", action="store_true",
                        help="stop after the two sweeps and the fixed clock they give")
    parser.add_argument("--dry", action="store_true",
                        help="no GPU work (sleeps): checks the plumbing against a fake NVML")
    args = parser.parse_args()
    policies = list(dict.fromkeys(args.policies or ["energy"]))
    missing = _missing()
    if missing:
        print(f"nvml_loop: govd needs {', '.join(missing)} in this Python ({sys.executable}): "
              "install it or carry its wheels (.whl, bench/README.md); nothing run",
              file=sys.stderr)
        return 1
    global DRY
    DRY = args.dry
    try:
        import torch
        cuda = DRY or torch.cuda.is_available()
    except ImportError:
        cuda = DRY
    devices = [d for d in discover_nvml() if d.controllable().ok]
    if not devices or os.geteuid() != 0 or not cuda:
        print("nvml_loop: needs a controllable NVIDIA GPU, root and torch with CUDA; nothing run")
        return 0
    device = devices[0]
    args.work_dir.mkdir(parents=True, exist_ok=True)
    args.out.mkdir(parents=True, exist_ok=True)
    device.read()  # GPM's metrics need two samples: the first read has none of them
    time.sleep(0.2)
    counters = sorted(device.read().counters)
    _offer_research(args.work_dir, policies)
    configs = [_config(args.work_dir, counters, policy_name=name) for name in policies]
    prewarm = None if args.sweeps_only else _prewarm(configs[0], np.unique(device.levels_mhz))
    report: dict[str, Any] = {
        "gpu": device.product, "levels": int(device.levels_mhz.size),
        "levels_mhz": [float(device.levels_mhz.min()), float(device.levels_mhz.max())],
        "counters": counters, "slowdown_target": SLOWDOWN, "policies": policies,
        "measured_at": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "command": "PYTHONPATH=. python3 bench/nvml_loop.py " + " ".join(sys.argv[1:]),
    }
    tables = []
    for work in WORKS:
        path, took = sweep(work, device, args.work_dir, args.out, args.every, args.frames,
                           configs[0], args.rounds, args.level_s)
        tables.append(read_sweep(path))
        report[f"sweep_{work}"] = {"file": path.name, "wall_s": round(took, 1)}
    if prewarm is not None:
        report["prewarm_exit"] = prewarm.wait(600)
    joined = _joined(tables)
    target = Target(max_slowdown=SLOWDOWN)
    idle_w = joined.idle_power_w
    idle_w = 0.0 if np.isnan(idle_w) else idle_w
    static = static_reference_level(joined, target, idle_w)
    fixed_mhz = float(joined.levels_mhz[static])
    report["fixed_mhz"] = fixed_mhz
    if args.sweeps_only:
        out = args.out / f"nvml-sweeps-{_slug(device.product)}.json"
        out.write_text(json.dumps(report, indent=1) + "\n")
        print(f"nvml_loop: wrote {out} (the sweeps only)")
        return 0
    runs: dict[str, Any] = {}
    kinds = ["default", "fixed", *(_kind(name) for name in policies)]
    for kind in kinds:
        try:
            runs[kind] = live(kind, device, args.work_dir, args.out, args.run_s, args.phase_s,
                              fixed_mhz)
        except (Exception, SystemExit) as exc:  # the other runs still tell something
            runs[kind] = {"error": f"{type(exc).__name__}: {exc}"}
            print(f"nvml_loop: the {kind} run failed: {exc}", file=sys.stderr)
    report["runs"] = runs
    per = {kind: _per_work(run) for kind, run in runs.items() if "error" not in run}
    report["per_work"] = per
    base = per.get("default", {})
    report["against_default"] = {
        kind: {work: {"slowdown": per[kind][work]["median_ms"] / base[work]["median_ms"] - 1,
                      "energy_ratio": per[kind][work]["j_per_step"] / base[work]["j_per_step"]}
               for work in WORKS if work in per[kind] and work in base}
        for kind in kinds[1:] if kind in per and "default" in per}
    out = args.out / f"nvml-loop-{_slug(device.product)}.json"
    out.write_text(json.dumps(report, indent=1) + "\n")
    print(json.dumps(report["against_default"], indent=1))
    print(f"nvml_loop: wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
