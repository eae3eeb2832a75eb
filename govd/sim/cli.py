"""`govd sim`: make sweep tables from the simulated GPU or from measured NVIDIA data.

    govd sim list
    govd sim sweep --scenario NAME --minutes M [--levels TABLE|FILE.json] [--seed N] -o F
    govd sim from-nvdvfs --gpu v100|gtx980|gtx1080ti|rtx2070s [--data DIR] --minutes M -o F
    govd sim from-nvdvfs --gpu GPU --kernels -o F       (one unit per measured kernel: fit input)
    govd sim fit SWEEP... --name NAME [--idle-w W] [--folds K] -o TABLE.json
    govd sim fit-games [MLGOV_CSV] -o GAMES.json

`fit` turns a measured sweep (yours, from `govd measure`, or the nv-dvfs data) into a level table;
`sweep --levels TABLE.json` then simulates it.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

import numpy as np

from govd.cli import UsageError, needs_extra
from govd.formats.sweep import SweepFormatError, SweepTable, read_sweep, write_sweep
from govd.sim.gpu import SCENARIOS, simulate
from govd.sim.levels import LEVEL_TABLES, LevelTable, LevelTableError, level_table, write_table
from govd.sim.nvdvfs import GPUS, NvDvfsError, default_data_dir, kernel_sweep, nvdvfs_sweep


def register(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Add `govd sim` and its sub-commands."""
    parser = subparsers.add_parser("sim", help="simulated GPU: sweep tables of scenarios",
                                   description=__doc__,
                                   formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="sim_command", metavar="SIM_COMMAND", required=True)

    listing = sub.add_parser("list", help="scenarios and level tables")
    listing.set_defaults(func=_list)

    sweep = sub.add_parser("sweep", help="every unit of a scenario at every level, as CSV")
    sweep.add_argument("--scenario", required=True, choices=sorted(SCENARIOS))
    sweep.add_argument("--minutes", type=float, required=True, help="length of the workload")
    sweep.add_argument("--levels", default="seed9", metavar="TABLE",
                       help=f"level table: {', '.join(sorted(LEVEL_TABLES))}, or a .json file")
    sweep.add_argument("--seed", type=int, default=0)
    sweep.add_argument("-o", "--output", required=True, type=Path, help="sweep table to write")
    sweep.set_defaults(func=_sweep)

    nv = sub.add_parser("from-nvdvfs", help="sweep table from measured V100 / GTX 980 data")
    nv.add_argument("--gpu", required=True, choices=sorted(GPUS))
    nv.add_argument("--data", type=Path, default=None,
                    help="folder of the nv-dvfs CSV files (default ../shared/data/nv-dvfs)")
    nv.add_argument("--minutes", type=float, help="GPU time at the top level")
    nv.add_argument("--kernels", action="store_true",
                    help="one unit per measured kernel, without noise (input of `sim fit`)")
    nv.add_argument("--seed", type=int, default=0)
    nv.add_argument("-o", "--output", required=True, type=Path, help="sweep table to write")
    nv.set_defaults(func=_from_nvdvfs)

    fit = sub.add_parser("fit", help="fit a level table to measured sweep tables")
    fit.add_argument("sweeps", nargs="+", type=Path, metavar="SWEEP",
                     help="sweep tables with the same levels (units are pooled)")
    fit.add_argument("--name", required=True, help="the table's name (for --levels)")
    fit.add_argument("--description", default="")
    fit.add_argument("--idle-w", type=_idle_w, default=None,
                     help="gated idle power (W); default the sweep's '# idle_power_w'")
    fit.add_argument("--folds", type=_folds, default=5,
                     help="k of the held-out k-fold over units (at least 2)")
    fit.add_argument("-o", "--output", required=True, type=Path, help="level table to write")
    fit.set_defaults(func=_fit)

    games = sub.add_parser("fit-games", help="fit the game model to measured FPS-vs-clock curves")
    games.add_argument("data", nargs="?", type=Path, default=None,
                       help="mlgov games-fps-vs-gpu-clock.csv (default ../shared/data/mlgov/)")
    games.add_argument("-o", "--output", required=True, type=Path, help="JSON file to write")
    games.set_defaults(func=_fit_games)


def _list(args: argparse.Namespace) -> int:
    print("scenarios:")
    for name, (description, _) in SCENARIOS.items():
        print(f"  {name:16s} {description}")
    print("level tables:")
    for table in LEVEL_TABLES.values():
        print(f"  {table.name:16s} {table.description}")
        for line in describe_table(table):
            print(f"  {'':16s} {line}")
    return 0


def describe_table(table: LevelTable) -> list[str]:
    """Lines for `sim list`: levels, source and fit error of `table`."""
    core = table.core_levels().freqs_mhz
    lines = [f"core MHz: {', '.join(f'{f:g}' for f in core)}"]
    if table.mem_freqs_mhz is not None:
        lines.append(f"memory MHz: {', '.join(f'{f:g}' for f in np.unique(table.mem_freqs_mhz))}")
    prov = table.provenance
    lines.append(f"source: {prov.get('source') or prov.get('made_by', 'unknown')}")
    fit = prov.get("fit")
    if fit:
        lines.append(f"fit error: time {fit['time_mape_pct']:.2f} % (held out "
                     f"{fit['heldout_time_mape_pct']:.2f} %), power {fit['power_mape_pct']:.2f} % "
                     f"(held out {fit['heldout_power_mape_pct']:.2f} %) MAPE, "
                     f"{fit['units']} units, {fit['folds']}-fold")
    else:
        lines.append("fit error: none (not fitted to a measurement)")
    return lines


