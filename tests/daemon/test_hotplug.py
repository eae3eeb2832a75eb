"""Hot-plug while the daemon runs: udev events routed to runners or to a rescan, and an NVML GPU
whose handle died with a driver reload reopened by its runner (fake libnvidia-ml.so.1)."""

from __future__ import annotations

from pathlib import Path

import pytest

from govd.conf.schema import Config
from govd.daemon.hotplug import DeviceWatch
from govd.device.discovery import HotplugEvent
from tests.daemon.test_device_runner import make_runner, run_ticks
from tests.nvml_fake import FakeNvml, build_fake_nvml
from tests.sysfs_fixtures import adreno_msm

MALI_PATH = "devices/platform/fde60000.gpu/devfreq/fde60000.gpu"


def event(action: str, name: str, sys_path: str = "/sys/x") -> HotplugEvent:
    return HotplugEvent(action, "devfreq", name, Path(sys_path))


def test_add_of_a_governed_device_probes_its_runner_and_asks_no_rescan(tmp_path):
    runner, _, _ = make_runner(tmp_path, [2])
    watch = DeviceWatch(tmp_path, rescan_s=0)
    watch.start([runner.name])
    run_ticks(runner, 1)
    watch.on_event(event("remove", runner.name), 1.0, [runner])
    assert runner.paused == "gone"
    watch.on_event(event("add", runner.name, str(runner.device.lock_dir())), 1.1, [runner])
    assert not watch.rescan_due(1.1)
    run_ticks(runner, 1, start_s=1.1)  # probed at once, not after the back-off
    assert runner.paused is None


def test_add_of_an_unknown_device_asks_for_a_rescan_that_finds_it_once(tmp_path):
    runner, _, _ = make_runner(tmp_path, [2])
    watch = DeviceWatch(tmp_path, rescan_s=0)
    watch.start([runner.name])
    assert not watch.rescan_due(0.0)
    adreno_msm(tmp_path, governor="userspace")
    watch.on_event(event("add", "5000000.gpu"), 0.5, [runner])
    assert watch.rescan_due(0.5)
    config = Config()
    assert [d.name for d in watch.new_devices(config, 0.5)] == ["5000000.gpu"]
    assert not watch.rescan_due(0.6)
    assert watch.new_devices(config, 0.6) == []  # already seen: not taken twice


def test_remove_of_an_unknown_device_changes_nothing(tmp_path):
    runner, _, _ = make_runner(tmp_path, [2])
    watch = DeviceWatch(tmp_path, rescan_s=0)
    watch.start([runner.name])
    watch.on_event(event("remove", "card7"), 0.0, [runner])
    assert runner.paused is None and not watch.rescan_due(0.0)


def test_without_udev_events_the_tree_is_rescanned_periodically(tmp_path):
    watch = DeviceWatch(tmp_path)  # not /sys: no udev, periodic rescans
    watch.start([])
    assert not watch.rescan_due(10.0)  # the first rescan is due one interval after start
    assert watch.rescan_due(12.5)
    watch.new_devices(Config(), 12.5)
    assert not watch.rescan_due(13.0)


@pytest.fixture(scope="module")
def fake_lib_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_fake_nvml(tmp_path_factory.mktemp("fake-nvml"))


