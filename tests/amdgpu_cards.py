"""amdgpu cards in fixture trees: one of each class written here from the kernel's documented
formats, and trees built at test time from real GPUs' files in ``../shared/data/sysfs-amd/``.

Every card's power files follow `tests.amdgpu_kernel.CardModel`'s rules. The classes:

- ``polaris``: 8 discrete levels in pp_dpm_sclk, voltages in OD_SCLK (overdrive on);
- ``rdna2_od``: fine-grained (min/max) with OD_SCLK and OD_RANGE (overdrive on);
- ``rdna2``: fine-grained without pp_od_clk_voltage (overdrive off, the default);
- ``laptop``: pp_od_clk_voltage without OD_SCLK (the GPU offers no clock limits);
- ``phoenix``: an APU with OD_SCLK shown in every performance level (no kernel parameter);
- ``deck``: Van Gogh before Linux 6.17: pp_od_clk_voltage empty outside manual;
- ``rdna4``: OD_SCLK_OFFSET only (Linux >= 6.14 format), with ``rdna4_old`` the 6.12/6.13 one.

Real trees copy the files a folder has, byte for byte, into a temporary tree and write the others
(performance level ``auto``, a pp_dpm_sclk from OD_SCLK) in the kernel's format; nothing from
the data folder lands in the repository.
"""

from __future__ import annotations

import re
from pathlib import Path

from tests.amdgpu_kernel import OD, PERF, SCLK, CardModel, Logical
from tests.sysfs_fixtures import KernelSysfs, pci_card

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "sysfs-amd"
_SCLK = re.compile(r"^\s*(\w+):\s*(\d+)\s*(mhz)\s*(\*)?", re.IGNORECASE | re.MULTILINE)
_OD_PAIR = re.compile(r"^\s*([01]):\s*(-?\d+)\s*mhz\s*$", re.IGNORECASE)
_RANGE = re.compile(r"^\s*(\w+):\s*(-?\d+)\s*mhz\s+(-?\d+)\s*mhz", re.IGNORECASE)

# The formats these cards are written in are the kernel's (sienna_cichlid, vangogh, smu_v14_0_2
# print functions); the clocks are made up, in the ranges such parts have.
HAND_WRITTEN_OD = {
    "polaris": ("OD_SCLK:\n0:        300MHz        750mV\n1:        600MHz        769mV\n"
                "2:        900MHz        881mV\n3:       1145MHz        968mV\n"
                "4:       1215MHz       1000mV\n5:       1257MHz       1025mV\n"
                "6:       1300MHz       1050mV\n7:       1366MHz       1150mV\nOD_MCLK:\n"
                "0:        300MHz        750mV\n1:       2000MHz        800mV\nOD_RANGE:\n"
                "SCLK:     300MHz       2000MHz\nMCLK:     300MHz       2250MHz\n"
                "VDDC:     750mV        1150mV\n"),
    "rdna2_od": ("OD_SCLK:\n0: 500Mhz\n1: 2660Mhz\nOD_MCLK:\n0: 97Mhz\n1: 1000MHz\n"
                 "OD_VDDC_CURVE:\n0: 500MHz 700mV\n1: 1580MHz 850mV\n2: 2660MHz 1150mV\n"
                 "OD_RANGE:\nSCLK:     500Mhz       3150Mhz\n"),
    "laptop": "OD_VDDGFX_OFFSET:\n0mV\nOD_RANGE:\n",
    "phoenix": "OD_SCLK:\n0:        400Mhz\n1:       2400Mhz\nOD_RANGE:\nSCLK:     400Mhz"
               "       2400Mhz\n",
    "rdna4": ("OD_SCLK_OFFSET:\n0Mhz\nOD_MCLK:\n0: 97Mhz\n1: 1200MHz\nOD_VDDGFX_OFFSET:\n0mV\n"
              "OD_RANGE:\nSCLK_OFFSET:    -400Mhz       800Mhz\nMCLK:      97Mhz       1400Mhz\n"
              "VDDGFX_OFFSET:    -150mv          0mv\n"),
    "rdna4_old": ("OD_SCLK_OFFSET:\n0: -400Mhz\n1: 800Mhz\nOD_MCLK:\n0: 97Mhz\n1: 1200MHz\n"
                  "OD_VDDGFX_OFFSET:\n0mV\nOD_RANGE:\nSCLK_OFFSET:    -400Mhz       800Mhz\n"
                  "MCLK:      97Mhz       1400Mhz\nVDDGFX_OFFSET:    -150mv          0mv\n"),
}
HAND_WRITTEN_SCLK = {
    "polaris": "0: 300Mhz *\n1: 600Mhz \n2: 900Mhz \n3: 1145Mhz \n4: 1215Mhz \n5: 1257Mhz \n"
               "6: 1300Mhz \n7: 1366Mhz \n",
    "rdna2": "0: 500Mhz \n1: 1283Mhz *\n2: 2660Mhz \n",
    "laptop": "0: 400Mhz \n1: 1500Mhz *\n2: 2300Mhz \n",
    "rdna4": "S: 12Mhz *\n1: 600Mhz \n2: 2400Mhz \n",
    "rdna4_old": "0: 600Mhz *\n1: 2400Mhz \n",
}
HAND_WRITTEN = {  # class -> (PCI device id, APU?)
    "polaris": (0x67DF, False), "rdna2_od": (0x73BF, False), "rdna2": (0x73BF, False),
    "laptop": (0x73EF, False), "phoenix": (0x15BF, True), "deck": (0x163F, True),
    "rdna4": (0x7550, False), "rdna4_old": (0x7550, False),
}


