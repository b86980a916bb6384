#!/usr/bin/env python3
"""How `gprof-orch report` and `gprof-orch import` scale to millions of kernels, beside
`nsys stats -r nvtx_kern_sum` on the same file.

Builds an N-kernel nsys SQLite export by repeating a real capture: every row of the CUDA
activity tables (kernels, runtime calls, memcpy, memset, synchronisation) and every NVTX range
is copied once per repeat, shifted in time by the capture's span (plus 1 ms) and in
correlationId (and the kernels' gridId, an NVTX start/end range's rangeId) by the largest id
plus one. Each copy is then the capture again, later on the same process and thread: every
launch stays in its range, every id stays unique, and each figure of each variant is exactly
`repeats` times the capture's. The domain-create event stays once at the start and the
domain-destroy moves after the last copy. The export sits in a copy of the capture's run folder
whose workload.json counts `repeats` times the iterations, so `gprof-orch report` reads it as
one long run.

Then, median of --repeat fresh processes each, alternating (wall time, CPU time and peak RSS
from wait4 on each child alone):
  - gprof-orch report FOLDER            (the whole report: parse, tables, every file written)
  - gprof-orch import EXPORT --ranges gprof@variant: --iters ITERS --out NEW_FOLDER
  - nsys stats --report nvtx_kern_sum --format csv EXPORT
and checks that each variant's launches and GPU ns in gprof-orch's report equal nsys's.

Usage:
    python benchmarks/bench_scale.py [--kernels 3000000,1000000] [--repeat 3] [--keep DIR] > result.md
    python benchmarks/bench_scale.py --code /tmp/head --no-nsys   # another checkout's gprof-orch (a "before")
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))
from benchlib import machine, run_child  # noqa: E402

SOURCE_RUN = ROOT / "tests/fixtures/runs/h200/nsys-triton-mean"
SQLITE = "report.sqlite"
# the run folder's own files (not rebuilt by `report`) that the scaled folder keeps
KEPT = ("manifest.json", "commands.sh", "logs")
GAP_NS = 1_000_000  # between one copy's last timestamp and the next copy's first
NVTX_DOMAIN_CREATE, NVTX_DOMAIN_DESTROY = 75, 76


def _columns(con: sqlite3.Connection, table: str) -> list[str]:
    return [r[1] for r in con.execute(f'PRAGMA table_info("{table}")')]


def repeated_tables(con: sqlite3.Connection) -> list[str]:
    """The CUDA activity tables a copy repeats: every CUPTI_ACTIVITY_KIND_* table with start
    and end (their correlationIds tie kernels, copies and syncs to the runtime calls)."""
    names = [
        r[0]
        for r in con.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name LIKE 'CUPTI_ACTIVITY_KIND_%' ORDER BY name"
        )
    ]
    return [t for t in names if {"start", "end"} <= set(_columns(con, t))]


def build_export(src: Path, dst: Path, repeats: int) -> dict[str, int]:
    """Write `src` repeated `repeats` times (see the module's docstring) to `dst`; return the
    row counts of the kernel, runtime, memcpy, memset and NVTX tables."""
    if repeats < 1:
        raise ValueError("repeats must be at least 1")
    shutil.copyfile(src, dst)
    os.chmod(dst, 0o644)
    con = sqlite3.connect(dst)
    try:
        con.execute("PRAGMA journal_mode = OFF")
        con.execute("PRAGMA synchronous = OFF")
        tables = repeated_tables(con)
        have = {t: _columns(con, t) for t in tables + ["NVTX_EVENTS"]}
        # one copy's span: every repeated row and every NVTX range, so nothing of copy k+1
        # starts before copy k's last kernel has ended
        lo, hi = [], []
        for t in tables:
            a, b = con.execute(
                f'SELECT min(start), max(max(start, ifnull(end, start))) FROM "{t}"'
            ).fetchone()
            if a is not None:
                lo.append(a), hi.append(b)
        a, b = con.execute(
            "SELECT min(start), max(max(start, ifnull(end, start))) FROM NVTX_EVENTS "
            f"WHERE eventType NOT IN ({NVTX_DOMAIN_CREATE}, {NVTX_DOMAIN_DESTROY})"
        ).fetchone()
        if a is not None:
            lo.append(a), hi.append(b)
        period = max(hi) - min(lo) + GAP_NS
        corr = 1 + max(
            con.execute(f'SELECT ifnull(max(correlationId), 0) FROM "{t}"').fetchone()[0]
            for t in tables
            if "correlationId" in have[t]
        )
        grid = 1 + (
            con.execute("SELECT ifnull(max(gridId), 0) FROM CUPTI_ACTIVITY_KIND_KERNEL").fetchone()[0]
            if "gridId" in have.get("CUPTI_ACTIVITY_KIND_KERNEL", [])
            else 0
        )
        range_ids = 1 + (
            con.execute("SELECT ifnull(max(rangeId), 0) FROM NVTX_EVENTS").fetchone()[0]
            if "rangeId" in have["NVTX_EVENTS"]
            else 0
        )
        con.execute("CREATE TEMP TABLE copies (k INTEGER PRIMARY KEY)")
        con.executemany("INSERT INTO copies VALUES (?)", ((k,) for k in range(1, repeats)))
        shift = {
            "start": f"t.start + c.k * {period}",
            "end": f"t.end + c.k * {period}",
            "correlationId": f"t.correlationId + c.k * {corr}",
            "gridId": f"t.gridId + c.k * {grid}",
            "rangeId": f"t.rangeId + c.k * {range_ids}",
        }

        def repeat(table: str, where: str = "1") -> None:
            cols = have[table]
            last = con.execute(f'SELECT max(rowid) FROM "{table}"').fetchone()[0]
            if last is None:
                return
            exprs = ", ".join(shift.get(c, f"t.{c}") for c in cols)
            quoted = ", ".join(f'"{c}"' for c in cols)
            # copy by copy, each in the capture's own row order
            con.execute(
                f'INSERT INTO "{table}" ({quoted}) SELECT {exprs} FROM copies c CROSS JOIN "{table}" t '
                f"WHERE t.rowid <= {last} AND ({where}) ORDER BY c.k, t.rowid"
            )

        for t in tables:
            repeat(t)
        repeat("NVTX_EVENTS", f"t.eventType NOT IN ({NVTX_DOMAIN_CREATE}, {NVTX_DOMAIN_DESTROY})")
        con.execute(
            f"UPDATE NVTX_EVENTS SET start = start + {(repeats - 1) * period} "
            f"WHERE eventType = {NVTX_DOMAIN_DESTROY}"
        )
        if "ANALYSIS_DETAILS" in {r[0] for r in con.execute("SELECT name FROM sqlite_master")}:
            con.execute(
                f"UPDATE ANALYSIS_DETAILS SET duration = duration + {(repeats - 1) * period}, "
                f"stopTime = stopTime + {(repeats - 1) * period}"
            )
        con.execute("DROP TABLE copies")
        con.commit()
        return {
            t: con.execute(f'SELECT count(*) FROM "{t}"').fetchone()[0]
            for t in (
                "CUPTI_ACTIVITY_KIND_KERNEL",
                "CUPTI_ACTIVITY_KIND_RUNTIME",
                "CUPTI_ACTIVITY_KIND_MEMCPY",
                "CUPTI_ACTIVITY_KIND_MEMSET",
                "NVTX_EVENTS",
            )
            if t in have or t == "NVTX_EVENTS"
        }
    finally:
        con.close()


def build_run_folder(src: Path, dst: Path, repeats: int) -> dict[str, int]:
    """A copy of the run folder `src` (an `nsys` run) whose export is `src`'s repeated `repeats`
    times and whose workload.json counts `repeats` times the iterations; the reports are left
    for `gprof-orch report` to build. Returns build_export()'s row counts."""
    dst.mkdir(parents=True)
    for name in KEPT:
        p = src / name
        if p.is_dir():
            shutil.copytree(p, dst / name)
        elif p.exists():
            shutil.copyfile(p, dst / name)
    wman = json.loads((src / "workload.json").read_text())
    wman["iters"] = int(wman["iters"]) * repeats
    (dst / "workload.json").write_text(json.dumps(wman, indent=1))
    return build_export(src / SQLITE, dst / SQLITE, repeats)


def kernels_in(sqlite: Path) -> int:
    with sqlite3.connect(f"{sqlite.resolve().as_uri()}?mode=ro", uri=True) as con:
        return con.execute("SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL").fetchone()[0]


def find_nsys() -> Path | None:
    for c in (
        os.environ.get("GPROF_NSYS"),
        shutil.which("nsys"),
        str(ROOT / ".tools/nsys/target-linux-x64/nsys"),
    ):
        if c and os.access(c, os.X_OK):
            return Path(c)
    return None


def nsys_per_range(csv_text: str, prefix: str = "gprof:variant:") -> dict[str, list[int]]:
    """nvtx_kern_sum's CSV -> per variant [kernel instances, total ns], over kernel names."""
    import csv
    import io

    lines = csv_text.splitlines()
    start = next(i for i, ln in enumerate(lines) if ln.lstrip('"').startswith("NVTX Range"))
    out: dict[str, list[int]] = {}
    for rec in csv.DictReader(io.StringIO("\n".join(lines[start:]))):
        name = rec["NVTX Range"]
        if name.startswith(prefix):
            acc = out.setdefault(name[len(prefix) :], [0, 0])
            acc[0] += int(rec["Kern Inst"])
            acc[1] += int(rec["Total Time (ns)"])
    return out


def ours_per_variant(folder: Path) -> dict[str, list[int]]:
    """Per variant [launches, GPU ns] of a rebuilt folder's per-kernel table (report.json has
    no kernels list: launches and time per iteration come from frame.parquet's rows)."""
    import pandas as pd

    f = pd.read_parquet(folder / "frame.parquet")
    k = f[(f["metric"] == "kernel_time_ns") & (f["kernel"] != "*") & (f["variant"] != "(outside variants)")]
    g = k.groupby("variant", sort=False)["value"].agg(["size", "sum"])
    return {v: [int(r["size"]), int(r["sum"])] for v, r in g.iterrows()}


def measure(size: int, repeat: int, work: Path, nsys: Path | None, env: dict[str, str], code: Path) -> dict:
    per_copy = kernels_in(SOURCE_RUN / SQLITE)
    repeats = math.ceil(size / per_copy)
    folder = work / f"scaled-{size}"
    t0 = time.perf_counter()
    counts = build_run_folder(SOURCE_RUN, folder, repeats)
    build_s = time.perf_counter() - t0
    export = folder / SQLITE
    mib = export.stat().st_size / 2**20
    print(f"built {folder.name}: {counts}, {mib:.0f} MiB in {build_s:.0f} s", file=sys.stderr)
    iters = json.loads((SOURCE_RUN / "workload.json").read_text())["iters"]
    gprof = [sys.executable, "-m", "orchestrator"]
    res: dict[str, list] = {"report": [], "import": [], "nsys": []} if nsys else {"report": [], "import": []}
    nsys_out = ""
    for i in range(repeat):
        # alternating, so that none always runs with the page cache another warmed
        res["report"].append(run_child(gprof + ["report", str(folder)], env, cwd=code))
        out = work / f"import-{size}-{i}"
        # the export alone, as a user's capture: beside its run folder it would borrow the folder's
        # workload.json, whose iterations count every copy
        res["import"].append(
            run_child(
                gprof
                + [
                    "import",
                    str(export),
                    "--ranges",
                    "gprof@variant:",
                    "--iters",
                    str(iters),
                    "--out",
                    str(out),
                ],
                env,
                cwd=code,
            )
        )
        shutil.rmtree(out)
        if nsys:
            res["nsys"].append(
                run_child(
                    [
                        str(nsys),
                        "stats",
                        "--report",
                        "nvtx_kern_sum",
                        "--format",
                        "csv",
                        "--output",
                        "-",
                        "--force-overwrite",
                        "true",
                        str(export),
                    ]
                )
            )
            nsys_out = res["nsys"][-1][3]
        print(
            f"{size:,} rep {i + 1}: "
            + ", ".join(f"{k} {v[-1][0]:.1f} s {v[-1][2]:.0f} MiB" for k, v in res.items()),
            file=sys.stderr,
        )
    ours = ours_per_variant(folder)
    theirs = nsys_per_range(nsys_out) if nsys else ours
    files = {p.name: p.stat().st_size for p in folder.iterdir() if p.name.startswith(("frame.", "report."))}
    return {
        "size": size,
        "repeats": repeats,
        "counts": counts,
        "mib": mib,
        "build_s": build_s,
        "res": res,
        "same": ours == theirs,
        "ours": ours,
        "theirs": theirs,
        "files": files,
    }


def markdown(results: list[dict], repeat: int, nsys_version: str, code: Path) -> str:
    m = machine(
        ["orchestrator", "reports", "benchmarks"], "the code or benchmarks", sqlite=sqlite3.sqlite_version
    )
    out = [
        f"- date: {m['date']}; commit: {m['commit']}; gprof-orch measured: {code}",
        f"- machine: {m['cpu']}; {m['os']}",
        f"- python {m['python']}, pandas {m['pandas']}, numpy {m['numpy']}, sqlite {m['sqlite']}; {nsys_version}",
        f"- median of {repeat} fresh processes each, alternating; peak RSS from wait4",
        "",
    ]
    for r in results:
        c = r["counts"]
        out += [
            f"### {r['size']:,} kernels: {SOURCE_RUN.relative_to(ROOT)} x {r['repeats']:,}",
            "",
            f"export: {c['CUPTI_ACTIVITY_KIND_KERNEL']:,} kernels, {c['CUPTI_ACTIVITY_KIND_RUNTIME']:,} runtime "
            f"calls, {c.get('CUPTI_ACTIVITY_KIND_MEMCPY', 0):,} memcpy, {c.get('CUPTI_ACTIVITY_KIND_MEMSET', 0):,} "
            f"memset, {c['NVTX_EVENTS']:,} NVTX events, {r['mib']:.0f} MiB (built in {r['build_s']:.0f} s)",
            "",
            "| what | wall s (median) | wall s (min..max) | CPU s | peak RSS MiB |",
            "| --- | ---: | ---: | ---: | ---: |",
        ]
        for key, label in (
            ("report", "gprof-orch report FOLDER"),
            ("import", "gprof-orch import EXPORT"),
            ("nsys", "nsys stats -r nvtx_kern_sum --format csv"),
        ):
            xs = r["res"].get(key)
            if not xs:
                continue
            walls = [x[0] for x in xs]
            out.append(
                f"| {label} | {statistics.median(walls):.2f} | {min(walls):.2f}..{max(walls):.2f} | "
                f"{statistics.median(x[1] for x in xs):.2f} | {statistics.median(x[2] for x in xs):.0f} |"
            )
        files = ", ".join(f"{n} {s / 2**20:.1f} MiB" for n, s in sorted(r["files"].items()))
        each = "; ".join(
            f"{k}: " + ", ".join(f"{x[0]:.1f} s/{x[2]:.0f} MiB" for x in xs) for k, xs in r["res"].items()
        )
        out += [
            "",
            f"each run (wall, peak RSS): {each}",
            "",
            f"files written by `report`: {files}",
            "",
            (
                f"per-variant launches and GPU ns equal to nsys's: **{'yes' if r['same'] else 'NO'}** "
                if "nsys" in r["res"]
                else "per-variant launches and GPU ns: "
            )
            + json.dumps(r["ours"]),
            "",
        ]
    return "\n".join(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--kernels",
        default="3000000,1000000",
        help="comma-separated kernel counts (rounded up to whole copies)",
    )
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--keep", type=Path, default=None, help="build (and keep) the folders here")
    ap.add_argument(
        "--code", type=Path, default=ROOT, help="the gprof-orch checkout to measure (default: this one)"
    )
    ap.add_argument("--no-nsys", action="store_true", help="leave nsys stats out")
    args = ap.parse_args()
    nsys = None if args.no_nsys else find_nsys()
    if nsys is None and not args.no_nsys:
        sys.exit("nsys not found: run scripts/install-nsys.sh or set GPROF_NSYS")
    nsys_version = (
        subprocess.run([str(nsys), "--version"], capture_output=True, text=True).stdout.strip()
        if nsys
        else ""
    )
    code = args.code.resolve()
    env = dict(os.environ, PYTHONPATH=str(code), GPROF_NO_PROGRESS="1")
    env.pop("GPROF_FRAME_CSV", None)  # what a user gets by default
    with tempfile.TemporaryDirectory(prefix="gprof-scale-") as tmp:
        work = args.keep or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        results = []
        for size in (int(float(s)) for s in args.kernels.split(",")):
            results.append(measure(size, args.repeat, work, nsys, env, code))
            if args.keep is None:
                shutil.rmtree(work / f"scaled-{size}")
    print(markdown(results, args.repeat, nsys_version, code))
    if not all(r["same"] for r in results):
        sys.exit(1)


if __name__ == "__main__":
    main()
