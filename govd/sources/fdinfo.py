"""GPU busy time from the kernel's per-client DRM usage stats in ``/proc/PID/fdinfo/FD``.

Where a device reports no busy fraction (i915, xe; many devfreq GPUs), frames alone cannot say how
busy the GPU was: MangoHud's frame time is present-to-present, about the tick whatever the load.
The kernel counts GPU time per open DRM file instead (Documentation/gpu/drm-usage-stats.rst), in
one of two forms:

- ``drm-engine-<engine>: <ns> ns``, busy time per engine class, with
  ``drm-engine-capacity-<engine>`` engines of that class (i915: render, copy, video,
  video-enhance, compute; amdgpu: gfx, compute, dec, enc, ...; msm, panfrost, v3d alike);
- ``drm-cycles-<engine>`` and ``drm-total-cycles-<engine>`` (xe: rcs, bcs, vcs, vecs, ccs): GPU
  cycles the client ran over the GPU timestamp cycles that passed, with the same capacity key.

Every open file carries ``drm-driver``, ``drm-client-id`` (one per open, shared by dup'ed and
inherited descriptors: the same id seen twice is one client, counted once) and, for PCI devices,
``drm-pdev``. The busy fraction of a device over an interval is the busiest engine class's
``Σ Δbusy / (Δtime · capacity)`` over its clients, 0..1.

Reading other users' processes' fdinfo needs ptrace read access: root with CAP_SYS_PTRACE. Where
it is refused the reader says so once (`problems`) and counts it, and reports NaN rather than an
idle GPU when no client could be read at all.
"""

from __future__ import annotations

import logging
import math
import os
import time
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

log = logging.getLogger(__name__)

RESCAN_S = 2.0
"""How often every process is looked at for DRM files; in between only the DRM files already
found are read again (a full look costs a readlink per open file of every process). Units: s."""
PIDS_PER_SAMPLE = 64
"""Processes looked at per `DrmBusyMeter.sample` (about 3 ms on the 2-core build machine)."""
MAX_DRM_FILES = 512
"""DRM files whose fdinfo is read per sample (a few per program that draws): the render node is
open to every user, and one process opening it thousands of times must not make every tick
read thousands of files; past this the busy fraction leaves the rest out, and says so once."""
FDS_PER_SAMPLE = 2048
"""Open files looked at (a readlink each) per `DrmBusyMeter.sample`: a process holding half a
million open would otherwise cost one tick seconds; its files are looked at over several."""


@dataclass(frozen=True)
class DrmClient:
    """One DRM client's usage, as one fdinfo file states it."""

    driver: str
    pdev: str | None
    client_id: str
    engine_ns: dict[str, int] = field(default_factory=dict)
    """Busy time per engine class. Units: ns."""
    cycles: dict[str, tuple[int, int]] = field(default_factory=dict)
    """(cycles the client ran, GPU timestamp cycles) per engine class (xe)."""
    capacity: dict[str, int] = field(default_factory=dict)
    """Engines of each class (1 when not stated)."""

    @property
    def key(self) -> tuple[str, str | None, str]:
        """What identifies the client across descriptors and processes."""
        return (self.driver, self.pdev, self.client_id)


def parse_fdinfo(text: str) -> DrmClient | None:
    """The DRM client an fdinfo file describes; None for a file that is not a DRM client with
    usage stats (no ``drm-driver`` or ``drm-client-id``)."""
    keys: dict[str, str] = {}
    for line in text.splitlines():
        name, sep, value = line.partition(":")
        if sep and name.startswith("drm-"):
            keys[name.strip()] = value.strip()
    driver, client_id = keys.get("drm-driver"), keys.get("drm-client-id")
    if not driver or not client_id:
        return None
    engine_ns: dict[str, int] = {}
    cycles: dict[str, list[int]] = {}
    capacity: dict[str, int] = {}
    for name, value in keys.items():
        number = _leading_int(value)
        if number is None:
            continue
        if name.startswith("drm-engine-capacity-"):
            capacity[name.removeprefix("drm-engine-capacity-")] = max(1, number)
        elif name.startswith("drm-engine-") and value.endswith(" ns"):
            engine_ns[name.removeprefix("drm-engine-")] = number
        elif name.startswith("drm-total-cycles-"):
            cycles.setdefault(name.removeprefix("drm-total-cycles-"), [0, 0])[1] = number
        elif name.startswith("drm-cycles-"):
            cycles.setdefault(name.removeprefix("drm-cycles-"), [0, 0])[0] = number
    return DrmClient(driver, keys.get("drm-pdev"), client_id, engine_ns,
                     {k: (v[0], v[1]) for k, v in cycles.items()}, capacity)