def amdgpu_card(
    root: Path, *, card: str = "card1", device_id: int = 0x73BF, apu: bool = False,
    sclk: str | bytes | None = None, od: str | bytes | None = None, perf: str | bytes = "auto",
    apu_range_mhz: tuple[int, int] | None = None, legacy_empty: bool = False,
    extra: dict[str, bytes] | None = None, bdf: str = "0000:03:00.0",
) -> tuple[Path, KernelSysfs, CardModel]:
    """A card whose power files are ``sclk`` (pp_dpm_sclk; written from the OD table when None),
    ``od`` (pp_od_clk_voltage; none when None) and ``perf``, as given, byte for byte. Returns
    (card directory, kernel, model). ``apu_range_mhz``: an APU's default clock range where its
    file does not show it (``legacy_empty``: the file reads empty outside manual)."""
    dev = pci_card(root, bdf, "amdgpu", card, device_id) / "device"
    kernel = KernelSysfs(root)
    files = {"gpu_busy_percent": b"37\n", "hwmon/hwmon1/power1_average": b"45000000\n",
             **(extra or {})}
    for name, data in files.items():
        (dev / name).parent.mkdir(parents=True, exist_ok=True)
        (dev / name).write_bytes(data)
    kernel.read_only.add(dev / "gpu_busy_percent")
    od_bytes = od.encode() if isinstance(od, str) else od
    perf_bytes = perf.encode() + b"\n" if isinstance(perf, str) else perf
    model = _model(root, dev, apu, od_bytes, perf_bytes, sclk, apu_range_mhz, legacy_empty)
    (dev / PERF).write_bytes(perf_bytes)
    if od_bytes is not None:
        (dev / OD).write_bytes(od_bytes)
    if sclk is None and model.levels:
        (dev / SCLK).write_text(model._sclk_text())
    elif sclk is not None:
        (dev / SCLK).write_bytes(sclk.encode() if isinstance(sclk, str) else sclk)
    model.found_now()
    model.attach(kernel)
    return dev.parent, kernel, model


def _text(data: bytes | None) -> str:
    return "" if data is None else data.replace(b"\0", b"").decode()


