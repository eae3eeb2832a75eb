"""Sysfs trees modelled on real devices, and a `SysfsIO` double that enforces the kernel's rules.

Plain files accept any write, so `KernelSysfs` checks each write against the rule the driver's
store function applies (EINVAL when min > max would result, amdgpu's manual-only `pp_dpm_sclk`,
EACCES on read-only files, clamping and rounding like the kernel), applies side effects (the running
clock follows the limits) and records every accepted write as ``(path relative to root, value)``.

Faults are injected per file and per operation (`KernelSysfs.fail`): the next N reads or writes
of a file raise ``OSError(errno)``, or every one until `KernelSysfs.heal`; `KernelSysfs.vanish`
takes a file away (ENOENT, as when a driver unbinds mid-tick) until `KernelSysfs.reappear`.
Every attempted write, refused or not, is kept in ``attempts`` with the errno it got (0 = taken).
"""

from __future__ import annotations

import errno
import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from govd.device.sysfs import SysfsIO

Rule = Callable[["KernelSysfs", Path, str], "str | None"]


def _refuse(code: int, path: Path) -> OSError:
    return OSError(code, os.strerror(code), str(path))


@dataclass
class Fault:
    """An errno a file's reads or writes raise, ``times`` more times (None: until healed)."""

    code: int
    times: int | None = None
    skip: int = 0
    """Calls let through before the fault starts."""
    fired: int = 0


class KernelSysfs(SysfsIO):
    """A `SysfsIO` over a fixture tree that refuses what the kernel refuses and logs writes."""

    def __init__(self, root: Path):
        self.root = root
        self.rules: dict[Path, Rule] = {}
        self.read_only: set[Path] = set()
        self.inject: dict[Path, int] = {}
        self.faults: dict[tuple[Path, str], Fault] = {}
        self.writes: list[tuple[str, str]] = []
        self.attempts: list[tuple[str, str, int]] = []

    def rel(self, path: Path) -> str:
        return str(path.relative_to(self.root))

    # -- fault injection -------------------------------------------------------------------
    def fail(
        self, path: Path, op: str, code: int, times: int | None = None, skip: int = 0
    ) -> Fault:
        """Make ``times`` ``op`` ("read" or "write") calls on ``path`` raise ``OSError(code)``
        after letting ``skip`` through; every call until `heal` when ``times`` is None."""
        if op not in ("read", "write"):
            raise ValueError(f"op must be read or write, got {op!r}")
        fault = Fault(code, times, skip)
        self.faults[(path, op)] = fault
        return fault

    def heal(self) -> None:
        """Remove every injected fault."""
        self.faults.clear()

    def vanish(self, path: Path) -> None:
        """Take ``path`` away (reads and writes then get ENOENT) until `reappear`."""
        path.rename(self._hidden(path))

    def reappear(self, path: Path) -> None:
        """Put back a file `vanish` took away."""
        self._hidden(path).rename(path)

    @staticmethod
    def _hidden(path: Path) -> Path:
        return path.with_name(f".vanished-{path.name}")

    def _check_fault(self, path: Path, op: str) -> None:
        fault = self.faults.get((path, op))
        if fault is None:
            return
        if fault.skip > 0:
            fault.skip -= 1
            return
        fault.fired += 1
        if fault.times is not None:
            fault.times -= 1
            if fault.times <= 0:
                del self.faults[(path, op)]
        raise _refuse(fault.code, path)

    # -- the SysfsIO door ------------------------------------------------------------------
    def read_text(self, path: str | Path) -> str:
        path = Path(path)  # devices pass a str (see SysfsIO.read_text)
        self._check_fault(path, "read")
        return super().read_text(path)

    def write_text(self, path: str | Path, value: str) -> None:
        path = Path(path)
        try:
            self._store(path, value)
        except OSError as exc:
            self.attempts.append((self.rel(path), value, exc.errno or 0))
            raise
        self.attempts.append((self.rel(path), value, 0))
        self.writes.append((self.rel(path), value))

    def _store(self, path: Path, value: str) -> None:
        if path in self.inject:
            raise _refuse(self.inject.pop(path), path)
        self._check_fault(path, "write")
        if not path.exists():
            raise _refuse(errno.ENOENT, path)
        if path in self.read_only:
            raise _refuse(errno.EACCES, path)
        rule = self.rules.get(path)
        stored = rule(self, path, value.strip()) if rule else value
        if stored is not None:  # None: the rule wrote the driver's files itself
            path.write_text(stored + "\n")

    def writable(self, path: Path) -> bool:
        return path.exists() and path not in self.read_only

    def value(self, path: Path) -> str:
        return path.read_bytes().decode(errors="replace").strip()

    def forget_writes(self) -> None:
        self.writes.clear()
        self.attempts.clear()


