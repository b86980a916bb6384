#!/usr/bin/env python3
"""Probe for `time`'s kernel clock (workloads/kernel_clock.py): can `time` read each call's kernel durations in-process,
through CUPTI's activity API (NVIDIA's cupti-python), as nsys does, beside its CUDA events?

On a GPU, with cupti-python importable (on the H200: its wheels carried, see below):

    python3 benchmarks/probes/probe_cupti_clock.py [--sizes 1e5,1e6,1e7,1e8] [--calls 200]

For each size, torch.square timed the way `time` times a call (L2 flushed, the stream held by
the blocking kernel, CUDA events around the call), first without CUPTI, then with CUPTI's
concurrent-kernel activity on. Prints, per size: the events' median each way, the median of
the call's kernel durations from CUPTI (the flush's and the hold's kernels told apart by order:
every call's records come after its spin kernel), and events minus CUPTI. A kernel clock meets
the goal's "within 0.5 us of nsys" where CUPTI's figure is what nsys reads (nsys reads the
same records); the events hold about 2.4 to 3.2 us more (docs/time-fidelity-h200.md, point 7).

The H200 image has torch's CUPTI (nvidia-cuda-cupti 13.0) but not cupti-python:
    pip download --no-deps --only-binary=:all: --python-version 3.12 --platform manylinux_2_28_x86_64 \
        --platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64 -d .device/cupti \
        cupti-python==13.0.1 'cuda-bindings>=13.0.2,<13.1' 'cuda-pathfinder>=1.4.1' pyelftools
and there: pip install --no-deps --target /tmp/cupti .device/cupti/*.whl; PYTHONPATH=/tmp/cupti.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path
from types import SimpleNamespace

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sizes", default="1e5,1e6,1e7,1e8")
    p.add_argument("--calls", type=int, default=200)
    p.add_argument("--out", type=Path)
    a = p.parse_args()
    import torch

    from workloads import timed, timers

    try:
        from cupti import cupti
    except ImportError as exc:
        print(f"no cupti-python: {exc}", file=sys.stderr)
        return 2
    records: list[tuple[str, int, int]] = []

    def requested():
        return 8 * 1024 * 1024, 0

    def completed(activities):
        for r in activities:
            if r.kind == cupti.ActivityKind.CONCURRENT_KERNEL:
                records.append((r.name, r.start, r.end))

    cupti.activity_register_callbacks(requested, completed)
    flush = timed.l2_flusher(SimpleNamespace(flush_l2=True, device="cuda"))
    hold, why = timers.make("blocking", "cuda")
    if why:
        print(why, file=sys.stderr)
    rows = []
    for size in a.sizes.split(","):
        n = int(float(size))
        x = torch.rand(n, device="cuda")
        x.square()
        torch.cuda.synchronize()
        got = {}
        for with_cupti in (False, True):
            if with_cupti:
                records.clear()
                cupti.activity_enable(cupti.ActivityKind.CONCURRENT_KERNEL)
            pairs = []
            for _ in range(a.calls):
                flush()
                s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                hold.hold()
                s.record()
                x.square()
                e.record()
                hold.release()
                pairs.append((s, e))
            torch.cuda.synchronize()
            got["events_cupti" if with_cupti else "events"] = statistics.median(
                s.elapsed_time(e) * 1e3 for s, e in pairs
            )
            if with_cupti:
                cupti.activity_flush_all(1)
                cupti.activity_disable(cupti.ActivityKind.CONCURRENT_KERNEL)
                # per call: the flush (memset or fill), the spin kernel, then the call's kernels
                calls, cur = [], None
                for name, start, end in sorted(records, key=lambda r: r[1]):
                    if "spin" in name:
                        cur = []
                        calls.append(cur)
                    elif cur is not None and (
                        "square" in name or "pow" in name or "elementwise" in name and "Fill" not in name
                    ):
                        cur.append(end - start)
                        cur = None  # one kernel a call; the next records are the next flush
                durs = [sum(c) / 1e3 for c in calls if c]
                got["cupti_kernel"] = statistics.median(durs) if durs else None
                got["cupti_calls"] = len(durs)
                got["kernel_names"] = sorted({r[0][:60] for r in records})
        got["size"] = size
        if got.get("cupti_kernel"):
            got["events_minus_cupti"] = got["events_cupti"] - got["cupti_kernel"]
        rows.append(got)
        print(json.dumps(got), flush=True)
    if hold.timeouts():
        print(f"blocking timer timed out {hold.timeouts()} time(s)", file=sys.stderr)
    if a.out:
        a.out.write_text(json.dumps({"device": torch.cuda.get_device_name(), "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
