"""The status file (``status.json`` beside the state file) and `govd status`, which reads it.

The daemon rewrites it atomically every few seconds and whenever it starts or stops idling,
world-readable (0644): per device the level, the policy and target, recent FPS and frame time,
predicted against actual frame time, power and energy, the loop's own tick statistics, and
whether govd idles.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

from govd.formats.regular_file import read_regular_text, write_atomically
from govd.telemetry.savings import saving_words

STATUS_MODE = 0o644
STATUS_NAME = "status.json"
MAX_STATUS_BYTES = 16 << 20
"""A status file larger than this is not govd's (one device takes about 1 KiB). Units: bytes."""


def status_path(state_file: Path) -> Path:
    """Where the status file lives: beside the state file."""
    return Path(state_file).with_name(STATUS_NAME)


def write_status(path: Path, status: dict[str, Any]) -> None:
    """Replace the status file (mode 0644). Not fsynced: it is rewritten every second and a
    stale one after a crash misleads nobody, while two fsyncs a second cost the loop time."""
    write_atomically(path, json.dumps(status, indent=1) + "\n", STATUS_MODE, durable=False)


def _number(value: Any, fmt: str, unit: str = "") -> str:
    return "-" if value is None else f"{value:{fmt}}{unit}"


def device_line(device: dict[str, Any]) -> str:
    """One line per device: policy, level, FPS, frame time (and predicted), power, energy, and
    the saving against the top clock (`govd.telemetry.savings`); or why it is not governed."""
    if device.get("state") == "paused":
        return f"{device['device']}: paused ({device.get('paused_reason')})"
    if device.get("state") == "waiting":
        return (f"{device['device']}: left to its own governor until frames come "
                f"({device['policy']} needs them), "
                f"{_number(device.get('level_mhz'), '.0f', ' MHz')}, "
                f"{_number(device.get('power_w'), '.2f', ' W')}")
    line = (
        f"{device['device']}: {device['policy']} ({device['target']}), "
        f"{_number(device.get('level_mhz'), '.0f', ' MHz')}, "
        f"{_number(device.get('fps'), '.1f', ' fps')}, "
        f"{_number(device.get('frame_ms'), '.2f', ' ms/frame')} "
        f"(predicted {_number(device.get('predicted_frame_ms'), '.2f', ' ms')}), "
        f"{_number(device.get('power_w'), '.2f', ' W')}, "
        f"{_number(device.get('energy_j'), '.1f', ' J')}"
    )
    saved = saving_words(device.get("savings") or {})
    return f"{line}; {saved}" if saved else line


def show_status(args: argparse.Namespace) -> int:
    """Print the running daemon's status (``--json``: the file as it is)."""
    from govd.cli import UsageError
    from govd.daemon.run import state_file_of

    path = status_path(state_file_of(args))
    try:
        text = read_regular_text(path, MAX_STATUS_BYTES)
        status = json.loads(text)
    except FileNotFoundError:
        raise UsageError(f"{path}: no status file; is govd running?") from None
    except OSError as exc:
        raise UsageError(f"{path}: cannot read the status: {exc.strerror}") from None
    except ValueError as exc:
        raise UsageError(f"{path}: cannot read the status: {exc}") from None
    if args.json:
        print(text, end="")
        return 0
    try:
        lines = _status_lines(status)
    except (AttributeError, KeyError, TypeError, ValueError) as exc:
        raise UsageError(f"{path}: not a govd status file ({type(exc).__name__}: {exc})") \
            from None
    print("\n".join(lines))
    return 0


def _status_lines(status: Any) -> list[str]:
    age_s = time.time() - float(status.get("written_unix_s", 0))
    loop = status.get("loop", {})
    lines = [f"govd pid {status.get('pid')}, updated {age_s:.1f} s ago, "
             f"{loop.get('ticks', 0)} ticks, {loop.get('overruns', 0)} overruns"]
    from govd.custody.state_file import govd_running

    if not govd_running(status.get("pid")):  # a crash left it: not shown as current
        lines[0] = (f"govd is not running: pid {status.get('pid')} wrote this status "
                    f"{age_s:.1f} s ago and is gone")
    idle = status.get("idle") or {}
    if idle.get("idle") and idle.get("since_s") is not None:
        idled_s = float(status.get("loop_time_s", 0)) - float(idle["since_s"])
        lines.append(f"  idling for {idled_s:.0f} s (no frames, GPU not busy): lowest level, "
                     f"ticking every {idle.get('period_ms')} ms")
    now_s = float(status.get("loop_time_s", 0))
    for device in status.get("devices", []):
        lines.append("  " + device_line(device))
        if device.get("state") == "waiting" and device.get("waiting_since_s") is not None:
            waited_s = now_s - float(device["waiting_since_s"])
            lines.append(f"    no frames for {waited_s:.0f} s. "
                         + str(device.get("no_frames_hint") or ""))
    lines += ["  " + line for line in frame_source_lines(status.get("frame_source", {}))]
    return lines


def frame_source_lines(report: dict[str, Any]) -> list[str]:
    """What the frame source says (`FrameSource.report`): frames per program, then each problem
    the user must fix (frames naming a device govd does not govern among them)."""
    lines = []
    by_app = report.get("frames_by_app")
    if by_app is not None:
        shown = ", ".join(f"{app} {n}" for app, n in sorted(by_app.items())) or "none yet"
        live = "live" if report.get("live") else "none live: the device is left to its own governor"
        sampled = report.get("sampled") or []
        lines.append(f"frames from MangoHud ({live}): {shown}"
                     + (f"; sampled logs: {', '.join(sampled)}" if sampled else ""))
    lines += [f"problem: {problem}" for problem in report.get("problems", [])]
    unknown = report.get("unknown_devices") or {}
    if unknown:
        named = ", ".join(f"{name} ({count})" for name, count in sorted(unknown.items()))
        governed = ", ".join(report.get("devices") or []) or "none"
        lines.append(f"problem: frames for devices govd does not govern, dropped: {named}; "
                     f"device= must name one it governs ({governed}), or be left out")
    return lines
