"""What amdgpu prints in ``pp_dpm_sclk`` and ``pp_od_clk_voltage``, parsed as kernels print it.

``pp_dpm_sclk`` (one line per shader-clock level, ``N: 500Mhz``, ``*`` after the one running;
``Mhz`` or ``MHz`` by kernel version):

- Discrete parts (Polaris, Vega) list their 8 real DPM levels, numbered 0..n-1.
- Fine-grained parts (RDNA, APUs) list only their minimum and maximum. When the clock runs between
  them a middle line shows it (``1: 1283Mhz *``); on APUs (Van Gogh, Raven) an unmarked middle
  line is a fixed placeholder (1100 MHz), never a level.
- A GPU in deep sleep adds ``S: 19Mhz *`` before the levels, and kernels from 6.17 number the levels
  after it from 1; a line ``F: 1283Mhz *`` (the current clock of a fine-grained part) and an
  unnumbered ``   1283Mhz *`` say the clock running the same way.
- No line may be marked (RDNA1 at its maximum; a clock matching no level within 25 MHz), or two
  (a GPU reading 0 MHz everywhere): the running clock is then unknown, not an error.

``pp_od_clk_voltage`` is a list of sections (``OD_SCLK:``, ``OD_MCLK:``, ``OD_VDDGFX_OFFSET:``,
``OD_RANGE:`` ...), possibly with NUL padding between them (dropped by `attribute_text`):
``OD_SCLK`` holds the soft minimum and maximum (``0: 500Mhz``, ``1: 2660Mhz``) on fine-grained parts
and the 8 (clock, voltage) points on Polaris/Vega; ``OD_RANGE`` the limits each may take
(``SCLK: 500Mhz 2800Mhz``); RDNA4 has ``OD_SCLK_OFFSET`` instead (``0Mhz`` on Linux >= 6.14; the
6.12/6.13 format printed its limits there as ``0: -500Mhz`` / ``1: 1000Mhz``, not the offset).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from govd.device.sysfs import excerpt

_SCLK_LINE = re.compile(r"^(?:(\w+):)?\s*(\d+(?:\.\d+)?)\s*mhz\s*(\*)?$", re.IGNORECASE)
_MHZ = re.compile(r"(-?\d+(?:\.\d+)?)\s*mhz", re.IGNORECASE)
_POINT = re.compile(r"^(\d+):\s*(-?\d+(?:\.\d+)?)\s*mhz(?:\s+(-?\d+(?:\.\d+)?)\s*mv)?$",
                    re.IGNORECASE)
MAX_SCLK_LINES = 64
"""Most numbered lines believed in ``pp_dpm_sclk``: a discrete table has at most 16 levels."""
FINE_LINES = 3
"""A table of two or three numbered lines is the fine-grained (min, [current], max) form; every
discrete sclk table amdgpu prints has 8 levels (and never fewer than 4)."""


@dataclass(frozen=True, slots=True)
class SclkTable:
    """``pp_dpm_sclk`` parsed."""

    levels_mhz: tuple[float, ...]
    """The levels, in the table's order: every numbered line of a discrete table, the first and
    last of a fine-grained one. Units: MHz."""
    fine: bool
    """The fine-grained (min, [current], max) form."""
    running_index: int | None
    """Position in `levels_mhz` of the level marked running, None when no level is (or the mark
    is on a current-clock line)."""
    current_mhz: float | None
    """The clock running as the table says it, None when nothing is marked (or two lines with
    different clocks are). Units: MHz."""
    sleeping: bool = False
    """The current clock is the ``S:`` deep-sleep line's."""


