#!/usr/bin/env python3
"""Benchmark gprof-orch's torch.profiler Chrome-trace parser on a large trace.

Builds a trace of about --size-mb MiB by replicating the events of a real one captured on an
H200 (tests/fixtures/runs/h200/torch-trace-square/trace.json: one ProfilerStep holding five
variant ranges of 25 `iter` ranges each). Each replica is a whole profiler step, so every
variant range keeps its iterations, operators, runtime calls and kernels nested as they were;
its timestamps, correlation ids (args.correlation and the ac2g flow ids), External ids and
Ev Idx are shifted by the same amount for every event of the replica, so launches stay inside
their ranges and ids stay unique. Events are written in the layout torch.profiler (Kineto)
writes: one key group a line, timestamps in microseconds with three decimals.

Then it times `read_trace` + `summarize` on that file, median of --repeat runs, each a fresh
process (interpreter start and imports included; configurations alternating), measures each
child's peak RSS with wait4, checks the per-variant kernel counts and iterations against
replicas x the original's, and prints a markdown report (machine, date, git commit) to stdout.

Usage: python benchmarks/bench_torch_trace_parse.py [--size-mb 200] [--repeat 3] [--keep PATH]
       [--no-orjson]     also time the standard-library json fallback
       [--no-pyarrow]    time pandas without pyarrow (its `str` columns then hold Python objects)
       [--baseline DIR]  also time the parser of another checkout, e.g. an older commit unpacked
                         with `git archive COMMIT orchestrator | tar -x -C DIR`
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))
from benchlib import machine, run_child  # noqa: E402

SOURCE = ROOT / "tests/fixtures/runs/h200/torch-trace-square/trace.json"
GOAL_S, GOAL_MIB = 20.0, 4096

CHILD = """
import json, sys, time
for blocked in filter(None, sys.argv[2].split(",")):
    sys.modules[blocked] = None  # makes `import orjson` / `import pyarrow` fail
t0 = time.perf_counter()
from orchestrator.parsers import torch_trace as tt
t1 = time.perf_counter()
trace = tt.read_trace(sys.argv[1])
t2 = time.perf_counter()
s = tt.summarize(trace)
t3 = time.perf_counter()
gpu = s["gpu"]
k = gpu[(gpu["kind"] == "kernel") & gpu["variant"].notna()]
rows = {v: [int(len(g)), int(g["duration_ns"].sum())] for v, g in k.groupby("variant", sort=False)}
print(json.dumps({"import": t1 - t0, "read": t2 - t1, "summarize": t3 - t2, "events": len(trace.events),
                  "iterations": len(s["iterations"]), "rows": rows}))
"""


# ------------------------------------------------------------------------------------ building


def _us(ns: int) -> str:
    """Integer ns -> microseconds with three decimals, as Kineto writes timestamps."""
    sign = "-" if ns < 0 else ""
    ns = abs(ns)
    return f"{sign}{ns // 1000}.{ns % 1000:03d}"


def _render(e: dict, ts_ns: int | None, dur_ns: int | None) -> str:
    """One event in Kineto's layout."""
    head = [f'"{k}": {json.dumps(v)}' for k, v in e.items() if k not in ("ts", "dur", "args")]
    lines = ["  {", "    " + ", ".join(head) + ","]
    times = []
    if ts_ns is not None:
        times.append(f'"ts": {_us(ts_ns)}')
    if dur_ns is not None:
        times.append(f'"dur": {_us(dur_ns)}')
    args = e.get("args")
    lines.append("    " + ", ".join(times) + ("," if args is not None else ""))
    if args is not None:
        lines.append('    "args": {')
        lines.append("      " + ", ".join(f'"{k}": {json.dumps(v)}' for k, v in args.items()))
        lines.append("    }")
    lines.append("  }")
    return "\n".join(lines)


def _ns(x: float) -> int:
    return round(float(x) * 1000)


