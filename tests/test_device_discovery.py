"""Discovery on fixture trees and, through umockdev, on devices pyudev really sees; hot-plug;
reopening from saved state; the `govd devices` command."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from govd.conf.schema import Config
from govd.daemon.governed import select
from govd.device import discovery
from govd.device.base import Controllability, Device, Reading
from govd.device.discovery import discover, gpu_evidence, open_found, restore_saved, scan
from tests.sysfs_fixtures import (
    amdgpu_polaris,
    devfreq_soc,
    exynos_bus,
    i915_gen9,
    mali_panfrost,
    pci_card,
    rockchip_dmc,
)
from tests.umockdev_required import needs_umockdev

REPO = Path(__file__).resolve().parent.parent
UMOCKDEV = REPO / "tests" / "umockdev"


def _govd(*args: str, wrapper: tuple[str, ...] = ()) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(REPO))
    return subprocess.run([*wrapper, sys.executable, "-m", "govd", *args], env=env,
                          capture_output=True, text=True, timeout=60)


def _machine(root: Path) -> None:
    i915_gen9(root)
    amdgpu_polaris(root, card="card1")
    mali_panfrost(root)
    pci_card(root, "0000:05:00.0", "nouveau", card="card2")


def test_scan_finds_cards_and_devfreq_only_with_their_drivers(tmp_path):
    _machine(tmp_path)
    found = [(f.subsystem, f.name, f.driver, f.backend) for f in scan(tmp_path)]
    assert found == [
        ("devfreq", "fde60000.gpu", "panfrost", "devfreq"),
        ("drm", "card0", "i915", "i915"),
        ("drm", "card1", "amdgpu", "amdgpu"),
        ("drm", "card2", "nouveau", None),
    ]


def test_discover_builds_one_backend_per_supported_device(tmp_path):
    _machine(tmp_path)
    assert [(d.backend, d.name) for d in discover(tmp_path)] == [
        ("devfreq", "fde60000.gpu"), ("i915", "card0"), ("amdgpu", "card1")]


def test_unsupported_driver_cannot_be_opened(tmp_path):
    _machine(tmp_path)
    with pytest.raises(KeyError, match="nouveau"):
        open_found(scan(tmp_path)[-1], tmp_path)


def test_restore_saved_reopens_the_device_and_puts_its_state_back(tmp_path):
    _machine(tmp_path)
    card = next(d for d in discover(tmp_path) if d.backend == "amdgpu")
    card.set_level(900)
    saved = json.loads(json.dumps(card.save()))  # as `govd restore` reads it from disk
    assert (tmp_path / saved["path"] / "device/power_dpm_force_performance_level").read_text() \
        == "manual"
    restore_saved(saved, tmp_path)
    assert (tmp_path / saved["path"] / "device/power_dpm_force_performance_level").read_text() \
        == "auto"


def test_saved_state_of_an_unknown_backend_is_refused(tmp_path):
    with pytest.raises(KeyError, match="warp"):
        restore_saved({"backend": "warp", "path": "x", "state": {}}, tmp_path)


class _Accelerator(Device):
    """A stand-in for a device another discoverer (NVML) would return."""

    backend = "nvml"
    name = "GPU-0"
    levels_mhz = np.array([300.0, 1500.0])
    bounds_mhz = (300.0, 1500.0)

    def controllable(self) -> Controllability:
        return Controllability(False, "needs root")

    def read(self) -> Reading:
        return Reading(freq_mhz=1500.0)

    def set_level(self, freq_mhz: float) -> None:
        raise AssertionError("not written in this test")

    def save(self) -> dict:
        return {"backend": "nvml"}

    def restore(self) -> None:
        pass


def test_other_discoverers_plug_into_discover_and_the_device_list(tmp_path, monkeypatch):
    from govd.device.cli import list_devices

    monkeypatch.setattr(discovery, "DISCOVERERS", [*discovery.DISCOVERERS,
                                                   lambda root: [_Accelerator()]])
    monkeypatch.setattr("govd.device.cli.DISCOVERERS", discovery.DISCOVERERS)
    mali_panfrost(tmp_path)
    assert [d.name for d in discover(tmp_path)] == ["fde60000.gpu", "GPU-0"]
    # the device list names them for the machine's own /sys (here: the tree stands for it);
    # under another root only that tree's devices, which is all `govd run` governs there
    assert [r["name"] for r in list_devices(tmp_path)] == ["fde60000.gpu"]
    monkeypatch.setattr("govd.device.cli.SYS", tmp_path)
    rows = list_devices(tmp_path)
    assert rows[-1]["name"] == "GPU-0" and rows[-1]["reason"] == "needs root"


def test_devices_command_lists_levels_and_why_not_controllable(tmp_path):
    _machine(tmp_path)
    (tmp_path / "devices/platform/fde60000.gpu/devfreq/fde60000.gpu/available_governors"
     ).write_text("simple_ondemand performance\n")
    result = _govd("devices", "--sysfs-root", str(tmp_path))
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].split() == ["NAME", "BACKEND", "LEVELS", "RUNNING", "CONTROL"]
    assert "52 levels 300–1150 MHz" in lines[2] and "controllable" in lines[2]
    assert "8 levels 300–1366 MHz" in lines[3]
    assert "not controllable" in lines[1] and "userspace" in lines[1]
    assert "nouveau" in lines[4] and "not controllable" in lines[4]


def test_devices_command_json(tmp_path):
    _machine(tmp_path)
    result = _govd("devices", "--json", "--sysfs-root", str(tmp_path))
    rows = json.loads(result.stdout)
    card0 = next(r for r in rows if r["name"] == "card0")
    assert card0 == {"name": "card0", "backend": "i915", "levels": 52, "min_mhz": 300.0,
                     "max_mhz": 1150.0, "current_mhz": 300.0, "controllable": True, "reason": "",
                     "gpu": True}


def test_devices_command_refuses_a_missing_root(tmp_path):
    result = _govd("devices", "--sysfs-root", str(tmp_path / "nope"))
    assert result.returncode == 2 and "not a directory" in result.stderr


@needs_umockdev
def test_udev_discovery_sees_umockdev_devices():
    result = _govd("devices", "--json", wrapper=(
        "umockdev-run", "--device", str(UMOCKDEV / "i915-gen9.umockdev"),
        "--device", str(UMOCKDEV / "mali-panfrost.umockdev"), "--"))
    assert result.returncode == 0, result.stderr
    rows = {r["name"]: r for r in json.loads(result.stdout)}
    # Render node and connector are filtered out; only the card and the devfreq device remain.
    assert set(rows) == {"card0", "fde60000.gpu"}
    assert rows["card0"]["backend"] == "i915" and rows["card0"]["current_mhz"] == 450
    assert rows["fde60000.gpu"]["levels"] == 6 and rows["fde60000.gpu"]["current_mhz"] == 400


@needs_umockdev
def test_unplug_and_replug_seen_by_scan_and_monitor(umockdev_tmpdir):
    env = dict(os.environ, PYTHONPATH=str(REPO), LD_PRELOAD="libumockdev-preload.so.0",
               TMPDIR=str(umockdev_tmpdir))
    result = subprocess.run(
        [sys.executable, str(REPO / "tests" / "umockdev_hotplug.py"),
         str(UMOCKDEV / "i915-gen9.umockdev"), str(UMOCKDEV / "mali-panfrost.umockdev")],
        env=env, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    seen = json.loads(result.stdout)
    assert seen["after_add"] == ["fde60000.gpu", "card0"]
    assert seen["after_remove"] == ["fde60000.gpu"]
    assert seen["after_replug"] == ["fde60000.gpu", "card0"]
    assert ["remove", "drm", "card0"] in seen["events"]
    assert seen["events"][-1] == ["add", "drm", "card0"]
    assert all(name not in ("renderD128", "card0-eDP-1") for _, _, name in seen["events"])


def _soc_with_a_memory_controller_and_a_bus(root: Path) -> None:
    mali_panfrost(root)
    rockchip_dmc(root)
    exynos_bus(root)


def test_only_gpus_are_taken_by_default_and_the_others_say_why(tmp_path):
    _soc_with_a_memory_controller_and_a_bus(tmp_path)
    devices = discover(tmp_path)
    assert [(d.name, d.not_gpu) for d in devices] == [
        ("dmc", "not a GPU (driver rockchip-dmc, compatible rockchip,rk3399-dmc)"),
        ("fde60000.gpu", None),
        ("soc:bus-wcore", "not a GPU (driver exynos-bus, compatible samsung,exynos-bus)"),
    ]
    assert [d.name for d in select(Config(), devices)] == ["fde60000.gpu"]


def test_a_non_gpu_devfreq_device_is_taken_only_when_an_entry_names_it(tmp_path):
    _soc_with_a_memory_controller_and_a_bus(tmp_path)
    by_backend = Config.model_validate({"devices": [{"backend": "devfreq"}]})
    assert [d.name for d in select(by_backend, discover(tmp_path))] == ["fde60000.gpu"]
    named = Config.model_validate({"devices": [{"name": "dmc"}]})
    assert [d.name for d in select(named, discover(tmp_path))] == ["dmc", "fde60000.gpu"]


@pytest.mark.parametrize(("what", "said"), [
    ("drm", "DRM card0"), ("compatible", "compatible vendor,gpu-3d"),
    ("pci", "PCI class 0x030000"), ("nothing", "not a GPU (driver acme-devfreq)"),
])
def test_gpu_evidence_is_what_the_kernel_says_about_the_parent(tmp_path, what, said):
    path, _ = devfreq_soc(tmp_path, "acme0", "acme-devfreq", [100_000_000, 200_000_000],
                          compatible="vendor,gpu-3d" if what == "compatible" else None)
    parent = tmp_path / "devices/platform/acme0"
    if what == "drm":
        (parent / "drm/card0").mkdir(parents=True)
    if what == "pci":
        (parent / "class").write_text("0x030000\n")
    assert gpu_evidence(path, "acme-devfreq") == (what != "nothing", said)


def test_devices_command_says_why_a_memory_controller_is_skipped(tmp_path):
    _soc_with_a_memory_controller_and_a_bus(tmp_path)
    result = _govd("devices", "--json", "--sysfs-root", str(tmp_path))
    rows = {r["name"]: r for r in json.loads(result.stdout)}
    assert rows["dmc"]["gpu"] is False and rows["dmc"]["skipped"] == (
        "not a GPU (driver rockchip-dmc, compatible rockchip,rk3399-dmc): governed only when a "
        "`devices:` entry names it")
    assert rows["fde60000.gpu"]["gpu"] is True and "skipped" not in rows["fde60000.gpu"]
    text = _govd("devices", "--sysfs-root", str(tmp_path)).stdout
    assert "skipped: not a GPU (driver rockchip-dmc" in text


@pytest.mark.timeout(20)
@pytest.mark.parametrize("kind", ["fifo", "dev-zero"])
def test_compatible_file_that_is_a_fifo_or_endless_neither_hangs_nor_eats_memory(tmp_path, kind):
    """`govd devices --sysfs-root DIR` reads what the tree holds: a FIFO must not block the
    scan, /dev/zero must not be read whole to keep its first 4 KiB."""
    rockchip_dmc(tmp_path)
    compatible = tmp_path / "firmware/devicetree/base/dmc/compatible"
    compatible.unlink()
    if kind == "fifo":
        os.mkfifo(compatible)
    else:
        compatible.symlink_to("/dev/zero")
    [device] = discover(tmp_path)
    assert device.not_gpu is not None and device.not_gpu.startswith("not a GPU")
