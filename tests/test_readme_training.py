"""README "Frames from programs and training loops", run as written: its PyTorch loop, with
stand-ins for what needs a GPU and PyTorch (`torch`, the model, the data), sends its steps to a
running govd configured with the README's `apps` entry, which governs the device on them under
that slowdown limit."""

from __future__ import annotations

import re
import sys
import threading
import time
import types
from pathlib import Path
from typing import Any

import pytest
import yaml

from govd.daemon.daemon import Daemon, Options
from tests.daemon.test_daemon_inprocess import config, run_until, short_dir  # noqa: F401
from tests.sysfs_fixtures import mali_panfrost

README = Path(__file__).resolve().parents[1] / "README.md"
SECTION = "## Frames from programs and training loops"
STEP_S = 0.02
"""How long a stand-in training step keeps the stand-in GPU busy. Units: s."""


def section_blocks(kind: str) -> list[str]:
    text = README.read_text()
    start = text.index(SECTION)
    body = text[start:text.index("\n## ", start + len(SECTION))]
    return re.findall(rf"```{kind}\n(.*?)```", body, re.DOTALL)


class _Loss:
    def backward(self) -> None:
        pass


def stand_ins(steps: int) -> dict[str, Any]:
    """What the loop needs from PyTorch and the training program."""
    torch = types.ModuleType("torch")
    torch.cuda = types.SimpleNamespace(synchronize=lambda: time.sleep(STEP_S))  # type: ignore[attr-defined]
    sys.modules["torch"] = torch
    optimizer = types.SimpleNamespace(step=lambda: None, zero_grad=lambda: None)
    return {"loader": range(steps), "model": lambda batch: _Loss(), "optimizer": optimizer}


def test_the_readme_training_loop_is_governed_under_its_slowdown_limit(
        short_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: F811
    [loop] = section_blocks("python")
    [apps] = section_blocks("yaml")
    root = short_dir / "sys"
    path, _ = mali_panfrost(root, governor="userspace", busy_percent=90)
    cfg = config(short_dir, policy={"name": "energy"}, **yaml.safe_load(apps))
    monkeypatch.setenv("GOVD_FRAMES_SOCKET", cfg.frames.socket.path)
    monkeypatch.delitem(sys.modules, "torch", raising=False)
    namespace = stand_ins(steps=150)
    training = threading.Thread(target=exec, args=(loop, namespace))

    def start_once(daemon: Daemon) -> None:
        if daemon.stats.ticks == 1:
            training.start()

    daemon = Daemon(Options(cfg, sysfs_root=root))
    run_until(daemon, lambda d: d.stats.ticks > 2 and not training.is_alive(), start_once)
    runner = daemon.runners[0]
    status = runner.status()
    assert status["target"] == "slowdown <= 10 %"  # the README's apps entry for app=train
    assert runner.savings.frames >= 140  # each step one report (the first may predate a tick)
    assert (path / "userspace/set_freq").read_text().strip() != "undefined"  # governed
