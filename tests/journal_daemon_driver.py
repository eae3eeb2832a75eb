"""Drives one `govd run` inside the private journal namespace of tests/test_journal_daemon.py.

    python -m tests.journal_daemon_driver WORK

Starts the live simulated GPU and the daemon (INVOCATION_ID set, so it logs to the journal; level
debug, a 1 s summary), lets it govern, then opens a fault episode: the tree's set_freq is made
read-only (a read-only bind mount: EROFS, as a kernel that refuses the write) and a SIGHUP
reload to `powersave` makes the daemon write it. Each retry fails until the mount is lifted;
then the write goes through and the episode ends. Every status file seen goes to
WORK/statuses.json for the test to compare with the journal.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from tests.live_gpu import DEVICE, govd_env, read_status, start_daemon, start_sim, stop, wait_for

CONFIG = "policy: {name: %s}\nlogging: {level: debug, summary_interval_s: 1.0}\n"


def main(work: Path) -> int:
    root = work / "gpu"
    sim = start_sim(root, work / "frames.sock")
    daemon = start_daemon(work, root, CONFIG % "performance",
                          govd_env({"INVOCATION_ID": "0123456789abcdef0123456789abcdef"}))
    statuses: list[dict[str, Any]] = []

    def seen(condition: Any) -> Any:
        status = read_status(work)
        if status and (not statuses or status["written_unix_s"] != statuses[-1]["written_unix_s"]):
            statuses.append(status)
        return status is not None and condition(status["devices"][0])

    set_freq = root / DEVICE / "userspace/set_freq"
    try:
        wait_for(lambda: seen(lambda d: d["ticks"] >= 60), "three seconds of ticks", daemon)
        subprocess.run(["mount", "--bind", str(set_freq), str(set_freq)], check=True)
        subprocess.run(["mount", "-o", "remount,bind,ro", str(set_freq)], check=True)
        (work / "govd.yaml").write_text(CONFIG % "powersave")
        daemon.send_signal(signal.SIGHUP)
        wait_for(lambda: seen(lambda d: d.get("paused_write", 0) >= 2), "two refused writes",
                 daemon)
        subprocess.run(["umount", str(set_freq)], check=True)
        wait_for(lambda: seen(lambda d: d["state"] == "governed" and d["policy"] == "powersave"
                              and d["chosen_mhz"] is not None), "the write to go through", daemon)
        time.sleep(2.5)  # two more summaries at the new level
        seen(lambda d: True)
    finally:
        subprocess.run(["umount", str(set_freq)], check=False, capture_output=True)
        code = stop(daemon)
        stop(sim)
    (work / "statuses.json").write_text(json.dumps(statuses))
    return code


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1])))