def _put(path: Path, content: object) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"{content}\n")


def _link(link: Path, target: Path) -> None:
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(os.path.relpath(target, link.parent))


def _int(path: Path, value: str) -> int:
    try:
        return int(value)
    except ValueError:
        raise _refuse(errno.EINVAL, path) from None


PCI_VENDORS = {"i915": 0x8086, "xe": 0x8086, "amdgpu": 0x1002}


def pci_card(root: Path, bdf: str, driver: str, card: str = "card0",
             device_id: int | None = None) -> Path:
    """A PCI GPU with its drm card, render node and a connector; returns the card's real path.
    ``device_id``: the PCI device id shown (with the driver's vendor) in ``vendor``/``device``."""
    pci = root / "devices/pci0000:00" / bdf
    pci.mkdir(parents=True)
    if device_id is not None:
        _put(pci / "vendor", f"{PCI_VENDORS[driver]:#06x}")
        _put(pci / "device", f"{device_id:#06x}")
    _put(root / "bus/pci/drivers" / driver / "bind", "")
    _link(pci / "driver", root / "bus/pci/drivers" / driver)
    _put(pci / "uevent", f"DRIVER={driver}\nPCI_SLOT_NAME={bdf}")
    minor = int(card.removeprefix("card"))
    for node in (card, f"renderD{128 + minor}", f"{card}-DP-1"):
        _put(pci / "drm" / node / "uevent", f"DEVNAME=dri/{node}")
        _link(pci / "drm" / node / "device", pci)
        _link(root / "class/drm" / node, pci / "drm" / node)
    return pci / "drm" / card


# -- i915 and xe -------------------------------------------------------------------------------

def _pinned_pair_rules(
    kernel: KernelSysfs, min_path: Path, max_path: Path, lo: int, hi: int,
    to_unit: Callable[[int], int], act_paths: list[Path], act_found_mhz: int | None = None,
) -> None:
    """min/max soft limits as i915's store functions treat them: rounded to the GT unit, EINVAL
    outside [lo, hi] or when min > max would result; the running clock runs where it ran when
    found (``act_found_mhz``, default: what the files say now), within the limits, so limits put
    back bring the clock found back too."""
    found = {act: act_found_mhz if act_found_mhz is not None else int(kernel.value(act))
             for act in act_paths}

    def follow() -> None:
        low, high = int(kernel.value(min_path)), int(kernel.value(max_path))
        for act in act_paths:
            if kernel.value(act).isdigit():  # garbage a test put there stays for a read
                act.write_text(f"{min(max(found[act], low), high)}\n")

    def store(which: str) -> Rule:
        def rule(k: KernelSysfs, path: Path, value: str) -> str:
            freq = to_unit(_int(path, value))
            low, high = int(k.value(min_path)), int(k.value(max_path))
            if not lo <= freq <= hi or (which == "min" and freq > high) or (
                which == "max" and freq < low
            ):
                raise _refuse(errno.EINVAL, path)
            path.write_text(f"{freq}\n")
            follow()
            return str(freq)

        return rule

    kernel.rules[min_path] = store("min")
    kernel.rules[max_path] = store("max")


