#!/usr/bin/env python3
"""Probe for `time`'s kernel clock (workloads/kernel_clock.py): what host time do CUPTI's activity records add to a call?

`time --kernel-clock` attributes each kernel record to its call through the record of the API
call that launched it (workloads/kernel_clock.py), so it turns on CUPTI's runtime and driver API
records, and CUPTI then sits in every CUDA call the variant makes: `CPU us` holds that. This probe
measures it, per configuration, each in a fresh process, the configurations interleaved over
--rounds rounds:

    off     no CUPTI
    api     runtime + driver API records, kernels, memsets, copies (the clock as built)
    launch  the same kinds, but API records only for launches, memsets, copies and graph launches
            (cuptiActivityEnableRuntimeApi / EnableDriverApi turn the other callbacks' records off)
    gpu     kernel, memset and copy records only (no API records: nothing to attribute by)

For each: the median host ns of a call (torch.square, torch.mean, an in-place add on 1e6
float32, launched back to back with a synchronize every 200), and how many of the kernel records
found their launching API record (the clock can attribute only those).

    python3 benchmarks/probes/probe_cupti_overhead.py [--rounds 3] [--out probe.json]

On the H200: cupti-python carried (docs/nsight-facts.md), PYTHONPATH with it.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import subprocess
import sys
import time

CONFIGS = ("off", "api", "launch", "gpu")
OPS = ("square", "mean", "add_")
# the API calls that put work on the GPU: the clock attributes a kernel, memset or copy through these
KEEP = re.compile(r"^cu(da)?(Launch|Memset|Memcpy|GraphLaunch)")


def child(config: str, calls: int) -> dict:
    import torch

    x = torch.randn(10**6, device="cuda")
    records: list[tuple] = []
    api_kinds: tuple = ()
    if config != "off":
        from cupti import cupti

        kind = cupti.ActivityKind
        api_kinds = (kind.RUNTIME, kind.DRIVER) if config in ("api", "launch") else ()
        gpu_kinds = (kind.CONCURRENT_KERNEL, kind.MEMSET, kind.MEMCPY)

        def completed(acts):
            for r in acts:
                records.append((r.kind, r.correlation_id))

        cupti.activity_register_callbacks(lambda: (8 * 2**20, 0), completed)
        for k in api_kinds + gpu_kinds:
            cupti.activity_enable(k)
        if config == "launch":
            kept = 0
            for enum, enable in (
                (cupti.runtime_api_trace_cbid, cupti.activity_enable_runtime_api),
                (cupti.driver_api_trace_cbid, cupti.activity_enable_driver_api),
            ):
                for name, cbid in enum.__members__.items():
                    if name in ("INVALID", "SIZE", "FORCE_INT"):
                        continue
                    keep = bool(KEEP.match(name))
                    kept += keep
                    try:
                        enable(int(cbid), int(keep))
                    except Exception:
                        pass
        stamp = [time.perf_counter_ns()]
        for _ in range(1000):
            cupti.get_timestamp()
        stamp_ns = (time.perf_counter_ns() - stamp[0]) / 1000
    ops = {"square": lambda: torch.square(x), "mean": lambda: torch.mean(x), "add_": lambda: x.add_(1.0)}
    out: dict = {"config": config}
    for name, op in ops.items():
        for _ in range(200):
            op()
        torch.cuda.synchronize()
        ts = []
        for i in range(calls):
            t0 = time.perf_counter_ns()
            op()
            ts.append(time.perf_counter_ns() - t0)
            if i % 200 == 199:
                torch.cuda.synchronize()
        torch.cuda.synchronize()
        out[name] = statistics.median(ts)
    if config != "off":
        cupti.activity_flush_all(1)
        api = {c for k, c in records if k in api_kinds}
        gpu = [c for k, c in records if k not in api_kinds]
        out.update(
            stamp_ns=stamp_ns,
            api_records=sum(1 for k, _ in records if k in api_kinds),
            gpu_records=len(gpu),
            gpu_attributable=sum(1 for c in gpu if c in api),
        )
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--calls", type=int, default=4000)
    p.add_argument("--configs", default=",".join(CONFIGS))
    p.add_argument("--child")
    p.add_argument("--out")
    a = p.parse_args()
    if a.child:
        print(json.dumps(child(a.child, a.calls)))
        return 0
    rows = []
    for r in range(a.rounds):
        for c in a.configs.split(","):
            res = subprocess.run(
                [sys.executable, __file__, "--child", c, "--calls", str(a.calls)],
                capture_output=True,
                text=True,
            )
            if res.returncode:
                print(f"{c}: exit {res.returncode}\n{res.stderr[-2000:]}", file=sys.stderr)
                continue
            row = json.loads(res.stdout.strip().splitlines()[-1]) | {"round": r}
            rows.append(row)
            print(json.dumps(row), file=sys.stderr)
    print(
        "| config | "
        + " | ".join(f"{o} host us (median of rounds)" for o in OPS)
        + " | get_timestamp ns | kernels attributable |"
    )
    print("|---|" + "---:|" * (len(OPS) + 2))
    for c in a.configs.split(","):
        rs = [r for r in rows if r["config"] == c]
        if not rs:
            continue
        cells = [f"{statistics.median(r[o] for r in rs) / 1e3:.2f}" for o in OPS]
        att = (
            f"{sum(r['gpu_attributable'] for r in rs)}/{sum(r['gpu_records'] for r in rs)}"
            if "gpu_records" in rs[0]
            else ""
        )
        stamp = f"{statistics.median(r['stamp_ns'] for r in rs):.0f}" if "stamp_ns" in rs[0] else ""
        print(f"| {c} | " + " | ".join(cells) + f" | {stamp} | {att} |")
    if a.out:
        with open(a.out, "w") as f:
            json.dump(rows, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
