"""The fidelity matrix of `time`: does each timer read the GPU time that nsys sees?

For every variant of the given workloads at every point (size, dtype), side by side in one
session on one GPU:
    blocking   gprof-orch time --timer blocking --no-kernel-clock: the CUDA events' median
    sleep      gprof-orch time --timer sleep --no-kernel-clock (100 us GPU sleep before each call)
    none       gprof-orch time --timer none --no-kernel-clock (the host's launch is timed too)
    warm       gprof-orch time --timer blocking --no-flush-l2 --no-kernel-clock (the cache as nsys's
               back-to-back iterations leave it: the like-for-like check against nsys)
    graph      gprof-orch time --cuda-graph --no-kernel-clock (blocking, flushed): graph replays
    kernel     gprof-orch time --kernel-clock (blocking, flushed; the default where cupti-python is):
               the median of each call's own kernels from CUPTI's records (empty where it is off)
    kernel-warm  the same with --no-flush-l2: the like-for-like check of the default against nsys
    do_bench   triton.testing.do_bench(fn, return_mode="median"), in this process
    nsys       gprof-orch nsys: the GPU time of the variant's kernels per iteration
and each one's ratio to nsys. Writes fidelity.json and fidelity.md into --out.

--same-loop adds the like-for-like check: `gprof-orch time --timer blocking --iters 200` run under
`gprof-orch exec nsys`, each timed call in its own NVTX range (GPROF_MARK_CALLS), so nsys's
kernel time of exactly those calls (flushed, held, as the events saw them) sits beside the
events' median of the same samples: `loop_events` and `loop_nsys`, per point.

    python3 benchmarks/bench_fidelity.py --out /tmp/fid [--workloads square,mean] [--points 1e6,1e8,1e8:bfloat16]

Needs a CUDA GPU and nsys (on the H200: `source .device/setup.sh` first).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
SLOW_HOST = ROOT / "tests" / "fixtures" / "workloads" / "slow_host.py"
TIMERS = ("blocking", "sleep", "none", "warm", "graph", "kernel", "kernel-warm")
# each method's arguments to `gprof-orch time` (the events' methods with the kernel clock off)
TIME_ARGS = {
    "blocking": ["--timer", "blocking", "--no-kernel-clock"],
    "sleep": ["--timer", "sleep", "--no-kernel-clock"],
    "none": ["--timer", "none", "--no-kernel-clock"],
    "warm": ["--timer", "blocking", "--no-flush-l2", "--no-kernel-clock"],
    "graph": ["--timer", "blocking", "--cuda-graph", "--no-kernel-clock"],
    "kernel": ["--timer", "blocking", "--kernel-clock"],
    "kernel-warm": ["--timer", "blocking", "--no-flush-l2", "--kernel-clock"],
}


def _cli(args: list[str], out: Path) -> dict[str, dict]:
    """Run gprof-orch; {point folder name or '': {variant: row}} from its report.json files."""
    argv = [sys.executable, "-m", "orchestrator", *args, "-o", str(out), "--format", "csv"]
    t0 = time.monotonic()
    res = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True)
    print(f"  {' '.join(args)}: exit {res.returncode} in {time.monotonic() - t0:.1f} s", file=sys.stderr)
    if res.returncode not in (0, 1):
        print(res.stderr[-1500:], file=sys.stderr)
    found = {}
    for rep in [out / "report.json", *sorted(out.glob("*/report.json"))]:
        if rep.exists():
            rows = json.loads(rep.read_text()).get("variants", [])
            if rows and "time_median_us" in rows[0]:
                found["" if rep.parent == out else rep.parent.name] = {r["variant"]: r for r in rows}
    return found


# nsys's own word that it lost events (gprof-orch's report warns with it): then its times are not
# the calls' (nsys 2023.4.4 under CUDA 13 drops the events after a runtime call it does not know)
LOST_EVENTS = "nsys reported errors while processing the raw events"


def _same_loop(
    workload: str, size: str, dtype: str, out: Path, extra: list[str], timer: str = "blocking"
) -> dict[str, dict]:
    """{variant: {"loop_events": us, "loop_nsys": us}}: one `time` run under nsys, its events'
    median beside nsys's GPU time per call of the very calls they timed."""
    from workloads.timers import MARK_CALLS_ENV

    timed, traced = out / "time", out / "exec"
    argv = [
        sys.executable,
        "-m",
        "orchestrator",
        "exec",
        "nsys",
        "--ranges",
        "gprof@call:",
        "-o",
        str(traced),
        "--format",
        "csv",
        "--",
        sys.executable,
        "-m",
        "orchestrator",
        "time",
        workload,
        "--size",
        size,
        "--dtype",
        dtype,
        "--timer",
        timer,
        "--iters",
        "200",
        "-o",
        str(timed),
        *extra,
    ]
    t0 = time.monotonic()
    res = subprocess.run(
        argv, cwd=ROOT, capture_output=True, text=True, env={**os.environ, MARK_CALLS_ENV: "1"}
    )
    print(
        f"  same loop {workload} {size} {dtype}: exit {res.returncode} in {time.monotonic() - t0:.1f} s",
        file=sys.stderr,
    )
    found: dict[str, dict] = {}
    for key, folder in (("loop_events", timed), ("loop_nsys", traced)):
        rep = folder / "report.json"
        if not rep.exists():
            print(res.stderr[-1500:], file=sys.stderr)
            continue
        if key == "loop_nsys" and LOST_EVENTS in (folder / "report.md").read_text():
            print(
                f"  same loop {workload} {size}: nsys lost events (see {folder}/report.md): no loop_nsys",
                file=sys.stderr,
            )
            continue
        for r in json.loads(rep.read_text()).get("variants", []):
            found.setdefault(r["variant"], {})[key] = r.get("time_median_us")
    return found


