"""`govd sim`: make sweep tables from the simulated GPU or from measured NVIDIA data.

    govd sim list
    govd sim sweep --scenario NAME --minutes M [--levels seed9|desktop|datacenter] [--seed N] -o F
    govd sim from-nvdvfs --gpu v100|gtx980 [--data DIR] --minutes M [--seed N] -o F
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from govd.cli import UsageError
from govd.formats.sweep import SweepTable, write_sweep
from govd.sim.gpu import SCENARIOS, simulate
from govd.sim.levels import LEVEL_TABLES
from govd.sim.nvdvfs import GPUS, NvDvfsError, default_data_dir, nvdvfs_sweep


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
    sweep.add_argument("--levels", default="seed9", choices=sorted(LEVEL_TABLES))
    sweep.add_argument("--seed", type=int, default=0)
    sweep.add_argument("-o", "--output", required=True, type=Path, help="sweep table to write")
    sweep.set_defaults(func=_sweep)

    nv = sub.add_parser("from-nvdvfs", help="sweep table from measured V100 / GTX 980 data")
    nv.add_argument("--gpu", required=True, choices=sorted(GPUS))
    nv.add_argument("--data", type=Path, default=None,
                    help="folder of the nv-dvfs CSV files (default ../shared/data/nv-dvfs)")
    nv.add_argument("--minutes", type=float, required=True, help="GPU time at the top level")
    nv.add_argument("--seed", type=int, default=0)
    nv.add_argument("-o", "--output", required=True, type=Path, help="sweep table to write")
    nv.set_defaults(func=_from_nvdvfs)


def _list(args: argparse.Namespace) -> int:
    print("scenarios:")
    for name, (description, _) in SCENARIOS.items():
        print(f"  {name:16s} {description}")
    print("level tables:")
    for table in LEVEL_TABLES.values():
        levels = ", ".join(f"{f:g}" for f in table.freqs_mhz)
        print(f"  {table.name:16s} {table.description}\n  {'':16s} MHz: {levels}")
    return 0


MAX_MINUTES = 24 * 60.0
"""Longest workload simulated (a day): longer ones would only exhaust memory. Units: min."""


def _check_minutes(minutes: float) -> None:
    if not 0 < minutes <= MAX_MINUTES:
        raise UsageError(f"--minutes must be in (0, {MAX_MINUTES:g}], got {minutes:g}")


def _sweep(args: argparse.Namespace) -> int:
    _check_minutes(args.minutes)
    table = simulate(args.scenario, args.levels, args.minutes, args.seed)
    _write(args.output, table)
    print(f"{args.output}: {table.units} units x {table.levels_mhz.size} levels "
          f"({args.scenario} on {args.levels}, seed {args.seed})", file=sys.stderr)
    return 0


def _from_nvdvfs(args: argparse.Namespace) -> int:
    _check_minutes(args.minutes)
    data = args.data if args.data is not None else default_data_dir()
    try:
        table = nvdvfs_sweep(args.gpu, data, args.minutes, args.seed)
    except NvDvfsError as exc:
        raise UsageError(str(exc)) from None
    _write(args.output, table)
    print(f"{args.output}: {table.units} kernel launches x {table.levels_mhz.size} levels "
          f"({args.gpu}, seed {args.seed})", file=sys.stderr)
    return 0


def _write(path: Path, table: SweepTable) -> None:
    try:
        write_sweep(path, table)
    except OSError as exc:
        raise UsageError(f"cannot write {path}: {exc.strerror or exc}") from None
