"""NVML errors on chosen calls of the fake libnvidia-ml, driven through a real `DeviceRunner`.

All scenarios run in one interpreter (the fake is found through LD_LIBRARY_PATH, read only when a
process starts), reconfiguring the fake's state file between them; each test checks its own row.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.nvml_fake import FakeNvml, build_fake_nvml

CODES = {"NOT_SUPPORTED": 3, "NO_PERMISSION": 4, "GPU_IS_LOST": 15, "UNKNOWN": 999}
CALLS = {"read": "GetClockInfo", "write": "SetGpuLockedClocks"}

RUNNER = """
from govd.daemon.device_runner import DeviceRunner, RunnerSettings
from govd.device.energy import MAX_POWER_W
from govd.governor import Governor
from govd.model.settings import ModelSettings
from govd.policy.static import Fixed
from govd.target import Target
from govd.telemetry.log import EpisodeLimiter

warned = []
class Catch(logging.Handler):
    def emit(self, record):
        warned.append(record.getMessage())
logging.getLogger("govd.test").addHandler(Catch(logging.WARNING))

def fake_get(key):
    lines = open(os.environ["FAKE_NVML_STATE"]).read().splitlines()
    return dict(line.split("=", 1) for line in lines if "=" in line).get(key)

def governed():
    for key in ("gpu0.lock_min", "gpu0.lock_max"):
        fake_set(key, 0)
    device = NvmlDevice.open_index(0)
    level = float(device.levels_mhz[len(device.levels_mhz) // 2])
    governor = Governor(device.levels_mhz, Fixed(level), Target(fps=60), ModelSettings(),
                        mem_levels_mhz=device.mem_levels_mhz)
    settings = RunnerSettings("fixed", Target(fps=60), {})
    warned.clear()
    limiter = EpisodeLimiter(logging.getLogger("govd.test"))
    runner = DeviceRunner(device, governor, settings, limiter)
    return device, runner, level
"""

SCENARIOS = RUNNER + """
rows = {}
for op, call in CALLS.items():
    for name, code in CODES.items():
        device, runner, level = governed()
        if op == "read":
            runner.tick(0.0, 0.05, [])
        fake_set(f"fail.{call}", code)
        fake_set(f"fail.{call}.times", 1)
        runner.tick(1.0, 0.05, [])
        row = {"paused": runner.paused, "lock_after_fault": int(fake_get("gpu0.lock_max"))}
        runner.tick(1.5, 0.05, [])
        row["paused_while_backing_off"] = runner.paused
        runner.tick(2.1, 0.05, [])
        row.update(resumed=runner.paused is None, level=level, warnings=len(warned),
                   lock_after=int(fake_get("gpu0.lock_max")),
                   running=device.read().freq_mhz)
        rows[f"{op}-{name}"] = row
        device.restore()
        device.close()
report(rows=rows)
""".replace("CALLS", repr(CALLS)).replace("CODES", repr(CODES))

ENERGY = RUNNER + """
fake_set("energy_stall", 1)
device, runner, level = governed()
seen = []
step = runner.governor.step
runner.governor.step = lambda sample: seen.append(sample.power_w) or step(sample)
values_mj = [5_000_000, 5_000_500, 0, 500] + [500] * 30 + [1000, 1500]  # 10 W, reload, stall
for k, value in enumerate(values_mj):
    fake_set("gpu0.energy_mj", value)
    runner.tick(k * 0.05, 0.05, [])
power_w = device.read().power_w
device.restore()
report(seen=[p if math.isfinite(p) else None for p in seen], power_w=power_w,
       energy_j=runner.energy_j, max_w=MAX_POWER_W)
"""

REAPPLY = RUNNER + """
device, runner, level = governed()
runner.tick(0.0, 0.05, [])
locked = fake_locks()
for key in ("gpu0.lock_min", "gpu0.lock_max", "gpu0.mem_lock_min", "gpu0.mem_lock_max"):
    fake_set(key, 0)  # a resume from suspend: the driver put its defaults back
runner.reapply()
runner.tick(0.05, 0.05, [])
report(locked=locked, again=fake_locks())
device.restore()
"""


@pytest.fixture(scope="module")
def fake(tmp_path_factory: pytest.TempPathFactory) -> FakeNvml:
    lib_dir = build_fake_nvml(tmp_path_factory.mktemp("fake-nvml"))
    return FakeNvml(lib_dir, Path(tmp_path_factory.mktemp("nvml-state")) / "nvml.state")


@pytest.fixture(scope="module")
def rows(fake: FakeNvml) -> dict[str, Any]:
    fake.configure({"gpus": 1, "arch": "hopper", "root": 1})
    return dict(fake.report(SCENARIOS)["rows"])


@pytest.mark.parametrize("code", list(CODES))
@pytest.mark.parametrize("op", list(CALLS))
def test_nvml_error_pauses_or_hands_back_then_recovers(rows, op, code):
    row = rows[f"{op}-{code}"]
    gone = code == "GPU_IS_LOST"
    assert row["paused"] == ("gone" if gone else op)
    if not gone:
        assert row["lock_after_fault"] == 0  # handed back: the lock reset to the driver default
    assert row["paused_while_backing_off"] == row["paused"]
    assert row["resumed"] and row["lock_after"] == row["level"] == row["running"]
    assert row["warnings"] == 1


def test_nvml_energy_reset_and_stall_fall_back_to_power_readings(fake):
    fake.configure({"gpus": 1, "arch": "hopper", "root": 1})
    got = fake.report(ENERGY)
    seen, power_w = got["seen"], got["power_w"]
    assert all(p is None or 0 <= p <= got["max_w"] for p in seen)
    assert seen[1] == pytest.approx(10.0)
    assert seen[2] == pytest.approx(power_w)  # the driver reload: the power reading
    assert seen[3] == pytest.approx(10.0)
    assert seen[-3] == pytest.approx(power_w)  # stalled for over a second: power readings
    assert seen[-1] == pytest.approx(10.0)  # moving again, started afresh


def test_nvml_locks_are_written_again_when_the_daemon_reapplies_after_a_resume(fake):
    fake.configure({"gpus": 1, "arch": "hopper", "root": 1})
    got = fake.report(REAPPLY)
    assert got["locked"][0] > 0 and got["locked"][1] > 0  # both clocks governed
    assert got["again"] == got["locked"]
