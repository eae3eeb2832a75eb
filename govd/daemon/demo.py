"""``govd run --sim``: the real daemon against the built-in simulated GPU, scored against the
kernel's governors.

Three simulated GPUs run as separate processes (`python -m govd.sim.live`), the same scenario,
seed and duration: one keeps its devfreq tree in a temporary folder and sends its frames to the
daemon's socket; the twins are left under the kernel's ``performance`` governor (the one that
meets the target: what govd's saving is measured against) and ``simple_ondemand`` (the
default, which saves energy by missing deadlines), with nobody listening.
The daemon governs the first exactly as it governs hardware (discovery under the tree's root,
the ``devfreq`` backend, the ``socket`` source, the state file), prints one status line per wall
second, and when the simulated run ends both summaries are compared.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from govd.cli import UsageError
from govd.conf.schema import Config, TargetConfig

DEFAULT_DURATION_S = 600.0
SIM_DEVICE = "govd-sim0"
_TREE_READY = f"class/devfreq/{SIM_DEVICE}/device/hwmon/hwmon0/power1_average"
START_TIMEOUT_S = 30.0
TWINS = {"performance": "performance", "ondemand": "simple_ondemand"}
"""The twins: name -> the kernel devfreq governor each runs under."""


def _start_sim(root: Path, socket: Path, args: argparse.Namespace, duration_s: float,
               log_path: Path) -> subprocess.Popen[bytes]:
    command = [sys.executable, "-m", "govd.sim.live", "--root", str(root), "--socket",
               str(socket), "--scenario", args.scenario, "--speed", str(args.speed),
               "--duration-s", str(duration_s)]
    with open(log_path, "wb") as out:
        return subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT)


def _wait_for_tree(root: Path, sim: subprocess.Popen[bytes], log_path: Path) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while not (root / _TREE_READY).exists():
        if sim.poll() is not None:
            raise UsageError(f"the simulated GPU failed to start:\n{log_path.read_text()}")
        if time.monotonic() > deadline:
            raise UsageError(f"the simulated GPU did not lay out {root} in {START_TIMEOUT_S} s")
        time.sleep(0.02)


def _warm_up(config: Config) -> None:
    """Load the compiled model kernels before the simulated clock starts, so the daemon takes
    the device at once and the comparison with ondemand starts from the same instant: a
    governor as the configuration builds it, stepped under each target it sets (each kind of
    target may put another model form in force)."""
    from govd.from_config import governor_from_config
    from govd.governor import Sample

    governor = governor_from_config(config, [100.0, 200.0, 300.0])
    for target in (config.target, *config.apps.values()):
        governor.target = target.to_target()
        governor.step(Sample(freq_mhz=300.0, frame_time_ms=5.0, frame_count=1))


def _demo_config(args: argparse.Namespace, tmp: Path) -> tuple[Config, Path | None]:
    from govd.daemon.run import read_config

    config, path = read_config(args) if args.config is not None else (Config(), None)
    frames = config.frames.model_copy(update={
        "source": "socket",
        "socket": config.frames.socket.model_copy(
            update={"path": str(tmp / "frames.sock"), "group": None}),
    })
    apps = dict(config.apps)
    if args.scenario == "gpgpu" and args.scenario not in apps:
        apps["gpgpu"] = TargetConfig(max_slowdown=0.1)  # throughput work: no frame deadline
    update: dict[str, Any] = {"frames": frames, "state_file": str(tmp / "state.json"),
                              "apps": apps}
    if path is None:
        # One status line per second says it all; the journal summary would repeat it.
        update["logging"] = config.logging.model_copy(update={"summary_interval_s": 0.0})
    return config.model_copy(update=update), path


def _status_printer(start_s: list[float]) -> Any:
    from govd.daemon.status import device_line

    def show(status: dict[str, Any]) -> None:
        if not start_s:
            start_s.append(status["loop_time_s"])
        sim_s = status["loop_time_s"] - start_s[0]
        for device in status["devices"]:
            print(f"[{sim_s:7.1f} s] {device_line(device)}", flush=True)

    return show


def _summary(path: Path) -> dict[str, Any] | None:
    try:
        summary: dict[str, Any] = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return summary


def _fps(summary: dict[str, Any]) -> float:
    return summary["frames"] / summary["sim_s"] if summary["sim_s"] else 0.0


def _missed_pct(summary: dict[str, Any]) -> float:
    return 100.0 * float(summary["deadline_misses"]) / max(int(summary["frames"]), 1)


def report(governed: dict[str, Any], twins: dict[str, dict[str, Any] | None]) -> str:
    """The final summary: energy, FPS and missed deadlines of govd beside each twin's (by the
    kernel governor that ran it), and what govd saved against each."""
    lines = [f"govd on the simulated GPU ({governed['scenario']}, levels {governed['levels']}, "
             f"seed {governed['seed']}, {governed['sim_s']:.0f} s simulated):"]
    runs = {"govd": governed} | {name: s for name, s in twins.items() if s is not None}
    missing = [name for name, s in twins.items() if s is None]

    def row(label: str, cell: Any, unit: str = "") -> str:
        return f"  {label:<17}" + "".join(f"{cell(s):>13}" for s in runs.values()) + unit

    lines += [
        f"  {'':17}" + "".join(f"{name:>13}" for name in runs),
        row("energy used", lambda s: f"{s['energy_j']:.1f}", "  J"),
        row("mean power", lambda s: f"{s['mean_power_w']:.3f}", "  W"),
        row("FPS", lambda s: f"{_fps(s):.1f}"),
        row("missed deadlines", lambda s: f"{_missed_pct(s):.1f} %"),
    ]
    e = governed["energy_j"]
    for name, s in runs.items():
        if name != "govd" and s["energy_j"] > 0:
            saving = 100.0 * (1.0 - e / s["energy_j"])
            # in words: a signed "+28 % energy" read as govd using more
            spent = f"{saving:.1f} % less" if saving >= 0 else f"{-saving:.1f} % more"
            lines.append(f"  govd against {name}: {spent} energy, missed deadlines "
                         f"{_missed_pct(governed):.1f} % against {_missed_pct(s):.1f} %")
        if name != "govd" and abs(governed["sim_s"] - s["sim_s"]) > 1.0:
            lines.append(f"  ({name} ran {s['sim_s']:.0f} s against {governed['sim_s']:.0f} s; "
                         "interrupted?)")
    if missing:
        lines.append(f"  (twin run missing: {', '.join(missing)})")
    return "\n".join(lines)


def run_demo(args: argparse.Namespace) -> int:
    """Run the simulated GPU and its ondemand twin, govern the first, print the comparison."""
    from govd.daemon.daemon import Daemon, Options
    from govd.daemon.loop import Clock
    from govd.daemon.status import status_path
    from govd.sim.gpu import SCENARIOS
    from govd.telemetry.log import setup_logging

    if args.scenario not in SCENARIOS:
        raise UsageError(f"unknown scenario {args.scenario!r}; known: {', '.join(SCENARIOS)}")
    duration_s = args.duration_s or DEFAULT_DURATION_S
    tmp = Path(tempfile.mkdtemp(prefix="govd-sim-"))
    sims: list[subprocess.Popen[bytes]] = []
    try:
        config, path = _demo_config(args, tmp)
        setup_logging(config.logging.level)
        _warm_up(config)
        governed_root = tmp / "governed"
        twin_roots = {name: tmp / name for name in TWINS}
        print(f"govd: simulated GPU under {governed_root}, {args.scenario}, "
              f"{duration_s:g} s at {args.speed:g}x (~{duration_s / args.speed:.0f} s); "
              f"twins under {', '.join(TWINS)} beside it", flush=True)
        sims.append(_start_sim(governed_root, tmp / "frames.sock", args, duration_s,
                               tmp / "governed.log"))
        for name, root in twin_roots.items():
            sims.append(_start_sim(root, tmp / "nobody.sock", args, duration_s,
                                   tmp / f"{name}.log"))
        _wait_for_tree(governed_root, sims[0], tmp / "governed.log")
        for (name, root), sim in zip(twin_roots.items(), sims[1:], strict=True):
            _wait_for_tree(root, sim, tmp / f"{name}.log")
            # what an administrator does: echo GOVERNOR > .../governor
            (root / f"class/devfreq/{SIM_DEVICE}/governor").write_text(TWINS[name] + "\n")
        options = Options(
            config=config, config_path=path, insecure_config=args.insecure_config,
            sysfs_root=governed_root, record=args.record, speed=args.speed,
            on_status=_status_printer([]), should_stop=lambda: sims[0].poll() is not None,
            status_file=status_path(tmp / "state.json"), status_every_s=1.0,  # a line a second
        )
        assert Clock(args.speed).speed == args.speed
        daemon = Daemon(options)
        status = daemon.run()
        # Stopped by a signal while the simulated GPU runs: its twin is not waited for either
        # (with --duration-s inf that wait would never end).
        finished = sims[0].poll() is not None
        for sim in sims if finished else []:
            with contextlib.suppress(subprocess.TimeoutExpired):
                sim.wait(timeout=5.0 + 2.0 * duration_s / args.speed)
        for sim in sims:
            if sim.poll() is None:
                sim.terminate()  # an interrupted demo: the sim writes what it has
                sim.wait(timeout=30.0)
        governed = _summary(governed_root / "summary.json")
        if governed is None:
            print("govd: the simulated GPU wrote no summary", file=sys.stderr)
            return 1
        print(report(governed, {name: _summary(root / "summary.json")
                                for name, root in twin_roots.items()}))
        loop = daemon.stats.summary()
        print(f"  daemon: {loop['ticks']} ticks, CPU {loop['cpu_mean_us'] or 0:.0f} µs/tick, "
              f"jitter p99 {loop['jitter_p99_us'] or 0:.0f} µs, "
              f"{daemon._scheduler.overruns if daemon._scheduler else 0} overruns, "
              f"device restored: {'yes' if status == 0 else 'NO'}")
        return status
    finally:
        for sim in sims:
            if sim.poll() is None:
                sim.kill()
                sim.wait()
        shutil.rmtree(tmp, ignore_errors=True)