def build(dst: Path, size_mb: float, source: Path = SOURCE) -> dict[str, int]:
    """Write the replicated trace to dst; return replicas, events and bytes."""
    data = json.loads(source.read_text())
    events = data["traceEvents"]
    step = [e for e in events if e.get("ph") in ("X", "s", "f") and e.get("cat") != "Trace"]
    once = [e for e in events if not (e.get("ph") in ("X", "s", "f") and e.get("cat") != "Trace")]
    t_lo = min(_ns(e["ts"]) for e in step)
    t_hi = max(_ns(e["ts"]) + _ns(e.get("dur", 0)) for e in step)
    period = (math.ceil((t_hi - t_lo) / 1e6) + 1) * 1_000_000  # whole ms, at least 1 ms apart

    def top(key: str) -> int:
        vals = [(e.get("args") or {}).get(key, -1) for e in step]
        if key == "correlation":
            vals += [e["id"] for e in step if e.get("ph") in ("s", "f")]
        return max(v for v in vals if isinstance(v, int)) + 1

    strides = {"correlation": top("correlation"), "External id": top("External id"), "Ev Idx": top("Ev Idx")}

    def replica(r: int) -> list[str]:
        out = []
        for e in step:
            e2 = dict(e)
            if "args" in e:
                args = dict(e["args"])
                for key, stride in strides.items():
                    if isinstance(args.get(key), int) and args[key] >= 0:
                        args[key] += r * stride
                e2["args"] = args
            if e.get("ph") in ("s", "f"):
                e2["id"] = e["id"] + r * strides["correlation"]
            if e.get("cat") == "user_annotation" and str(e.get("name", "")).startswith("ProfilerStep#"):
                e2["name"] = f"ProfilerStep#{r + 1}"
            out.append(_render(e2, _ns(e["ts"]) + r * period, _ns(e["dur"]) if "dur" in e else None))
        return out

    one = ",\n".join(replica(0)).encode()
    n_rep = max(1, round(size_mb * 2**20 / (len(one) + 2)))
    tail = []
    for e in once:
        dur = _ns(e["dur"]) + (n_rep - 1) * period if "dur" in e else None
        ts = _ns(e["ts"]) + (n_rep - 1) * period if e.get("name") == "Record Window End" else _ns(e["ts"])
        tail.append(_render(e, ts, dur))
    head = {k: v for k, v in data.items() if k != "traceEvents"}
    after = {k: head.pop(k) for k in list(head) if list(data).index(k) > list(data).index("traceEvents")}
    with open(dst, "w") as fh:
        fh.write(json.dumps(head, indent=2)[:-2] + ',\n  "traceEvents": [\n')
        for r in range(n_rep):
            fh.write(",\n".join(replica(r)))
            fh.write(",\n")
        fh.write(",\n".join(tail))
        fh.write(
            "\n  ]" + "".join(f",\n  {json.dumps(k)}: {json.dumps(v)}" for k, v in after.items()) + "\n}\n"
        )
    return {"replicas": n_rep, "events": n_rep * len(step) + len(once), "bytes": dst.stat().st_size}


# ------------------------------------------------------------------------------------- running


