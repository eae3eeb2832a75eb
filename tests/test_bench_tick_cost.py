"""The tick-cost tools (bench/profile_tick.py --free, bench/tick_floor.py): what they replay and
how they tick, not the figures they measure."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

BENCH = Path(__file__).resolve().parents[1] / "bench"


@pytest.fixture
def bench_path(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(BENCH))


class _Counting:
    """Methods that count their real calls and answer 1, 2, 3... (one count per object)."""

    def __init__(self) -> None:
        self.real_calls = 0

    def _answer(self) -> int:
        self.real_calls += 1
        return self.real_calls


class _Governor(_Counting):
    def step(self) -> int:
        return self._answer()


class _Device(_Counting):
    def read(self) -> int:
        return self._answer()

    def override(self) -> int:
        return self._answer()


class _Source(_Counting):
    def drain(self) -> int:
        return self._answer()


class _Runner(_Counting):
    def __init__(self) -> None:
        super().__init__()
        self.governor, self.device, self.summary = _Governor(), _Device(), None

    def _apply(self) -> int:
        return self._answer()


class _FakeDaemon:
    """Just what `_parts_to_free` and `_free` touch: a tick body that calls every part once
    and keeps what each answered."""

    def __init__(self) -> None:
        self.runners = [_Runner()]
        self.source = _Source()
        self.answers: list[tuple[int, ...]] = []

    def _tick(self, tick: Any) -> None:
        r = self.runners[0]
        self.answers.append((r.governor.step(), r.device.read(), r.device.override(),
                             r._apply(), self.source.drain()))


@pytest.mark.usefixtures("bench_path")
def test_a_freed_part_hands_back_what_it_answered_when_recorded_without_running(
        monkeypatch: pytest.MonkeyPatch) -> None:
    import profile_tick

    monkeypatch.setattr(profile_tick, "PERIOD_S", 0.001)
    daemon = _FakeDaemon()
    governor = daemon.runners[0].governor
    figures = profile_tick._free(daemon, ticks=3, rounds=1, last_s=time.monotonic())
    assert set(figures["median_us"]) == {
        "whole tick", "without governor.step", "without device.read", "without device.override",
        "without runner._apply", "without source.drain", "without all"}
    # per variant: 3 whole ticks, 3 recorded, 3 replayed; the step freed in 2 of the 6 variants
    assert governor.real_calls == 6 * 9 - 2 * 3
    # replayed ticks answer what the recorded ticks before them answered, in order
    steps = [answer[0] for answer in daemon.answers]
    assert steps[6:9] == steps[3:6]  # "without governor.step" is the first variant
    # and every method is the class's again afterwards
    assert "step" not in vars(governor)
    assert "drain" not in vars(daemon.source)


@pytest.mark.usefixtures("bench_path")
def test_the_floor_loop_runs_its_body_once_per_deadline() -> None:
    import tick_floor

    calls: list[float] = []
    start_s = time.monotonic()
    per_tick_us = tick_floor._loop(0.2, lambda: calls.append(time.monotonic()))
    assert len(calls) == 4
    # on absolute deadlines: the k-th tick starts no earlier than k periods after the start
    for k, at_s in enumerate(calls, start=1):
        assert at_s >= start_s + k * tick_floor.PERIOD_S - 0.002
    assert per_tick_us >= 0
