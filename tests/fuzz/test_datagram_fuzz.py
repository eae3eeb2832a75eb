"""Frame datagrams of any shape: the line parser either accepts a frame within the protocol's
limits or rejects it with a known reason, and the socket source counts every line exactly once."""

from __future__ import annotations

import math
import socket
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from govd.sources.frame_line import (
    MAX_APP_CHARS,
    MAX_GPU_TIME_US,
    MAX_TARGET_FPS,
    MIN_GPU_TIME_US,
    REASONS,
    LineRejected,
    _parse_any,
    parse_frame_line,
)
from govd.sources.socket import SocketSource

numbers = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.integers(-(10**30), 10**30).map(str),
    st.sampled_from(["nan", "-inf", "Infinity", "1e999", "-0", "0.0", "1_000", "0x10", "1e-999",
                     ".5", "5.", "+7", "١٢٣", "１０", "1e", "--1", ""]),
)
keys = st.one_of(
    st.tuples(st.sampled_from(["app", "target_fps", "pid", "uid", "policy", "", "x"]),
              st.one_of(numbers, st.text(max_size=80))).map(lambda kv: f"{kv[0]}={kv[1]}"),
    st.text(max_size=10),
)
protocol_like = st.tuples(
    st.sampled_from(["F", "f", "G", "", "F\x00"]), numbers, st.lists(keys, max_size=4),
    st.sampled_from([" ", "\t", "  ", "\u00a0", "\u2003"]),
).map(lambda t: t[3].join([t[0], t[1], *t[2]]).encode("utf-8", "surrogatepass"))
lines = st.one_of(st.binary(max_size=200), protocol_like)


@settings(max_examples=1500, deadline=None)
@given(lines)
def test_a_line_is_a_frame_within_limits_or_rejected_with_a_known_reason(raw: bytes) -> None:
    try:
        line = parse_frame_line(raw)
    except LineRejected as exc:
        assert exc.reason in REASONS
        return
    assert MIN_GPU_TIME_US / 1000 <= line.gpu_time_ms <= MAX_GPU_TIME_US / 1000
    assert line.target_fps is None or 0 < line.target_fps <= MAX_TARGET_FPS
    assert line.app is None or (0 < len(line.app) <= MAX_APP_CHARS and line.app.isprintable())


def _outcome(parse: object, raw: bytes) -> object:
    try:
        return parse(raw)  # type: ignore[operator]
    except LineRejected as exc:
        return exc.reason


long_ascii = st.text(st.characters(min_codepoint=0x21, max_codepoint=0x7E), min_size=60,
                     max_size=90)  # around the cut of app= at MAX_APP_CHARS
common_like = st.tuples(
    st.sampled_from(["F ", "F  ", "F\t", "f ", " F "]),
    st.one_of(st.from_regex(r"\A[0-9]{1,9}(\.[0-9]{0,4})?\Z"), numbers),
    st.one_of(st.just(""), st.builds(lambda sep, v: f"{sep}app={v}", st.sampled_from([" ", "  "]),
                                     st.one_of(st.text(max_size=80), long_ascii)),
              st.just(" app="), st.just(" app=a=b"), st.just(" target_fps=60"), keys),
    st.sampled_from(["", " ", "\r"]),
).map(lambda t: "".join(t).encode("utf-8", "surrogatepass"))


common_lines = st.builds(lambda t, app: f"F {t} app={app}".encode("utf-8", "surrogatepass"),
                         st.from_regex(r"\A[0-9]{1,8}(\.[0-9]{0,3})?\Z"),
                         st.one_of(long_ascii, st.text(max_size=70)))


@settings(max_examples=2000, deadline=None)
@given(st.one_of(common_lines, common_like, lines))
def test_the_common_line_shortcut_answers_as_the_full_protocol_does(raw: bytes) -> None:
    assert _outcome(parse_frame_line, raw) == _outcome(_parse_any, raw)


@settings(max_examples=500, deadline=None)
@given(st.floats(allow_nan=True, allow_infinity=True))
def test_time_is_accepted_exactly_when_finite_from_one_ns_to_ten_seconds(t_us: float) -> None:
    try:
        line = parse_frame_line(f"F {t_us!r}".encode())
    except LineRejected:
        assert not (math.isfinite(t_us) and MIN_GPU_TIME_US <= t_us <= MAX_GPU_TIME_US)
    else:
        assert line.gpu_time_ms == pytest.approx(t_us / 1000)


@pytest.fixture(scope="module")
def limited_source() -> Iterator[tuple[SocketSource, Path]]:
    with tempfile.TemporaryDirectory(prefix="govd-", dir="/tmp") as d:
        path = Path(d) / "frames.sock"
        src = SocketSource(path, group=None, rate_fps=1.0, burst=40, max_queue=30,
                           max_datagram_bytes=2048, clock=lambda: 7.0)
        yield src, path
        src.close()


@settings(max_examples=150, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.one_of(st.lists(lines, max_size=12).map(b"\n".join),
                          st.binary(min_size=2049, max_size=5000)), min_size=1, max_size=8))
def test_every_line_received_is_accepted_or_counted_under_one_reason(
    limited_source: tuple[SocketSource, Path], datagrams: list[bytes]
) -> None:
    src, path = limited_source
    before = src.stats()
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as s:
        for payload in datagrams:
            s.sendto(payload, socket.MSG_DONTWAIT, str(path))
    # Every datagram read before the drain: the drain alone reads for 4 ms at most, which a
    # loaded machine (the full suite beside other work) can spend before the eighth.
    src.receive()
    frames = src.drain()
    after = src.stats()
    delta = {k: after.get(k, 0) - before.get(k, 0) for k in after}
    outcomes = ["accepted", "rate_limited", "queue_full", "over_budget",
                *(f"dropped_{r}" for r in REASONS)]
    assert delta.get("datagrams", 0) == len(datagrams)
    assert delta.get("lines", 0) == sum(delta.get(k, 0) for k in outcomes)
    assert delta.get("accepted", 0) == len(frames) <= src.max_queue
    assert set(after) <= {*outcomes, "datagrams", "lines", "truncated", "rate_limited_datagrams"}
