"""`govd measure`: sweep a real GPU's levels under your workload and write a sweep table.

    govd measure [--device NAME] [--runs R] [options] -o SWEEP.csv -- CMD [ARG...]
    govd measure [--device NAME] --frames SOCKET [--frames-per-level N] [options] -o SWEEP.csv

The device is taken through its ordinary backend (`govd devices` lists them) and put back exactly
as found on every way out: the end of the sweep, an error, Ctrl-C or SIGTERM (the daemon's signal
flags and its state file: a crash or SIGKILL leaves the file, and `govd restore` puts the device
back). The sweep table then feeds `govd sim fit`, `govd eval` and the model.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path

from govd.cli import UsageError
from govd.conf.schema import Config
from govd.daemon.signals import SignalFlags
from govd.daemon.state import (
    SavedState,
    StateFileError,
    load_state,
    owner_alive,
    remove_state,
    restore_devices,
    save_state,
)
from govd.device.base import Device, DeviceError
from govd.device.discovery import discover
from govd.formats.sweep import write_sweep
from govd.measure.sweep import (
    CommandWork,
    FrameWork,
    Interrupted,
    MeasureError,
    SweepPlan,
    Work,
    run_sweep,
)

INTERRUPTED_STATUS = 130


def register(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Add `govd measure`."""
    parser = subparsers.add_parser("measure", help="sweep a GPU's levels under a workload",
                                   description=__doc__,
                                   formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default=None, help="device name (default: the only one)")
    parser.add_argument("--sysfs-root", type=Path, default=Path("/sys"),
                        help="look for devices under this sysfs root (fixtures, simulators)")
    parser.add_argument("--state-file", type=Path, default=None,
                        help=f"state file for `govd restore` (default {Config().state_file})")
    parser.add_argument("--frames", type=Path, default=None, metavar="SOCKET",
                        help="take the work from frames sent to this socket instead of a command")
    parser.add_argument("--frames-per-level", type=_positive_int, default=300)
    parser.add_argument("--runs", type=_positive_int, default=3, help="command runs per level")
    parser.add_argument("--settle-s", type=_non_negative, default=0.5,
                        help="wait after setting a level (s)")
    parser.add_argument("--sample-ms", type=_positive, default=50.0,
                        help="device reading interval while the work runs (ms)")
    parser.add_argument("--idle-s", type=_non_negative, default=1.0,
                        help="seconds of idle power at the lowest level before the sweep (0: none)")
    parser.add_argument("--every", type=_positive_int, default=1,
                        help="sweep every k-th level (always the lowest and the highest)")
    parser.add_argument("-o", "--output", required=True, type=Path, help="sweep table to write")
    parser.add_argument("command", nargs=argparse.REMAINDER,
                        help="-- CMD [ARG...]: the workload, run once per unit")
    parser.set_defaults(func=measure)


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {text}")
    return value


def _positive(text: str) -> float:
    value = float(text)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be positive, got {text}")
    return value


def _non_negative(text: str) -> float:
    value = float(text)
    if not value >= 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, got {text}")
    return value


def measure(args: argparse.Namespace) -> int:
    """Run the sweep; 0 when written, 130 when interrupted, 1 when it failed (device restored)."""
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if bool(command) == (args.frames is not None):
        raise UsageError("give the work either as -- CMD ... or as --frames SOCKET (one of them)")
    device = _pick(discover(args.sysfs_root), args.device)
    ok = device.controllable()
    if not ok.ok:
        raise UsageError(f"{device.name}: cannot be governed: {ok.reason}")
    state_file = args.state_file or Path(Config().state_file)
    _check_state_file(state_file)
    plan = SweepPlan(settle_s=args.settle_s, sample_s=args.sample_ms / 1000.0,
                     idle_s=args.idle_s, levels=_levels(device, args.every))
    work: Work
    if command:
        work = CommandWork(command, args.runs)
    else:
        from govd.sources.socket import SocketSource

        try:
            work = FrameWork(SocketSource(args.frames, group=None), args.frames_per_level)
        except OSError as exc:
            raise UsageError(f"{args.frames}: cannot listen: {exc.strerror or exc}") from None
    try:
        return _sweep_and_restore(device, work, plan, state_file, args)
    finally:
        if isinstance(work, FrameWork):
            work.source.close()


def _sweep_and_restore(device: Device, work: Work, plan: SweepPlan, state_file: Path,
                       args: argparse.Namespace) -> int:
    try:
        save_state(state_file, SavedState([device.save()], str(args.sysfs_root)))
    except StateFileError as exc:
        raise UsageError(str(exc)) from None
    flags = SignalFlags()
    status, table, problem = 1, None, ""
    try:
        table = run_sweep(device, work, plan, lambda: flags.stop is not None,
                          lambda line: print(f"govd measure: {line}", file=sys.stderr))
        status = 0
    except Interrupted:
        status, problem = INTERRUPTED_STATUS, "interrupted"
    except (MeasureError, DeviceError) as exc:
        problem = str(exc)
    finally:
        failures = restore_devices([device])
        flags.close()
    if failures:
        print(f"govd measure: could not restore {failures[0]}; {state_file} kept for "
              "`govd restore`", file=sys.stderr)
        return 1
    remove_state(state_file)
    if table is None:
        print(f"govd measure: {problem}; {device.name} restored as found", file=sys.stderr)
        return status
    try:
        write_sweep(args.output, table)
    except OSError as exc:
        raise UsageError(f"cannot write {args.output}: {exc.strerror or exc}") from None
    print(f"govd measure: {args.output}: {table.units} units x {table.levels_mhz.size} levels of "
          f"{device.name}; restored as found", file=sys.stderr)
    from govd.formats.sweep_checks import implausible

    for problem in implausible(dataclasses.replace(table, path=str(args.output))):
        print(f"govd measure: warning: {problem}", file=sys.stderr)
    return 0


def _pick(devices: list[Device], name: str | None) -> Device:
    if name is not None:
        for device in devices:
            if device.name == name:
                return device
        known = ", ".join(d.name for d in devices) or "none found"
        raise UsageError(f"no device {name!r} (devices: {known})")
    if len(devices) != 1:
        known = ", ".join(d.name for d in devices) or "none found"
        raise UsageError(f"choose a device with --device (devices: {known})")
    return devices[0]


def _levels(device: Device, every: int) -> list[int]:
    count = len(device.levels_mhz)
    chosen = list(range(0, count, every))
    if chosen[-1] != count - 1:
        chosen.append(count - 1)
    return chosen


def _check_state_file(path: Path) -> None:
    """Refuse to start over a state file: a running govd holds the devices, or a crashed one
    left devices to put back first."""
    try:
        state = load_state(path)
    except StateFileError as exc:
        raise UsageError(str(exc)) from None
    if state is None:
        return
    if owner_alive(state):
        raise UsageError(f"{path}: govd (pid {state.pid}) holds the devices; stop it first")
    raise UsageError(f"{path}: left by a govd that did not stop cleanly; run `govd restore` first")
