"""A real GPU workload for `bench/nvml_loop.py`: PyTorch training steps and memory-bound steps,
each timed to the GPU's end (``torch.cuda.synchronize``) and reported to govd's frame socket
through `govd.client`, as a training loop would.

    python bench/gpu_work.py --work train|stream|phased --duration-s S [--phase-s P]
                             [--socket PATH] [--stats FILE]

- ``train``: one training step of a small transformer language model (bf16 autocast, AdamW):
  compute-bound, its time grows almost as 1/f of the graphics clock;
- ``stream``: a memory-bound step (scaled adds and a reduction over 2 GiB tensors): its time
  hardly depends on the graphics clock;
- ``phased``: the two alternating every ``--phase-s`` seconds, as the stages of a pipeline or a
  data-loading phase alternate: no one fixed clock suits both.

Every step is reported as ``app=train``. With ``--stats`` it writes, per phase segment, the
steps, their median and total time and the GPU energy counter's rise (NVML), as JSON. Warm-up
steps (the first 2 s) are reported to govd but not counted. Needs torch with CUDA and pynvml.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import pynvml

import govd.client

torch = None  # imported in main(): --dry runs without it

WARM_UP_S = 2.0


def train_step_fn():  # type: ignore[no-untyped-def]
    """A closure running one training step of a small transformer LM on the GPU."""
    vocab, width, layers, batch, seq = 8192, 1024, 6, 16, 512
    layer = torch.nn.TransformerEncoderLayer(width, 16, 4 * width, batch_first=True,
                                             norm_first=True)
    model = torch.nn.Sequential(torch.nn.Embedding(vocab, width),
                                torch.nn.TransformerEncoder(layer, layers),
                                torch.nn.Linear(width, vocab)).cuda()
    optimiser = torch.optim.AdamW(model.parameters(), lr=1e-4)
    tokens = torch.randint(0, vocab, (batch, seq), device="cuda")

    def step() -> None:
        with torch.autocast("cuda", dtype=torch.bfloat16):
            logits = model(tokens)
            loss = torch.nn.functional.cross_entropy(logits.view(-1, vocab).float(),
                                                     tokens.view(-1))
        loss.backward()
        optimiser.step()
        optimiser.zero_grad(set_to_none=True)
    return step


def stream_step_fn():  # type: ignore[no-untyped-def]
    """A closure running one memory-bound step: scaled adds and a reduction over 2 GiB."""
    n = 512 * 1024 * 1024  # float32: 2 GiB per tensor
    a = torch.rand(n, device="cuda")
    b = torch.rand(n, device="cuda")

    def step() -> None:
        for _ in range(4):
            torch.add(a, b, alpha=0.5, out=a)
        a.sum()
    return step


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--work", choices=("train", "stream", "phased"), required=True)
    parser.add_argument("--duration-s", type=float, required=True)
    parser.add_argument("--phase-s", type=float, default=10.0)
    parser.add_argument("--socket", default=None, help="govd's frame socket (default: none)")
    parser.add_argument("--stats", type=Path, default=None)
    parser.add_argument("--dry", action="store_true",
                        help="sleep instead of GPU work: checks the plumbing without a GPU "
                             "(against tests/fake_nvml)")
    args = parser.parse_args()
    global torch
    if args.dry:
        steps = {"train": lambda: time.sleep(0.03), "stream": lambda: time.sleep(0.01)}
        synchronize = lambda: None  # noqa: E731
    else:
        import torch
        steps = {"train": train_step_fn(), "stream": stream_step_fn()}
        synchronize = torch.cuda.synchronize

    pynvml.nvmlInit()
    handle = pynvml.nvmlDeviceGetHandleByIndex(0)
    order = ["train", "stream"] if args.work == "phased" else [args.work]
    reporter = govd.client.Reporter(app="train", path=args.socket) if args.socket else None

    segments: list[dict[str, object]] = []
    start = time.perf_counter()
    end = start + WARM_UP_S + args.duration_s
    segment_index = -1
    times: list[float] = []
    energy0 = 0
    while (now := time.perf_counter()) < end:
        counted = now >= start + WARM_UP_S
        index = int((now - start) // args.phase_s) % len(order)
        if counted and (index != segment_index or not segments):
            if segments and times:
                segments[-1].update(_close(times, energy0, handle))
            segments.append({"work": order[index], "started_s": round(now - start, 3)})
            segment_index, times = index, []
            energy0 = pynvml.nvmlDeviceGetTotalEnergyConsumption(handle)
        t0 = time.perf_counter()
        steps[order[index]]()
        synchronize()
        took = time.perf_counter() - t0
        if reporter is not None:
            reporter.send(took)
        if counted:
            times.append(took)
    if segments and times:
        segments[-1].update(_close(times, energy0, handle))
    if args.stats is not None:
        sent, dropped = (reporter.sent, dict(reporter.dropped)) if reporter else (0, {})
        args.stats.write_text(json.dumps({"work": args.work, "duration_s": args.duration_s,
                                          "phase_s": args.phase_s, "sent_reports": sent,
                                          "dropped_reports": dropped,
                                          "segments": segments}, indent=1) + "\n")
    return 0


def _close(times: list[float], energy0: int, handle: object) -> dict[str, float]:
    energy_j = (pynvml.nvmlDeviceGetTotalEnergyConsumption(handle) - energy0) / 1000
    return {"steps": len(times), "median_ms": statistics.median(times) * 1000,
            "busy_s": sum(times), "energy_j": energy_j}


if __name__ == "__main__":
    sys.exit(main())
