"""`govd replay`: reading run traces and rerunning the model over them."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from govd.formats.trace import TraceFormatError, read_trace

REPO = Path(__file__).resolve().parent.parent
LEVELS = [200, 244, 267, 311, 355, 400, 444, 489, 511]


def write_trace(path: Path, ticks: int = 400) -> None:
    rng = np.random.default_rng(3)
    lines = ["time_s,frame_time_ms,frame_count,freq_mhz,power_w,vs_active"]
    c = 10.0
    for k in range(ticks):
        f = LEVELS[rng.integers(len(LEVELS))]
        c = float(np.clip(c + rng.normal(0, 0.3), 2, 20))
        t = c * (0.7 * 400 / f + 0.3)
        frame = "" if k % 50 == 7 else f"{t:.4f}"
        lines.append(f"{0.05 * k:.2f},{frame},3,{f},{1 + f / 500:.3f},{c * 1000:.1f}")
    path.write_text("\n".join(lines) + "\n")


def govd(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, "-m", "govd", *args], capture_output=True, text=True,
                          env=env, timeout=120)


def test_replay_reports_the_models_accuracy_over_a_trace(tmp_path: Path) -> None:
    trace = tmp_path / "run.csv"
    write_trace(trace)
    out = govd("replay", str(trace), "--json")
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    assert report["ticks"] == 400 and report["ticks_with_frames"] == 392
    assert report["skipped"] == 8  # the ticks without frames
    assert report["fitted"]["mape"] < 0.03
    assert report["next_tick"]["mape"] < 0.10
    text = govd("replay", str(trace))
    assert "MAPE" in text.stdout


def test_empty_cells_are_missing_values_not_zeros(tmp_path: Path) -> None:
    trace = tmp_path / "run.csv"
    trace.write_text("time_s,frame_time_ms,frame_count,freq_mhz,power_w\n0.0,,0,400,\n")
    loaded = read_trace(trace)
    assert math.isnan(loaded.frame_time_ms[0]) and math.isnan(loaded.power_w[0])


@pytest.mark.parametrize("body, message", [
    ("", ":1: empty file"),
    ("a,b\n1,2\n", ":1: header must start with"),
    ("time_s,frame_time_ms,frame_count,freq_mhz,power_w\n0,1,1,400\n", ":2: 4 cells"),
    ("time_s,frame_time_ms,frame_count,freq_mhz,power_w\n0,1,1,400,x\n", ":2: column power_w"),
    ("time_s,frame_time_ms,frame_count,freq_mhz,power_w\n0,nan,1,400,1\n", ":2: column frame"),
    ("time_s,frame_time_ms,frame_count,freq_mhz,power_w\n", ":2: no ticks"),
    ("time_s,frame_time_ms,frame_count,freq_mhz,power_w\n0,1,1,,1\n", ":2: time_s and freq"),
])
def test_bad_traces_get_one_clear_line_naming_file_and_line(tmp_path: Path, body: str,
                                                            message: str) -> None:
    trace = tmp_path / "bad.csv"
    trace.write_text(body)
    with pytest.raises(TraceFormatError, match=message.replace("(", r"\(")):
        read_trace(trace)
    out = govd("replay", str(trace))
    assert out.returncode == 2
    assert str(trace) in out.stderr and "Traceback" not in out.stderr
