"""amdgpu's power files as the kernel keeps them, for fixture trees: one model per card.

A `CardModel` holds what the driver holds (performance level, the sclk mask, the overdrive table
being edited and the one committed, the deep-sleep state) and renders ``power_dpm_force_performance_
level``, ``pp_dpm_sclk`` and ``pp_od_clk_voltage`` from it in the kernel's formats. Writes go
through `CardModel.store`, which applies the rules of the kernel's store functions
(drivers/gpu/drm/amd/pm/amdgpu_pm.c and the swsmu ppt files):

- ``pp_dpm_sclk`` takes level indices (a mask) only in ``manual``, and never on an APU (EINVAL);
- ``pp_od_clk_voltage`` takes ``s 0 MHZ`` / ``s 1 MHZ`` / ``c`` / ``r`` only in ``manual``; each
  clock must lie in ``OD_RANGE``; a discrete GPU refuses a minimum above the maximum being edited
  (and a maximum below the minimum) at once, an APU at ``c``, and an APU takes one pair per write;
  nothing is applied before ``c``, and ``r`` puts back the table the GPU booted with; RDNA4 (Linux
  >= 6.14) takes one offset, ``s OFFSET``;
- an APU leaving ``manual`` goes back to its default clocks (vangogh_set_performance_level);
  before Linux 6.17 its ``pp_od_clk_voltage`` reads empty outside ``manual``;
- the clock runs at the committed soft minimum and maximum (a pin runs at the pin), else where it
  ran when found.

The model is saved as JSON under ``ROOT/amdgpu-kernel/`` after every write, so a `govd run` or
`govd restore` in another process (`tests.kernel_driver`) sees the same GPU. Whenever the model is
back in the state it was found in, every file gets its found bytes back verbatim (NUL padding
included): a byte-for-byte comparison of the tree then says whether govd restored what it found.
"""

from __future__ import annotations

import errno
import json
import os
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from tests.sysfs_fixtures import KernelSysfs, Rule

MODEL_DIR = "amdgpu-kernel"
PERF = "power_dpm_force_performance_level"
SCLK = "pp_dpm_sclk"
OD = "pp_od_clk_voltage"
LEVELS = ("auto", "low", "high", "manual", "profile_standard", "profile_min_sclk",
          "profile_min_mclk", "profile_peak", "profile_exit")
APU_PLACEHOLDER_MHZ = 1100
"""The fixed middle line Van Gogh prints in pp_dpm_sclk (VANGOGH_UMD_PSTATE_STANDARD_GFXCLK)."""
_OD_SCLK_LINE = re.compile(rb"^(\s*[01]:\s*)(\d+)((?:Mhz|MHz))", re.MULTILINE)


def _refuse(code: int, path: Path) -> OSError:
    return OSError(code, os.strerror(code), str(path))


@dataclass
class Logical:
    """What the driver holds: the part of the model a restore must put back."""

    perf: str
    mask: list[int] | None = None
    pending: list[int] | None = None
    committed: list[int] | None = None
    offset_pending: int | None = None
    offset_committed: int | None = None


