"""--cluster local:N against the serial loop: a sweep of 4N equal CPU points (`time square`, sizes
1000..1000+4N-1, so every point costs the same: mostly its child's interpreter start and torch
import), each side a fresh `gprof-orch` process, alternating, median of --repeat. Also times the
cluster's start-up alone (LocalCluster of N workers and its client, up and closed).

Goal: cluster wall <= 1.2 x (serial wall / N) + start-up.

Also the machine's own ceiling, without Dask: one point run alone (a fresh `gprof-orch` process,
its one child), then N of them at once; N x alone / together is the most any N-way split of
these points can gain here. The goal asks for 2 / 1.2 = 1.67x with N = 2.

    python benchmarks/bench_cluster.py --workers 2 --repeat 3 > docs/scale-cluster-cpu.md
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from benchlib import ROOT, machine, run_child

STARTUP = """
import sys, time
from orchestrator.cluster import Session, parse_spec
t = time.perf_counter()
s = Session(parse_spec(sys.argv[1]))
up = time.perf_counter() - t
s.close()
print(up)
"""


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--iters", type=int, default=20)
    p.add_argument(
        "--size-base",
        type=int,
        default=1000,
        help="the first point's size (elements); with --iters, how much a point measures beside its "
        "child's start (1000 and 20: about 1.5 s a point, mostly the interpreter and torch import)",
    )
    p.add_argument(
        "--baseline",
        type=Path,
        help="another checkout (`git worktree add DIR REV`): its cluster sweep "
        "runs too, interleaved with this tree's, for a before/after side by side",
    )
    args = p.parse_args(argv)
    n = args.workers
    sizes = ",".join(str(args.size_base + i) for i in range(4 * n))
    base = [
        sys.executable,
        "-m",
        "orchestrator",
        "time",
        "square",
        "--device",
        "cpu",
        "--size",
        sizes,
        "--variants",
        "mul",
        "--iters",
        str(args.iters),
        "--warmup",
        "1",
        "--json",
    ]
    env = {**os.environ, "GPROF_NO_PROGRESS": "1"}
    sides = ("serial", "cluster") + (("baseline",) if args.baseline else ())
    walls: dict[str, list[float]] = {s: [] for s in sides}
    cpu: dict[str, list[float]] = {s: [] for s in sides}
    loads, startups, workers_used = [], [], []
    alone, together = [], []
    one = base[: base.index("--size")] + ["--size", str(args.size_base)] + base[base.index("--size") + 2 :]
    tmp = Path(tempfile.mkdtemp(prefix="bench-cluster-"))
    try:
        for rep in range(args.repeat):
            for side in sides:
                out = tmp / f"{side}-{rep}"
                argv = base + ["-o", str(out)] + (["--cluster", f"local:{n}"] if side != "serial" else [])
                loads.append(os.getloadavg()[0])
                where = args.baseline.resolve() if side == "baseline" else ROOT
                wall, cpu_s, _, stdout = run_child(argv, env=env, cwd=where)
                walls[side].append(wall)
                cpu[side].append(cpu_s)
                doc = json.loads(stdout)
                assert doc["status"] == "ok" and len({r["numel"] for r in doc["variants"]}) == 4 * n, doc
                if side != "serial":
                    children = json.loads((out / "manifest.json").read_text())["children"]
                    workers_used.append(len({c["placement"]["worker"] for c in children.values()}))
                shutil.rmtree(out, ignore_errors=True)
            wall, _, _, stdout = run_child([sys.executable, "-c", STARTUP, f"local:{n}"], env=env)
            startups.append(float(stdout.strip().splitlines()[-1]))
            alone.append(run_child(one + ["-o", str(tmp / f"alone-{rep}")], env=env)[0])
            together.append(_at_once([one + ["-o", str(tmp / f"together-{rep}-{i}")] for i in range(n)], env))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    serial, clustered, startup = (statistics.median(v) for v in (walls["serial"], walls["cluster"], startups))
    bound = 1.2 * serial / n + startup
    info = machine(
        ["orchestrator/cluster", "orchestrator/api.py", "benchmarks/bench_cluster.py"],
        "the cluster code",
        dask=_version("dask"),
        distributed=_version("distributed"),
    )
    rows = [
        ("serial (one child at a time)", walls["serial"], cpu["serial"]),
        (f"--cluster local:{n}", walls["cluster"], cpu["cluster"]),
    ]
    if args.baseline:
        rev = subprocess.run(
            ["git", "-C", str(args.baseline), "rev-parse", "--short", "HEAD"], capture_output=True, text=True
        ).stdout.strip()
        rows.append(
            (f"--cluster local:{n}, baseline {rev or args.baseline}", walls["baseline"], cpu["baseline"])
        )
    print(f"# --cluster local:{n} against the serial sweep, on the CPU\n")
    more = f" --size-base {args.size_base}" if args.size_base != 1000 else ""
    more += f" --iters {args.iters}" if args.iters != 20 else ""
    more += f" --baseline {args.baseline}" if args.baseline else ""
    print(
        f"`python benchmarks/bench_cluster.py --workers {n} --repeat {args.repeat}{more}`: a sweep of {4 * n} equal points "
        f"(`gprof-orch time square --device cpu --size {sizes} --variants mul --iters {args.iters} --warmup 1`), "
        f"each side a fresh process, alternating; median of {args.repeat}.\n"
    )
    print(f"- date: {info['date']}; commit: {info['commit']}")
    print(f"- machine: {info['cpu']}; {info['os']}")
    print(
        f"- python {info['python']}, pandas {info['pandas']}, dask {info['dask']}, distributed {info['distributed']}"
    )
    print(
        f"- **shared machine**: other people's tests and fuzz jobs ran at the same time; the 1-minute load "
        f"average when each run started was {min(loads):.1f} to {max(loads):.1f} on {os.cpu_count()} cores\n"
    )
    print(
        "| what | wall s (median) | wall s (min..max) | CPU s (median, the gprof-orch process and its children) |"
    )
    print("| --- | ---: | ---: | ---: |")
    for name, w, c in rows:
        print(
            f"| {name} | {statistics.median(w):.2f} | {min(w):.2f}..{max(w):.2f} | {statistics.median(c):.2f} |"
        )
    print(
        f"| cluster start-up alone (LocalCluster of {n} + client) | {startup:.2f} | {min(startups):.2f}.."
        f"{max(startups):.2f} | |\n"
    )
    print(f"- serial / cluster: **{serial / clustered:.2f}x** (the ideal is {n}x)")
    print(
        f"- goal: cluster <= 1.2 x serial / {n} + start-up = 1.2 x {serial:.2f} / {n} + {startup:.2f} = "
        f"{bound:.2f} s: **{'met' if clustered <= bound else 'not met'}** ({clustered:.2f} s)"
    )
    print(f"- workers used per cluster run: {workers_used}")
    ceiling = [n * a / t for a, t in zip(alone, together)]
    print(
        f"- the machine's ceiling, without Dask: one point alone {statistics.median(alone):.2f} s, {n} at once "
        f"{statistics.median(together):.2f} s: at most **{statistics.median(ceiling):.2f}x** from {n} ways "
        f"({min(ceiling):.2f}..{max(ceiling):.2f}); the goal asks {n / 1.2:.2f}x of the points, plus start-up"
    )
    return 0


def _at_once(argvs: list[list[str]], env: dict[str, str]) -> float:
    """Wall seconds until every one of these processes, started together, has exited ok."""
    t0 = time.perf_counter()
    procs = [subprocess.Popen(a, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env) for a in argvs]
    for a, proc in zip(argvs, procs):
        _, err = proc.communicate()
        if proc.returncode != 0:
            sys.exit(f"failed ({proc.returncode}): {' '.join(a)}\n{err.decode()[-2000:]}")
    return time.perf_counter() - t0


def _version(name: str) -> str:
    from importlib import metadata

    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return "-"


if __name__ == "__main__":
    sys.exit(main())
