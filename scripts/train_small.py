"""A small training script, as a user would write it, for `gprof-orch exec nsys`.

An MLP on random data, trained for --steps steps with AdamW; each step is a torch.cuda.nvtx
range "step" holding "forward", "backward" and "optimizer". Nothing in it knows gprof-orch.

    gprof-orch exec nsys --ranges '*@' -- python scripts/train_small.py --steps 20
    gprof-orch exec nsys --ranges '*@' --nsys-arg=--capture-range=cudaProfilerApi \
        -- python scripts/train_small.py --steps 20 --warmup 3     # the steady state only
    python scripts/check_kern_sum.py <that run folder>     # per range, against nsys stats
"""

from __future__ import annotations

import argparse

import torch
from torch.cuda import nvtx


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument(
        "--warmup",
        type=int,
        default=0,
        help="steps before the measured ones, outside cudaProfilerStart/Stop (nsys "
        "--capture-range=cudaProfilerApi then captures the measured steps only)",
    )
    ap.add_argument("--width", type=int, default=1024)
    ap.add_argument("--batch", type=int, default=256)
    args = ap.parse_args()
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(args.width, args.width),
        torch.nn.GELU(),
        torch.nn.Linear(args.width, args.width),
        torch.nn.GELU(),
        torch.nn.Linear(args.width, 10),
    ).to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    x = torch.randn(args.batch, args.width, device=dev)
    y = torch.randint(0, 10, (args.batch,), device=dev)
    profiled = dev == "cuda" and args.warmup > 0
    for i in range(args.warmup + args.steps):
        if profiled and i == args.warmup:
            # the steady state only: under `nsys profile --capture-range=cudaProfilerApi` the
            # warm-up (allocator growth, lazy loading, torch's driver entry-point lookups) is not
            # captured; nsys 2023.4.4 loses a thread's events at a CUDA 13 call it does not know
            torch.cuda.synchronize()
            torch.cuda.profiler.start()
        nvtx.range_push("step")
        nvtx.range_push("forward")
        loss = torch.nn.functional.cross_entropy(model(x), y)
        nvtx.range_pop()
        nvtx.range_push("backward")
        opt.zero_grad(set_to_none=True)
        loss.backward()
        nvtx.range_pop()
        nvtx.range_push("optimizer")
        opt.step()
        nvtx.range_pop()
        nvtx.range_pop()
    if dev == "cuda":
        torch.cuda.synchronize()
    if profiled:
        torch.cuda.profiler.stop()
    print(f"final loss {loss.item():.4f} after {args.steps} steps on {dev}")


if __name__ == "__main__":
    main()
