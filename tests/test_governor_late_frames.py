"""What the governor tells the policy of late frames: the share its source measured (the
daemon per frame, a replay per unit), nothing without frames or a frame-rate target."""

from __future__ import annotations

import math

import numpy as np

from govd.eval.replay import replay
from govd.formats.sweep import SweepTable
from govd.governor import Governor, Sample
from govd.model.settings import ModelSettings
from govd.policy.base import Outlook
from govd.target import Target

LEVELS_MHZ = np.array([200.0, 300.0, 400.0])


class Recorder:
    """A policy that keeps what it was shown and stays at the top."""

    name = "recorder"
    uses_model = False

    def __init__(self) -> None:
        self.seen: list[float] = []

    def decide(self, view: Outlook) -> int:
        self.seen.append(view.late_share)
        return view.hi

    def reset(self) -> None:
        pass


def _late_shares(target: Target, samples: list[Sample]) -> list[float]:
    policy = Recorder()
    gov = Governor(LEVELS_MHZ, policy, target, ModelSettings(form="seed"))
    for sample in samples:
        gov.step(sample)
    return policy.seen


def test_the_measured_share_of_late_frames_reaches_the_policy() -> None:
    seen = _late_shares(Target(fps=50.0), [
        Sample(freq_mhz=400.0, frame_time_ms=15.0, frame_count=4, late_share=0.25),
        Sample(freq_mhz=400.0, frame_time_ms=25.0, frame_count=1, late_share=1.0),
        Sample(freq_mhz=400.0),                                      # no frame
        Sample(freq_mhz=400.0, frame_time_ms=25.0, frame_count=1),   # not judged
    ])
    assert seen[:2] == [0.25, 1.0]
    assert math.isnan(seen[2])
    # the governor does not guess from the mean: busy-time pseudo-frames have no deadline
    assert math.isnan(seen[3])


def test_no_late_frames_without_a_frame_rate_target() -> None:
    seen = _late_shares(Target(max_slowdown=0.1), [
        Sample(freq_mhz=400.0, frame_time_ms=25.0, frame_count=1, late_share=1.0)])
    assert math.isnan(seen[0])


def test_a_replay_judges_each_unit_against_the_deadline() -> None:
    """A replay unit is one frame: late (1) or not (0); a slowdown target judges none."""
    time_ms = np.array([[30.0, 22.0, 15.0], [30.0, 25.0, 18.0]])
    sweep = SweepTable(LEVELS_MHZ, time_ms, np.ones_like(time_ms))
    for target, expected in ((Target(fps=50.0), [0.0, 0.0]), (Target(fps=60.0), [0.0, 1.0])):
        policy = Recorder()
        replay(sweep, policy, target, ModelSettings(form="seed"))
        assert policy.seen == expected  # the top level ran: 15 ms, then 18 ms
    policy = Recorder()
    replay(sweep, policy, Target(max_slowdown=0.1), ModelSettings(form="seed"))
    assert all(math.isnan(x) for x in policy.seen)
