"""`make uninstall` in the container: the last line of the README's install section."""

from __future__ import annotations

from pathlib import Path

from tests.pid1.conftest import (
    CONFIG,
    DROPINS,
    SOURCE,
    installed,
    show,
    sim_files,
    wait_for,
)
from tests.pid1.container import Container
from tests.pid1.test_service_life import GOVERNED

DOC = "/usr/local/share/doc/govd"


def test_make_uninstall_stops_govd_restores_the_device_and_removes_what_install_added(
        stage: Path, tmp_path: Path) -> None:
    # A container of its own: this one ends without govd.
    box: Container = installed(stage, tmp_path / "console.log")
    try:
        wait_for("govd to govern the device",
                 lambda: sim_files(box)["governor"] == GOVERNED, box=box)
        # as the README's Metrics section has it: the example drop-in, copied as it is
        box.sh(f"cp {DOC}/metrics.conf.example {DROPINS}/metrics.conf")
        assert box.run("getent", "group", "govd", check=False).returncode == 0
        done = box.run("make", "-s", "-C", SOURCE, "uninstall", timeout=120)
        assert "kept /etc/govd/govd.yaml (edited)" in done.stdout  # the test configuration
        # the example copy went; the test's own drop-in is the administrator's, kept and named
        assert f"kept {DROPINS} (drop-ins not from govd: sim.conf)" in done.stdout
        assert box.sh(f"ls {DROPINS}").split() == ["sim.conf"]
        assert box.run("getent", "group", "govd", check=False).returncode == 2  # removed
        assert box.run("test", "-e", "/var/lib/govd", check=False).returncode == 1
        assert sim_files(box)["governor"] == "simple_ondemand"  # as the simulator started
        for unit in ("govd.service", "govd.socket"):
            assert show(box, "LoadState", unit) == "not-found"
        left = box.sh("ls -d /opt/govd/* /usr/local/bin/govd /usr/local/share/doc/govd "
                      "/etc/systemd/system/govd.service /etc/systemd/system/govd.socket "
                      "/usr/lib/sysusers.d/govd.conf /usr/lib/tmpfiles.d/govd.conf "
                      f"/run/govd/frames.sock {CONFIG} 2>/dev/null", check=False).split()
        assert left == [CONFIG]
    finally:
        box.halt()