MAX_MINUTES = 24 * 60.0
"""Longest workload simulated (a day): longer ones would only exhaust memory. Units: min."""


def _check_minutes(minutes: float) -> None:
    if not 0 < minutes <= MAX_MINUTES:
        raise UsageError(f"--minutes must be in (0, {MAX_MINUTES:g}], got {minutes:g}")


def _sweep(args: argparse.Namespace) -> int:
    _check_minutes(args.minutes)
    if args.scenario not in SCENARIOS:
        raise UsageError(f"unknown scenario {args.scenario!r} (known: {', '.join(SCENARIOS)})")
    try:
        levels = level_table(args.levels)
    except (KeyError, LevelTableError) as exc:
        raise UsageError(str(exc).strip("'\"")) from None
    table = simulate(args.scenario, levels, args.minutes, args.seed)
    _write(args.output, table)
    print(f"{args.output}: {table.units} units x {table.levels_mhz.size} levels "
          f"({args.scenario} on {args.levels}, seed {args.seed})", file=sys.stderr)
    return 0


def _from_nvdvfs(args: argparse.Namespace) -> int:
    data = args.data if args.data is not None else default_data_dir()
    if not args.kernels:
        if args.minutes is None:
            raise UsageError("--minutes is required (or --kernels)")
        _check_minutes(args.minutes)
    try:
        table = (kernel_sweep(args.gpu, data) if args.kernels
                 else nvdvfs_sweep(args.gpu, data, args.minutes, args.seed))
    except NvDvfsError as exc:
        raise UsageError(str(exc)) from None
    _write(args.output, table)
    what = ("kernels", "as measured") if args.kernels else ("kernel launches", f"seed {args.seed}")
    print(f"{args.output}: {table.units} {what[0]} x {table.levels_mhz.size} levels "
          f"({args.gpu}, {what[1]})", file=sys.stderr)
    return 0


def _idle_w(text: str) -> float:
    value = float(text)
    if not 0 <= value < float("inf"):  # also refuses nan
        raise argparse.ArgumentTypeError(f"must be a power of 0 W or more, got {text}")
    return value


def _folds(text: str) -> int:
    value = int(text)
    if value < 2:
        raise argparse.ArgumentTypeError(f"a held-out k-fold needs k of 2 or more, got {text}")
    return value


def _writable_folder(path: Path) -> None:
    """Refuse, before the work, an output whose folder does not exist or cannot be written:
    a fit takes a minute, found out only at its end otherwise."""
    folder = path.absolute().parent
    if not folder.is_dir():
        raise UsageError(f"{path}: its folder does not exist")
    if not os.access(folder, os.W_OK):
        raise UsageError(f"{path}: cannot write in its folder")


def _fit(args: argparse.Namespace) -> int:
    needs_extra("scipy", "fit", "govd sim fit")
    from govd.sim.fit import FitError, fit_table, pool_sweeps

    _writable_folder(args.output)

    sweeps = []
    for path in args.sweeps:
        try:
            sweeps.append(read_sweep(path))
        except OSError as exc:
            raise UsageError(f"cannot read {path}: {exc.strerror or exc}") from None
        except SweepFormatError as exc:
            raise UsageError(str(exc)) from None
    try:
        sweep = pool_sweeps(sweeps)
        table = fit_table(sweep, args.name, args.description, args.folds, args.idle_w)
    except FitError as exc:
        raise UsageError(str(exc)) from None
    try:
        write_table(args.output, table)
    except OSError as exc:
        raise UsageError(f"cannot write {args.output}: {exc.strerror or exc}") from None
    for line in describe_table(table):
        print(f"{args.output}: {line}", file=sys.stderr)
    return 0


def _fit_games(args: argparse.Namespace) -> int:
    needs_extra("scipy", "fit", "govd sim fit-games")
    from govd.sim.games import GamesDataError, default_data_file, fit_games

    _writable_folder(args.output)

    try:
        fitted = fit_games(args.data if args.data is not None else default_data_file())
    except GamesDataError as exc:
        raise UsageError(str(exc)) from None
    try:
        args.output.write_text(json.dumps(fitted, indent=1) + "\n")
    except OSError as exc:
        raise UsageError(f"cannot write {args.output}: {exc.strerror or exc}") from None
    prov = fitted["provenance"]
    print(f"{args.output}: {len(fitted['games'])} games, curve error median "
          f"{prov['median_curve_error_pct']:.2f} %, max {prov['max_curve_error_pct']:.2f} %",
          file=sys.stderr)
    return 0


def _write(path: Path, table: SweepTable) -> None:
    try:
        write_sweep(path, table)
    except OSError as exc:
        raise UsageError(f"cannot write {path}: {exc.strerror or exc}") from None
