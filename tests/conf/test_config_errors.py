"""Every kind of configuration error is reported as file:line: field.path: message."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from govd.conf import ConfigError, load_config, parse_config
from govd.target import Target


def errors_of(text: str) -> list[str]:
    with pytest.raises(ConfigError) as info:
        parse_config(text, "g.yaml")
    return info.value.errors


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("period_ms: 50\nfrobnicate: 1\n", "g.yaml:2: frobnicate: unknown key (allowed: devices,"),
        ("model:\n  algorithm: rls\n  lamda: 0.9\n", "g.yaml:3: model.lamda: unknown key"),
        ("period_ms: 5\n", "g.yaml:1: period_ms: Input should be greater than or equal to 10"),
        ("period_ms: '50'\n", "g.yaml:1: period_ms: Input should be a valid integer"),
        ("model:\n  algorithm: lms\n", "g.yaml:2: model.algorithm: Input should be 'rls' or 'dcd'"),
        ("target:\n  fps: 60\n  max_slowdown: 0.1\n", "g.yaml:1: target: give exactly one of"),
        ("target: {}\n", "g.yaml:1: target: give exactly one of fps or max_slowdown"),
        ("apps:\n  game:\n    fps: -1\n", "g.yaml:3: apps.game.fps: Input should be greater"),
        (
            "devices:\n  - name: a\n  - backend: nvml\n    bounds: {min_mhz: 900, max_mhz: 300}\n",
            "g.yaml:4: devices[1].bounds: min_mhz (900) is above max_mhz (300)",
        ),
        ("devices:\n  - enabled: false\n", "g.yaml:2: devices[0]: a device entry needs at least"),
        ("devices:\n  - pci_id: 10de\n", "g.yaml:2: devices[0].pci_id: String should match"),
        ("devices:\n  - pci_id: 10:20\n", "g.yaml:2: devices[0].pci_id: Input should be a valid"),
        ("policy:\n  name: turbo\n", "g.yaml:2: policy.name: unknown policy 'turbo'"),
        ("policy:\n  params: {x: [1]}\n", "g.yaml:2: policy.params: parameter 'x' must be"),
        ("model:\n  dcd:\n    H: 3\n", "g.yaml:3: model.dcd.H: H must be a power of two"),
        ("frames:\n  source: mangohud\n", "g.yaml:1: frames: source mangohud needs mangohud.dir"),
        ("metrics:\n  listen: localhost\n", "g.yaml:2: metrics.listen: listen must be host:port"),
        ("state_file: state.json\n", "g.yaml:1: state_file: state_file must be an absolute path"),
        ("power:\n  voltage:\n    c0: [{freq_mhz: 1}]\n", "g.yaml:3: power.voltage.c0[0].volt"),
        ("period_ms: 50\nperiod_ms: 60\n", "g.yaml:2: period_ms: duplicate key"),
        ("- 1\n- 2\n", "g.yaml:1: the configuration must be a mapping"),
        ("model:\n  mu: [1\n", "g.yaml:3:"),  # YAML syntax error: unclosed flow sequence
        ("period_ms: 50\n\tbad: 1\n", "g.yaml:2:"),  # a tab where indentation is expected
        ("when: 2024-13-45\n", "g.yaml:"),  # the safe constructor refuses the date
        ("x: !!python/object/apply:os.system ['true']\n", "g.yaml:1: could not determine"),
    ],
)
def test_error_names_file_line_and_field(text: str, expected: str) -> None:
    assert any(line.startswith(expected) for line in errors_of(text)), errors_of(text)


def test_all_errors_are_reported_together() -> None:
    errors = errors_of("period_ms: 1\nmodel:\n  mu: -1\nbogus: true\n")
    assert [e.split(":")[1] for e in errors] == ["1", "3", "4"]


def test_alias_bomb_is_refused() -> None:
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]" for i in range(1, 8)]
    assert "more than" in errors_of("\n".join(lines))[0]


def test_empty_file_gives_defaults_and_target_converts() -> None:
    config = parse_config("", "g.yaml")
    assert config.period_ms == 50 and config.target.to_target() == Target(fps=60.0)
    custom = parse_config("target:\n  max_slowdown: 0.1\n")
    assert custom.target.to_target() == Target(max_slowdown=0.1)


def test_group_writable_file_is_refused_unless_insecure(tmp_path: Path) -> None:
    path = tmp_path / "govd.yaml"
    path.write_text("period_ms: 60\n")
    os.chmod(tmp_path, 0o755)
    os.chmod(path, 0o664)
    with pytest.raises(ConfigError) as info:
        load_config(path)
    assert info.value.errors[0].startswith(f"{path}:1: refusing an unsafe configuration")
    assert "writable by group or others (mode 0664)" in info.value.errors[0]
    assert load_config(path, allow_insecure=True).period_ms == 60


def test_world_writable_folder_is_refused(tmp_path: Path) -> None:
    folder = tmp_path / "etc"
    folder.mkdir()
    path = folder / "govd.yaml"
    path.write_text("period_ms: 60\n")
    os.chmod(path, 0o644)
    os.chmod(folder, 0o777)
    with pytest.raises(ConfigError, match="folder is writable by group or others"):
        load_config(path)
    os.chmod(folder, 0o755)
    assert load_config(path).period_ms == 60


def test_file_owned_by_another_user_is_refused(tmp_path: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root to give the file to another user")
    path = tmp_path / "govd.yaml"
    path.write_text("period_ms: 60\n")
    os.chmod(tmp_path, 0o755)
    os.chown(path, 65534, 65534)
    with pytest.raises(ConfigError, match="owned by uid 65534"):
        load_config(path)


def test_missing_and_non_utf8_files_are_config_errors(tmp_path: Path) -> None:
    os.chmod(tmp_path, 0o755)
    with pytest.raises(ConfigError, match="cannot read"):
        load_config(tmp_path / "absent.yaml")
    path = tmp_path / "latin1.yaml"
    path.write_bytes(b"period_ms: 50\n# caf\xe9\n")
    os.chmod(path, 0o644)
    with pytest.raises(ConfigError, match=r"latin1.yaml:2: not UTF-8"):
        load_config(path)


def test_a_key_of_control_characters_is_quoted_in_its_one_line_error() -> None:
    """Found by the fuzz test: a bare carriage-return key broke the one-line error format."""
    from govd.conf.load import ConfigError, parse_config

    try:
        parse_config('"\\r": 1\n', "f.yaml")
    except ConfigError as exc:
        assert exc.errors == [
            "f.yaml:1: '\\r': unknown key (allowed: devices, policy, target, apps, period_ms, "
            "min_dwell_ms, model, power, frames, logging, metrics, idle, state_file)"
        ]
    else:
        raise AssertionError("a carriage-return key was accepted")


@pytest.mark.parametrize(("text", "line", "char"), [
    ("\x01", 1, "\x01"), ("period_ms: 50\n\x11\n", 2, "\x11"), ("a: 1\nb: '\x7f'\n", 2, "\x7f"),
])
def test_control_character_is_a_config_error_with_its_line(text: str, line: int,
                                                           char: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_config(text, "f.yaml")
    assert info.value.errors == [f"f.yaml:{line}: character {char!r} is not allowed in YAML"]


def test_a_prior_with_the_scaling_form_is_refused_in_one_line() -> None:
    from pydantic import ValidationError

    from govd.conf.schema import ModelConfig
    with pytest.raises(ValidationError, match="prior seeds the seed form"):
        ModelConfig(form="scaling", prior="/etc/govd/prior.json")
    assert ModelConfig(form="auto", prior="/etc/govd/prior.json").prior


@pytest.mark.parametrize(("text", "expected"), [
    ("devices:\n  - backend: nvml\n    memory_clock: off\n",
     "g.yaml:3: devices[0].memory_clock: Input should be 'auto' or 'off'"),
    ("devices:\n  - name: 0000\n", "g.yaml:2: devices[0].name: Input should be a valid string"),
    ("apps:\n  yes: {fps: 30}\n", "g.yaml:1: apps[1].[key]: Input should be a valid string"),
])
def test_unquoted_yaml_boolean_or_number_where_text_belongs_says_to_quote_it(
        text: str, expected: str) -> None:
    """YAML 1.1 reads unquoted off/on/yes/no as booleans and 0000 as a number: `memory_clock:
    off` is refused as "should be 'auto' or 'off'", baffling whoever wrote off. The line says
    what YAML read and to quote it."""
    [line] = errors_of(text)
    assert line.startswith(expected), line
    assert "quote" in line and "YAML read" in line