def _sections(text: str) -> dict[str, list[str]]:
    sections: dict[str, list[str]] = {}
    name = ""
    for line in text.splitlines():
        if line.strip().endswith(":") and ": " not in line.strip():
            name = line.strip()[:-1]
            sections[name] = []
        elif line.strip():
            sections.setdefault(name, []).append(line)
    return sections


def _model(root: Path, dev: Path, apu: bool, od: bytes | None, perf: bytes,
           sclk: str | bytes | None, apu_range: tuple[int, int] | None,
           legacy_empty: bool) -> CardModel:
    sections = _sections(_text(od))
    pairs = [_OD_PAIR.match(line) for line in sections.get("OD_SCLK", [])]
    ranges = {m.group(1).upper(): [int(m.group(2)), int(m.group(3))]
              for m in map(_RANGE.match, sections.get("OD_RANGE", [])) if m}
    if od is None:
        od_kind = "none"
    elif "OD_SCLK_OFFSET" in sections:
        od_kind = "offset"
    elif pairs and all(pairs) and len(pairs) == 2:
        od_kind = "sclk"
    elif sections.get("OD_SCLK"):
        od_kind = "points"
    elif legacy_empty:
        od_kind = "sclk"
    else:
        od_kind = "other"
    sclk_text = _text(sclk.encode() if isinstance(sclk, str) else sclk)
    rows = [(tag, int(mhz), star) for tag, mhz, _, star in _SCLK.findall(sclk_text)]
    numbered = [(int(tag), mhz, bool(star)) for tag, mhz, star in rows if tag.isdigit()]
    sleep = [mhz for tag, mhz, star in rows if tag.upper() == "S" and star]
    od_sclk = [int(m.group(2)) for m in pairs] if od_kind == "sclk" and pairs else None
    if legacy_empty:
        od_sclk = list(apu_range) if apu_range else None
    state = Logical(perf=_text(perf).strip(), pending=od_sclk, committed=od_sclk)
    model = CardModel(root=str(root), dev=str(dev.relative_to(root)), apu=apu,
                      sclk_kind="discrete" if len(numbered) > 3 else "fine", od_kind=od_kind,
                      state=state, legacy_empty=legacy_empty,
                      sleep_mhz=sleep[0] if sleep else None,
                      unit=next((u for *_, u, _ in _SCLK.findall(sclk_text)), "Mhz"))
    if od_kind == "sclk":
        model.od_range = ranges.get("SCLK") or (list(apu_range) if apu_range else None)
        # r puts back what the GPU booted with: an APU's defaults are its whole range
        model.od_boot = list(model.od_range) if apu else list(od_sclk)
    if od_kind == "offset":
        model.offset_range = ranges.get("SCLK_OFFSET")
        current = sections["OD_SCLK_OFFSET"]
        model.offset_format = "6.14" if len(current) == 1 else "6.12"
        state.offset_pending = state.offset_committed = (
            int(re.sub(r"[^-\d]", "", current[0])) if len(current) == 1 else None)
    if numbered:
        model.levels = [mhz for _, mhz, _ in numbered]
        stars = [i for i, (_, _, star) in enumerate(numbered) if star]
        if model.sclk_kind == "discrete":
            model.found_index = stars[0] if stars else 0
        else:
            model.levels = [numbered[0][1], numbered[-1][1]]
            marked = [numbered[i][1] for i in stars]
            model.found_mhz = marked[0] if marked else None
    elif od_sclk:  # no pp_dpm_sclk captured: the kernel's table for the OD limits
        model.levels = list(od_sclk)
        model.found_mhz = od_sclk[0]
    elif od_kind == "points":  # Polaris/Vega list in pp_dpm_sclk the clocks of OD_SCLK
        clocks = [re.search(r"(\d+)\s*mhz", line, re.IGNORECASE) for line in sections["OD_SCLK"]]
        model.levels = [int(m.group(1)) for m in clocks if m]
        model.sclk_kind, model.found_index = "discrete", 0
    return model


