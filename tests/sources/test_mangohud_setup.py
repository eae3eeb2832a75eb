"""The supported MangoHud set-up: the folder tmpfiles makes, the drop-ins systemd accepts, and the
README's MangoHud.conf and govd lines, which must say what the source needs."""

from __future__ import annotations

import os
import re
import shutil
import stat
import subprocess
import textwrap
from pathlib import Path

import pytest
import yaml

from govd.conf.schema import Config
from tests.test_unit_files import analyze, units_with_stand_in

REPO = Path(__file__).resolve().parents[2]
SYSTEMD = REPO / "systemd"
README = REPO / "README.md"


def readme_section() -> str:
    text = README.read_text()
    start = text.index("## Frames from games (MangoHud)")
    end = text.find("\n## ", start + 1)
    return text[start:end if end > 0 else None]


def fenced(section: str, language: str) -> list[str]:
    """The code blocks of ``language`` in ``section``, indentation (list items) removed."""
    return [textwrap.dedent(b) for b in re.findall(rf"```{language}\n(.*?)```", section,
                                                   flags=re.S)]


@pytest.mark.skipif(shutil.which("systemd-tmpfiles") is None, reason="no systemd-tmpfiles")
def test_tmpfiles_makes_a_folder_group_govd_may_write_and_nobody_else_reads(
        tmp_path: Path) -> None:
    (tmp_path / "etc").mkdir()
    (tmp_path / "etc" / "passwd").write_text("root:x:0:0::/root:/bin/sh\n")
    (tmp_path / "etc" / "group").write_text("root:x:0:\ngovd:x:987:\n")
    conf = tmp_path / "usr" / "lib" / "tmpfiles.d"
    conf.mkdir(parents=True)
    shutil.copy(SYSTEMD / "govd.tmpfiles", conf / "govd.conf")
    done = subprocess.run(["systemd-tmpfiles", "--create", f"--root={tmp_path}", "govd.conf"],
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0 and done.stderr == "", done.stderr
    folder = tmp_path / "var" / "lib" / "govd" / "mangohud"
    st = folder.stat()
    assert stat.S_IMODE(st.st_mode) == 0o3770  # setgid, sticky, group rwx, others nothing
    assert (st.st_uid, st.st_gid) == (0, 987)
    assert stat.S_IMODE(folder.parent.stat().st_mode) == 0o755  # members can reach it


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="no systemd-analyze")
@pytest.mark.parametrize("dropin", ["mangohud-home.conf.example", "fdinfo.conf.example"])
def test_dropins_verify_cleanly(tmp_path: Path, dropin: str) -> None:
    service, _ = units_with_stand_in(tmp_path)
    (service.parent / "govd.service.d").mkdir()
    shutil.copy(SYSTEMD / dropin, service.parent / "govd.service.d" / "local.conf")
    result = analyze("verify", str(service))
    assert result.returncode == 0 and result.stderr == "", result.stderr


def test_readme_mangohud_conf_lines_are_what_the_source_needs() -> None:
    [conf] = [block for block in fenced(readme_section(), "ini") if "autostart_log" in block]
    keys = dict(line.partition("=")[::2] for line in conf.splitlines()
                if line and not line.startswith("#"))
    assert keys["log_interval"] == "0"  # every frame, not samples
    assert keys["output_folder"] == "/var/lib/govd/mangohud"  # what govd.tmpfiles makes
    assert int(keys["autostart_log"]) >= 0
    assert "log_duration" not in keys and "no_display" not in keys


def test_readme_govd_lines_are_a_valid_configuration() -> None:
    [block] = [b for b in fenced(readme_section(), "yaml") if "mangohud" in b]
    config = Config.model_validate(yaml.safe_load(block))
    assert config.frames.source == "mangohud"
    assert config.frames.mangohud.dir == "/var/lib/govd/mangohud"


def test_a_log_govd_may_not_read_says_its_mode_and_the_fix(tmp_path: Path) -> None:
    from govd.sources.mangohud_log import unreadable_why

    log = tmp_path / "game_2026-01-01_00-00-00.csv"
    log.write_text("fps,frametime,elapsed\n")
    log.chmod(0o600)
    os.chown(log, 1000, 1000)
    why = unreadable_why(log, PermissionError(13, "Permission denied"))
    assert why.startswith("Permission denied (mode 0600, owner uid 1000, group gid 1000): ")
    assert "readable by that group" in why and "umask 022 or 002" in why
    assert unreadable_why(log, FileNotFoundError(2, "No such file")) == "No such file"


def test_the_service_reads_logs_as_a_member_of_the_group_govd() -> None:
    unit = (Path(__file__).resolve().parents[2] / "systemd" / "govd.service").read_text()
    assert "\nSupplementaryGroups=govd\n" in unit


def test_a_group_readable_log_govd_may_not_read_says_the_unit_lacks_the_group(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import grp as grp_module

    from govd.sources import mangohud_log

    log = tmp_path / "game_2026-01-01_00-00-00.csv"
    log.write_text("fps,frametime,elapsed\n")
    log.chmod(0o660)
    os.chown(log, 65534, 4242)
    monkeypatch.setattr(mangohud_log.grp, "getgrgid",
                        lambda gid: grp_module.struct_group(("govd", "x", gid, [])))
    why = mangohud_log.unreadable_why(log, PermissionError(13, "Permission denied"))
    assert why.endswith("govd is not in the group govd, which may read it: the unit lacks "
                        "SupplementaryGroups=govd (one older than this govd: make install)")