def busy_fraction(before: dict[tuple[str, str | None, str], DrmClient],
                  after: dict[tuple[str, str | None, str], DrmClient], interval_ns: float) -> float:
    """Busy fraction (0..1) of the busiest engine class between two snapshots taken
    ``interval_ns`` apart (ns). Clients only in one snapshot are left out: a client's counters
    start at its open, which may be long before it was first seen. A counter that went back
    (client id reused) is left out too."""
    busy_ns: Counter[str] = Counter()
    ran: Counter[str] = Counter()
    total: dict[str, int] = {}
    capacity: dict[str, int] = {}
    for key, now in after.items():
        then = before.get(key)
        if then is None:
            continue
        for engine, ns in now.engine_ns.items():
            step = ns - then.engine_ns.get(engine, ns)
            if step > 0:
                busy_ns[engine] += step
            capacity[engine] = now.capacity.get(engine, 1)
        for engine, (cycles, timestamp) in now.cycles.items():
            old_cycles, old_timestamp = then.cycles.get(engine, (cycles, timestamp))
            if cycles >= old_cycles and timestamp > old_timestamp:
                ran[engine] += cycles - old_cycles
                total[engine] = max(total.get(engine, 0), timestamp - old_timestamp)
            capacity[engine] = now.capacity.get(engine, 1)
    fractions = [0.0]
    if interval_ns > 0:
        fractions += [ns / (interval_ns * capacity[e]) for e, ns in busy_ns.items()]
    fractions += [ran[e] / (total[e] * capacity[e]) for e in ran if total.get(e)]
    return min(1.0, max(fractions))


