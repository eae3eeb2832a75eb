"""The NVML backend against a fake libnvidia-ml.so.1, through the real nvidia-ml-py code.

Each scenario runs in its own process (see tests/nvml_fake.py); the fake is compiled once.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.nvml_fake import REPO_ROOT, FakeNvml, build_fake_nvml, one_gpu


@pytest.fixture(scope="session")
def fake_lib_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_fake_nvml(tmp_path_factory.mktemp("fake-nvml"))


@pytest.fixture
def nvml(fake_lib_dir: Path, tmp_path: Path) -> FakeNvml:
    return one_gpu(fake_lib_dir, tmp_path, "hopper")


def test_discovery_lists_every_gpu_with_its_identity(nvml: FakeNvml) -> None:
    nvml.configure({"gpus": 2, "gpu1.arch": "volta", "root": 1})
    got = nvml.report("""
        gpus = discover_nvml()
        report(gpus=[[g.backend, g.name, g.product, g.pci_bus_id] for g in gpus])
    """)
    assert got["gpus"] == [
        ["nvml", "GPU-fa4e0009-0000-4000-8000-000000000000", "NVIDIA H100 80GB HBM3",
         "00000000:17:00.0"],
        ["nvml", "GPU-fa4e0005-0000-4000-8000-000000000001", "Tesla V100-SXM2-16GB",
         "00000000:27:00.0"],
    ]


def test_one_memory_clock_makes_the_levels_its_graphics_clocks_ascending(
        nvml: FakeNvml) -> None:
    nvml.configure({"arch": "volta", "root": 1})
    got = nvml.report("""
        (gpu,) = discover_nvml()
        report(levels=gpu.levels_mhz.tolist(), bounds=gpu.bounds_mhz, mem=gpu.mem_levels_mhz,
               running_mem=gpu.read().mem_freq_mhz, reason=gpu.controllable().reason)
    """)
    assert got["levels"][:3] == [135.0, 142.0, 150.0]  # V100's alternate 7 and 8 MHz steps
    assert got["bounds"] == [135.0, 1530.0]
    assert got["mem"] is None
    assert got["running_mem"] == 877.0
    assert got["reason"] == ""  # one memory clock: nothing to say about it


def test_lock_is_read_back_and_restore_resets_to_the_driver_default(nvml: FakeNvml) -> None:
    got = nvml.report("""
        (gpu,) = discover_nvml()
        before = gpu.read().freq_mhz
        gpu.set_level(1200)
        locked = gpu.read().freq_mhz
        gpu.restore()
        gpu.restore()  # idempotent
        report(before=before, locked=locked, after=gpu.read().freq_mhz)
    """)
    assert got == {"before": 1980.0, "locked": 1200.0, "after": 1980.0}
    assert nvml.state()["gpu0.lock_max"] == "0"


def test_request_between_levels_locks_the_nearest_level_within_bounds(nvml: FakeNvml) -> None:
    got = nvml.report("""
        (gpu,) = discover_nvml()
        running = []
        for freq_mhz in (1209, 5000, 10):
            gpu.set_level(freq_mhz)
            running.append(gpu.read().freq_mhz)
        gpu.restore()
        report(running=running)
    """)
    assert got["running"] == [1215.0, 1980.0, 345.0]


def test_no_write_when_already_locked_at_that_level(nvml: FakeNvml) -> None:
    nvml.report("""
        (gpu,) = discover_nvml()
        gpu.set_level(1200)
        gpu.set_level(1200)
        gpu.set_level(1203)  # the same level once snapped
        report()
    """)
    assert nvml.state()["gpu0.lock_writes"] == "1"


def test_lock_without_root_is_refused_and_the_gpu_stops_being_controllable(
        nvml: FakeNvml) -> None:
    nvml.configure({"root": 0})
    got = nvml.report("""
        (gpu,) = discover_nvml()
        before = gpu.controllable().ok
        result = outcome(gpu.set_level, 1200)
        report(before=before, result=result, after=gpu.controllable().reason)
    """)
    assert got["before"] is True  # the test runs as root; the fake plays the non-root caller
    assert got["result"].startswith("WriteRefused")
    assert "root" in got["result"]
    assert "Insufficient Permissions" in got["after"]


def test_controllable_again_once_a_lock_succeeds_after_a_refusal(nvml: FakeNvml) -> None:
    nvml.configure({"root": 1, "fail.SetGpuLockedClocks": 4, "fail.SetGpuLockedClocks.times": 1})
    got = nvml.report("""
        (gpu,) = discover_nvml()
        refused = outcome(gpu.set_level, 1200)
        during = gpu.controllable().ok
        retried = outcome(gpu.set_level, 1200)
        c = gpu.controllable()
        gpu.restore()
        report(refused=refused, during=during, retried=retried, after=[c.ok, c.reason])
    """)
    assert got["refused"].startswith("WriteRefused") and got["during"] is False
    assert got["retried"] == "ok"
    assert got["after"] == [True, ""]


@pytest.mark.parametrize("loss", ["gpu0.lost", "reload"])
def test_first_lock_after_the_gpu_came_back_is_written_again(nvml: FakeNvml, loss: str) -> None:
    """A GPU that fell off the bus, or whose driver reloaded, comes back with the default clocks
    (the fake drops its locks as the driver does): the same level must be locked again."""
    got = nvml.report(f"""
        (gpu,) = discover_nvml()
        gpu.set_level(1200)
        locked = fake_locks()
        fake_set({loss!r}, 1)
        gone = outcome(gpu.read)
        if {loss!r} == "reload":  # a stale session: the daemon reopens the GPU by its UUID
            saved = gpu.save()
            gpu.close()
            gpu = NvmlDevice.from_saved(saved)
        else:
            fake_set({loss!r}, 0)
        dropped = fake_locks()
        gpu.set_level(1200)
        report(locked=locked, gone=gone, dropped=dropped, again=fake_locks())
    """)
    assert got["gone"].startswith("DeviceGone")
    assert got["locked"] == got["again"] == [1200, 0]
    assert got["dropped"] == [0, 0]


def test_not_controllable_when_govd_is_not_root(nvml: FakeNvml) -> None:
    got = nvml.report("""
        os.geteuid = lambda: 1000
        (gpu,) = discover_nvml()
        c = gpu.controllable()
        report(ok=c.ok, reason=c.reason)
    """)
    assert got["ok"] is False
    assert "not root" in got["reason"]


def test_pascal_has_no_energy_counter_and_cannot_lock_graphics_clocks(nvml: FakeNvml) -> None:
    nvml.configure({"arch": "pascal", "root": 1})
    got = nvml.report("""
        (gpu,) = discover_nvml()
        r = gpu.read()
        c = gpu.controllable()
        report(energy_is_nan=math.isnan(r.energy_mj), power_w=r.power_w, ok=c.ok,
               reason=c.reason, result=outcome(gpu.set_level, 900))
    """)
    assert got["energy_is_nan"] is True
    assert got["power_w"] > 0
    assert got["ok"] is False
    assert "Pascal" in got["reason"]
    assert got["result"].startswith("NotSupported")


def test_reading_reports_utilisation_watts_and_a_counter_that_never_decreases(
        nvml: FakeNvml) -> None:
    nvml.configure({"root": 1, "busy": 40})
    got = nvml.report("""
        (gpu,) = discover_nvml()
        first = gpu.read()
        gpu.set_level(345)  # less power from here on: the counter must still not fall
        second = gpu.read()
        gpu.restore()
        report(busy=first.busy, mem_busy=first.counters["mem_busy"], power_w=first.power_w,
               energy=[first.energy_mj, second.energy_mj])
    """)
    assert got["busy"] == 0.4
    assert got["mem_busy"] == 0.2
    assert got["power_w"] == 70 + 630 * 0.4  # the fake's model at full clock: idle + busy share
    assert 0 < got["energy"][0] <= got["energy"][1]


def test_lost_gpu_raises_device_gone_and_is_skipped_by_discovery(nvml: FakeNvml) -> None:
    nvml.configure({"gpus": 2, "root": 1})
    done = nvml.run("""
        gpus = discover_nvml()
        fake_set("gpu0.lost", 1)
        read_result = outcome(gpus[0].read)
        report(read=read_result, again=[g.name for g in discover_nvml()])
    """)
    got = json.loads(done.stdout.strip().splitlines()[-1])
    assert got["read"].startswith("DeviceGone")
    assert "GPU is lost" in got["read"]
    assert got["again"] == ["GPU-fa4e0009-0000-4000-8000-000000000001"]
    assert "NVML GPU 0 skipped" in done.stderr


def test_driver_reload_makes_open_gpus_gone_until_rediscovered(nvml: FakeNvml) -> None:
    got = nvml.report("""
        (gpu,) = discover_nvml()
        fake_set("reload", 1)
        stale = outcome(gpu.read)
        gpu.close()
        (fresh,) = discover_nvml()
        report(stale=stale, fresh=fresh.read().freq_mhz)
    """)
    assert got["stale"].startswith("DeviceGone")
    assert "Uninitialized" in got["stale"]
    assert got["fresh"] == 1980.0


def test_no_library_means_no_gpus_and_a_logged_reason(nvml: FakeNvml) -> None:
    done = nvml.run("report(gpus=len(discover_nvml()))", with_library=False)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"gpus": 0}
    assert "libnvidia-ml.so.1 not found" in done.stderr


def test_restore_without_writes_leaves_a_lock_found_in_place(nvml: FakeNvml) -> None:
    nvml.configure({"root": 1, "gpu0.lock_min": 1500, "gpu0.lock_max": 1500})
    got = nvml.report("""
        (gpu,) = discover_nvml()
        saved = gpu.save()
        gpu.restore()
        report(saved=saved, running=gpu.read().freq_mhz)
    """)
    assert got["running"] == 1500.0
    assert got["saved"]["graphics_clock_mhz"] == 1500
    assert got["saved"]["gpu_locked_before"] is None  # NVML cannot read a locked range


def test_restore_saved_in_a_fresh_process_resets_what_a_crashed_one_locked(
        nvml: FakeNvml) -> None:
    nvml.configure({"arch": "ampere", "root": 1})
    crashed = nvml.run("""
        (gpu,) = discover_nvml()
        gpu.set_pair(900, 405)
        report(**gpu.save())
        sys.stdout.flush()
        os._exit(1)  # dies holding both locks
    """)
    saved = json.loads(crashed.stdout.strip().splitlines()[-1])
    assert saved["backend"] == "nvml"
    assert saved["pci_bus_id"] == "00000000:17:00.0"
    assert (nvml.state()["gpu0.lock_max"], nvml.state()["gpu0.mem_lock_max"]) == ("900", "405")

    got = nvml.report(f"""
        restore_saved({saved!r})
        (gpu,) = discover_nvml()
        r = gpu.read()
        report(freq=r.freq_mhz, mem=r.mem_freq_mhz)
    """)
    assert got == {"freq": 1410.0, "mem": 1215.0}


def test_restore_saved_for_a_gpu_no_longer_there_is_device_gone(nvml: FakeNvml) -> None:
    got = nvml.report("""
        saved = {"backend": "nvml", "uuid": "GPU-00000000-0000-0000-0000-000000000000"}
        report(result=outcome(restore_saved, saved))
    """)
    assert got["result"].startswith("DeviceGone")
    assert "Not Found" in got["result"]


def run_benchmark(env: dict[str, str], results_dir: Path, *, as_uid: int | None = None,
                  args: tuple[str, ...] = ()) -> subprocess.CompletedProcess[str]:
    """Run bench/nvml_real.py as a script, optionally pretending to be some uid."""
    script = REPO_ROOT / "bench" / "nvml_real.py"
    pretend = f"os.geteuid = lambda: {as_uid}; " if as_uid is not None else ""
    argv = [str(script), "--results-dir", str(results_dir), *args]
    code = (f"import os, runpy, sys; {pretend}"
            f"sys.argv = {argv!r}; "
            f"runpy.run_path({str(script)!r}, run_name='__main__')")
    return subprocess.run([sys.executable, "-c", code], env={**os.environ, **env},
                          capture_output=True, text=True, timeout=60, check=False)


def test_real_gpu_benchmark_refuses_politely_without_a_gpu(tmp_path: Path) -> None:
    done = run_benchmark({"LD_LIBRARY_PATH": str(tmp_path), "PYTHONPATH": str(REPO_ROOT)},
                         tmp_path / "results")
    assert done.returncode == 0, done.stderr
    assert "no NVIDIA GPU" in done.stdout
    assert not (tmp_path / "results").exists()


def test_real_gpu_benchmark_refuses_politely_when_not_root(nvml: FakeNvml, tmp_path: Path) -> None:
    done = run_benchmark({"LD_LIBRARY_PATH": str(nvml.lib_dir), "PYTHONPATH": str(REPO_ROOT),
                          "FAKE_NVML_STATE": str(nvml.state_path)}, tmp_path / "results",
                         as_uid=1000)
    assert done.returncode == 0, done.stderr
    assert "root" in done.stdout
    assert not (tmp_path / "results").exists()
    assert "gpu0.lock_writes" not in nvml.state()


@pytest.mark.parametrize("arch", ["turing", "ampere"])
def test_real_gpu_benchmark_sets_pairs_where_the_memory_clock_is_governed(
        nvml: FakeNvml, tmp_path: Path, arch: str) -> None:
    nvml.configure({"arch": arch, "root": 1})
    done = run_benchmark({"LD_LIBRARY_PATH": str(nvml.lib_dir), "PYTHONPATH": str(REPO_ROOT),
                          "FAKE_NVML_STATE": str(nvml.state_path)}, tmp_path / "results",
                         as_uid=0, args=("--hold-ms", "0", "--poll-s", "0.02"))
    assert done.returncode == 0, done.stderr
    (out,) = (tmp_path / "results").iterdir()
    pairs = json.loads(out.read_text())["pair_lock"]
    if arch == "turing":
        assert pairs["supported"] is False and "Ampere" in pairs["reason"]
    else:
        route = [(s["level_mhz"], s["mem_mhz"]) for s in pairs["steps"]]
        assert route == [(210, 1215), (810, 1215), (1410, 1215), (210, 405), (615, 405),
                         (1005, 405), (615, 405), (210, 405), (1410, 1215), (810, 1215),
                         (210, 1215)]
        assert pairs["read_back_differs"] == 0
    assert nvml.state()["gpu0.lock_max"] == "0"  # restored


@pytest.mark.parametrize("arch", ["volta", "ampere"])
def test_generic_restore_saved_brings_an_nvml_gpu_back(nvml: FakeNvml, arch: str) -> None:
    """`govd restore` goes through discovery's backend registry, whatever the GPU generation
    (Volta has no memory lock to reset: that must not fail the restore)."""
    nvml.configure({"arch": arch, "root": 1})
    crashed = nvml.run("""
        (gpu,) = discover_nvml()
        gpu.set_level(900)
        report(**gpu.save())
        sys.stdout.flush()
        os._exit(1)
    """)
    saved = json.loads(crashed.stdout.strip().splitlines()[-1])
    assert nvml.state()["gpu0.lock_max"] == "900"
    got = nvml.report(f"""
        from govd.device import discovery
        discovery.restore_saved({saved!r})
        report(lock=None)
    """)
    assert got == {"lock": None}
    assert nvml.state()["gpu0.lock_max"] in ("0", "")


def test_pci_id_is_vendor_colon_device_so_a_devices_entry_can_match_it(nvml: FakeNvml) -> None:
    """NVML packs the ids as device << 16 | vendor (the fake's H100: 0x233010de): a
    ``devices: [{pci_id: "10de:2330"}]`` entry must find this GPU."""
    got = nvml.report("""
        from govd.conf.schema import Config
        from govd.daemon.governed import entry_for
        (gpu,) = discover_nvml()
        config = Config.model_validate({"devices": [{"pci_id": "10DE:2330", "enabled": False}]})
        report(pci_id=gpu.pci_id, matched=entry_for(config, gpu) is not None)
    """)
    assert got == {"pci_id": "10de:2330", "matched": True}
