"""`govd measure`: sweep a real GPU's levels under your workload and write a sweep table.

    govd measure [--device NAME] [--runs R] [options] -o SWEEP.csv -- CMD [ARG...]
    govd measure [--device NAME] --frames SOCKET [--frames-per-level N] [options] -o SWEEP.csv

The device is taken through its ordinary backend (`govd devices` lists them) and held as the
daemon holds its devices (`govd.custody`): locked, so that `govd measure` and the daemon never
hold one GPU at once; what a crashed govd left on it put back first; its state found saved
beside the configured state file (``--config``, as `govd run` and `govd restore` read it); and
put back exactly as found on every way out: the end of the sweep, an error, Ctrl-C or SIGTERM.
After a SIGKILL `govd restore` (or the next daemon) puts it back. The sweep table then feeds
`govd sim fit`, `govd eval` and the model.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path

from govd.conf.load import DEFAULT_CONFIG
from govd.custody.custody import Custody
from govd.custody.lock import DeviceBusy
from govd.custody.signals import SignalFlags
from govd.custody.state_file import StateFileError, measure_state_file
from govd.device.base import Device, DeviceError, DeviceGone
from govd.device.discovery import discover
from govd.errors import UsageError
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
MAX_UNITS = 100_000
"""Most units (command runs, frames) per level: a sweep table holds units x levels rows."""
MAX_CELLS = 10_000_000
"""Most units x levels swept: a table of them takes about 1 GB in memory. Checked before the
device is taken, so an impossible sweep writes nothing."""


def register(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Add `govd measure`."""
    parser = subparsers.add_parser("measure", help="sweep a GPU's levels under a workload",
                                   description=__doc__,
                                   formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default=None,
                        help="device name (default: the only GPU; names any device)")
    parser.add_argument("--sysfs-root", type=Path, default=Path("/sys"),
                        help="look for devices under this sysfs root (fixtures, simulators)")
    parser.add_argument("--config", type=Path, default=None,
                        help=f"the daemon's configuration, for its state_file (default "
                             f"{DEFAULT_CONFIG} when it exists)")
    parser.add_argument("--insecure-config", action="store_true",
                        help="accept a configuration writable by others than root and the user")
    parser.add_argument("--state-file", type=Path, default=None,
                        help="state file for `govd restore` (default: beside the configured "
                             "state_file, named after the device)")
    parser.add_argument("--frames", type=Path, default=None, metavar="SOCKET",
                        help="take the work from frames sent to this socket instead of a command")
    parser.add_argument("--frames-per-level", type=_units, default=300)
    parser.add_argument("--level-s", type=_non_negative, default=2.0,
                        help="with --frames: read the device at least this long at each level "
                             "(s): energy counters advance in steps (NVML: 100 ms), and a "
                             "level's power needs several of them")
    parser.add_argument("--runs", type=_units, default=3, help="command runs per level")
    parser.add_argument("--settle-s", type=_non_negative, default=0.5,
                        help="wait after setting a level (s)")
    parser.add_argument("--sample-ms", type=_positive, default=50.0,
                        help="device reading interval while the work runs (ms)")
    parser.add_argument("--idle-s", type=_non_negative, default=1.0,
                        help="seconds of idle power at the lowest level before the sweep (0: none)")
    parser.add_argument("--rounds", type=_positive_int, default=1,
                        help="sweep the levels this many times, upwards then downwards in "
                             "turn, so that a drift of the work or of the GPU's temperature "
                             "spreads over every level")
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


def _units(text: str) -> int:
    value = _positive_int(text)
    if value > MAX_UNITS:
        raise argparse.ArgumentTypeError(f"must be at most {MAX_UNITS}, got {text}")
    return value


def _positive(text: str) -> float:
    value = float(text)
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"must be positive and finite, got {text}")
    return value


def _non_negative(text: str) -> float:
    value = float(text)
    if not 0 <= value < float("inf"):
        raise argparse.ArgumentTypeError(f"must be 0 or more and finite, got {text}")
    return value


