"""Quick check of workloads/timers.py on a GPU: each hold around a call with a slow host side,
and the spin's timeout on a call that waits for the GPU. Prints medians in us."""

import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
import torch

from workloads import timers

x = torch.randn(10_000_000, device="cuda")
flush = torch.empty(256 * 2**20, dtype=torch.int8, device="cuda")


def busy(us):
    end = time.perf_counter() + us * 1e-6
    while time.perf_counter() < end:
        pass


def measure(hold, fn, n=200):
    s, e = (
        [torch.cuda.Event(enable_timing=True) for _ in range(n)],
        [torch.cuda.Event(enable_timing=True) for _ in range(n)],
    )
    for i in range(n):
        flush.zero_()
        hold.hold()
        s[i].record()
        fn()
        e[i].record()
        hold.release()
    torch.cuda.synchronize()
    return statistics.median(a.elapsed_time(b) * 1e3 for a, b in zip(s, e)), hold.timeouts()


tiny = torch.empty(1, device="cuda")
fns = {
    "empty": lambda: None,
    "tiny": lambda: tiny.zero_(),
    "mean": lambda: x.mean(),
    "host300": lambda: (busy(300), x.mean()),
    "host2ms": lambda: (busy(2000), x.mean()),
}
t0 = time.perf_counter()
blocking = timers.BlockingHold()
print(f"blocking hold built in {time.perf_counter() - t0:.2f} s")
holds = {"none": timers.NoHold(), "sleep": timers.SleepHold(100), "blocking": blocking}
for hname, hold in holds.items():
    for fname, fn in fns.items():
        hold.reset()
        med, to = measure(hold, fn)
        print(f"{hname:9s} {fname:8s} median {med:8.2f} us  timeouts {to}")
blocking.reset()
t0 = time.perf_counter()
med, to = measure(blocking, lambda: x.mean().item(), n=5)
print(
    f"blocking synced   median {med:8.2f} us  timeouts {to} (expect 5), {time.perf_counter() - t0:.2f} s for 5"
)
