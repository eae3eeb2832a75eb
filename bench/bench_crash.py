"""Crashes: `govd run` killed with SIGKILL at random moments, then put right by `govd restore` or
by the next `govd run`, which restores the stale state first.

Each run lays out a fresh simulated devfreq GPU (`govd.sim.live.LiveGpu`, ticked every 50 ms by a
thread of this process, sending its frames to the daemon's socket) and gives it a non-default
state to be found (one of `FOUND_STATES`, in turn: other governors, narrowed bounds, a userspace
level). It starts `govd run` on it and kills it with SIGKILL:

- ``random``: at a uniformly random moment of its first ``--window-s`` seconds (mostly before
  READY: start-up, discovery, the state file, the first writes);
- ``state-file``: as soon as the state file appears (polled every 0.2 ms);
- ``mid-loop``: at a random moment of the first second after READY.

What the daemon had reached when it was killed (state file written, READY) is recorded as seen
just before the kill. Then, in turn, either `govd restore` (its exit status must be 0), or a new
`govd run` on the same state file: its own state file must hold what was found (it restored the
stale state before saving), and after SIGTERM the tree must be as found. In both cases every
governed file (governor, min_freq, max_freq, and userspace/set_freq when the governor found was
userspace) is compared with what was found, and no state file may be left.

Writes `bench/results/crash.json`.   python bench/bench_crash.py [--runs 200] [--seed 1]
"""

from __future__ import annotations

import argparse
import json
import random
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

from daemon_setup import (
    NotifyListener,
    env,
    governed_state,
    machine,
    restored_as_found,
    saved_as_found,
    scratch_dir,
    set_found_state,
    start_daemon,
    stop,
    write_result,
)

from govd.sim.live import TICK_MS, LiveGpu

FOUND_STATES = (
    {"governor": "performance", "min_freq": "244000000", "max_freq": "489000000"},
    {"governor": "userspace", "userspace/set_freq": "311000000", "min_freq": "200000000",
     "max_freq": "444000000"},
    {"governor": "powersave", "min_freq": "267000000", "max_freq": "511000000"},
    {"governor": "simple_ondemand", "min_freq": "355000000", "max_freq": "511000000"},
)
KILLS = ("random", "state-file", "mid-loop")
RECOVERIES = ("restore", "restart")
STATE_POLL_S = 0.0002
"""How often kill=state-file looks for the state file (s): READY follows it within ms."""


class TickingGpu:
    """A LiveGpu ticked in real time by a thread (the kernel and the GPU behind the tree)."""

    def __init__(self, root: Path, frames: Path, found: dict[str, str]) -> None:
        self.gpu = LiveGpu(root, str(frames), "game-medium")
        set_found_state(root, found)
        self.gpu.tick()
        self.gpu.tick()  # the level found is running and published
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(TICK_MS / 1000.0):
            self.gpu.tick()

    def close(self) -> None:
        """Stop ticking."""
        self._stop.set()
        self._thread.join()
        self.gpu.close()


def _ready_seen(notify: NotifyListener) -> bool:
    notify.sock.setblocking(False)
    seen = False
    try:
        while True:
            seen |= b"READY=1" in notify.sock.recv(4096)
    except BlockingIOError:
        pass
    return seen


def _kill(daemon: subprocess.Popen[bytes], kill: str, state_file: Path,
          notify: NotifyListener, rng: random.Random, window_s: float) -> dict[str, Any]:
    """Kill ``daemon`` at the moment ``kill`` asks for; returns what it had reached."""
    ready = False
    if kill == "random":
        time.sleep(rng.uniform(0.0, window_s))
    elif kill == "state-file":
        deadline = time.monotonic() + 120.0
        while not state_file.exists() and daemon.poll() is None and time.monotonic() < deadline:
            time.sleep(STATE_POLL_S)
    else:
        notify.wait_ready(daemon)
        ready = True
        time.sleep(rng.uniform(0.0, 1.0))
    had_state_file = state_file.exists()
    ready = ready or _ready_seen(notify)
    daemon.send_signal(signal.SIGKILL)
    daemon.wait()
    return {"had_state_file": had_state_file, "ready": ready,
            "exited_before_kill": daemon.returncode != -signal.SIGKILL}


