"""What the governor tells the policy of late frames: the share the tick measured, else its
mean frame judged against the deadline, nothing without frames or a frame-rate target."""

from __future__ import annotations

import math

import numpy as np

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
        Sample(freq_mhz=400.0, frame_time_ms=25.0, frame_count=1),   # one frame: its own
        Sample(freq_mhz=400.0, frame_time_ms=15.0, frame_count=1),
        Sample(freq_mhz=400.0),                                      # no frame
    ])
    assert seen[:3] == [0.25, 1.0, 0.0]
    assert math.isnan(seen[3])


def test_no_late_frames_without_a_frame_rate_target() -> None:
    seen = _late_shares(Target(max_slowdown=0.1), [
        Sample(freq_mhz=400.0, frame_time_ms=25.0, frame_count=1, late_share=1.0)])
    assert math.isnan(seen[0])