def hand_written(root: Path, kind: str, **kwargs: object) -> tuple[Path, KernelSysfs, CardModel]:
    """A card of class ``kind`` (see the module doc), written here, not read from data."""
    device_id, apu = HAND_WRITTEN[kind]
    if kind == "deck":
        kwargs.setdefault("sclk", "0: 200Mhz \n1: 1100Mhz \n2: 1600Mhz *\n")
        return amdgpu_card(root, device_id=device_id, apu=True, od="\n",
                           legacy_empty=True, apu_range_mhz=(200, 1600), **kwargs)  # type: ignore[arg-type]
    kwargs.setdefault("od", HAND_WRITTEN_OD.get(kind))
    kwargs.setdefault("sclk", HAND_WRITTEN_SCLK.get(kind))
    return amdgpu_card(root, device_id=device_id, apu=apu, **kwargs)  # type: ignore[arg-type]


# -- trees from real GPUs' files --------------------------------------------------------------

REAL_FACTS: dict[str, dict[str, object]] = {
    # What the data folder's README says of each GPU that its files alone do not show.
    "amdgpu-sysfs-rs/vangogh": {"apu": True},
    "amdgpu-sysfs-rs/internal-7840u": {"apu": True},
    "pastes-simpledeckytdp-issue-62/apu-unspecified-200-2200": {"apu": True},
    # a Steam Deck in auto on a kernel before 6.17: the file reads empty; its range is Van
    # Gogh's (vangogh's OD_RANGE above)
    "pastes-simpledeckytdp-issue-62/steamdeck-lcd-oled-auto": {
        "apu": True, "legacy_empty": True, "apu_range_mhz": (200, 1600)},
}
"""Facts of real GPUs their files do not carry, keyed by folder (relative to `DATA`)."""


def real_folders() -> list[str]:
    """Every GPU folder under `DATA` with a clock file (pp_dpm_sclk or pp_od_clk_voltage*),
    relative to it; [] where the data folder is absent."""
    if not DATA.is_dir():
        return []
    folders = {str(p.parent.relative_to(DATA)) for p in DATA.glob("*/*/*")
               if p.name == SCLK or p.name.startswith(OD)}
    return sorted(folders)


def from_data(root: Path, folder: str, card: str = "card1", bdf: str | None = None
              ) -> tuple[Path, KernelSysfs, CardModel]:
    """A tree under ``root`` with the card whose files are in ``DATA/folder`` (at PCI address
    ``bdf``; None: the one its uevent names)."""
    src = DATA / folder
    facts = REAL_FACTS.get(folder, {})
    od_files = sorted(src.glob(f"{OD}*"))
    uevent = (src / "uevent").read_text(errors="replace") if (src / "uevent").exists() else ""
    pci = re.search(r"PCI_ID=1002:([0-9A-Fa-f]{4})", uevent)
    slot = re.search(r"PCI_SLOT_NAME=(\S+)", uevent)
    extra = {}
    for name in ("gpu_busy_percent",):
        if (src / name).exists():
            extra[name] = (src / name).read_bytes()
    perf = (src / PERF).read_bytes() if (src / PERF).exists() else (
        b"manual\n" if folder.endswith("/vangogh") else b"auto\n")  # captured in manual
    return amdgpu_card(
        root, card=card, device_id=int(pci.group(1), 16) if pci else 0x73BF,
        apu=bool(facts.get("apu")),
        bdf=bdf or (slot.group(1) if slot else "0000:03:00.0"),
        sclk=(src / SCLK).read_bytes() if (src / SCLK).exists() else None,
        od=od_files[0].read_bytes() if od_files else None, perf=perf, extra=extra,
        legacy_empty=bool(facts.get("legacy_empty")),
        apu_range_mhz=facts.get("apu_range_mhz"),  # type: ignore[arg-type]
    )