def _restore(tmp: Path) -> list[str]:
    result = subprocess.run(
        [sys.executable, "-m", "govd", "restore", "--state-file", str(tmp / "state.json")],
        env=env(), capture_output=True, text=True, timeout=120,
    )
    return [] if result.returncode == 0 else [f"govd restore exited {result.returncode}: "
                                              f"{result.stderr.strip()}"]


def _restart(tmp: Path, root: Path, notify: NotifyListener, found: dict[str, str]) -> list[str]:
    daemon = start_daemon(tmp, root, notify.path)
    try:
        notify.wait_ready(daemon)
    except RuntimeError as exc:
        daemon.kill()
        daemon.wait()
        return [f"restart: {exc}"]
    state = json.loads((tmp / "state.json").read_text())
    problems = [f"new state file: {line}"
                for line in saved_as_found(found, (state["devices"] or [None])[0])]
    status = stop(daemon)
    if status != 0:
        problems.append(f"restarted govd run exited {status}")
    return problems


def one_run(index: int, rng: random.Random, window_s: float) -> dict[str, Any]:
    """One crash and its recovery; returns what happened and what differs from the found state."""
    found_state = FOUND_STATES[index % len(FOUND_STATES)]
    kill = KILLS[index % len(KILLS)]
    recovery = RECOVERIES[index % len(RECOVERIES)]  # 2 and 3 are coprime: 6 runs, all pairs
    with scratch_dir("govd-crash-") as tmp_name:
        tmp = Path(tmp_name)
        root = tmp / "gpu"
        gpu = TickingGpu(root, tmp / "frames.sock", found_state)
        notify = NotifyListener(tmp / "notify.sock")
        try:
            found = governed_state(root)
            daemon = start_daemon(tmp, root, notify.path)
            reached = _kill(daemon, kill, tmp / "state.json", notify, rng, window_s)
            if recovery == "restore":
                problems = _restore(tmp)
            else:
                problems = _restart(tmp, root, notify, found)
            problems += restored_as_found(found, governed_state(root))
            if (tmp / "state.json").exists():
                problems.append("state file left behind")
        finally:
            notify.close()
            gpu.close()
    return {"run": index, "found": found_state["governor"], "kill": kill, "recovery": recovery,
            **reached, "problems": problems}


def main() -> None:
    """Run the crash benchmark and write the JSON."""
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--window-s", type=float, default=3.0,
                        help="kill=random: the moment is drawn from [0, this] s after start")
    parser.add_argument("--out", type=Path, default=None,
                        help="result file (default bench/results/crash.json)")
    args = parser.parse_args()
    rng = random.Random(args.seed)
    runs = []
    wall_start = time.monotonic()
    for index in range(args.runs):
        run = one_run(index, rng, args.window_s)
        runs.append(run)
        if run["problems"]:
            print(f"run {index}: {run['problems']}", file=sys.stderr, flush=True)
    phases: Counter[str] = Counter()
    for run in runs:
        phase = ("ready" if run["ready"] else "state-file" if run["had_state_file"]
                 else "before-state-file")
        phases[f"{run['kill']}/{phase}/{run['recovery']}"] += 1
    failures = [run for run in runs if run["problems"]]
    write_result("crash", {
        "benchmark": "crash: govd run SIGKILLed at random moments on a fresh simulated devfreq "
                     "GPU, then govd restore or a new govd run",
        "command": f"python bench/bench_crash.py --runs {args.runs} --seed {args.seed} "
                   f"--window-s {args.window_s:g}",
        "measured": {
            "runs": len(runs), "restored_as_found": len(runs) - len(failures),
            "failures": failures,
            "by_kill_phase_recovery": dict(sorted(phases.items())),
            "by_found_governor": dict(Counter(run["found"] for run in runs)),
            "exited_before_kill": sum(run["exited_before_kill"] for run in runs),
            "wall_s": round(time.monotonic() - wall_start, 1),
        },
        "targets": {"restored_as_found": args.runs},
        "met": {"restored_as_found": not failures},
        "notes": "phase is what the daemon had reached just before the kill, as seen from "
                 "outside: before-state-file, state-file (written, not READY), ready.",
        "machine": machine(),
    }, args.out)


if __name__ == "__main__":
    main()