def measure(args: argparse.Namespace) -> int:
    """Run the sweep; 0 when written, 130 when interrupted, 1 when it failed (device restored)."""
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if bool(command) == (args.frames is not None):
        raise UsageError("give the work either as -- CMD ... or as --frames SOCKET (one of them)")
    if not args.output.absolute().parent.is_dir():  # found out after the sweep, otherwise
        raise UsageError(f"{args.output}: its folder does not exist")
    sysfs_root = Path(args.sysfs_root).absolute()  # the state file names it for `govd restore`
    device = _pick(discover(sysfs_root), args.device)
    try:
        ok = device.controllable()
    except DeviceError as exc:
        raise UsageError(f"{device.name}: cannot be governed: {exc}") from None
    if not ok.ok:
        raise UsageError(f"{device.name}: cannot be governed: {ok.reason}")
    plan = SweepPlan(settle_s=args.settle_s, sample_s=args.sample_ms / 1000.0,
                     idle_s=args.idle_s, levels=_levels(device, args.every), rounds=args.rounds)
    units = (args.runs if command else args.frames_per_level) * args.rounds
    if units * len(plan.levels or ()) > MAX_CELLS:
        raise UsageError(f"{units} units x {len(plan.levels or ())} levels is more than "
                         f"{MAX_CELLS} measurements; sweep fewer units or rounds, or use --every")
    base = _configured_state_file(args)
    state_file = args.state_file or measure_state_file(base, device.name)
    work: Work
    if command:
        work = CommandWork(command, args.runs)
    else:
        from govd.sources.socket import SocketSetupError, SocketSource

        try:
            work = FrameWork(SocketSource(args.frames, group=None), args.frames_per_level,
                             level_s=args.level_s)
        except (OSError, SocketSetupError) as exc:
            why = exc.strerror if isinstance(exc, OSError) and exc.strerror else exc
            raise UsageError(f"{args.frames}: cannot listen: {why}") from None
    try:
        return _sweep_in_custody(device, work, plan, Custody(state_file, sysfs_root, base), args)
    finally:
        if isinstance(work, FrameWork):
            work.source.close()


def _configured_state_file(args: argparse.Namespace) -> Path:
    """The daemon's state file, from the configuration it reads: measure's state file and the
    locks of devices without a sysfs directory go beside it."""
    from govd.commands.options import read_config

    config, _ = read_config(args)
    return Path(config.state_file)


def _say(line: str) -> None:
    print(f"govd measure: {line}", file=sys.stderr)


def _sweep_in_custody(device: Device, work: Work, plan: SweepPlan, custody: Custody,
                      args: argparse.Namespace) -> int:
    """Take ``device`` into ``custody``, sweep it, and put it back on every way out (Ctrl-C and
    SIGTERM stop the sweep through the signal flags; anything raised still restores)."""
    flags = SignalFlags()
    status, table, problem = 1, None, ""
    failures: list[str] = []
    try:
        try:
            custody.lock(device)
            done = custody.restore_leftovers()
            for line in done.failures:
                _say(f"could not restore {line} (left by a govd that did not stop cleanly)")
            custody.record([device])
        except (DeviceBusy, DeviceGone, StateFileError, DeviceError) as exc:
            _say(f"{exc}; nothing written")
            return 1
        why = device.settle_domains()  # the levels a sweep plans on are those it can set
        if why is not None:
            _say(f"{device.name}: {why}")
        plan = dataclasses.replace(plan, levels=_levels(device, args.every))
        table = run_sweep(device, work, plan, lambda: flags.stop is not None, _say)
        status = 0
    except Interrupted:
        status, problem = INTERRUPTED_STATUS, "interrupted"
    except (MeasureError, DeviceError) as exc:
        problem = str(exc)
    finally:
        failures = custody.end()
        flags.close()
    if failures:
        for line in failures:
            _say(f"could not restore {line}")
        _say(f"{custody.state_file} kept for `govd restore`")
        return 1
    restored = ("restored as far as its driver shows: " + "; ".join(custody.caveats)
                if custody.caveats else "restored as found")
    if table is None:
        _say(f"{problem}; {device.name} {restored}")
        return status
    try:
        write_sweep(args.output, table)
    except OSError as exc:
        raise UsageError(f"cannot write {args.output}: {exc.strerror or exc}") from None
    _say(f"{args.output}: {table.units} units x {table.levels_mhz.size} levels of "
         f"{device.name}; {restored}")
    from govd.formats.sweep_checks import implausible

    for problem in implausible(dataclasses.replace(table, path=str(args.output))):
        _say(f"warning: {problem}")
    return 0


def _pick(devices: list[Device], name: str | None) -> Device:
    """The device named ``name``; without one, the only GPU (a device the kernel does not call
    a GPU, such as a memory controller's devfreq, is measured only when named, as the daemon
    governs it only when its configuration names it)."""
    if name is not None:
        for device in devices:
            if device.name == name:
                return device
        known = ", ".join(d.name for d in devices) or "none found"
        raise UsageError(f"no device {name!r} (devices: {known})")
    gpus = [d for d in devices if d.not_gpu is None]
    if len(gpus) != 1:
        known = ", ".join(d.name for d in gpus) or "no GPU found"
        others = [d.name for d in devices if d.not_gpu is not None]
        also = f"; not GPUs, measured only when named: {', '.join(others)}" if others else ""
        raise UsageError(f"choose a device with --device (GPUs: {known}{also})")
    return gpus[0]


def _levels(device: Device, every: int) -> list[int]:
    count = len(device.levels_mhz)
    chosen = list(range(0, count, every))
    if chosen[-1] != count - 1:
        chosen.append(count - 1)
    return chosen
