"""`govd reload` (the unit's ExecReload): SIGHUP to the running daemon, then its verdict, as an
exit status: a refused file fails the reload instead of looking like one (issue #26)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.daemon.test_daemon_process import env, sim, start_daemon, wait_for  # noqa: F401


def reload(tmp_path: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "govd", "reload", "--config", str(tmp_path / "govd.yaml"),
         "--state-file", str(tmp_path / "state.json"), *extra],
        env=env(), capture_output=True, text=True, timeout=120)


def status(tmp_path: Path) -> dict:
    try:
        return json.loads((tmp_path / "status.json").read_text())
    except (OSError, ValueError):
        return {}


def test_reload_exits_0_when_applied_and_1_with_the_reasons_when_refused(
        tmp_path: Path, sim: Path) -> None:  # noqa: F811
    config = tmp_path / "govd.yaml"
    config.write_text("policy: {name: energy}\n")
    daemon = start_daemon(tmp_path, sim, "--config", str(config))
    try:
        wait_for(lambda: status(tmp_path).get("devices"), "the first status file", daemon)
        config.write_text("policy: {name: performance}\n")
        applied = reload(tmp_path)
        assert (applied.returncode, applied.stdout) == (0, "govd reload: configuration reloaded\n")
        assert status(tmp_path)["devices"][0]["policy"] == "performance"

        config.write_text("policy: {name: performance}\nperiod_ms: fast\n")
        refused = reload(tmp_path)
        assert refused.returncode == 1
        assert refused.stderr.startswith("govd reload: refused, old configuration kept: ")
        assert "period_ms" in refused.stderr
        assert daemon.poll() is None  # still running, on the old configuration
        assert status(tmp_path)["reload"]["applied"] is False
    finally:
        daemon.terminate()
        daemon.wait(timeout=60)


def test_a_stale_status_file_never_gets_another_process_signalled(tmp_path: Path) -> None:
    bystander = subprocess.Popen(["sleep", "60"])
    try:
        (tmp_path / "status.json").write_text(json.dumps({"pid": bystander.pid}))
        (tmp_path / "govd.yaml").write_text("{}\n")
        done = reload(tmp_path)
        assert done.returncode == 2
        assert f"pid {bystander.pid} is not a running `govd run`" in done.stderr
        assert bystander.poll() is None  # not signalled
    finally:
        bystander.kill()
        bystander.wait()


def test_without_a_status_file_it_says_govd_is_not_running(tmp_path: Path) -> None:
    (tmp_path / "govd.yaml").write_text("{}\n")
    done = reload(tmp_path)
    assert done.returncode == 2 and "is govd running?" in done.stderr
