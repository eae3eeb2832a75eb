"""``govd run --sim``: the real daemon against the built-in simulated GPU, scored against the
kernel's governors.

Three simulated GPUs run as separate processes (`python -m govd.sim.live`), the same scenario,
seed and duration: one keeps its devfreq tree in a temporary folder and sends its frames to the
daemon's socket (with ``--no-frames`` to nobody: what govd does when nothing reports frames);
the twins are left under the kernel's ``performance`` governor (the one that meets the target:
what govd's saving is measured against) and ``simple_ondemand`` (the default, which saves
energy by missing deadlines), with nobody listening. The daemon governs the first exactly as
it governs hardware (discovery under the tree's root, the ``devfreq`` backend, the ``socket``
source, the state file) but on the simulated GPU's own time, in lockstep with it
(`govd.sim.clock`); it prints one status line per wall second, and when the simulated run ends
govd is compared with each twin on the same work (`compare`).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from govd.conf.schema import Config, TargetConfig
from govd.errors import UsageError

DEFAULT_DURATION_S = 600.0
SIM_DEVICE = "govd-sim0"
_TREE_READY = f"class/devfreq/{SIM_DEVICE}/device/hwmon/hwmon0/power1_average"
START_TIMEOUT_S = 30.0
TWINS = {"performance": "performance", "ondemand": "simple_ondemand"}
"""The twins: name -> the kernel devfreq governor each runs under."""
SHARED_MEMORY = "/dev/shm"
"""The tmpfs every Linux system mounts (POSIX shared memory): the demo's folder when the user
has no runtime folder ($XDG_RUNTIME_DIR)."""


def scratch_parent() -> str | None:
    """Where the demo makes its temporary folder: None (``tempfile``'s choice) when the user set
    ``TMPDIR``; otherwise memory, ``$XDG_RUNTIME_DIR`` or else ``/dev/shm``, the first that is
    a folder this user may write to; otherwise None.

    Each simulated GPU replaces its sysfs files by rename every tick (the daemon its status file
    every second), and ext4 starts writing a file out when it is renamed over another
    (auto_da_alloc): a simulator at 10x used 10.3 s of CPU in 20 s on an ext4 /tmp (5.4 s of
    it the kernel's), 8.1 s on tmpfs (2.0 s)."""
    if os.environ.get("TMPDIR"):
        return None
    for folder in (os.environ.get("XDG_RUNTIME_DIR"), SHARED_MEMORY):
        if folder and os.path.isdir(folder) and os.access(folder, os.W_OK | os.X_OK):
            return folder
    return None


def _start_sim(root: Path, socket: Path, args: argparse.Namespace, duration_s: float,
               log_path: Path, lockstep: bool = False) -> subprocess.Popen[bytes]:
    command = [sys.executable, "-m", "govd.sim.live", "--root", str(root), "--socket",
               str(socket), "--scenario", args.scenario, "--speed", str(args.speed),
               "--duration-s", str(duration_s), *(["--lockstep"] if lockstep else [])]
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
    the device at once and the comparison with ondemand starts from the same instant."""
    from govd.from_config import governor_from_config, warm_up

    warm_up(governor_from_config(config, [100.0, 200.0, 300.0]),
            [t.to_target() for t in (config.target, *config.apps.values())])


def _demo_config(args: argparse.Namespace, config: Config, tmp: Path) -> Config:
    """``config`` as the demo runs it: frames from its socket, state in its folder."""
    frames = config.frames.model_copy(update={
        # busy time stays busy time; every other source is the demo's socket
        "source": "busy" if config.frames.source == "busy" else "socket",
        "socket": config.frames.socket.model_copy(
            update={"path": str(tmp / "frames.sock"), "group": None}),
    })
    apps = dict(config.apps)
    if args.scenario == "gpgpu" and args.scenario not in apps:
        apps["gpgpu"] = TargetConfig(max_slowdown=0.1)  # throughput work: no frame deadline
    update: dict[str, Any] = {"frames": frames, "state_file": str(tmp / "state.json"),
                              "apps": apps}
    if args.config is None:
        # One status line per second says it all; the journal summary would repeat it.
        update["logging"] = config.logging.model_copy(update={"summary_interval_s": 0.0})
    return config.model_copy(update=update)


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


def _last(summary: dict[str, Any]) -> tuple[float, int, float, float]:
    """(sim s, frames, energy J, busy s) when the run's last frame completed."""
    points = summary.get("progress") or [[summary["sim_s"], summary["frames"],
                                          summary["energy_j"], summary.get("busy_s", 0.0)]]
    t, n, e, b = points[-1]
    return float(t), int(n), float(e), float(b)


def compare(governed: dict[str, Any], twin: dict[str, Any]) -> dict[str, Any]:
    """govd's run against a twin's on equal work: the energy and time the twin took for the
    frames (units) govd completed, from the twin's progress records; where the twin completed
    fewer, per frame over the whole runs instead. ``saving``: share of the twin's energy govd
    did not use; ``slowdown``: how much longer govd took for that work (equal work only);
    ``missed``: each run's share of frames over the deadline (None without a frame rate)."""
    from govd.sim.live import work_at

    t_govd, n_govd, e_govd, _ = _last(governed)
    same = work_at(twin, n_govd) if n_govd else None
    if same is not None:
        t_twin, e_twin, _ = same
        saving = 1.0 - e_govd / e_twin if e_twin > 0 else math.nan
        slowdown = t_govd / t_twin - 1.0 if t_twin > 0 else math.nan
    else:
        _, n_twin, e_twin_all, _ = _last(twin)
        per_twin = e_twin_all / n_twin if n_twin else math.nan
        saving = 1.0 - (e_govd / n_govd) / per_twin if n_govd and per_twin > 0 else math.nan
        slowdown = math.nan
    return {"same_frames": n_govd, "equal_work": same is not None, "saving": saving,
            "slowdown": slowdown, "missed": _missed(governed), "twin_missed": _missed(twin)}


def _missed(summary: dict[str, Any]) -> float | None:
    if summary.get("target_fps") is None and "progress" in summary:
        return None  # throughput work: no deadline
    return float(summary["deadline_misses"]) / max(int(summary["frames"]), 1)


def _per_frame_mj(summary: dict[str, Any]) -> float:
    _, n, e, _ = _last(summary)
    return 1000.0 * e / n if n else math.nan


def _rate(summary: dict[str, Any]) -> float:
    return summary["frames"] / summary["sim_s"] if summary["sim_s"] else 0.0


def _pct(value: float | None) -> str:
    return "-" if value is None or not math.isfinite(value) else f"{100 * value:.1f} %"


def report(governed: dict[str, Any], twins: dict[str, dict[str, Any] | None],
           estimate: dict[str, Any] | None = None) -> str:
    """The final summary: per run (govd, then each twin by the kernel governor that ran it)
    energy, frames, energy per frame, rate and missed deadlines; govd against each twin on equal
    work (and for throughput work the slowdown); and govd's own estimate of its saving against
    the top clock (``estimate``: `govd.telemetry.savings.Savings.report`, what `govd status`
    shows) beside the one measured against the ``performance`` twin."""
    throughput = governed.get("target_fps") is None and "progress" in governed
    unit = "unit" if throughput else "frame"
    lines = [f"govd on the simulated GPU ({governed['scenario']}, levels {governed['levels']}, "
             f"seed {governed['seed']}, {governed['sim_s']:.0f} s simulated, "
             + ("throughput work" if throughput else
                f"{governed.get('target_fps') or 60:g} FPS target") + "):"]
    runs = {"govd": governed} | {name: s for name, s in twins.items() if s is not None}
    missing = [name for name, s in twins.items() if s is None]

    def row(label: str, cell: Any, unit: str = "") -> str:
        return f"  {label:<17}" + "".join(f"{cell(s):>13}" for s in runs.values()) + unit

    lines += [
        f"  {'':17}" + "".join(f"{name:>13}" for name in runs),
        row("energy used", lambda s: f"{s['energy_j']:.1f}", "  J"),
        row("mean power", lambda s: f"{s['mean_power_w']:.3f}", "  W"),
        row(f"{unit}s", lambda s: f"{s['frames']}"),
        row(f"energy per {unit}", lambda s: f"{_per_frame_mj(s):.2f}", "  mJ"),
        row(f"{unit}s/s" if throughput else "FPS", lambda s: f"{_rate(s):.1f}"),
    ]
    if not throughput:
        lines.append(row("missed deadlines", lambda s: _pct(_missed(s))))
    for name, twin in runs.items():
        if name == "govd":
            continue
        c = compare(governed, twin)
        saving = c["saving"]
        # in words: a signed "+28 % energy" read as govd using more
        spent = ("? energy" if not math.isfinite(saving) else
                 f"{100 * saving:.1f} % less energy" if saving >= 0 else
                 f"{-100 * saving:.1f} % more energy")
        how = (f"same work (the first {c['same_frames']} {unit}s)" if c["equal_work"]
               else f"per {unit}")
        cost = (f"{_pct(c['slowdown'])} slower" if throughput else
                f"missed deadlines {_pct(c['missed'])} against {_pct(c['twin_missed'])}")
        lines.append(f"  govd against {name}, {how}: {spent}, {cost}")
        if abs(governed["sim_s"] - twin["sim_s"]) > 1.0:
            lines.append(f"  ({name} ran {twin['sim_s']:.0f} s against {governed['sim_s']:.0f} s; "
                         "interrupted?)")
    if estimate is not None and estimate.get("saved_share") is not None:
        from govd.telemetry.savings import saving_words

        measured = twins.get("performance")
        against = ""
        if measured is not None:
            saving = compare(governed, measured)["saving"]
            against = f"; measured against the performance twin: {_pct(saving)}"
        lines.append(f"  govd's own estimate (govd status): {saving_words(estimate)}{against}")
    if missing:
        lines.append(f"  (twin run missing: {', '.join(missing)})")
    return "\n".join(lines)


def verdict(governed: dict[str, Any], twins: dict[str, dict[str, Any] | None],
            estimate: dict[str, Any] | None, speed: float) -> dict[str, Any]:
    """The demo's findings as JSON (`govd run --sim --report FILE`): each twin's comparison
    (`compare`) and govd's own estimate, with what ran."""
    return {
        "scenario": governed["scenario"], "levels": governed["levels"], "seed": governed["seed"],
        "speed": speed, "sim_s": governed["sim_s"], "frames": governed["frames"],
        "energy_j": governed["energy_j"], "target_fps": governed.get("target_fps"),
        "twins": {name: None if twin is None else
                  {"energy_j": twin["energy_j"], "frames": twin["frames"],
                   **_finite(compare(governed, twin))}
                  for name, twin in twins.items()},
        "estimate": estimate,
    }


def _finite(values: dict[str, Any]) -> dict[str, Any]:
    return {k: None if isinstance(v, float) and not math.isfinite(v) else v
            for k, v in values.items()}


def run_demo(args: argparse.Namespace, config: Config, path: Path | None) -> int:
    """Run the simulated GPU and its ondemand twin, govern the first, print the comparison.
    ``config`` is the one read from ``path`` (``--config``), or the defaults when there is none."""
    from govd.daemon.daemon import Daemon, Options
    from govd.daemon.status import status_path
    from govd.sim.clock import SimClock
    from govd.sim.gpu import SCENARIOS
    from govd.telemetry.log import setup_logging

    if args.scenario not in SCENARIOS:
        raise UsageError(f"unknown scenario {args.scenario!r}; known: {', '.join(SCENARIOS)}")
    duration_s = args.duration_s or DEFAULT_DURATION_S
    tmp = Path(tempfile.mkdtemp(prefix="govd-sim-", dir=scratch_parent()))
    sims: list[subprocess.Popen[bytes]] = []
    try:
        config = _demo_config(args, config, tmp)
        setup_logging(config.logging.level)
        _warm_up(config)
        governed_root = tmp / "governed"
        twin_roots = {name: tmp / name for name in TWINS}
        print(f"govd: simulated GPU under {governed_root}, {args.scenario}, "
              f"{duration_s:g} s at {args.speed:g}x (~{duration_s / args.speed:.0f} s); "
              f"twins under {', '.join(TWINS)} beside it", flush=True)
        # --no-frames: the application reports no frames (to a socket nobody reads)
        sends_to = tmp / ("nobody.sock" if args.no_frames else "frames.sock")
        sims.append(_start_sim(governed_root, sends_to, args, duration_s,
                               tmp / "governed.log", lockstep=True))
        for name, root in twin_roots.items():
            sims.append(_start_sim(root, tmp / "nobody.sock", args, duration_s,
                                   tmp / f"{name}.log"))
        _wait_for_tree(governed_root, sims[0], tmp / "governed.log")
        for (name, root), sim in zip(twin_roots.items(), sims[1:], strict=True):
            _wait_for_tree(root, sim, tmp / f"{name}.log")
            # what an administrator does: echo GOVERNOR > .../governor
            (root / f"class/devfreq/{SIM_DEVICE}/governor").write_text(TWINS[name] + "\n")
        # The daemon's loop runs on the simulated GPU's own time: on a loaded machine the sim
        # falls behind its nominal pace, and a daemon counting speed x wall time would not.
        clock = SimClock(governed_root, args.speed)
        options = Options(
            config=config, config_path=path, insecure_config=args.insecure_config,
            sysfs_root=governed_root, record=args.record, speed=args.speed, clock=clock,
            on_status=_status_printer([]), should_stop=lambda: sims[0].poll() is not None,
            status_file=status_path(tmp / "state.json"), status_every_s=1.0,  # a line a second
        )
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
        twins = {name: _summary(root / "summary.json") for name, root in twin_roots.items()}
        estimate = daemon.runners[0].savings.report() if daemon.runners else None
        print(report(governed, twins, estimate))
        if args.report is not None:
            args.report.write_text(json.dumps(verdict(governed, twins, estimate, args.speed),
                                              indent=1) + "\n")
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
