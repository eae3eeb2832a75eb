"""A backend and a frame source plug in by registration alone: a third party's module and one
entry point each, and the configuration, discovery, the daemon and `govd restore` take them,
with no edit to govd. The toy backend and source here live in a module the test writes, and
register through a ``*.dist-info`` folder put on ``sys.path``, as ``pip install`` would."""

from __future__ import annotations

import json
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
from pydantic import ValidationError

from govd.conf.schema import Config
from govd.daemon.daemon import Daemon, Options
from govd.device import discovery, registry
from govd.sources import registry as sources

TOY = '''
from govd.device.base import Controllability, Device, Reading
from govd.device.registry import Backend
from govd.sources.base import Frame, FrameSource

import numpy as np

LEVELS_MHZ = np.array([300.0, 600.0, 900.0])
FOUND_AT_MHZ = 600.0
DEVICES = []
SOURCES = []


class ToyDevice(Device):
    backend = "toy"

    def __init__(self, level_mhz=FOUND_AT_MHZ):
        self.name = "toy0"
        self.level_mhz = level_mhz
        self.saved = None

    @property
    def levels_mhz(self):
        return LEVELS_MHZ

    @property
    def bounds_mhz(self):
        return (300.0, 900.0)

    def controllable(self):
        return Controllability(True)

    def read(self):
        return Reading(freq_mhz=self.level_mhz)

    def set_level(self, freq_mhz):
        self.level_mhz = float(freq_mhz)

    def save(self):
        self.saved = self.level_mhz
        return {"backend": "toy", "name": self.name, "state": {"level_mhz": self.saved}}

    def restore(self):
        if self.saved is not None:
            self.level_mhz = self.saved


def discover(_sysfs_root):
    device = ToyDevice()
    DEVICES.append(device)
    return [device]


def reopen(saved, _sysfs_root):
    device = ToyDevice(level_mhz=-1.0)  # what a crash left: anything but the saved level
    device.saved = saved["state"]["level_mhz"]
    DEVICES.append(device)
    return device


BACKEND = Backend("toy", discover=discover, reopen=reopen)


class ToySource(FrameSource):
    def __init__(self, gpu_time_ms):
        self.gpu_time_ms = gpu_time_ms
        self.devices = []
        self.drained = 0
        SOURCES.append(self)

    def drain(self):
        self.drained += 1
        return [Frame(gpu_time_ms=self.gpu_time_ms, app="toy")]

    def set_devices(self, names):
        self.devices = list(names)

    def no_frames_hint(self):
        return "the toy always has frames"


def open_toy(frames, opening):
    return ToySource(gpu_time_ms=4.0)
'''


@pytest.fixture
def toy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[object]:
    """The toy backend and source, installed as a distribution with two entry points."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "toy_plug.py").write_text(textwrap.dedent(TOY))
    info = site / "toy_plug-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: toy-plug\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(
        f"[{registry.GROUP}]\ntoy = toy_plug:BACKEND\n\n"
        f"[{sources.GROUP}]\ntoy = toy_plug:open_toy\n")
    monkeypatch.syspath_prepend(str(site))
    import toy_plug  # type: ignore[import-not-found]

    yield toy_plug
    sys.modules.pop("toy_plug", None)


def test_the_configuration_takes_a_registered_backend_and_source_by_name(toy) -> None:
    config = Config.model_validate({"devices": [{"backend": "toy"}],
                                    "frames": {"source": "toy"}})
    assert config.devices[0].backend == "toy" and config.frames.source == "toy"
    schema = json.dumps(Config.model_json_schema())
    assert '"toy"' in schema


def test_an_unregistered_name_is_refused_with_the_registered_ones() -> None:
    with pytest.raises(ValidationError, match="Input should be 'socket', 'mangohud', 'busy' or "
                                              "'sim'"):
        Config.model_validate({"frames": {"source": "toy"}})
    with pytest.raises(ValidationError, match="'amdgpu' or 'nvml'"):
        Config.model_validate({"devices": [{"backend": "toy"}]})


def test_a_plugin_cannot_shadow_a_builtin_backend(tmp_path: Path, toy) -> None:
    info = next((tmp_path / "site").glob("*.dist-info"))
    (info / "entry_points.txt").write_text(f"[{registry.GROUP}]\ndevfreq = toy_plug:BACKEND\n")
    assert registry.backend("devfreq").sysfs_class is not None  # govd's own, not the toy
    assert registry.available().count("devfreq") == 1


def test_the_daemon_governs_a_registered_backend_fed_by_a_registered_source(
        toy, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "sys"
    root.mkdir()
    # The daemon asks every backend for devices only on the machine's own /sys: the empty tree
    # stands for it; the machine's NVIDIA GPUs (or a fake libnvidia-ml) are kept out.
    monkeypatch.setattr("govd.daemon.governed.SYS", root)
    monkeypatch.delitem(registry._BUILTIN, "nvml")
    config = Config.model_validate({
        "period_ms": 10, "policy": {"name": "performance"},
        "state_file": str(tmp_path / "state.json"), "frames": {"source": "toy"},
        "logging": {"summary_interval_s": 0}})
    daemon = Daemon(Options(config, sysfs_root=root))
    seen: dict[str, object] = {}

    def stop() -> bool:
        if daemon.runners:
            seen["level_mhz"] = toy.DEVICES[0].level_mhz
            seen["state"] = json.loads((tmp_path / "state.json").read_text())
        return daemon.stats.ticks >= 5

    daemon.options.should_stop = stop
    assert daemon.run() == 0
    [device] = toy.DEVICES
    [source] = toy.SOURCES
    assert [r.name for r in daemon.runners] == ["toy0"]
    assert seen["level_mhz"] == 900.0  # performance: the top level, while governed
    assert seen["state"]["devices"][0]["state"] == {"level_mhz": 600.0}  # type: ignore[index]
    assert source.devices == ["toy0"] and source.drained >= 5
    assert device.level_mhz == 600.0, "put back as found"
    assert not (tmp_path / "state.json").exists()


def test_restore_reopens_a_registered_backends_device_from_its_saved_state(
        toy, tmp_path: Path) -> None:
    saved = {"backend": "toy", "name": "toy0", "state": {"level_mhz": 600.0}}
    discovery.check_saved(saved)
    device = discovery.restore_saved(saved, tmp_path)
    assert type(device).__name__ == "ToyDevice" and device.level_mhz == 600.0  # type: ignore