def i915_gen9(
    root: Path, card: str = "card0", rpn: int = 300, rp0: int = 1150,
    min_mhz: int = 300, max_mhz: int = 1150, act_mhz: int = 300, hwmon: bool = False,
    bdf: str = "0000:00:02.0", device_id: int = 0x1912,
) -> tuple[Path, KernelSysfs]:
    """A gen9 GT (Skylake GT2: RPn 300, RP0 1150, unit 50/3 MHz) in PCI slot ``bdf``. Returns
    (card dir, kernel)."""
    path = pci_card(root, bdf, "i915", card, device_id=device_id)
    files = {"gt_RPn_freq_mhz": rpn, "gt_RP0_freq_mhz": rp0, "gt_RP1_freq_mhz": 350,
             "gt_min_freq_mhz": min_mhz, "gt_max_freq_mhz": max_mhz, "gt_boost_freq_mhz": rp0,
             "gt_act_freq_mhz": act_mhz, "gt_cur_freq_mhz": act_mhz}
    for name, value in files.items():
        _put(path / name, value)
    if hwmon:
        _put(path / "device/hwmon/hwmon3/energy1_input", 123_000_000)
    kernel = KernelSysfs(root)
    kernel.read_only |= {path / n for n in files if n not in
                         ("gt_min_freq_mhz", "gt_max_freq_mhz", "gt_boost_freq_mhz")}

    def to_unit(mhz: int) -> int:
        opcode = (mhz * 3 + 25) // 50
        return (opcode * 50 + 1) // 3

    _pinned_pair_rules(kernel, path / "gt_min_freq_mhz", path / "gt_max_freq_mhz", rpn, rp0,
                       to_unit, [path / "gt_act_freq_mhz", path / "gt_cur_freq_mhz"])

    def boost(k: KernelSysfs, p: Path, value: str) -> str:
        freq = to_unit(_int(p, value))
        if not rpn <= freq <= rp0:
            raise _refuse(errno.EINVAL, p)
        return str(freq)

    kernel.rules[path / "gt_boost_freq_mhz"] = boost
    return path, kernel


def xe_lunarlake(
    root: Path, card: str = "card0", rpn: int = 400, rp0: int = 2050,
    min_mhz: int = 400, max_mhz: int = 2050, act_mhz: int = 800,
) -> tuple[Path, KernelSysfs]:
    """An xe GT (tile0/gt0/freq0, RPn 400, RP0 2050). Returns (card dir, kernel)."""
    path = pci_card(root, "0000:00:02.0", "xe", card)
    freq0 = path / "device/tile0/gt0/freq0"
    files = {"rpn_freq": rpn, "rp0_freq": rp0, "rpe_freq": 1000, "min_freq": min_mhz,
             "max_freq": max_mhz, "act_freq": act_mhz, "cur_freq": act_mhz}
    for name, value in files.items():
        _put(freq0 / name, value)
    _put(path / "device/tile0/gt1/freq0/rpn_freq", 100)  # the media GT, not governed
    kernel = KernelSysfs(root)
    xe_rules(kernel, freq0, rpn, rp0, act_mhz)
    save_spec(root, "xe", {"freq0": str(freq0.relative_to(root)), "rpn": rpn, "rp0": rp0,
                           "act": act_mhz})
    return path, kernel


def xe_rules(kernel: KernelSysfs, freq0: Path, rpn: int, rp0: int, act_mhz: int) -> None:
    """xe's rules for the GT at ``freq0``: min/max in RPn..RP0, min <= max; the clock found
    (``act_mhz``) runs within the limits."""
    kernel.read_only |= {freq0 / n for n in ("rpn_freq", "rp0_freq", "rpe_freq", "act_freq",
                                             "cur_freq")}
    _pinned_pair_rules(kernel, freq0 / "min_freq", freq0 / "max_freq", rpn, rp0,
                       lambda mhz: mhz, [freq0 / "act_freq", freq0 / "cur_freq"], act_mhz)


SPEC = "kernel-spec.json"
"""Under a fixture root: the rules its stateless fixtures (xe) follow, for `tests.kernel_driver`
to apply in another process (amdgpu cards keep their own model, `tests.amdgpu_kernel`)."""


def save_spec(root: Path, kind: str, entry: dict[str, object]) -> None:
    """Record that the fixture ``entry`` of ``kind`` lives under ``root``."""
    path = root / SPEC
    spec = json.loads(path.read_text()) if path.exists() else {}
    spec.setdefault(kind, []).append(entry)
    path.write_text(json.dumps(spec, sort_keys=True) + "\n")


def load_spec(root: Path, kernel: KernelSysfs) -> None:
    """Apply the rules `save_spec` recorded under ``root`` to ``kernel``."""
    path = root / SPEC
    spec = json.loads(path.read_text()) if path.exists() else {}
    for entry in spec.get("xe", []):
        xe_rules(kernel, root / entry["freq0"], entry["rpn"], entry["rp0"], entry["act"])


# -- amdgpu (the kernel's rules live in tests.amdgpu_kernel; more classes in tests.amdgpu_cards) --

