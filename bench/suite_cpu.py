"""A pytest plugin for bench/bench_suite.py: the CPU time each test took, in its own process and
in the children it waited for, appended as JSON lines to $GOVD_SUITE_CPU_LOG (one file per
pytest-xdist worker, so workers never interleave their writes).

CPU time, unlike wall time, hardly depends on what else runs on the machine, so it says which
tests are expensive on a shared machine. What a test's children leave running (a container held
by a session fixture) is counted when it is reaped, i.e. in the test or teardown that reaps it.

    .venv/bin/python -m pytest -p bench.suite_cpu ...      (bench_suite.py --per-test does this)
"""

from __future__ import annotations

import json
import os
import resource
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

LOG_ENV = "GOVD_SUITE_CPU_LOG"


def _cpu_s() -> float:
    """User + system CPU time of this process and of every child it has reaped. Units: s."""
    mine = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return mine.ru_utime + mine.ru_stime + children.ru_utime + children.ru_stime


def _log_path() -> Path | None:
    base = os.environ.get(LOG_ENV)
    if not base:
        return None
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    return Path(f"{base}.{worker}")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    """Time the whole protocol of one test: setup, call and teardown."""
    cpu_s, wall_s = _cpu_s(), time.monotonic()
    result = yield
    path = _log_path()
    if path is not None:
        record = {"test": item.nodeid, "cpu_s": round(_cpu_s() - cpu_s, 3),
                  "wall_s": round(time.monotonic() - wall_s, 3),
                  "worker": os.environ.get("PYTEST_XDIST_WORKER", "main")}
        with path.open("a") as out:
            out.write(json.dumps(record) + "\n")
    return result