def parse_sclk(text: str) -> SclkTable:
    """Parse ``pp_dpm_sclk`` (NULs already dropped). Raises ValueError (one line) for a table no
    kernel prints: no level, numbers not consecutive from 0 (or from 1 after an ``S:`` line), a
    discrete table not ascending, more than `MAX_SCLK_LINES` lines."""
    numbered: list[tuple[int, float, bool]] = []
    marked: list[float] = []  # clocks of the current-clock lines (S:, F:, unnumbered) marked
    tags: set[str] = set()
    for line in text.splitlines():
        match = _SCLK_LINE.match(line.strip())
        if match is None:
            continue
        tag, mhz, star = match.group(1), float(match.group(2)), match.group(3) is not None
        if tag is not None and tag.isdigit():
            numbered.append((int(tag), mhz, star))
            if len(numbered) > MAX_SCLK_LINES:
                raise ValueError(f"more than {MAX_SCLK_LINES} levels")
        else:
            tags.add((tag or "").upper())
            if star:
                marked.append(mhz)
    if not numbered:
        raise ValueError(f"no clock levels in {excerpt(text)}")
    numbers = [n for n, _, _ in numbered]
    first = numbers[0]
    if first not in ((0, 1) if "S" in tags else (0,)) or numbers != list(
            range(first, first + len(numbers))):
        # the index govd writes is a level's position: any other numbering could force a level
        # the driver numbers differently
        raise ValueError("levels not numbered from 0 (or from 1 after an S: line): "
                         f"{' '.join(map(str, numbers[:20]))}")
    fine = 2 <= len(numbered) <= FINE_LINES  # one line is one level, whatever the part
    starred = [(i, mhz) for i, (_, mhz, star) in enumerate(numbered) if star]
    levels: tuple[float, ...]
    if fine:
        levels = (numbered[0][1], numbered[-1][1])
        running = [0 if i == 0 else 1 for i, _ in starred if i in (0, len(numbered) - 1)]
    else:
        levels = tuple(mhz for _, mhz, _ in numbered)
        if list(levels) != sorted(levels):
            raise ValueError(f"clocks not ascending: {' '.join(f'{m:g}' for m in levels[:20])}"
                             " MHz")
        running = [i for i, _ in starred]
    clocks = marked or [mhz for _, mhz in starred]
    current = clocks[0] if clocks and all(c == clocks[0] for c in clocks) else None
    index = running[0] if len(running) == 1 and not marked else None
    return SclkTable(levels, fine, index, current, sleeping=bool(marked) and "S" in tags)


@dataclass(frozen=True, slots=True)
class OdTable:
    """``pp_od_clk_voltage`` parsed (what govd uses of it)."""

    sections: dict[str, tuple[str, ...]] = field(default_factory=dict)
    """Every section's lines, white space collapsed, by header (``OD_SCLK``, ``OD_RANGE`` ...)."""

    @property
    def empty(self) -> bool:
        """Nothing printed: an APU outside ``manual`` on kernels before 6.17 (Van Gogh, Renoir)."""
        return not self.sections

    @property
    def sclk_mhz(self) -> tuple[float, float] | None:
        """``OD_SCLK``'s soft (minimum, maximum) on a fine-grained part, None where the section is
        absent or holds (clock, voltage) points (Polaris, Vega). Units: MHz."""
        points = self.sclk_points()
        if len(points) != 2 or any(v is not None for _, v in points):
            return None
        return points[0][0], points[1][0]

    def sclk_points(self) -> list[tuple[float, float | None]]:
        """``OD_SCLK``'s lines as (MHz, V or None), in order."""
        points = []
        for line in self.sections.get("OD_SCLK", ()):
            match = _POINT.match(line)
            if match is not None:
                volts = None if match.group(3) is None else float(match.group(3)) / 1000.0
                points.append((float(match.group(2)), volts))
        return points

    def range_mhz(self, key: str) -> tuple[float, float] | None:
        """The (low, high) ``OD_RANGE`` gives for ``key`` (``SCLK``, ``SCLK_OFFSET``, ``MCLK``),
        None when it gives none. Units: MHz."""
        for line in self.sections.get("OD_RANGE", ()):
            name, _, rest = line.partition(":")
            if name.strip().upper() == key:
                values = [float(v) for v in _MHZ.findall(rest)]
                if len(values) == 2 and values[0] <= values[1]:
                    return values[0], values[1]
        return None

    @property
    def has_sclk_offset(self) -> bool:
        """RDNA4's ``OD_SCLK_OFFSET`` (a clock offset instead of a minimum and maximum)."""
        return "OD_SCLK_OFFSET" in self.sections

    @property
    def apu_like(self) -> bool:
        """Only what APUs print: ``OD_SCLK`` and ``OD_RANGE`` (with ``SCLK``, and ``CCLK`` on Van
        Gogh) and the CPU core clocks; a discrete GPU prints its memory clock, voltage offset or
        curve too."""
        apu_sections = {"OD_SCLK", "OD_RANGE"}
        for name in self.sections:
            if name not in apu_sections and not name.startswith("CCLK_RANGE"):
                return False
        keys = {line.partition(":")[0].strip().upper() for line in self.sections.get("OD_RANGE",
                                                                                   ())}
        return bool(self.sections) and keys <= {"SCLK", "CCLK"}

    def without(self, section: str) -> str:
        """Every section but ``section``, as one line per section (``NAME: line | line``): what
        a restore must leave as it found it besides the clock govd sets."""
        return "\n".join(f"{name}: {' | '.join(lines)}" for name, lines in self.sections.items()
                         if name != section)


