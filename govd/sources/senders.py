"""What the frame socket remembers about each sender: its rate budget and its process name."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from govd.sources.base import one_line

FORGET_AFTER_S = 10.0
"""A sender silent this long is forgotten (its pid may be reused by another process). Units: s."""
NAME_TTL_S = 1.0
"""How long a sender's process name is trusted before ``/proc/<pid>/comm`` is read again: its
pid may go to another program meanwhile. Units: s."""
UNLIMITED = 1 << 62
"""`Senders.allowance` with the limit disabled: more lines than any datagram holds."""


@dataclass(slots=True)
class _Sender:
    tokens: float
    last_s: float
    name: str | None = None
    named_s: float = 0.0


class Senders:
    """Per-pid token buckets and cached ``/proc/<pid>/comm`` names.

    Each pid may send ``rate_fps`` frames per second on average and ``burst`` at once, so that one
    noisy process cannot crowd the others out of the bounded queue. ``rate_fps`` of 0 disables the
    limit. Time comes from the caller (``now_s``), so the buckets can be tested without sleeping.
    """

    def __init__(self, rate_fps: float, burst: float, proc_root: Path = Path("/proc")) -> None:
        self.rate_fps = rate_fps
        self.burst = max(burst, 1.0)
        self.proc_root = proc_root
        self._known: dict[int, _Sender] = {}

    def set_rate(self, rate_fps: float, burst: float) -> None:
        """New limits (frames/s, frames); each sender's tokens are capped at the new burst."""
        self.rate_fps = rate_fps
        self.burst = max(burst, 1.0)
        for sender in self._known.values():
            sender.tokens = min(sender.tokens, self.burst)

    def _sender(self, pid: int, now_s: float) -> _Sender:
        sender = self._known.get(pid)
        if sender is None:
            sender = _Sender(tokens=self.burst, last_s=now_s)
            self._known[pid] = sender
        return sender

    def allowance(self, pid: int, now_s: float) -> int:
        """How many frames ``pid`` may send now (its whole tokens, refilled up to ``now_s``);
        a large number when the limit is disabled. Take them with `spend`."""
        sender = self._known.get(pid)  # `_sender`, written out: called once per datagram
        if sender is None:
            sender = self._known[pid] = _Sender(tokens=self.burst, last_s=now_s)
        elapsed_s = max(0.0, now_s - sender.last_s)
        sender.last_s = now_s
        if self.rate_fps <= 0:
            return UNLIMITED
        sender.tokens = min(self.burst, sender.tokens + elapsed_s * self.rate_fps)
        return int(sender.tokens)

    def spend(self, pid: int, frames: int) -> None:
        """Take ``frames`` from ``pid``'s budget (after `allowance` said they were there)."""
        sender = self._known.get(pid)
        if sender is not None and self.rate_fps > 0:
            sender.tokens = max(0.0, sender.tokens - frames)

    def admit(self, pid: int, now_s: float) -> bool:
        """Take one frame from ``pid``'s budget; False when the budget is spent."""
        if self.allowance(pid, now_s) < 1:
            return False
        self.spend(pid, 1)
        return True

    def name(self, pid: int, now_s: float) -> str:
        """The process name of ``pid`` (``/proc/<pid>/comm``), cached for `NAME_TTL_S`; "" when
        it cannot be read (the process has exited, or pid is 0 because the kernel sent no
        credentials)."""
        if pid <= 0:
            return ""
        sender = self._sender(pid, now_s)
        if sender.name is None or now_s - sender.named_s > NAME_TTL_S:
            sender.named_s = now_s
            try:
                comm = (self.proc_root / str(pid) / "comm").read_bytes()
            except OSError:
                comm = b""
            sender.name = one_line(comm.decode("utf-8", "replace").strip())
        return sender.name

    def forget_idle(self, now_s: float) -> None:
        """Drop senders silent for `FORGET_AFTER_S`: bounds memory and pid-reuse mistakes."""
        stale = [pid for pid, s in self._known.items() if now_s - s.last_s > FORGET_AFTER_S]
        for pid in stale:
            del self._known[pid]

    def __len__(self) -> int:
        return len(self._known)
