"""Benchmark: real MangoHud logs replayed at their own pace through the daemon on the simulated GPU.

The simulated GPU (`python -m govd.sim.live`, devfreq tree) runs as its own process; the daemon
runs in this process with ``frames: source: mangohud`` on a folder, 50 ms ticks. A writer, called
once per tick, appends each log's rows to a new file in that folder once the time in the row's
``elapsed`` has come (as MangoHud ≥ 0.6.9 writes them); everything the MangoHud source hands the
daemon is recorded. Two phases:

- one log at a time: frames delivered vs rows written, and the frame rate govd reports (`govd
  status`'s FPS, median over the ticks while rows are written, once its 1 s window holds live
  frames only) vs the log's own (per-frame: rows per second of ``elapsed``; sampled: the mean of
  its ``fps`` column);
- every log at once (a game beside a launcher, and more): frames delivered vs rows written per
  program, duplicates and rows missing.

The logs are the ones in ``../shared/data/mangohud`` that MangoHud writes while logging. The
0.6.8 per-frame glxgears log (frame time in µs, written whole at stop by that version) is
replayed re-expressed as 0.6.9 writes it: ``frametime`` divided by 1000, nothing else changed.

Writes `bench/results/mangohud.json`.   python bench/bench_mangohud.py
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections import Counter
from pathlib import Path
from typing import Any

from daemon_setup import REPO, machine, scratch_dir, start_sim, write_result

from govd.conf.schema import Config
from govd.daemon.daemon import Daemon, Options
from govd.sources.base import Frame

DATA = REPO / ".." / "shared" / "data" / "mangohud"
LOGS = {
    "vkcube": ("vkcube-rtx2060-mangohud0.8.2-perframe.csv", 1.0),
    "glxgears": ("glxgears-llvmpipe-mangohud0.6.8-perframe.csv", 1e-3),  # µs → ms (0.6.9)
    "overwatch": ("overwatch-rx9070xt-mangohud0.8.1-interval100.csv", 1.0),
    "overwatch-b": ("overwatch-rx9070xt-mangohud0.8.1-interval100-b.csv", 1.0),
}
PERIOD_MS = 50
RESCAN_S = 0.2
"""How often the folder is listed: a new log's rows wait for the next listing and then come in
one tick, which the status FPS window (1 s) would count as a burst; see `first_frame_s`."""


class Replay:
    """One log: its lines before the rows, its rows (frametime rescaled), each row's elapsed."""

    def __init__(self, app: str, path: Path, scale: float) -> None:
        lines = path.read_text().splitlines()
        header = next(i for i, line in enumerate(lines) if line.startswith("fps,"))
        self.app, self.head = app, "\n".join(lines[: header + 1]) + "\n"
        self.columns = lines[header].split(",")
        ft, el = self.columns.index("frametime"), self.columns.index("elapsed")
        self.rows: list[str] = []
        self.elapsed_s: list[float] = []
        for line in lines[header + 1:]:
            cells = line.split(",")
            if len(cells) != len(self.columns):
                continue
            cells[ft] = repr(float(cells[ft]) * scale) if scale != 1.0 else cells[ft]
            self.rows.append(",".join(cells))
            self.elapsed_s.append(int(cells[el]) / 1e9)
        self.frame_ms = [float(r.split(",")[ft]) for r in self.rows]
        fps = [float(r.split(",")[self.columns.index("fps")]) for r in self.rows]
        gaps = [b - a for a, b in zip(self.elapsed_s, self.elapsed_s[1:], strict=False)]
        self.sampled = statistics.median(g * 1000 / t for g, t in
                                         zip(gaps, self.frame_ms[1:], strict=True)) > 1.5
        span_s = self.elapsed_s[-1] - self.elapsed_s[0]
        self.own_fps = statistics.fmean(fps) if self.sampled else (len(self.rows) - 1) / span_s
        self.file: Path | None = None
        self.written = 0
        self.started_s = 0.0

    def start(self, folder: Path, now_s: float) -> None:
        self.file = folder / f"{self.app}_2026-01-02_03-04-05.csv"
        self.file.write_text(self.head)
        self.started_s = now_s

    def grow(self, now_s: float) -> None:
        """Append the rows whose elapsed time has come."""
        assert self.file is not None
        due = self.written
        while due < len(self.rows) and self.elapsed_s[due] <= now_s - self.started_s:
            due += 1
        if due > self.written:
            with open(self.file, "a") as f:
                f.write("".join(r + "\n" for r in self.rows[self.written:due]))
            self.written = due

    @property
    def done(self) -> bool:
        return self.written == len(self.rows)


