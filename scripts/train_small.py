"""A small training script, as a user would write it, for `gprof-orch exec nsys` (issue 16).

An MLP on random data, trained for --steps steps with AdamW; each step is a torch.cuda.nvtx
range "step" holding "forward", "backward" and "optimizer". Nothing in it knows gprof-orch.

    gprof-orch exec nsys --ranges '*@' -- python scripts/train_small.py --steps 20
    python scripts/check_kern_sum.py <that run folder>     # per range, against nsys stats
"""
from __future__ import annotations

import argparse

import torch
from torch.cuda import nvtx


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--width", type=int, default=1024)
    ap.add_argument("--batch", type=int, default=256)
    args = ap.parse_args()
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(args.width, args.width), torch.nn.GELU(),
                                torch.nn.Linear(args.width, args.width), torch.nn.GELU(),
                                torch.nn.Linear(args.width, 10)).to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    x = torch.randn(args.batch, args.width, device=dev)
    y = torch.randint(0, 10, (args.batch,), device=dev)
    for _ in range(args.steps):
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
    print(f"final loss {loss.item():.4f} after {args.steps} steps on {dev}")


if __name__ == "__main__":
    main()