@dataclass
class CardModel:
    """One amdgpu card's power state and the rules its files follow."""

    root: str
    dev: str
    """The card's PCI device directory, relative to the root."""
    apu: bool
    sclk_kind: str
    """``discrete`` (levels in pp_dpm_sclk) or ``fine`` (min/max)."""
    od_kind: str
    """``sclk`` (OD_SCLK min/max), ``offset`` (RDNA4), ``points`` (Polaris/Vega OD_SCLK with
    voltages), ``other`` (a file without OD_SCLK), ``none`` (no file)."""
    state: Logical
    levels: list[int] = field(default_factory=list)
    """Discrete: every level. Fine: (min, max) as pp_dpm_sclk prints them when found."""
    found_index: int | None = None
    found_mhz: int | None = None
    """Where the clock ran when found (discrete: level index; fine: MHz)."""
    od_range: list[int] | None = None
    od_boot: list[int] | None = None
    offset_range: list[int] | None = None
    offset_format: str = "6.14"
    legacy_empty: bool = False
    """An APU whose pp_od_clk_voltage reads empty outside manual (Van Gogh before 6.17)."""
    sleep_mhz: int | None = None
    """Deep sleep: pp_dpm_sclk gets an ``S:`` line with this clock (levels numbered from 1)."""
    unit: str = "Mhz"
    found: Logical | None = None
    found_bytes: dict[str, str] = field(default_factory=dict)
    """Each power file's bytes when found (hex), written back when the state is found's again."""

    # -- files ---------------------------------------------------------------------------------
    def path(self, name: str) -> Path:
        return Path(self.root) / self.dev / name

    def save(self) -> None:
        model = Path(self.root) / MODEL_DIR / (self.dev.replace("/", "_") + ".json")
        model.parent.mkdir(exist_ok=True)
        data = asdict(self)
        data.pop("root")
        partial = model.with_suffix(".partial")  # a reader in another process sees all or none
        partial.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
        partial.rename(model)

    @classmethod
    def load_all(cls, root: Path) -> list[CardModel]:
        """Every card model saved under ``root``."""
        models = []
        for model in sorted((root / MODEL_DIR).glob("*.json")):
            data = json.loads(model.read_text())
            data["state"] = Logical(**data["state"])
            data["found"] = Logical(**data["found"]) if data["found"] else None
            models.append(cls(root=str(root), **data))
        return models

    def found_now(self) -> None:
        """Take the files as they are as the found state's bytes (after `render`)."""
        self.found = Logical(**asdict(self.state))
        self.found_bytes = {name: self.path(name).read_bytes().hex()
                            for name in (PERF, SCLK, OD) if self.path(name).exists()}
        self.save()

    def render(self) -> None:
        """Write the power files from the state (the found bytes when the state is found's)."""
        if self.found is not None and asdict(self.state) == asdict(self.found):
            for name, data in self.found_bytes.items():
                self.path(name).write_bytes(bytes.fromhex(data))
            return
        self.path(PERF).write_text(f"{self.state.perf}\n")
        self.path(SCLK).write_text(self._sclk_text())
        if self.od_kind != "none":
            self.path(OD).write_bytes(self._od_bytes())

    # -- what the clock does -------------------------------------------------------------------
    def running_mhz(self) -> int:
        """The clock running: the committed pin, else where it ran when found, within limits."""
        s = self.state
        if self.sclk_kind == "discrete":
            return self.levels[self.running_index()]
        lo, hi = s.committed or self.levels
        if s.perf == "high":
            return hi
        if s.perf == "low":
            return lo
        return min(max(self.found_mhz if self.found_mhz is not None else lo, lo), hi)

    def running_index(self) -> int:
        if self.state.perf == "high":
            return len(self.levels) - 1
        if self.state.perf == "low":
            return 0
        index = self.found_index or 0
        mask = self.state.mask if self.state.perf == "manual" else None
        return index if not mask or index in mask else min(mask)

    def _sclk_text(self) -> str:
        u = self.unit
        if self.sclk_kind == "discrete":
            star = -1 if self.sleep_mhz is not None else self.running_index()
            lines = [f"{i + (self.sleep_mhz is not None)}: {mhz}{u} {'*' if i == star else ''}"
                     for i, mhz in enumerate(self.levels)]
        else:
            lo, hi = self.state.committed or self.levels
            now = self.running_mhz()
            if self.apu:  # vangogh_print_clk_levels: min, current or the placeholder, max
                mark = 2 if now == hi else 0 if now == lo else 1
                middle = now if mark == 1 else APU_PLACEHOLDER_MHZ
                lines = [f"0: {lo}{u} {'*' if mark == 0 else ''}",
                         f"1: {middle}{u} {'*' if mark == 1 else ''}",
                         f"2: {hi}{u} {'*' if mark == 2 else ''}"]
            elif self.sleep_mhz is not None:
                lines = [f"1: {lo}{u} ", f"2: {hi}{u} "]
            elif now in (lo, hi):
                lines = [f"0: {lo}{u} {'*' if now == lo else ''}",
                         f"1: {hi}{u} {'*' if now != lo else ''}"]
            else:
                lines = [f"0: {lo}{u} ", f"1: {now}{u} *", f"2: {hi}{u} "]
        if self.sleep_mhz is not None:
            lines.insert(0, f"S: {self.sleep_mhz}{u} *")
        return "".join(line + "\n" for line in lines)

    def _od_bytes(self) -> bytes:
        template = bytes.fromhex(self.found_bytes.get(OD, ""))
        s = self.state
        if self.od_kind == "sclk":
            if self.legacy_empty and s.perf != "manual":
                return b"\n"
            lo, hi = s.pending or self.od_boot or [0, 0]
            if self.legacy_empty or b"OD_SCLK:" not in template:  # vangogh's own format
                rlo, rhi = self.od_range or [lo, hi]
                return (f"OD_SCLK:\n0: {lo:>10}Mhz\n1: {hi:>10}Mhz\nOD_RANGE:\n"
                        f"SCLK: {rlo:>7}Mhz {rhi:>10}Mhz\n").encode()
            head, header, tail = template.partition(b"OD_SCLK:")
            values = iter((lo, hi))
            return head + header + _OD_SCLK_LINE.sub(
                lambda m: m.group(1) + str(next(values, 0)).encode() + m.group(3), tail,
                count=2)
        if self.od_kind == "offset" and self.offset_format == "6.14":
            return re.sub(rb"(OD_SCLK_OFFSET:\n)(-?\d+)(Mhz)",
                          lambda m: m.group(1) + str(s.offset_pending or 0).encode() + m.group(3),
                          template, count=1)
        return template

    # -- writes --------------------------------------------------------------------------------
    def attach(self, kernel: KernelSysfs) -> None:
        """Make ``kernel`` apply this card's rules to its power files."""
        for name in (PERF, SCLK, OD):
            kernel.rules[self.path(name)] = self._rule(name)

    def _rule(self, name: str) -> Rule:
        def rule(_: KernelSysfs, path: Path, value: str) -> None:
            self.store(name, path, value)
            self.render()
            self.save()
            return None

        return rule

    def store(self, name: str, path: Path, value: str) -> None:
        """Apply one write as the kernel does, or raise OSError as it refuses."""
        s = self.state
        if name == PERF:
            if value not in LEVELS:
                raise _refuse(errno.EINVAL, path)
            if value != "manual":
                s.mask = None  # any other level unforces the DPM levels
                if self.apu:  # and on an APU brings back the default clocks
                    s.pending = s.committed = list(self.od_boot) if self.od_boot else None
            s.perf = value
            return
        if s.perf != "manual":
            raise _refuse(errno.EINVAL, path)
        if name == SCLK:
            self._store_mask(path, value)
        else:
            self._store_od(path, value)

    def _store_mask(self, path: Path, value: str) -> None:
        if self.apu:  # smu fine-grained APUs: force_clk_levels refuses sclk
            raise _refuse(errno.EINVAL, path)
        try:
            mask = sorted({int(word) for word in value.split()})
        except ValueError:
            raise _refuse(errno.EINVAL, path) from None
        count = len(self.levels)
        if not mask or mask[0] < 0 or mask[-1] >= count:
            raise _refuse(errno.EINVAL, path)
        self.state.mask = mask

    def _store_od(self, path: Path, value: str) -> None:
        s = self.state
        words = value.split()
        if not words or self.od_kind in ("none", "points", "other"):
            raise _refuse(errno.EINVAL, path)
        command, args = words[0], words[1:]
        try:
            numbers = [int(a) for a in args]
        except ValueError:
            raise _refuse(errno.EINVAL, path) from None
        if command == "c" and not numbers:
            if self.od_kind == "offset":
                s.offset_committed = s.offset_pending
                return
            if s.pending[0] > s.pending[1]:  # the APU's check at commit
                raise _refuse(errno.EINVAL, path)
            s.committed = list(s.pending)
            return
        if command == "r" and not numbers:
            if self.od_kind == "offset":
                s.offset_pending = 0
            else:
                s.pending = list(self.od_boot)
            return
        if command != "s":
            raise _refuse(errno.EINVAL, path)
        if self.od_kind == "offset":
            lo, hi = self.offset_range
            if len(numbers) != 1 or not lo <= numbers[0] <= hi:
                raise _refuse(errno.EINVAL, path)
            s.offset_pending = numbers[0]
            return
        if len(numbers) % 2 or not numbers or (self.apu and len(numbers) != 2):
            raise _refuse(errno.EINVAL, path)
        pending = list(s.pending)
        for which, mhz in zip(numbers[::2], numbers[1::2], strict=True):
            lo, hi = self.od_range
            if which not in (0, 1) or not lo <= mhz <= hi:
                raise _refuse(errno.EINVAL, path)
            if not self.apu and ((which == 0 and mhz > pending[1])
                                 or (which == 1 and mhz < pending[0])):
                raise _refuse(errno.EINVAL, path)
            pending[which] = mhz
        s.pending = pending


def attach_all(root: Path, kernel: KernelSysfs) -> list[CardModel]:
    """Attach every card model saved under ``root`` to ``kernel``."""
    models = CardModel.load_all(root)
    for model in models:
        model.attach(kernel)
    return models


def found_state(model: CardModel) -> dict[str, Any]:
    """The logical state a card was found in (for assertions)."""
    return asdict(model.found) if model.found else {}
