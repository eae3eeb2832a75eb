"""A devfreq device's sysfs tree as the Linux kernel lays it out, kept by the live simulated GPU.

`DevfreqTree` creates `ROOT/class/devfreq/<name>/` with the files a devfreq device has
(drivers/devfreq/devfreq.c): `available_frequencies` (Hz, ascending), `available_governors`,
`governor`, `cur_freq`, `target_freq`, `min_freq`, `max_freq`, `polling_interval`, `trans_stat`,
`userspace/set_freq`, and `device/` with `gpu_busy_percent` and `hwmon/hwmon0/energy1_input` (µJ,
cumulative), `power1_average` (µW). The files another process writes (`governor`, `min_freq`,
`max_freq`, `userspace/set_freq`) are read back each tick and applied by the kernel's rules; every
file the sim owns is replaced atomically (write a temporary, rename), and only when its text
changed (`cur_freq` mostly does not).

Every suite and demo run ticks this tree ~20 times per simulated second in lockstep with the
daemon, so a tick goes to the files through `os` calls on paths made once, and `TransStat`
rebuilds `trans_stat` from rows kept while no transition is counted: through pathlib and a
fresh table each tick the simulator cost ~1 ms of CPU a tick, more than the daemon it serves.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

GOVERNORS = ("simple_ondemand", "userspace", "performance", "powersave")
UPTHRESHOLD = 90
DOWNDIFFERENTIAL = 5


def simple_ondemand_hz(busy_us: int, total_us: int, cur_hz: int, max_hz: int,
                       up: int = UPTHRESHOLD, down: int = DOWNDIFFERENTIAL) -> int:
    """The frequency the kernel's simple_ondemand asks for (governor_simpleondemand.c). Units: Hz.

    Integer arithmetic as in the kernel; the caller clamps to min/max and snaps to a level.
    """
    if up > 100 or up < down:
        raise ValueError("simple_ondemand: upthreshold must be <= 100 and >= downdifferential")
    if total_us == 0:
        return max_hz
    if busy_us >= 1 << 24 or total_us >= 1 << 24:
        busy_us >>= 7
        total_us >>= 7
    if busy_us * 100 > total_us * up or cur_hz == 0:
        return max_hz
    if busy_us * 100 > total_us * (up - down):
        return cur_hz
    return (busy_us * cur_hz // total_us) * 100 // (up - down // 2)


def snap_hz(requested_hz: int, levels_hz: list[int], min_hz: int, max_hz: int) -> int:
    """Clamp to [min, max] (max wins when min > max), then the lowest level >= it. Units: Hz.

    `min_hz`/`max_hz` are the effective bounds (already levels).
    """
    hz = min(max(requested_hz, min_hz), max_hz)
    for level in levels_hz:
        if level >= hz:
            return min(level, max_hz)
    return max_hz


def trans_stat_text(levels_hz: list[int], transitions: np.ndarray, time_ms: np.ndarray,
                    current_hz: int) -> str:
    """`trans_stat` exactly as drivers/devfreq/devfreq.c prints it."""
    return TransStat(levels_hz).text(transitions, time_ms, current_hz)


class TransStat:
    """`trans_stat` of one device, printed tick after tick: the rows of transition counts are
    kept until a transition is counted (the counts only grow, so their sum says when)."""

    def __init__(self, levels_hz: list[int]) -> None:
        self.levels_hz = list(levels_hz)
        self._header = ["     From  :   To", "           :"
                        + "".join(f"{f:10d}" for f in self.levels_hz) + "   time(ms)"]
        self._total = -1
        self._rows: list[tuple[str, int]] = []

    def text(self, transitions: np.ndarray, time_ms: np.ndarray, current_hz: int) -> str:
        """`trans_stat` exactly as drivers/devfreq/devfreq.c prints it."""
        total = int(transitions.sum())
        if total != self._total:
            self._total = total
            self._rows = [(f"{f:10d}:" + "".join(f"{int(n):10d}" for n in transitions[i]), f)
                          for i, f in enumerate(self.levels_hz)]
        lines = self._header + [("*" if f == current_hz else " ") + row + f"{int(t):10d}"
                                for (row, f), t in zip(self._rows, time_ms.tolist(), strict=True)]
        lines.append(f"Total transition : {total}")
        return "\n".join(lines) + "\n"


def write_atomically(path: Path | str, text: str) -> None:
    """Replace `path` by `text` in one rename, so a reader never sees half a file. Lighter than
    `govd.formats.regular_file.write_atomically` (no fsync, no fresh name), which a tick of the
    simulator cannot afford; the temporary is never followed if it is a link."""
    path = os.fspath(path)
    head, name = os.path.split(path)
    tmp = os.path.join(head, f".{name}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC,
                 0o666)
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)
    os.replace(tmp, path)


OWNED = ("cur_freq", "target_freq", "device/gpu_busy_percent",
         "device/hwmon/hwmon0/energy1_input", "device/hwmon/hwmon0/power1_average", "trans_stat")
"""The files the device writes each tick (`DevfreqTree.publish`)."""
CONTROLS = ("governor", "min_freq", "max_freq", "userspace/set_freq")
"""The files another process writes and the device reads back each tick."""


class DevfreqTree:
    """The sysfs files of one simulated devfreq device under a chosen root."""

    def __init__(self, root: Path, levels_hz: list[int], name: str = "govd-sim0",
                 polling_ms: int = 50) -> None:
        self.levels_hz = sorted(levels_hz)
        self.dir = Path(root) / "class" / "devfreq" / name
        self.hwmon = self.dir / "device" / "hwmon" / "hwmon0"
        (self.dir / "userspace").mkdir(parents=True, exist_ok=True)
        self.hwmon.mkdir(parents=True, exist_ok=True)
        top, bottom = self.levels_hz[-1], self.levels_hz[0]
        files = {
            "available_frequencies": " ".join(str(f) for f in self.levels_hz),
            "available_governors": " ".join(GOVERNORS),
            "governor": "simple_ondemand",
            "min_freq": str(bottom),
            "max_freq": str(top),
            "cur_freq": str(top),
            "target_freq": str(top),
            "polling_interval": str(polling_ms),
            "userspace/set_freq": str(top),
            "device/gpu_busy_percent": "0",
            # what tells the kernel's GPUs from other devfreq devices (`gpu_evidence`)
            "device/of_node/compatible": "govd,sim-gpu\0",
            "device/hwmon/hwmon0/name": "govd_sim",
            "device/hwmon/hwmon0/energy1_input": "0",
            "device/hwmon/hwmon0/power1_average": "0",
        }
        for rel, text in files.items():
            (self.dir / rel).parent.mkdir(parents=True, exist_ok=True)
            write_atomically(self.dir / rel, text + "\n")
        self.governor = "simple_ondemand"
        self.min_hz, self.max_hz, self.set_hz = bottom, top, top
        self._path = {rel: os.fspath(self.dir / rel) for rel in OWNED + CONTROLS}
        self._written = {rel: files[rel] + "\n" for rel in OWNED if rel in files}

    def _read(self, rel: str) -> str:
        """The text of a file of the tree (raises OSError, UnicodeDecodeError as read_text)."""
        fd = os.open(self._path[rel], os.O_RDONLY)
        try:
            return os.read(fd, 65536).decode()
        finally:
            os.close(fd)

    def _read_int(self, rel: str, fallback: int) -> int:
        try:
            return int(self._read(rel).split()[0])
        except (OSError, ValueError, IndexError):
            return fallback

    def read_controls(self) -> None:
        """Pick up what another process wrote; a value the kernel would refuse is put back."""
        try:
            wanted = self._read("governor").strip()
        except OSError:
            wanted = self.governor
        if wanted in GOVERNORS:
            self.governor = wanted
        elif wanted:  # empty: caught between another writer's truncate and write; not a value
            write_atomically(self._path["governor"], self.governor + "\n")
        # the kernel stores min/max as QoS requests and uses the levels they admit
        min_req = self._read_int("min_freq", self.min_hz)
        max_req = self._read_int("max_freq", self.max_hz)
        above = [f for f in self.levels_hz if f >= min_req]
        below = [f for f in self.levels_hz if f <= max_req]
        self.max_hz = below[-1] if below else self.levels_hz[0]
        self.min_hz = min(above[0] if above else self.levels_hz[-1], self.max_hz)
        self.set_hz = self._read_int("userspace/set_freq", self.set_hz)

    def publish(self, cur_hz: int, busy_percent: int, energy_uj: int, power_uw: int,
                trans_stat: str) -> None:
        """Write the files the device owns for this tick (those whose text changed)."""
        for rel, text in zip(OWNED, (f"{cur_hz}\n", f"{cur_hz}\n", f"{busy_percent}\n",
                                     f"{energy_uj}\n", f"{power_uw}\n", trans_stat), strict=True):
            if self._written.get(rel) != text:
                write_atomically(self._path[rel], text)
                self._written[rel] = text