POLARIS_SCLK_MHZ = [300, 600, 900, 1145, 1215, 1257, 1300, 1366]


def amdgpu_polaris(
    root: Path, card: str = "card1", current: int = 0, perf_level: str = "auto",
    unit: str = "Mhz",
) -> tuple[Path, KernelSysfs]:
    """A discrete Polaris (RX 580, 1002:67df): 8 sclk levels, level ``current`` running,
    voltages in OD_SCLK. Returns (card, kernel)."""
    from tests.amdgpu_cards import HAND_WRITTEN_OD, amdgpu_card

    sclk = "".join(f"{i}: {mhz}{unit} {'*' if i == current else ''}\n"
                   for i, mhz in enumerate(POLARIS_SCLK_MHZ))
    path, kernel, _ = amdgpu_card(root, card=card, device_id=0x67DF, sclk=sclk,
                                  od=HAND_WRITTEN_OD["polaris"], perf=perf_level)
    return path, kernel


def amdgpu_navi21(
    root: Path, card: str = "card1", current_mhz: int = 1283, perf_level: str = "auto",
) -> tuple[Path, KernelSysfs]:
    """A fine-grained RDNA2 (RX 6800, 1002:73bf) with overdrive on: pp_dpm_sclk shows min,
    current, max (500..2660 MHz); OD_SCLK 500/2660 within OD_RANGE 500..3150 MHz."""
    from tests.amdgpu_cards import HAND_WRITTEN_OD, amdgpu_card

    sclk = (f"0: 500Mhz \n1: {current_mhz}Mhz *\n2: 2660Mhz \n"
            if current_mhz not in (500, 2660) else
            f"0: 500Mhz {'*' if current_mhz == 500 else ''}\n"
            f"1: 2660Mhz {'*' if current_mhz == 2660 else ''}\n")
    path, kernel, _ = amdgpu_card(root, card=card, device_id=0x73BF, sclk=sclk,
                                  od=HAND_WRITTEN_OD["rdna2_od"], perf=perf_level)
    return path, kernel


# -- devfreq -----------------------------------------------------------------------------------

def devfreq_soc(
    root: Path, name: str, driver: str, freqs_hz: list[int], governor: str = "simple_ondemand",
    governors: str = "userspace powersave performance simple_ondemand",
    busy_percent: int | None = None, energy_uj: int | None = None,
    compatible: str | None = None, set_freq: str | None = None,
) -> tuple[Path, KernelSysfs]:
    """A platform device under devfreq (a GPU unless told otherwise); returns (devfreq dir,
    kernel). set_freq appears only while the userspace governor runs, clamped to min/max and
    rounded up to an OPP. ``compatible``: the device tree's ``compatible`` strings, as the kernel
    shows them (NUL-separated) in ``of_node/compatible``. ``set_freq``: what it holds when the
    tree is built under userspace (default: the lowest level, a request another tool made;
    ``"undefined"``: userspace just selected, nothing asked yet, which only the kernel's rules
    can show again after a restore, not a tree of plain files)."""
    platform = root / "devices/platform" / name
    _put(root / "bus/platform/drivers" / driver / "bind", "")
    _link(platform / "driver", root / "bus/platform/drivers" / driver)
    _put(platform / "uevent", f"DRIVER={driver}")
    if compatible is not None:
        of_node = root / "firmware/devicetree/base" / name
        of_node.mkdir(parents=True, exist_ok=True)
        (of_node / "compatible").write_bytes(compatible.encode() + b"\0")
        _link(platform / "of_node", of_node)
    path = platform / "devfreq" / name
    _link(path / "device", platform)
    _link(root / "class/devfreq" / name, path)
    files = {"available_frequencies": " ".join(map(str, freqs_hz)), "cur_freq": freqs_hz[0],
             "min_freq": freqs_hz[0], "max_freq": freqs_hz[-1], "governor": governor,
             "available_governors": governors, "target_freq": freqs_hz[0],
             "trans_stat": "", "uevent": ""}
    for file, value in files.items():
        _put(path / file, value)
    if governor == "userspace":
        _put(path / "userspace/set_freq", set_freq or freqs_hz[0])
    if busy_percent is not None:
        _put(platform / "gpu_busy_percent", busy_percent)
    if energy_uj is not None:
        _put(platform / "hwmon/hwmon0/energy1_input", energy_uj)
    kernel = KernelSysfs(root)
    kernel.read_only |= {path / n for n in ("available_frequencies", "cur_freq",
                                            "available_governors", "target_freq")}

    def settle(k: KernelSysfs, wanted_hz: int) -> int:
        low, high = int(k.value(path / "min_freq")), int(k.value(path / "max_freq"))
        wanted_hz = min(max(wanted_hz, low), high)
        running = min((f for f in freqs_hz if f >= wanted_hz), default=freqs_hz[-1])
        (path / "cur_freq").write_text(f"{running}\n")
        return running

    def set_governor(k: KernelSysfs, p: Path, value: str) -> str:
        if value not in k.value(path / "available_governors").split():
            raise _refuse(errno.EINVAL, p)
        if value == "userspace":
            _put(path / "userspace/set_freq", "undefined")
        elif (path / "userspace").exists():
            (path / "userspace/set_freq").unlink()
            (path / "userspace").rmdir()
        return value

    def set_freq(k: KernelSysfs, p: Path, value: str) -> str:
        if not (path / "userspace").exists():
            raise _refuse(errno.ENOENT, p)
        wanted = _int(p, value)
        settle(k, wanted)
        return str(wanted)

    def bound(which: str) -> Rule:
        def rule(k: KernelSysfs, p: Path, value: str) -> str:
            freq = _int(p, value)
            other = int(k.value(path / ("max_freq" if which == "min" else "min_freq")))
            if (which == "min" and freq > other) or (which == "max" and freq < other):
                raise _refuse(errno.EINVAL, p)
            p.write_text(f"{freq}\n")
            settle(k, int(k.value(path / "cur_freq")))
            return str(freq)

        return rule

    kernel.rules[path / "governor"] = set_governor
    kernel.rules[path / "userspace/set_freq"] = set_freq
    kernel.rules[path / "min_freq"] = bound("min")
    kernel.rules[path / "max_freq"] = bound("max")
    return path, kernel


