"""The demo's closing comparison: energy on equal work, in words that say which way it went."""

from __future__ import annotations

from typing import Any

from govd.daemon.demo import compare, report


def _run(energy_j: float, frames: int = 600, missed: int = 6, **extra: Any) -> dict:
    return {"scenario": "game-medium", "levels": "seed9", "seed": 0, "sim_s": 10.0,
            "energy_j": energy_j, "mean_power_w": energy_j / 10.0, "frames": frames,
            "deadline_misses": missed, "target_fps": 60.0, **extra}


def test_a_saving_reads_as_less_energy_and_a_cost_as_more() -> None:
    text = report(_run(60.0), {"performance": _run(80.0, missed=0), "ondemand": _run(50.0)})
    assert "govd against performance, per frame: 25.0 % less energy" in text
    assert "govd against ondemand, per frame: 20.0 % more energy" in text
    assert "+25.0" not in text


def _compute(energy_j: float, units: int, progress: list[list[float]]) -> dict:
    return _run(energy_j, frames=units, missed=0, target_fps=None, progress=progress)


def test_throughput_is_compared_on_the_same_units_not_the_same_time() -> None:
    # govd did 100 units in 10 s for 5 J; the twin at the top clock did its first 100 units in
    # 6 s for 4 J, then 100 more, costlier, for 6 J: per second govd used half, per unit the
    # same, on the same work 25 % more, and it took 10 s where the twin took 6.
    govd = _compute(5.0, 100, [[0, 0, 0, 0], [10.0, 100, 5.0, 9.0]])
    twin = _compute(10.0, 200, [[0, 0, 0, 0], [6.0, 100, 4.0, 5.5], [10.0, 200, 10.0, 9.5]])
    found = compare(govd, twin)
    assert found["equal_work"] and found["same_frames"] == 100
    assert found["saving"] == -0.25
    assert abs(found["slowdown"] - 10.0 / 6.0 + 1.0) < 1e-12
    assert found["missed"] is None  # throughput work has no deadline
    text = report(govd, {"performance": twin})
    assert "govd against performance, same work (the first 100 units): 25.0 % more energy, " \
           "66.7 % slower" in text
    assert "missed deadlines" not in text and "energy per unit" in text


def test_a_twin_that_did_less_work_is_compared_per_frame() -> None:
    govd = _run(6.0, frames=600, progress=[[0, 0, 0, 0], [10.0, 600, 6.0, 4.0]])
    slow = _run(4.0, frames=400, progress=[[0, 0, 0, 0], [10.0, 400, 4.0, 9.0]])
    found = compare(govd, slow)
    assert not found["equal_work"] and found["saving"] == 0.0  # 10 mJ a frame each