def parse_od(text: str) -> OdTable:
    """Parse ``pp_od_clk_voltage`` (NULs already dropped): its sections, each line's white space
    collapsed. Lines before any header are kept under ``""``."""
    sections: dict[str, list[str]] = {}
    name = ""
    for raw in text.splitlines():
        line = " ".join(raw.split())
        if not line:
            continue
        if line.endswith(":") and not line[:-1].strip().isdigit() and ": " not in line:
            name = line[:-1].strip().upper()
            sections.setdefault(name, [])
            continue
        sections.setdefault(name, []).append(line)
    return OdTable({key: tuple(lines) for key, lines in sections.items()})


_OD_SCLK_PAIR = re.compile(r"(?:^|\n)OD_SCLK:[ \t]*\n[ \t]*0:[ \t]*(\d+)[ \t]*mhz[ \t]*\n"
                           r"[ \t]*1:[ \t]*(\d+)[ \t]*mhz[ \t]*(?:\n|$)", re.IGNORECASE)


def od_sclk_pair(text: str) -> tuple[float, float] | None:
    """``OD_SCLK``'s (minimum, maximum) from ``pp_od_clk_voltage``, as `OdTable.sclk_mhz` gives
    it but without parsing the other sections: the check a tick makes. Units: MHz."""
    match = _OD_SCLK_PAIR.search(text)
    if match is None or "OD_SCLK:" not in text:
        return None
    section = text[match.end():].lstrip()
    if section[:2].rstrip(":").isdigit():  # a third point: Polaris/Vega, no min/max pair
        return None
    return float(match.group(1)), float(match.group(2))


def od_sections(text: str) -> dict[str, tuple[str, ...]]:
    """The sections of a string made by `OdTable.without`, by name."""
    found: dict[str, tuple[str, ...]] = {}
    for line in text.splitlines():
        name, _, rest = line.partition(": ")
        found[name] = tuple(rest.split(" | ")) if rest else ()
    return found


def parse_voltage_curve(text: str) -> list[tuple[float, float]]:
    """(MHz, V) points from ``pp_od_clk_voltage``: ``OD_VDDC_CURVE`` where it has voltages, else
    the ``OD_SCLK`` lines that carry one (Polaris, Vega10). Empty when it has neither."""
    table = parse_od(text)
    curve = []
    for line in table.sections.get("OD_VDDC_CURVE", ()):
        match = _POINT.match(line)
        if match is not None and match.group(3) is not None:
            curve.append((float(match.group(2)), float(match.group(3)) / 1000.0))
    if not curve:
        curve = [(mhz, v) for mhz, v in table.sclk_points() if v is not None]
    return sorted(curve)
