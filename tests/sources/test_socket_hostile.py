"""The frame socket against hostile and careless senders: frame times that vanish in the unit
change, and bad input said in the journal, once in a while, never once per datagram."""

from __future__ import annotations

import pytest

from govd.sources.frame_line import LineRejected, parse_frame_line


@pytest.mark.parametrize("raw", [b"F 4e-324", b"F 1e-310", b"F 0." + b"0" * 320 + b"1",
                                 b"F 0.0000001"])
def test_time_too_short_to_be_a_frame_is_rejected_not_made_zero_ms(raw: bytes) -> None:
    # 5e-324 us is positive, but 0.0 once in ms: a zero-time frame reached the model.
    with pytest.raises(LineRejected) as exc:
        parse_frame_line(raw)
    assert exc.value.reason == "too_small"