class DrmBusyMeter:
    """Busy fraction of one device from every process's DRM fdinfo.

    The device is picked by ``pdev`` (its PCI slot, ``0000:00:02.0``) or, for a device that is no
    PCI device, by ``driver``. ``proc`` is the proc root (tests point it at a fixture tree),
    ``clock`` a monotonic clock (s).
    """

    def __init__(self, pdev: str | None = None, driver: str | None = None,
                 proc: Path = Path("/proc"),
                 clock: Callable[[], float] = time.monotonic) -> None:
        if pdev is None and driver is None:
            raise ValueError("a DRM busy meter needs the device's PCI slot or driver")
        self.pdev, self.driver, self.proc, self._clock = pdev, driver, Path(proc), clock
        self._files: dict[str, list[Path]] = {}
        """Processes with DRM files → their fdinfo files."""
        self._pending: list[str] = []
        """Processes still to look at in this round, the next one last."""
        self._walking: tuple[str, list[str], list[Path]] | None = None
        """The process being looked at over several samples: its files left, its DRM files."""
        self._refused_pids: set[str] = set()
        self._next_scan_s = -math.inf
        self._before: dict[tuple[str, str | None, str], DrmClient] | None = None
        self._before_s = math.nan
        self.counts: Counter[str] = Counter()
        self._problem: str | None = None
        self._over_problem: str | None = None

    def sample(self) -> float:
        """Busy fraction (0..1) since the previous call; NaN on the first call, and when no
        client could be read because the kernel refused (see the module docstring)."""
        now_s = self._clock()
        self._look(now_s)
        clients = self._read(self._to_read())
        before, before_s = self._before, self._before_s
        self._before, self._before_s = clients, now_s
        if self._refused_pids and not clients:
            return math.nan  # the kernel hid the clients: an idle GPU would be a guess
        if before is None:
            return math.nan
        return busy_fraction(before, clients, (now_s - before_s) * 1e9)

    def _to_read(self) -> list[Path]:
        """The DRM files to read this sample: all of them, or past `MAX_DRM_FILES` the first
        file of each process, then the second, ...: a program with a few keeps them, the one
        holding thousands is cut."""
        groups = list(self._files.values())
        total = sum(len(g) for g in groups)
        if total <= MAX_DRM_FILES:
            return [f for g in groups for f in g]
        self.counts["drm_files_over"] += total - MAX_DRM_FILES
        if self._over_problem is None:
            self._over_problem = (f"{total} open DRM files: GPU busy time reads {MAX_DRM_FILES} "
                                  "a tick, the first of each process first, and leaves the "
                                  "rest out")
            log.warning("%s", self._over_problem)
        picked: list[Path] = []
        depth = 0
        while len(picked) < MAX_DRM_FILES:
            picked += [g[depth] for g in groups if depth < len(g)]
            depth += 1
        return picked[:MAX_DRM_FILES]

    def _look(self, now_s: float) -> None:
        """Look at the next `PIDS_PER_SAMPLE` processes, and at most `FDS_PER_SAMPLE` of their
        open files, for DRM files; list them all again every `RESCAN_S`. Spread over the
        ticks, a look never costs one tick much."""
        if not self._pending and self._walking is None and now_s >= self._next_scan_s:
            self._next_scan_s = now_s + RESCAN_S
            try:
                pids = [e.name for e in os.scandir(self.proc) if e.name.isdigit()]
            except OSError:
                pids = []
            for ended in set(self._files) - set(pids):
                del self._files[ended]
            self._refused_pids &= set(pids)
            self._pending = pids[::-1]  # taken from the end
        fds_left, pids_left = FDS_PER_SAMPLE, PIDS_PER_SAMPLE
        while fds_left > 0 and pids_left > 0:
            if self._walking is None:
                if not self._pending:
                    break
                pid = self._pending.pop()
                fds = self._open_files(pid)
                if fds is None:
                    self._files.pop(pid, None)
                    pids_left -= 1
                    continue
                self._walking = (pid, fds, [])
            pid, fds, found = self._walking
            take = fds[-fds_left:]
            del fds[-fds_left:]
            fds_left -= len(take)
            found += self._drm_files(pid, take)
            if not fds:  # this process is done
                self._walking = None
                pids_left -= 1
                if found:
                    self._files[pid] = found
                else:
                    self._files.pop(pid, None)

    def _open_files(self, pid: str) -> list[str] | None:
        """The fd numbers ``pid`` has open; None when it ended or the kernel refused."""
        try:
            fds = os.listdir(self.proc / pid / "fd")
        except PermissionError:
            self._refused(pid)
            return None
        except OSError:
            return None  # the process ended
        self._refused_pids.discard(pid)
        return fds

    def _drm_files(self, pid: str, fds: list[str]) -> list[Path]:
        """fdinfo files of those of ``pid``'s open files ``fds`` that are DRM device nodes."""
        fd_dir = self.proc / pid / "fd"
        found = []
        for fd in fds:
            try:
                if os.readlink(fd_dir / fd).startswith("/dev/dri/"):
                    found.append(self.proc / pid / "fdinfo" / fd)
            except OSError:
                continue  # closed meanwhile
        return found

    def _read(self, files: Iterable[Path]) -> dict[tuple[str, str | None, str], DrmClient]:
        clients: dict[tuple[str, str | None, str], DrmClient] = {}
        for path in files:
            try:
                text = path.read_text(errors="replace")
            except PermissionError:
                self._refused(path.parent.parent.name)
                continue
            except OSError:
                continue  # closed since the scan
            client = parse_fdinfo(text)
            if client is None or not self._ours(client):
                continue
            clients.setdefault(client.key, client)  # dup'ed descriptors: one client
        self.counts["clients"] = len(clients)
        return clients

    def _ours(self, client: DrmClient) -> bool:
        if self.pdev is not None:
            return client.pdev == self.pdev
        return client.driver == self.driver

    def _refused(self, pid: str) -> None:
        self.counts["denied"] += 1
        self._refused_pids.add(pid)
        if self._problem is None:
            self._problem = (f"cannot read {self.proc}/{pid}/fd: GPU busy time of other users' "
                             "programs needs CAP_SYS_PTRACE (systemd/fdinfo.conf.example)")
            log.warning("%s", self._problem)

    def problems(self) -> list[str]:
        """What keeps the meter from seeing every client (one line each)."""
        return [p for p in (self._problem, self._over_problem) if p]


def _leading_int(value: str) -> int | None:
    # ASCII digits only: str.isdigit() also says yes to "²" and "١٢٣", which int() refuses
    # (or reads), and whoever owns a process writes what its fdinfo holds in a test tree.
    head = value.split()[0] if value.split() else ""
    return int(head) if head.isascii() and head.isdigit() and len(head) <= 20 else None


def pci_slot(sysfs_device: Path) -> str | None:
    """The PCI slot (``0000:03:00.0``) of a DRM card's sysfs folder (``.../drm/card0``); None
    when its ``device`` is no PCI device (a platform GPU) or cannot be resolved."""
    try:
        target = (sysfs_device / "device").resolve(strict=True)
    except OSError:
        return None
    if target.name.count(":") == 2 and "." in target.name:
        return target.name
    return None


def meter_for(sysfs_device: Path, proc: Path = Path("/proc")) -> DrmBusyMeter | None:
    """A busy meter for the GPU whose sysfs folder is ``sysfs_device`` (a DRM card or a devfreq
    device): by PCI slot, else by the name of its driver (``panfrost``); None when neither can
    be found."""
    pdev = pci_slot(sysfs_device)
    if pdev is not None:
        return DrmBusyMeter(pdev=pdev, proc=proc)
    try:
        driver = (sysfs_device / "device" / "driver").resolve(strict=True).name
    except OSError:
        return None
    return DrmBusyMeter(driver=driver, proc=proc)
