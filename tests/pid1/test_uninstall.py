"""`make uninstall` in the container: the last line of the README's install section."""

from __future__ import annotations

from pathlib import Path

from tests.pid1.conftest import CONFIG, SOURCE, installed, show, sim_files, wait_for
from tests.pid1.container import Container
from tests.pid1.test_service_life import GOVERNED


def test_make_uninstall_stops_govd_restores_the_device_and_removes_what_install_added(
        stage: Path, tmp_path: Path) -> None:
    # A container of its own: this one ends without govd.
    box: Container = installed(stage, tmp_path / "console.log")
    try:
        wait_for("govd to govern the device",
                 lambda: sim_files(box)["governor"] == GOVERNED, box=box)
        done = box.run("make", "-s", "-C", SOURCE, "uninstall", timeout=120)
        assert "kept /etc/govd/govd.yaml (edited)" in done.stdout  # the test configuration
        assert sim_files(box)["governor"] == "simple_ondemand"  # as the simulator started
        for unit in ("govd.service", "govd.socket"):
            assert show(box, "LoadState", unit) == "not-found"
        left = box.sh("ls -d /opt/govd/* /usr/local/bin/govd /usr/local/share/doc/govd "
                      "/etc/systemd/system/govd.service /etc/systemd/system/govd.socket "
                      "/usr/lib/sysusers.d/govd.conf /usr/lib/tmpfiles.d/govd.conf "
                      f"/run/govd/frames.sock {CONFIG} 2>/dev/null", check=False).split()
        assert left == [CONFIG]  # (the test's own drop-in folder is not install's to remove)
    finally:
        box.halt()
