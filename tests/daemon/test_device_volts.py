"""The power model's voltage table in the daemon: the driver's own where it publishes one
(DESIGN.md: amdgpu's ``pp_od_clk_voltage``), else the configuration's, else V affine in f."""

from __future__ import annotations

import logging

import numpy as np
import pytest

from govd.conf.schema import Config
from govd.daemon.governed import build_governor, device_volts
from govd.device.amdgpu import AmdgpuDevice
from govd.device.base import DeviceError
from tests.sysfs_fixtures import amdgpu_polaris


def _polaris(tmp_path):
    path, kernel = amdgpu_polaris(tmp_path)
    return AmdgpuDevice(path, tmp_path, kernel)


def _configured(device, volts=(0.6, 0.7)) -> Config:
    lo, hi = float(device.levels_mhz[0]), float(device.levels_mhz[-1])
    return Config.model_validate({"power": {"voltage": {device.name: [
        {"freq_mhz": lo, "voltage_v": volts[0]}, {"freq_mhz": hi, "voltage_v": volts[1]}]}}})


def test_the_governor_models_power_on_the_voltages_the_driver_publishes(tmp_path) -> None:
    """amdgpu publishes its voltage curve; the daemon used to read only ``power.voltage`` and
    took V affine in f on every AMD GPU."""
    device = _polaris(tmp_path)
    published = device.volts_by_level()
    assert published is not None
    governor, _ = build_governor(Config(), device)
    assert governor.model_settings.volts == pytest.approx(tuple(published))


def test_the_published_table_comes_before_the_configured_one(tmp_path, caplog) -> None:
    device = _polaris(tmp_path)
    with caplog.at_level(logging.INFO, logger="govd.daemon"):
        volts = device_volts(_configured(device), device, device.levels_mhz)
    assert volts == pytest.approx(tuple(device.volts_by_level()))
    assert "power.voltage's is not used" in caplog.text


class _Unreadable(AmdgpuDevice):
    def volts_by_level(self):
        raise DeviceError("pp_od_clk_voltage: Permission denied")


class _Garbled(AmdgpuDevice):
    def volts_by_level(self):
        volts = np.array(super().volts_by_level())
        volts[1] = np.nan
        return volts


@pytest.mark.parametrize("kind", [_Unreadable, _Garbled])
def test_a_table_that_cannot_be_used_falls_back_with_one_warning(tmp_path, caplog, kind) -> None:
    path, kernel = amdgpu_polaris(tmp_path)
    device = kind(path, tmp_path, kernel)
    with caplog.at_level(logging.WARNING, logger="govd.daemon"):
        volts = device_volts(_configured(device), device, device.levels_mhz)
        assert device_volts(Config(), device, device.levels_mhz) == ()
    lo, hi = device.levels_mhz[0], device.levels_mhz[-1]
    assert volts == pytest.approx(tuple(np.interp(device.levels_mhz, [lo, hi], [0.6, 0.7])))
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 2 and all("\n" not in r.getMessage() for r in warnings)
    assert all(device.name in r.getMessage() for r in warnings)


def test_without_a_published_table_the_configured_one_is_used(tmp_path) -> None:
    path, kernel = amdgpu_polaris(tmp_path)
    (path / "device/pp_od_clk_voltage").unlink()
    device = AmdgpuDevice(path, tmp_path, kernel)
    volts = device_volts(_configured(device), device, device.levels_mhz)
    lo, hi = device.levels_mhz[0], device.levels_mhz[-1]
    assert volts == pytest.approx(tuple(np.interp(device.levels_mhz, [lo, hi], [0.6, 0.7])))
