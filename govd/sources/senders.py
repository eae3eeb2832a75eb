"""What the frame socket remembers about who sends: a rate budget per user, a name per process.

The budget is the sender's user's (its uid from SCM_CREDENTIALS), not its process's: a process
that forks a hundred children to send from each gets the budget of one user, not of a hundred
processes. Processes without credentials (pid 0) share the budget of uid -1.
"""

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
MAX_NAMES = 4096
"""Process names remembered at most: a forking sender must not grow the cache without end."""


@dataclass(slots=True)
class _Budget:
    tokens: float
    last_s: float


@dataclass(slots=True)
class _Name:
    name: str
    named_s: float


class Senders:
    """Token buckets per uid and cached ``/proc/<pid>/comm`` names per pid.

    Each user may send ``rate_fps`` frames per second on average and ``burst`` at once, so that
    one noisy user cannot crowd the others out of the bounded queue, however many processes it
    sends from. ``rate_fps`` of 0 disables the limit. Time comes from the caller (``now_s``), so
    the buckets can be tested without sleeping.
    """

    def __init__(self, rate_fps: float, burst: float, proc_root: Path = Path("/proc")) -> None:
        self.rate_fps = rate_fps
        self.burst = max(burst, 1.0)
        self.proc_root = proc_root
        self._budgets: dict[int, _Budget] = {}
        self._names: dict[int, _Name] = {}

    def set_rate(self, rate_fps: float, burst: float) -> None:
        """New limits (frames/s, frames); each sender's tokens are capped at the new burst."""
        self.rate_fps = rate_fps
        self.burst = max(burst, 1.0)
        for budget in self._budgets.values():
            budget.tokens = min(budget.tokens, self.burst)

    def allowance(self, uid: int, now_s: float) -> int:
        """How many frames user ``uid`` may send now (its whole tokens, refilled up to
        ``now_s``); a large number when the limit is disabled. Take them with `spend`."""
        budget = self._budgets.get(uid)  # called once per datagram: no helper call
        if budget is None:
            budget = self._budgets[uid] = _Budget(tokens=self.burst, last_s=now_s)
        elapsed_s = max(0.0, now_s - budget.last_s)
        budget.last_s = now_s
        if self.rate_fps <= 0:
            return UNLIMITED
        budget.tokens = min(self.burst, budget.tokens + elapsed_s * self.rate_fps)
        return int(budget.tokens)

    def spend(self, uid: int, frames: int) -> None:
        """Take ``frames`` from ``uid``'s budget (after `allowance` said they were there)."""
        budget = self._budgets.get(uid)
        if budget is not None and self.rate_fps > 0:
            budget.tokens = max(0.0, budget.tokens - frames)

    def admit(self, uid: int, now_s: float) -> bool:
        """Take one frame from ``uid``'s budget; False when the budget is spent."""
        if self.allowance(uid, now_s) < 1:
            return False
        self.spend(uid, 1)
        return True

    def name(self, pid: int, now_s: float) -> str:
        """The process name of ``pid`` (``/proc/<pid>/comm``), cached for `NAME_TTL_S`; "" when
        it cannot be read (the process has exited, or pid is 0 because the kernel sent no
        credentials)."""
        if pid <= 0:
            return ""
        known = self._names.get(pid)
        if known is None or now_s - known.named_s > NAME_TTL_S:
            try:
                comm = (self.proc_root / str(pid) / "comm").read_bytes()
            except OSError:
                comm = b""
            if known is None and len(self._names) >= MAX_NAMES:
                del self._names[next(iter(self._names))]  # the oldest
            known = self._names[pid] = _Name(one_line(comm.decode("utf-8", "replace").strip()),
                                             now_s)
        return known.name

    def forget_idle(self, now_s: float) -> None:
        """Drop budgets and names unused for `FORGET_AFTER_S`: bounds memory and pid reuse."""
        for uid in [u for u, b in self._budgets.items() if now_s - b.last_s > FORGET_AFTER_S]:
            del self._budgets[uid]
        for pid in [p for p, n in self._names.items() if now_s - n.named_s > FORGET_AFTER_S]:
            del self._names[pid]

    def __len__(self) -> int:
        return len(self._budgets)