def test_nvml_gpu_lost_to_a_driver_reload_is_reopened_and_locked_again(fake_lib_dir, tmp_path):
    nvml = FakeNvml(fake_lib_dir, tmp_path / "nvml.state")
    nvml.configure({"gpus": 1, "arch": "hopper", "root": 1})
    got = nvml.report("""
        import functools, logging
        from govd.daemon.device_runner import DeviceRunner, RunnerSettings
        from govd.device.discovery import reopen
        from govd.governor import Governor
        from govd.model.settings import ModelSettings
        from govd.policy.registry import make_policy
        from govd.target import Target
        from govd.telemetry.log import EpisodeLimiter

        (gpu,) = discover_nvml()
        gpu.save()
        governor = Governor(gpu.levels_mhz, make_policy("powersave"), Target(fps=60),
                            ModelSettings(), mem_levels_mhz=gpu.mem_levels_mhz)
        runner = DeviceRunner(gpu, governor, RunnerSettings("powersave", Target(fps=60), {}),
                              EpisodeLimiter(logging.getLogger("t")),
                              reopen=functools.partial(reopen, sysfs_root="/sys"))
        runner.tick(0.0, 0.05, [])
        locked_before = open(os.environ["FAKE_NVML_STATE"]).read()
        fake_set("reload", 1)  # the fake drops every lock, as a reload does
        runner.tick(0.05, 0.05, [])
        paused = runner.paused
        runner.tick(2.0, 0.05, [])  # past the back-off: probe, reopen, lock again
        state = dict(l.split("=", 1) for l in open(os.environ["FAKE_NVML_STATE"]).read().split())
        report(paused=paused, now=runner.paused, reopened=runner.counts["reopened"],
               same_gpu=runner.device.name == gpu.name, lock=state.get("gpu0.lock_min"),
               locked_before="gpu0.lock_min" in locked_before)
    """)
    assert got["locked_before"] and got["paused"] == "gone"
    assert got["now"] is None and got["reopened"] == 1 and got["same_gpu"]
    assert got["lock"] not in (None, "0")


def _counting_scans(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    """Record each full scan `DeviceWatch` makes (the real scan still runs)."""
    import govd.daemon.hotplug as hotplug

    scans: list[Path] = []
    real = hotplug.find_devices

    def counted(root: Path) -> list:
        scans.append(root)
        return real(root)

    monkeypatch.setattr(hotplug, "find_devices", counted)
    return scans


def test_a_periodic_rescan_of_an_unchanged_tree_skips_the_full_scan(tmp_path, monkeypatch):
    scans = _counting_scans(monkeypatch)
    adreno_msm(tmp_path, governor="userspace")
    watch = DeviceWatch(tmp_path, rescan_s=2.0)
    watch.start([])
    assert [d.name for d in watch.new_devices(Config(), 2.0)] == ["5000000.gpu"]
    assert watch.new_devices(Config(), 4.0) == []
    assert watch.new_devices(Config(), 6.0) == []
    assert len(scans) == 1  # the class folders listed the same entries: nothing can be new


def test_a_device_that_appears_is_found_by_the_next_periodic_rescan(tmp_path, monkeypatch):
    scans = _counting_scans(monkeypatch)
    (tmp_path / "class" / "devfreq").mkdir(parents=True)
    watch = DeviceWatch(tmp_path, rescan_s=2.0)
    watch.start([])
    assert watch.new_devices(Config(), 2.0) == []
    assert watch.new_devices(Config(), 4.0) == []
    adreno_msm(tmp_path, governor="userspace")
    assert [d.name for d in watch.new_devices(Config(), 6.0)] == ["5000000.gpu"]
    assert len(scans) == 1  # before it, nothing was listed: nothing to scan


def test_an_entry_no_scan_took_keeps_the_periodic_scans_full(tmp_path, monkeypatch):
    scans = _counting_scans(monkeypatch)
    adreno_msm(tmp_path, governor="userspace")
    (tmp_path / "class" / "drm" / "card3").mkdir(parents=True)  # no driver govd knows
    watch = DeviceWatch(tmp_path, rescan_s=2.0)
    watch.start([])
    watch.new_devices(Config(), 2.0)
    watch.new_devices(Config(), 4.0)
    assert len(scans) == 2  # card3 was never seen: a driver bound since could make it new


def test_an_asked_rescan_scans_in_full_even_when_the_tree_looks_unchanged(tmp_path, monkeypatch):
    scans = _counting_scans(monkeypatch)
    adreno_msm(tmp_path, governor="userspace")
    watch = DeviceWatch(tmp_path, rescan_s=2.0)
    watch.start([])
    watch.new_devices(Config(), 2.0)
    watch.look_again([])  # a reload: devices refused before may be wanted now
    assert [d.name for d in watch.new_devices(Config(), 2.5)] == ["5000000.gpu"]
    assert len(scans) == 2