def expected_rows(source: Path) -> tuple[dict[str, list[int]], int]:
    """Per variant [kernels, GPU ns] and the iteration count of the source trace itself."""
    sys.path.insert(0, str(ROOT))
    from orchestrator.parsers import torch_trace as tt

    s = tt.summarize(tt.read_trace(source))
    gpu = s["gpu"]
    k = gpu[(gpu["kind"] == "kernel") & gpu["variant"].notna()]
    return (
        {v: [int(len(g)), int(g["duration_ns"].sum())] for v, g in k.groupby("variant", sort=False)},
        len(s["iterations"]),
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size-mb", type=float, default=200, help="size of the built trace, MiB")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--keep", type=Path, default=None, help="write the built trace here and keep it")
    ap.add_argument("--no-orjson", action="store_true", help="also time the standard-library json fallback")
    ap.add_argument(
        "--no-pyarrow",
        action="store_true",
        help="time pandas without pyarrow (its `str` columns then hold Python objects)",
    )
    ap.add_argument(
        "--baseline",
        type=Path,
        default=None,
        help="also time the parser of this checkout, e.g. an older commit unpacked with "
        "`git archive COMMIT orchestrator | tar -x -C DIR`",
    )
    args = ap.parse_args()
    common = ["pyarrow"] if args.no_pyarrow else []
    # (label, checkout, modules blocked in the child)
    configs = [("this checkout", ROOT, common)]
    if args.no_orjson:
        configs.append(("this checkout, json (orjson blocked)", ROOT, common + ["orjson"]))
    if args.baseline:
        configs.insert(0, (f"baseline ({args.baseline})", args.baseline.resolve(), common))

    with tempfile.TemporaryDirectory(prefix="gprof-bench-") as tmp:
        path = args.keep or Path(tmp) / "trace.json"
        load_before = os.getloadavg()
        t0 = time.perf_counter()
        built = build(path, args.size_mb)
        print(f"built {path}: {built} in {time.perf_counter() - t0:.1f} s", file=sys.stderr)
        runs: dict[str, list] = {label: [] for label, _, _ in configs}
        for i in range(args.repeat):
            for label, root, blocked in configs:  # alternate, so load changes hit every config alike
                env = dict(os.environ, PYTHONPATH=str(root))
                runs[label].append(
                    run_child([sys.executable, "-c", CHILD, str(path), ",".join(blocked)], env, cwd=root)
                )
                print(
                    f"rep {i + 1} {label}: {runs[label][-1][0]:.2f} s, {runs[label][-1][2]:.0f} MiB",
                    file=sys.stderr,
                )
        load = os.getloadavg()

    base, base_iters = expected_rows(SOURCE)
    n = built["replicas"]
    want_counts = {v: c * n for v, (c, _) in base.items()}
    versions = {}
    for mod in ("orjson", "pyarrow"):
        try:
            versions[mod] = __import__(mod).__version__
        except ImportError:
            versions[mod] = "not installed"
    m = machine(
        ["orchestrator/parsers/torch_trace.py", "benchmarks/bench_torch_trace_parse.py"],
        "the parser or this script",
        **versions,
    )
    print(f"## torch.profiler trace parsing: {built['bytes'] / 2**20:.0f} MiB, {built['events']:,} events\n")
    print(f"- date: {m['date']}; commit: {m['commit']}")
    print(f"- machine: {m['cpu']}; {m['os']}")
    print(
        f"- python {m['python']}, pandas {m['pandas']}, numpy {m['numpy']}, "
        f"pyarrow {'blocked' if args.no_pyarrow else m['pyarrow']}, orjson {m['orjson']}"
    )
    print(
        f"- trace: {n} replicas of {SOURCE.relative_to(ROOT)} ({built['events']:,} events, "
        f"{built['bytes']:,} bytes)"
    )
    print(
        f"- median of {args.repeat} runs a configuration, each a fresh process, configurations alternating; "
        f"load average (1 min, {os.cpu_count()} cores) before {load_before[0]:.1f}, after {load[0]:.1f}\n"
    )
    print(
        "| read_trace + summarize | wall s (median) | wall s (min..max) | CPU s | peak RSS MiB | "
        "read_trace s | summarize s | goal: < 20 s, < 4 GiB |"
    )
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |")
    failed = []
    for label, _, _ in configs:
        xs = runs[label]
        outs = [json.loads(x[3]) for x in xs]
        walls = [x[0] for x in xs]
        wall, rss = statistics.median(walls), statistics.median(x[2] for x in xs)
        met = wall < GOAL_S and rss < GOAL_MIB
        print(
            f"| {label} | {wall:.2f} | {min(walls):.2f}..{max(walls):.2f} | "
            f"{statistics.median(x[1] for x in xs):.2f} | {rss:.0f} | "
            f"{statistics.median(o['read'] for o in outs):.2f} | "
            f"{statistics.median(o['summarize'] for o in outs):.2f} | {'met' if met else '**MISSED**'} |"
        )
        got = {v: c for v, (c, _) in outs[-1]["rows"].items()}
        if got != want_counts or outs[-1]["iterations"] != base_iters * n:
            failed.append((label, got, outs[-1]["iterations"]))
    out = json.loads(runs[configs[-1][0]][-1][3])
    # shifted timestamps could round a kernel's start and end apart by 1 ns; shown, not checked
    drift = {v: out["rows"][v][1] - base[v][1] * n for v in base if v in out["rows"]}
    print(
        f"\n{out['events']:,} complete events. Per-variant kernel counts = {n} x the original's and "
        f"iterations = {n} x {base_iters}, in every configuration: **{'NO' if failed else 'yes'}** "
        f"({json.dumps(want_counts)}); GPU ns minus {n} x the original's: {json.dumps(drift)}"
    )
    if failed:
        for label, got, iters in failed:
            print(f"\n{label}: {json.dumps(got)}, {iters} iterations")
        sys.exit(1)


if __name__ == "__main__":
    main()
