"""The NVML backend's two clock domains against the fake libnvidia-ml.so.1: (core, memory) pairs,
ordered writes with roll-back, the NOT_SUPPORTED fallback, the configuration switch and a daemon
run that governs both clocks. Each scenario runs in its own process (see tests/nvml_fake.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.nvml_fake import FakeNvml, build_fake_nvml, one_gpu


@pytest.fixture(scope="module")
def fake_lib_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_fake_nvml(tmp_path_factory.mktemp("fake-nvml"))


@pytest.fixture
def nvml(fake_lib_dir: Path, tmp_path: Path) -> FakeNvml:
    return one_gpu(fake_lib_dir, tmp_path, "ampere")


def test_levels_are_every_supported_pair_sorted_by_core_then_memory(nvml: FakeNvml) -> None:
    nvml.configure({"arch": "hopper", "root": 1})
    got = nvml.report("""
        (gpu,) = discover_nvml()
        report(cores=gpu.levels_mhz.tolist(), mems=gpu.mem_levels_mhz.tolist(),
               bounds=gpu.bounds_mhz, reason=gpu.controllable().reason)
    """)
    pairs = list(zip(got["cores"], got["mems"], strict=True))
    # the fake's H100: 345..1980 MHz at memory 2619 MHz, 345..1500 MHz at 1593 MHz, 15 MHz steps
    expected = sorted([(345.0 + 15 * i, 2619.0) for i in range(110)]
                      + [(345.0 + 15 * i, 1593.0) for i in range(78)])
    assert pairs == expected
    assert got["bounds"] == [345.0, 1980.0]
    assert got["reason"] == ""


def test_more_pairs_than_the_daemon_governs_are_thinned_evenly_keeping_the_extremes(
        nvml: FakeNvml) -> None:
    nvml.configure({"arch": "ada", "root": 1})  # 309 + 107 pairs at 7 and 8 MHz steps
    got = nvml.report("""
        from govd.device.nvml import GOVERNED_LEVELS
        (gpu,) = discover_nvml()
        pairs = list(zip(gpu.levels_mhz.tolist(), gpu.mem_levels_mhz.tolist()))
        gpu.set_pair(*pairs[len(pairs) // 3])
        r = gpu.read()
        gpu.restore()
        report(pairs=pairs, most=GOVERNED_LEVELS, chosen=pairs[len(pairs) // 3],
               running=[r.freq_mhz, r.mem_freq_mhz])
    """)
    pairs = got["pairs"]
    assert 200 < len(pairs) <= got["most"]
    assert pairs == sorted(pairs)
    assert [pairs[0], pairs[-1]] == [[210.0, 405.0], [2520.0, 10501.0]]
    assert [210.0, 10501.0] in pairs and [1005.0, 405.0] in pairs
    assert got["running"] == got["chosen"]


def test_pair_sets_both_clocks_and_restore_resets_both(nvml: FakeNvml) -> None:
    got = nvml.report("""
        (gpu,) = discover_nvml()
        gpu.set_pair(903, 400)  # snapped to the nearest memory clock, then graphics clock at it
        r = gpu.read()
        locked = fake_locks()
        gpu.restore()
        after = gpu.read()
        report(running=[r.freq_mhz, r.mem_freq_mhz], locked=locked, locks_after=fake_locks(),
               after=[after.freq_mhz, after.mem_freq_mhz], saved=gpu.save())
    """)
    assert got["running"] == [900.0, 405.0]
    assert got["locked"] == [900, 405]
    assert got["locks_after"] == [0, 0]
    assert got["after"] == [1410.0, 1215.0]
    assert (got["saved"]["graphics_clock_mhz"], got["saved"]["mem_clock_mhz"]) == (1410, 1215)


def test_writes_are_ordered_so_the_fake_never_sees_an_unsupported_pair(nvml: FakeNvml) -> None:
    """At memory 405 MHz the fake supports graphics clocks up to 1005 MHz only, and refuses any
    lock that would leave the pair outside that: lowering memory must lock graphics first,
    raising it must lock memory first."""
    got = nvml.report("""
        (gpu,) = discover_nvml()
        steps = []
        for pair in [(1410, 1215), (900, 405), (1395, 1215), (210, 405), (1005, 405)]:
            gpu.set_pair(*pair)
            steps.append(fake_locks())
        gpu.restore()
        report(steps=steps)
    """)
    assert got["steps"] == [[1410, 1215], [900, 405], [1395, 1215], [210, 405], [1005, 405]]


def test_no_write_for_a_pair_already_locked(nvml: FakeNvml) -> None:
    nvml.report("""
        (gpu,) = discover_nvml()
        gpu.set_pair(900, 405)
        gpu.set_pair(900, 405)
        gpu.set_pair(600, 405)  # only the graphics clock changes
        report()
    """)
    state = nvml.state()
    assert (state["gpu0.lock_writes"], state["gpu0.mem_lock_writes"]) == ("2", "1")


@pytest.mark.parametrize("before", [None, (1410, 1215)])
def test_refused_second_write_puts_the_first_back(nvml: FakeNvml, before) -> None:
    got = nvml.report(f"""
        (gpu,) = discover_nvml()
        if {before!r} is not None:
            gpu.set_pair(*{before!r})
        first = fake_locks()
        fake_set("fail.SetMemoryLockedClocks", 2)  # INVALID_ARGUMENT, once
        fake_set("fail.SetMemoryLockedClocks.times", 1)
        result = outcome(gpu.set_pair, 900, 405)  # graphics first (memory falls), then memory
        after_refusal = fake_locks()
        gpu.set_pair(900, 405)  # govd's idea of the locks is still right: both written
        report(first=first, result=result, after_refusal=after_refusal, retried=fake_locks())
    """)
    assert got["result"].startswith("WriteRefused")
    assert got["after_refusal"] == got["first"]
    assert got["retried"] == [900, 405]


def test_memory_lock_not_supported_falls_back_to_the_graphics_clock_only(nvml: FakeNvml) -> None:
    got = nvml.report("""
        (gpu,) = discover_nvml()
        fake_set("fail.SetMemoryLockedClocks", 3)  # NOT_SUPPORTED
        result = outcome(gpu.set_pair, 900, 405)
        first = fake_locks()
        gpu.set_pair(1200, 405)  # from now on the graphics clock only
        c = gpu.controllable()
        report(result=result, first=first, then=fake_locks(), mem_levels=gpu.mem_levels_mhz,
               levels=len(gpu.levels_mhz), ok=c.ok, reason=c.reason)
    """)
    assert got["result"] == "ok"
    assert got["first"] == [900, 0] and got["then"] == [1200, 0]
    assert got["mem_levels"] is None and got["levels"] == 81  # 210..1410 MHz at 1215 MHz
    assert got["ok"] is True
    assert "NOT_SUPPORTED" in got["reason"] and "graphics clock only" in got["reason"]


def test_before_ampere_the_graphics_clock_alone_is_governed_and_devices_says_so(
        nvml: FakeNvml) -> None:
    nvml.configure({"arch": "turing", "root": 1})
    got = nvml.report("""
        from govd.commands.devices import describe
        (gpu,) = discover_nvml()
        gpu.set_pair(600, 405)
        row = describe(gpu)
        gpu.restore()
        report(mem_levels=gpu.mem_levels_mhz, levels=gpu.levels_mhz.tolist(), row=row)
    """)
    assert got["mem_levels"] is None
    assert got["levels"] == [300.0 + 15 * i for i in range(87)]  # at memory 5001 MHz
    row = got["row"]
    assert row["controllable"] is True
    assert "Ampere" in row["reason"] and "graphics clock only, at memory 5001 MHz" in row["reason"]
    assert "mem_levels" not in row


def test_devices_lists_the_memory_clocks_of_a_two_domain_gpu(nvml: FakeNvml) -> None:
    got = nvml.report("""
        from govd.commands.devices import describe, _text
        (gpu,) = discover_nvml()
        row = describe(gpu)
        report(row=row, text=_text(row))
    """)
    row = got["row"]
    assert row["levels"] == 81 + 54
    assert row["mem_levels_mhz"] == [405.0, 1215.0]
    assert row["current_mem_mhz"] == 1215.0
    assert "× mem 405, 1215 MHz" in got["text"]


GOVERNOR = """
from govd.conf.schema import Config
from govd.daemon.governed import build_governor
(gpu,) = discover_nvml()
config = Config.model_validate({"devices": [{"backend": "nvml", "memory_clock": MODE}]})
governor, _ = build_governor(config, gpu)
mems = governor.mem_levels_mhz
report(levels=governor.levels_mhz.tolist(), mems=None if mems is None else mems.tolist())
"""


def test_memory_clock_off_governs_the_graphics_clocks_at_the_highest_memory_clock(
        nvml: FakeNvml) -> None:
    off = nvml.report(GOVERNOR.replace("MODE", "'off'"))
    auto = nvml.report(GOVERNOR.replace("MODE", "'auto'"))
    assert off["mems"] is None
    assert off["levels"] == [210.0 + 15 * i for i in range(81)]
    assert len(auto["levels"]) == len(auto["mems"]) == 81 + 54


DAEMON = """
import tempfile
from pathlib import Path
from govd.conf.schema import Config
from govd.daemon import daemon as daemon_module
from govd.daemon.daemon import Daemon, Options

work = Path(tempfile.mkdtemp())
daemon_module.find_devices = lambda root: discover_nvml()  # the fake GPU, not this machine's
config = Config.model_validate({
    "period_ms": 10, "policy": {"name": "powersave"}, "target": {"max_slowdown": 0.1},
    "frames": {"source": "busy"}, "logging": {"summary_interval_s": 0},
    "state_file": str(work / "state.json"),
})
seen = {}

def should_stop():
    status = daemon.runners[0].status() if daemon.runners else {}
    if status.get("chosen_mem_mhz") is not None and "locks" not in seen:
        seen.update(locks=fake_locks(), status=status)
    return "locks" in seen and daemon.stats.ticks >= 5

daemon = Daemon(Options(config, sysfs_root=work, rescan_s=0, should_stop=should_stop))
code = daemon.run()
saved = json.loads((work / "state.json").read_text()) if (work / "state.json").exists() else None
s = seen["status"]
report(code=code, locks=seen["locks"], after=fake_locks(), saved=saved,
       status=[s["chosen_mhz"], s["chosen_mem_mhz"], s["level_mhz"], s["mem_level_mhz"]])
"""


def test_daemon_governs_both_clocks_and_puts_both_back(nvml: FakeNvml) -> None:
    got = nvml.report(DAEMON)
    assert got["code"] == 0
    assert got["locks"] == [210, 405]  # powersave: the lowest core clock at the lowest memory
    assert got["status"][:2] == [210.0, 405.0]
    assert got["after"] == [0, 0]


def test_a_failed_memory_reset_still_resets_the_graphics_lock_and_is_retried(
        nvml: FakeNvml) -> None:
    """One domain's failed reset must not leave the other locked: restore resets every domain
    it can, then says what failed, and a second restore finishes the job."""
    got = nvml.report("""
        (gpu,) = discover_nvml()
        gpu.set_pair(903, 400)
        fake_set("fail.ResetMemoryLockedClocks", 999)
        fake_set("fail.ResetMemoryLockedClocks.times", 1)
        first = outcome(gpu.restore)
        after_first = fake_locks()
        second = outcome(gpu.restore)
        report(first=first, after_first=after_first, second=second, after_second=fake_locks())
    """)
    assert got["first"].startswith("DeviceError") and "reset memory" in got["first"]
    assert got["after_first"] == [0, 405]  # graphics reset though memory's reset failed
    assert got["second"] == "ok"
    assert got["after_second"] == [0, 0]


def test_settling_the_domains_finds_a_refused_memory_lock_before_any_level_is_planned(
        nvml: FakeNvml) -> None:
    """A GPU that lists two memory clocks and refuses the memory lock (the H200 of 27 Nov) is
    found out by one write once in custody, not at the first pair a governor chose."""
    got = nvml.report("""
        (gpu,) = discover_nvml()
        pairs = len(gpu.levels_mhz)
        works = gpu.settle_domains()
        locked = fake_locks()
        gpu.restore()
        unlocked = fake_locks()
        fake_set("fail.SetMemoryLockedClocks", 3)  # NOT_SUPPORTED
        (gpu,) = discover_nvml()
        why = gpu.settle_domains()
        report(pairs=pairs, works=works, locked=locked, unlocked=unlocked, why=why,
               levels=len(gpu.levels_mhz), mems=gpu.mem_levels_mhz, refused=fake_locks(),
               reason=gpu.controllable().reason)
    """)
    assert got["pairs"] == 81 + 54
    assert got["works"] is None
    assert got["locked"] == [0, 1215]  # the memory clock at its highest, graphics unlocked
    assert got["unlocked"] == [0, 0]
    assert "NOT_SUPPORTED" in got["why"] and got["why"] == got["reason"]
    assert got["levels"] == 81 and got["mems"] is None
    assert got["refused"] == [0, 0]


def test_the_daemon_governs_the_graphics_clock_alone_where_the_memory_lock_is_refused(
        nvml: FakeNvml) -> None:
    nvml.configure({"arch": "ampere", "root": 1, "fail.SetMemoryLockedClocks": 3})
    got = nvml.report(DAEMON.replace(
        'if status.get("chosen_mem_mhz") is not None and "locks" not in seen:',
        'if status.get("chosen_mhz") is not None and "locks" not in seen:').replace(
        "report(code=code,", "report(levels=len(daemon.runners[0].governor.levels_mhz), "
        "mems=daemon.runners[0].governor.mem_levels_mhz, code=code,"))
    assert got["code"] == 0
    assert got["levels"] == 81 and got["mems"] is None  # not the 135 listed pairs
    assert got["locks"] == [210, 0]
    assert got["status"][1] is None  # no memory clock chosen
    assert got["status"][3] == 1215.0  # the memory clock read: its highest, unlocked
    assert got["after"] == [0, 0]


def test_a_gpu_that_appears_and_cannot_be_governed_after_settling_is_put_back(
        nvml: FakeNvml) -> None:
    """Settling writes to the GPU after its state is recorded: a governor that then cannot be
    built leaves the GPU as it was found, let go, not held with a closed handle."""
    nvml.configure({"arch": "ampere", "root": 1, "fail.SetMemoryLockedClocks": 3})
    got = nvml.report("""
        import tempfile
        from pathlib import Path
        from govd.conf.schema import Config
        from govd.daemon import daemon as daemon_module
        from govd.daemon.daemon import Daemon, Options
        from govd.daemon.governed import SetupError

        work = Path(tempfile.mkdtemp())
        config = Config.model_validate({"state_file": str(work / "state.json")})
        daemon = Daemon(Options(config, sysfs_root=work, rescan_s=0))
        (gpu,) = discover_nvml()
        daemon._watch.new_devices = lambda config, now_s: [gpu]
        built = daemon_module.build_governor
        calls = []

        def build_once(config, device):
            calls.append(len(device.levels_mhz))
            if len(calls) > 1:
                raise SetupError(f"{device.name}: no governor this time")
            return built(config, device)

        daemon_module.build_governor = build_once
        daemon._take_new(0.0)
        report(calls=calls, runners=len(daemon.runners), held=daemon.custody.holds(gpu.name),
               locked=daemon.custody.locks.holds(gpu.name), locks=fake_locks())
    """)
    assert got["calls"] == [81 + 54, 81]  # the listed pairs, then the graphics clocks left
    assert got["runners"] == 0 and got["held"] is False and got["locked"] is False
    assert got["locks"] == [0, 0]