def run_daemon(root: Path, tmp: Path, replays: list[Replay]) -> dict[str, Any]:
    """Replay ``replays`` at once through a daemon on the simulated tree under ``root``."""
    folder = tmp / f"mangohud-{'-'.join(r.app for r in replays)}"
    folder.mkdir()
    config = Config.model_validate({
        "period_ms": PERIOD_MS, "state_file": str(tmp / "state.json"),
        "frames": {"source": "mangohud", "mangohud": {"dir": str(folder),
                                                      "rescan_s": RESCAN_S}},
        "logging": {"summary_interval_s": 0},
    })
    daemon = Daemon(Options(config, sysfs_root=root))
    delivered: list[Frame] = []
    fps: list[float] = []
    started: list[float] = []
    first: list[float] = []

    def each_tick() -> bool:
        now_s = time.monotonic()
        if daemon.source is not None and not started:
            drain = daemon.source.drain

            def recording() -> list[Frame]:
                frames = drain()
                if frames and not first:
                    first.append(time.monotonic())
                delivered.extend(frames)
                return frames

            daemon.source.drain = recording  # type: ignore[method-assign]
            started.append(now_s)
            for replay in replays:
                replay.start(folder, now_s)
        for replay in replays:
            replay.grow(now_s)
        status = daemon.runners[0].status() if daemon.runners else {}
        # govd's FPS once its 1 s window holds only live frames, while rows are written
        writing = not all(r.done for r in replays)
        steady = bool(first) and now_s - first[0] > 1.0 + PERIOD_MS / 1000
        if steady and writing and status.get("fps") is not None:
            fps.append(status["fps"])
        # two more seconds after the last row: the last rows are read, nothing comes twice
        return bool(started) and all(r.done for r in replays) and now_s - started[0] > max(
            r.elapsed_s[-1] for r in replays) + 2.0

    daemon.options.should_stop = each_tick
    assert daemon.run() == 0
    report = daemon.source.report() if daemon.source is not None else {}
    return {"delivered": delivered, "fps": fps, "report": report,
            "first_frame_s": first[0] - started[0] if first and started else None,
            "stats": daemon.source.stats() if daemon.source is not None else {}}


def compare(replay: Replay, frames: list[Frame]) -> dict[str, Any]:
    """Frames delivered for ``replay``'s program against the rows written."""
    got = [f.gpu_time_ms for f in frames if f.app == replay.app]
    written = Counter(replay.frame_ms)
    seen = Counter(got)
    return {
        "rows_written": len(replay.rows),
        "frames_delivered": len(got),
        "duplicates_or_spurious": sum((seen - written).values()),
        "missing": sum((written - seen).values()),
        "in_order": got == replay.frame_ms,
    }


def main() -> None:
    """Run both phases and write the JSON."""
    argparse.ArgumentParser(description=__doc__).parse_args()
    available = {app: DATA / name for app, (name, _) in LOGS.items() if (DATA / name).exists()}
    if not available:
        raise SystemExit(f"{DATA}: no MangoHud logs; nothing to replay")
    with scratch_dir("govd-bench-mangohud-") as tmp_name:
        tmp = Path(tmp_name)
        root = tmp / "gpu"
        sim = start_sim(root, tmp / "nobody.sock")
        try:
            one_at_a_time = {}
            for app, path in available.items():
                replay = Replay(app, path, LOGS[app][1])
                run = run_daemon(root, tmp, [replay])
                counted = sum(f.count for f in run["delivered"])
                one_at_a_time[app] = {
                    **compare(replay, run["delivered"]),
                    "sampled_log": replay.sampled,
                    "frames_counted": round(counted, 1),
                    "log_fps": round(replay.own_fps, 2),
                    "govd_status_fps_median": (round(statistics.median(run["fps"]), 2)
                                               if run["fps"] else None),
                    "status_samples": len(run["fps"]),
                    "first_frame_after_s": round(run["first_frame_s"], 3),
                }
            replays = [Replay(app, path, LOGS[app][1]) for app, path in available.items()]
            together = run_daemon(root, tmp, replays)
            at_once = {r.app: compare(r, together["delivered"]) for r in replays}
        finally:
            sim.terminate()
            sim.wait(timeout=60)
    result = {
        "benchmark": "real MangoHud logs replayed at their own pace through govd run "
                     "(mangohud source) on the simulated GPU (devfreq), 50 ms ticks",
        "one_at_a_time": one_at_a_time,
        "all_at_once": at_once,
        "all_at_once_source_stats": together["stats"],
        "totals": {
            "rows_written": sum(v["rows_written"] for v in at_once.values()),
            "frames_delivered": sum(v["frames_delivered"] for v in at_once.values()),
            "duplicates_or_spurious": sum(v["duplicates_or_spurious"] for v in at_once.values()),
            "missing": sum(v["missing"] for v in at_once.values()),
        },
        "notes": "frames_delivered counts rows handed to the daemon (one Frame each); a sampled "
                 "row stands for Frame.count frames (frames_counted). log_fps: rows per second "
                 "of elapsed (per-frame logs) or the mean fps column (sampled logs). The 0.6.8 "
                 "glxgears log is replayed with frametime/1000 (as 0.6.9+ writes it).",
        "machine": machine(),
    }
    write_result("mangohud", result)


if __name__ == "__main__":
    main()