def _do_bench(workload: str, size: str, dtype: str) -> dict[str, float]:
    import torch
    import triton.testing

    from workloads import registry

    if workload.startswith("slow-host"):
        registry.load_file(SLOW_HOST)
    w = registry.get(workload)
    shape = tuple(int(float(s)) for s in size.split("x"))
    x = w.make_input(shape, dtype, "cuda", 0)
    out = {}
    for v in w.variants:
        try:
            if v.setup is not None:
                v.setup()
            v.fn(x)
            torch.cuda.synchronize()
            out[v.name] = (
                triton.testing.do_bench(lambda v=v: v.fn(x), warmup=25, rep=200, return_mode="median") * 1e3
            )
        except Exception as exc:  # a variant that needs what is missing here: left out, said
            print(f"  do_bench {workload} {v.name}: {type(exc).__name__}: {exc}", file=sys.stderr)
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--workloads", default="square,mean,triton-mean,slow-host-mean")
    p.add_argument(
        "--points",
        default="1e5,1e6,1e7,1e8,1e8:bfloat16",
        help="size[:dtype], comma-separated (dtype float32 by default)",
    )
    p.add_argument("--timers", default=",".join(TIMERS), help="of " + ", ".join(TIMERS))
    p.add_argument("--no-nsys", action="store_true")
    p.add_argument("--no-do-bench", action="store_true")
    p.add_argument(
        "--same-loop", action="store_true", help="add the same-loop check (events and nsys on one run)"
    )
    p.add_argument("--loop-timer", default="blocking", help="the timer of the same-loop run")
    p.add_argument(
        "--merge",
        nargs="+",
        type=Path,
        metavar="FIDELITY_JSON",
        help="no runs: merge the rows of earlier fidelity.json files (later ones add methods)",
    )
    a = p.parse_args()
    a.out.mkdir(parents=True, exist_ok=True)
    if a.merge:
        merged: dict[tuple, dict] = {}
        metas = []
        for f in a.merge:
            d = json.loads(f.read_text())
            metas.append(d["meta"])
            for r in d["rows"]:
                key = (r["workload"], r["size"], r["dtype"], r["variant"])
                merged.setdefault(key, {}).update({k: v for k, v in r.items() if v is not None})
        meta = {k: "; ".join(dict.fromkeys(str(m[k]) for m in metas)) for k in ("device", "date", "commit")}
        rows = list(merged.values())
        (a.out / "fidelity.json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=1))
        (a.out / "fidelity.md").write_text(_markdown(meta, rows))
        print(_markdown(meta, rows))
        return
    points = [(pt.split(":") + ["float32"])[:2] for pt in a.points.split(",")]
    by_dtype: dict[str, list[str]] = {}
    for size, dtype in points:
        by_dtype.setdefault(dtype, []).append(size)
    rows, md = [], ""
    for wl in a.workloads.split(","):
        extra = ["--workload-file", str(SLOW_HOST)] if wl.startswith("slow-host") else []
        results: dict[str, dict] = {}
        for dtype, sizes in by_dtype.items():
            for method in [t for t in a.timers.split(",") if t] + ([] if a.no_nsys else ["nsys"]):
                out = a.out / "runs" / f"{wl}-{dtype}-{method}"
                args = ["nsys", wl, "--iters", "50"] if method == "nsys" else ["time", wl, *TIME_ARGS[method]]
                t0 = time.monotonic()
                got = _cli(args + ["--size", ",".join(sizes), "--dtype", dtype] + extra, out)
                print(f"{wl} {dtype} {method}: {time.monotonic() - t0:.0f} s", file=sys.stderr, flush=True)
                for point, table in got.items():
                    size = point.split("-")[0] if point else _norm(sizes[0])
                    results.setdefault((size, dtype), {})[method] = table
            for size in [] if a.no_do_bench else sizes:
                results.setdefault((_norm(size), dtype), {})["do_bench"] = _do_bench(wl, size, dtype)
            for size in sizes if a.same_loop else []:
                loop = _same_loop(
                    wl, size, dtype, a.out / "runs" / f"{wl}-{size}-{dtype}-loop", extra, a.loop_timer
                )
                for key in ("loop_events", "loop_nsys"):
                    results.setdefault((_norm(size), dtype), {})[key] = {
                        v: d.get(key) for v, d in loop.items()
                    }
        for (size, dtype), by_method in results.items():
            variants = sorted(
                {v for t in by_method.values() for v in t},
                key=lambda v: (
                    list(by_method.get("nsys", {}) or by_method.get("blocking", {})).index(v)
                    if v in (by_method.get("nsys") or by_method.get("blocking") or {})
                    else 99
                ),
            )
            # the stop rule's figures: the events' blocking run's, else the default's (kernel)
            stop_from = "blocking" if "blocking" in by_method else "kernel"
            for v in variants:
                row = {"workload": wl, "size": size, "dtype": dtype, "variant": v}
                for method, table in by_method.items():
                    val = table.get(v)
                    row[method] = val if isinstance(val, float) else (val or {}).get("time_median_us")
                    if method == "kernel" and isinstance(val, dict):
                        row["kernel_events"] = val.get("events_median_us")  # the events of the same calls
                    if method == stop_from and isinstance(val, dict):
                        row["noise_pct"] = val.get("noise_pct")
                        row["samples"] = val.get("samples")
                        row["note"] = val.get("note")
                rows.append(row)
        md = _save(a.out, rows)  # after each workload: a run cut short by its time limit keeps these
    print(md)


def _save(out: Path, rows: list[dict]) -> str:
    """fidelity.json and fidelity.md of the rows so far; the markdown."""
    meta = {
        "device": _device(),
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "commit": os.environ.get("GPROF_COMMIT", "unknown"),
    }
    (out / "fidelity.json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=1))
    md = _markdown(meta, rows)
    (out / "fidelity.md").write_text(md)
    return md


def _norm(size: str) -> str:
    from workloads.shapes import parse_size

    return parse_size(size)


def _device() -> str:
    try:
        return subprocess.run(
            ["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"],
            capture_output=True,
            text=True,
        ).stdout.strip()
    except OSError:
        return "unknown"


def _markdown(meta: dict, rows: list[dict]) -> str:
    methods = [m for m in (*TIMERS, "do_bench") if any(r.get(m) is not None for r in rows)]
    loop = any(r.get("loop_nsys") is not None for r in rows)
    head = [
        "workload",
        "size",
        "dtype",
        "variant",
        "nsys us",
        *[f"{m} us" for m in methods],
        *[f"{m}/nsys" for m in methods],
        *(["loop events us", "loop nsys us", "loop events - nsys us"] if loop else []),
        *(["kernel - loop nsys us"] if loop and "kernel" in methods else []),
        *(["goal"] if "kernel" in methods or "kernel-warm" in methods else []),
        "noise %",
        "samples",
    ]
    lines = [
        f"device: {meta['device']}; date: {meta['date']}; commit: {meta['commit']}",
        "",
        "| " + " | ".join(head) + " |",
        "|" + "---|" * len(head),
    ]

    def f(x, nd=2):
        return "" if x is None else f"{x:.{nd}f}"

    for r in rows:
        ns = r.get("nsys")
        ratios = [f(r[m] / ns, 3) if r.get(m) and ns else "" for m in methods]
        lines.append(
            "| "
            + " | ".join(
                [
                    r["workload"],
                    r["size"],
                    r["dtype"],
                    r["variant"],
                    f(ns),
                    *[f(r.get(m)) for m in methods],
                    *ratios,
                    *(
                        [
                            f(r.get("loop_events")),
                            f(r.get("loop_nsys")),
                            f(r["loop_events"] - r["loop_nsys"])
                            if r.get("loop_events") and r.get("loop_nsys")
                            else "",
                        ]
                        if loop
                        else []
                    ),
                    *(
                        [f(r["kernel"] - r["loop_nsys"]) if r.get("kernel") and r.get("loop_nsys") else ""]
                        if loop and "kernel" in methods
                        else []
                    ),
                    *([_goal(r)] if "kernel" in methods or "kernel-warm" in methods else []),
                    f(r.get("noise_pct")),
                    str(int(r["samples"])) if r.get("samples") else "",
                ]
            )
            + " |"
        )
    return "\n".join(lines) + "\n"


def _goal(r: dict) -> str:
    """The goal for the default `time` median (the kernel clock): within 3% or 0.5 us,
    whichever is larger, of nsys's kernel time per iteration. Judged like for like: the flushed
    kernel clock against nsys on the same flushed calls (loop nsys), and the unflushed one
    (kernel-warm) against nsys's back-to-back iterations."""
    out = []
    for mine, ref in (("kernel", "loop_nsys"), ("kernel-warm", "nsys")):
        if r.get(mine) and r.get(ref):
            d = r[mine] - r[ref]
            out.append(
                ("ok" if abs(d) <= max(0.5, 0.03 * r[ref]) else "MISS")
                + f" {d:+.2f} vs {ref.replace('_', ' ')}"
            )
    return "; ".join(out)


if __name__ == "__main__":
    main()
