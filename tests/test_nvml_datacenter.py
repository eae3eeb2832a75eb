"""NVML as datacenter GPUs are: the whole fine clock table governed, locks written only when the
decision changes, and Hopper's GPM counters (SM activity, DRAM bandwidth) read as NVML gives them.

Scenarios run against the fake libnvidia-ml.so.1 (tests/nvml_fake.py), whose ``h100-sxm`` has an
H100 SXM's table (one memory clock, 110 graphics clocks 15 MHz apart) and whose GPM calls behave
as NVML's: Hopper or newer only, metrics from two samples over the time between them.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from govd.device.nvml import GOVERNED_LEVELS, shares, spread
from tests.nvml_fake import FakeNvml, build_fake_nvml, one_gpu


@pytest.fixture(scope="session")
def fake_lib_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_fake_nvml(tmp_path_factory.mktemp("fake-nvml"))


@pytest.fixture
def nvml(fake_lib_dir: Path, tmp_path: Path) -> FakeNvml:
    return one_gpu(fake_lib_dir, tmp_path, "h100-sxm")


def test_datacenter_table_is_governed_whole(nvml: FakeNvml) -> None:
    got = nvml.report("""
        (gpu,) = discover_nvml()
        report(levels=gpu.levels_mhz.tolist(), mem=gpu.mem_levels_mhz, ok=gpu.controllable().ok)
    """)
    levels = got["levels"]
    assert len(levels) == 110 and (levels[0], levels[-1]) == (345.0, 1980.0)
    assert set(np.diff(levels)) == {15.0} and got["mem"] is None and got["ok"]


def test_v100_table_of_187_clocks_is_governed_whole(nvml: FakeNvml) -> None:
    nvml.configure({"arch": "volta", "root": 1})
    got = nvml.report("""
        (gpu,) = discover_nvml()
        report(levels=gpu.levels_mhz.tolist())
    """)
    assert len(got["levels"]) == 187 and max(np.diff(got["levels"])) <= 15


def test_thinning_spends_the_cap_on_real_clocks_in_proportion_to_each_memory_clock() -> None:
    """A cap, not a design: the pairs kept fill it, each memory clock keeps its share of its
    own supported clocks (ends included), and a table within the cap is kept whole."""
    assert shares([110], GOVERNED_LEVELS) == [110]
    kept = shares([309, 107], GOVERNED_LEVELS)
    assert sum(kept) == GOVERNED_LEVELS and kept[0] > 2 * kept[1] > 0
    clocks = np.arange(210.0, 2521.0, 7.5)
    subset = spread(clocks, 100)
    assert subset.size == 100 and (subset[0], subset[-1]) == (clocks[0], clocks[-1])
    assert set(subset) <= set(clocks)
    assert spread(clocks, 1000) is clocks


def test_hopper_gpm_counters_are_the_models_counters(nvml: FakeNvml) -> None:
    nvml.configure({"arch": "h100-sxm", "root": 1, "sm_util": 70, "dram_util": 30})
    got = nvml.report("""
        import time
        (gpu,) = discover_nvml()
        first = gpu.read().counters  # within 100 ms of the first sample: nothing yet
        time.sleep(0.25)
        second = gpu.read().counters
        fake_set("gpu0.sm_util", 10)
        time.sleep(0.25)
        third = gpu.read().counters
        gpu.close()
        report(first=first, second=second, third=third)
    """)
    assert set(got["first"]) == {"mem_busy"}
    assert got["second"]["sm_activity"] == pytest.approx(0.70, abs=0.01)
    assert got["second"]["dram_bw_util"] == pytest.approx(0.30, abs=0.01)
    assert got["third"]["sm_activity"] == pytest.approx(0.10, abs=0.02)  # a new interval


@pytest.mark.parametrize("arch", ["ampere", "volta", "ada"])
def test_gpus_before_hopper_have_no_gpm_and_read_as_before(nvml: FakeNvml, arch: str) -> None:
    nvml.configure({"arch": arch, "root": 1})
    done = nvml.run("""
        import time
        (gpu,) = discover_nvml()
        counters = [gpu.read().counters for _ in range(3) if time.sleep(0.12) is None]
        report(counters=counters)
    """)
    assert done.returncode == 0, done.stderr
    assert done.stderr.count("no GPM (") == 1  # said once, at start
    assert all(set(c) == {"mem_busy"} for c in json.loads(done.stdout)["counters"])
    assert "gpu0.gpm_at_ms" not in nvml.state()


def test_gpm_sample_of_a_lost_gpu_is_device_gone(nvml: FakeNvml) -> None:
    got = nvml.report("""
        import time
        (gpu,) = discover_nvml()
        time.sleep(0.15)
        fake_set("fail.GpmSampleGet", 15)
        report(outcome=outcome(gpu.read))
    """)
    assert got["outcome"].startswith("DeviceGone")


def test_gpm_failing_otherwise_loses_the_counters_not_the_gpu(nvml: FakeNvml) -> None:
    got = nvml.report("""
        import time
        (gpu,) = discover_nvml()
        time.sleep(0.15)
        fake_set("fail.GpmSampleGet", 999)
        first = outcome(gpu.read)
        time.sleep(0.15)
        report(first=first, later=sorted(gpu.read().counters))
    """)
    assert got == {"first": "ok", "later": ["mem_busy"]}


DAEMON = """
import tempfile
from pathlib import Path
from govd.conf.schema import Config
from govd.daemon import daemon as daemon_module
from govd.daemon.daemon import Daemon, Options

work = Path(tempfile.mkdtemp())
daemon_module.find_devices = lambda root: discover_nvml()  # the fake GPU, not this machine's
config = Config.model_validate({
    "period_ms": 10, "policy": {"name": "fixed", "params": {"freq_mhz": 1200}},
    "target": {"max_slowdown": 0.1}, "frames": {"source": "busy"},
    "model": {"counters": ["sm_activity", "dram_bw_util"]},
    "logging": {"summary_interval_s": 0}, "state_file": str(work / "state.json"),
})

def should_stop():
    return daemon.stats.ticks >= 60

daemon = Daemon(Options(config, sysfs_root=work, rescan_s=0, should_stop=should_stop))
code = daemon.run()
state = dict(l.split("=", 1) for l in open(os.environ["FAKE_NVML_STATE"]).read().split())
report(code=code, ticks=daemon.stats.ticks, lock_writes=int(state["gpu0.lock_writes"]),
       locks=fake_locks(), sampled="gpu0.gpm_at_ms" in state)
"""


def test_daemon_locks_the_clock_once_for_an_unchanging_decision(nvml: FakeNvml) -> None:
    """Locking every tick delayed NCCL collectives (a reported NVIDIA issue): 60 ticks at one
    level are one lock; the GPM counters flow to the model meanwhile."""
    got = nvml.report(DAEMON)
    assert got["code"] == 0 and got["ticks"] >= 60
    assert got["lock_writes"] == 1 and got["sampled"]
    assert got["locks"] == [0, 0]  # reset at the end
