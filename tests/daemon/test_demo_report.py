"""The demo's closing comparison says in words which way the energy went."""

from __future__ import annotations

from govd.daemon.demo import report


def _run(energy_j: float, frames: int = 600, missed: int = 6) -> dict:
    return {"scenario": "game-medium", "levels": "seed9", "seed": 0, "sim_s": 10.0,
            "energy_j": energy_j, "mean_power_w": energy_j / 10.0, "frames": frames,
            "deadline_misses": missed}


def test_a_saving_reads_as_less_energy_and_a_cost_as_more() -> None:
    text = report(_run(60.0), {"performance": _run(80.0, missed=0), "ondemand": _run(50.0)})
    assert "govd against performance: 25.0 % less energy" in text
    assert "govd against ondemand: 20.0 % more energy" in text
    assert "+25.0" not in text