def mali_panfrost(root: Path, **kwargs: object) -> tuple[Path, KernelSysfs]:
    """A Mali-G52 (RK3568) under panfrost: 200–800 MHz OPPs."""
    freqs = [200_000_000, 300_000_000, 400_000_000, 600_000_000, 700_000_000, 800_000_000]
    kwargs.setdefault("compatible", "rockchip,rk3568-mali\0arm,mali-bifrost")
    return devfreq_soc(root, "fde60000.gpu", "panfrost", freqs, **kwargs)  # type: ignore[arg-type]


def adreno_msm(root: Path, **kwargs: object) -> tuple[Path, KernelSysfs]:
    """An Adreno 618 (SC7180) under msm: 180–800 MHz OPPs, busy reported by the driver."""
    freqs = [180_000_000, 267_000_000, 355_000_000, 430_000_000, 565_000_000, 650_000_000,
             800_000_000]
    kwargs.setdefault("compatible", "qcom,adreno-618.0\0qcom,adreno")
    return devfreq_soc(root, "5000000.gpu", "msm", freqs, **kwargs)  # type: ignore[arg-type]


# -- devfreq devices that are not GPUs: govd must leave them alone unless named -----------------

def rockchip_dmc(root: Path, **kwargs: object) -> tuple[Path, KernelSysfs]:
    """The RK3399's DDR memory controller (``dmc``): devfreq with userspace governor available,
    driver rockchip-dmc, compatible ``rockchip,rk3399-dmc``; 200–856 MHz."""
    freqs = [200_000_000, 400_000_000, 666_000_000, 856_000_000]
    kwargs.setdefault("compatible", "rockchip,rk3399-dmc")
    return devfreq_soc(root, "dmc", "rockchip-dmc", freqs, **kwargs)  # type: ignore[arg-type]


def exynos_bus(root: Path, **kwargs: object) -> tuple[Path, KernelSysfs]:
    """An Exynos5422 bus (``soc:bus-wcore``) scaled by devfreq: driver exynos-bus, compatible
    ``samsung,exynos-bus``; 84–400 MHz."""
    freqs = [84_000_000, 111_000_000, 222_000_000, 333_000_000, 400_000_000]
    kwargs.setdefault("compatible", "samsung,exynos-bus")
    return devfreq_soc(root, "soc:bus-wcore", "exynos-bus", freqs,  # type: ignore[arg-type]
                       **kwargs)
