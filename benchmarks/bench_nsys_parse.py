#!/usr/bin/env python3
"""Benchmark gprof-orch's nsys SQLite parser against `nsys stats --report nvtx_kern_sum`.

Builds an export with --kernels kernel launches inside NVTX ranges by replicating rows of a
real export captured on an H200 (tests/fixtures/nsys/h200_nvtx_variants_nvtx0217): its
"D_torch_push" (push/pop) and "E_torch_startend" (start/end) ranges each hold one launch unit
(cuKernelGetName + cudaLaunchKernel + the kernel) and one cudaDeviceSynchronize. Each new range
is a copy of one of them holding --per-range launch units; every copied row is shifted in time
and correlationId consistently, so launches stay inside their ranges and ids stay unique.

Then it times, on the same file, median of --repeat runs, each a fresh process:
  - gprof-orch: read_export + attribute_kernels(domain=None, prefix="") + summarize
  - nsys stats --report nvtx_kern_sum --format csv (nsys's own per-range kernel summary)
checks that both give the same per-range launch counts and total GPU ns, and prints a markdown
report (machine, date, git commit) to stdout.

Usage: python benchmarks/bench_nsys_parse.py [--kernels 1000000] [--per-range 100] [--repeat 3]
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import os
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))
from benchlib import machine, run_child  # noqa: E402

SOURCE = ROOT / "tests/fixtures/nsys/h200_nvtx_variants_nvtx0217/nvtx_variants_nvtx0217.sqlite"
TEMPLATES = ("D_torch_push", "E_torch_startend")

OURS = """
import json, sys, time
t0 = time.perf_counter()
from orchestrator.parsers.nsys import attribute_kernels, read_export, summarize, variant_ranges
t1 = time.perf_counter()
ex = read_export(sys.argv[1])
t2 = time.perf_counter()
att = attribute_kernels(ex, domain=None, prefix="")
t3 = time.perf_counter()
s = summarize(att, variant_ranges(ex, None, ""))
t4 = time.perf_counter()
# nsys names activity outside every range ""
rows = {(r.variant if isinstance(r.variant, str) else ""): [int(r.launches), int(r.gpu_time_total_ns)]
        for r in s.itertuples()}
print(json.dumps({"import": t1 - t0, "read": t2 - t1, "attribute": t3 - t2, "summarize": t4 - t3, "rows": rows}))
"""


def find_nsys() -> Path | None:
    for c in (
        os.environ.get("GPROF_NSYS"),
        shutil.which("nsys"),
        str(ROOT / ".tools/nsys/target-linux-x64/nsys"),
    ):
        if c and os.access(c, os.X_OK):
            return Path(c)
    return None


def build(dst: Path, kernels: int, per_range: int) -> dict[str, int]:
    """Write the replicated export to dst; return its row counts."""
    shutil.copyfile(SOURCE, dst)
    os.chmod(dst, 0o644)
    con = sqlite3.connect(dst)
    con.execute("PRAGMA journal_mode = OFF")
    con.execute("PRAGMA synchronous = OFF")
    rt_cols = [r[1] for r in con.execute("PRAGMA table_info(CUPTI_ACTIVITY_KIND_RUNTIME)")]
    k_cols = [r[1] for r in con.execute("PRAGMA table_info(CUPTI_ACTIVITY_KIND_KERNEL)")]
    n_cols = [r[1] for r in con.execute("PRAGMA table_info(NVTX_EVENTS)")]
    stride = con.execute("SELECT max(correlationId) + 1 FROM CUPTI_ACTIVITY_KIND_RUNTIME").fetchone()[0]
    t_end = max(
        con.execute(f"SELECT max(end) FROM {t}").fetchone()[0] or 0
        for t in ("CUPTI_ACTIVITY_KIND_RUNTIME", "CUPTI_ACTIVITY_KIND_KERNEL", "NVTX_EVENTS")
    )

    templates = []
    for name in TEMPLATES:
        rowid, rs, re_ = con.execute(
            "SELECT rowid, start, end FROM NVTX_EVENTS WHERE text = ? AND end IS NOT NULL", (name,)
        ).fetchone()
        calls = con.execute(
            "SELECT r.rowid, r.start, r.end, s.value FROM CUPTI_ACTIVITY_KIND_RUNTIME r JOIN StringIds s "
            "ON s.id = r.nameId WHERE r.start >= ? AND r.end <= ? ORDER BY r.start",
            (rs, re_),
        ).fetchall()
        unit = [c for c in calls if "Synchronize" not in c[3]]
        tail = [c for c in calls if "Synchronize" in c[3]]
        # pace launch units as the template did: its lead-in plus its CPU-side span
        period = (unit[-1][2] - unit[0][1]) + (unit[0][1] - rs)
        templates.append(
            {
                "range": rowid,
                "rs": rs,
                "re": re_,
                "unit": [c[0] for c in unit],
                "tail": [c[0] for c in tail],
                "period": period,
                "span": (re_ - rs) + (per_range - 1) * period,
            }
        )
    n_ranges = kernels // per_range
    range_period = max(t["span"] for t in templates) + 10_000
    base0 = t_end + 1_000_000

    # shifts: one row per launch unit (u) and one per range (r), in temp tables SQLite joins
    con.execute("CREATE TEMP TABLE u (tmpl INTEGER, dt INTEGER, dcorr INTEGER)")
    con.execute(
        "CREATE TEMP TABLE r (tmpl INTEGER, dstart INTEGER, dend INTEGER, dcorr INTEGER, idx INTEGER)"
    )
    r_idx = np.arange(n_ranges)
    tmpl = r_idx % len(templates)
    rs = np.array([templates[i]["rs"] for i in tmpl])
    per = np.array([templates[i]["period"] for i in tmpl])
    dstart = base0 + r_idx * range_period - rs
    dend = dstart + (per_range - 1) * per
    r_dcorr = (kernels + r_idx + 1) * stride
    con.executemany(
        "INSERT INTO r VALUES (?, ?, ?, ?, ?)",
        zip(tmpl.tolist(), dstart.tolist(), dend.tolist(), r_dcorr.tolist(), r_idx.tolist()),
    )
    u_range = np.repeat(r_idx, per_range)
    u_j = np.tile(np.arange(per_range), n_ranges)
    u_dt = dstart[u_range] + u_j * per[u_range]
    u_dcorr = (np.arange(n_ranges * per_range) + 1) * stride
    con.executemany(
        "INSERT INTO u VALUES (?, ?, ?)", zip(tmpl[u_range].tolist(), u_dt.tolist(), u_dcorr.tolist())
    )

    def shifted(cols: list[str], shift: str, corr: str | None) -> str:
        out = []
        for c in cols:
            if c in ("start", "end"):
                out.append(f"t.{c} + {shift}")
            elif c == "correlationId" and corr:
                out.append(f"t.correlationId + {corr}")
            else:
                out.append(f"t.{c}")
        return ", ".join(out)

    for i, t in enumerate(templates):
        unit_ids = ",".join(map(str, t["unit"]))
        tail_ids = ",".join(map(str, t["tail"]))
        con.execute(
            f"INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME ({', '.join(rt_cols)}) "
            f"SELECT {shifted(rt_cols, 'u.dt', 'u.dcorr')} FROM u JOIN CUPTI_ACTIVITY_KIND_RUNTIME t "
            f"ON t.rowid IN ({unit_ids}) WHERE u.tmpl = {i} ORDER BY u.rowid, t.start"
        )
        con.execute(
            f"INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL ({', '.join(k_cols)}) "
            f"SELECT {shifted(k_cols, 'u.dt', 'u.dcorr')} FROM u JOIN CUPTI_ACTIVITY_KIND_KERNEL t "
            f"ON t.correlationId IN (SELECT correlationId FROM CUPTI_ACTIVITY_KIND_RUNTIME "
            f"WHERE rowid IN ({unit_ids})) WHERE u.tmpl = {i} ORDER BY u.rowid"
        )
        if tail_ids:
            con.execute(
                f"INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME ({', '.join(rt_cols)}) "
                f"SELECT {shifted(rt_cols, 'r.dend', 'r.dcorr')} FROM r JOIN CUPTI_ACTIVITY_KIND_RUNTIME t "
                f"ON t.rowid IN ({tail_ids}) WHERE r.tmpl = {i}"
            )
        ncols = [
            "t.start + r.dstart"
            if c == "start"
            else "t.end + r.dend"
            if c == "end"
            else "t.rangeId + r.idx + 1000"
            if c == "rangeId"
            else f"t.{c}"
            for c in n_cols
        ]
        con.execute(
            f"INSERT INTO NVTX_EVENTS ({', '.join(n_cols)}) SELECT {', '.join(ncols)} "
            f"FROM r JOIN NVTX_EVENTS t ON t.rowid = {t['range']} WHERE r.tmpl = {i}"
        )
    con.commit()
    counts = {
        t: con.execute(f"SELECT count(*) FROM {t}").fetchone()[0]
        for t in ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_RUNTIME", "NVTX_EVENTS")
    }
    con.execute("DROP TABLE u")
    con.execute("DROP TABLE r")
    con.close()
    return counts


def nsys_rows(csv_text: str) -> dict[str, list[int]]:
    """Per range name: [kernel instances, total ns], summed over kernel names and threads."""
    lines = csv_text.splitlines()
    start = next(
        i for i, ln in enumerate(lines) if ln.startswith('"NVTX Range"') or ln.startswith("NVTX Range")
    )
    rows: dict[str, list[int]] = {}
    for rec in csv.DictReader(io.StringIO("\n".join(lines[start:]))):
        acc = rows.setdefault(rec["NVTX Range"], [0, 0])
        acc[0] += int(rec["Kern Inst"])
        acc[1] += int(rec["Total Time (ns)"])
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kernels", type=int, default=1_000_000)
    ap.add_argument("--per-range", type=int, default=100)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--keep", type=Path, default=None, help="write the built export here and keep it")
    args = ap.parse_args()
    if args.kernels % (args.per_range * len(TEMPLATES)):
        sys.exit("--kernels must be a multiple of 2 x --per-range")
    nsys = find_nsys()
    if nsys is None:
        sys.exit("nsys not found: run scripts/install-nsys.sh or set GPROF_NSYS")
    nsys_version = subprocess.run([str(nsys), "--version"], capture_output=True, text=True).stdout.strip()

    with tempfile.TemporaryDirectory(prefix="gprof-bench-") as tmp:
        db = args.keep or Path(tmp) / "bench.sqlite"
        t0 = time.perf_counter()
        counts = build(db, args.kernels, args.per_range)
        build_s = time.perf_counter() - t0
        size_mb = db.stat().st_size / 2**20
        print(f"built {db.name}: {counts} rows, {size_mb:.0f} MiB in {build_s:.1f} s", file=sys.stderr)

        env = dict(os.environ, PYTHONPATH=str(ROOT))
        ours, theirs = [], []
        ours_out = theirs_out = ""
        for i in range(args.repeat):
            # alternate, so neither side always runs with the page cache the other warmed
            ours.append(run_child([sys.executable, "-c", OURS, str(db)], env))
            theirs.append(
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
                        str(db),
                    ]
                )
            )
            ours_out, theirs_out = ours[-1][3], theirs[-1][3]
            print(
                f"rep {i + 1}: gprof-orch {ours[-1][0]:.2f} s, nsys stats {theirs[-1][0]:.2f} s",
                file=sys.stderr,
            )

    phases = json.loads(ours_out)
    mine = {k: v for k, v in phases["rows"].items()}
    nsys_r = nsys_rows(theirs_out)
    same = mine == nsys_r
    med = lambda xs, k: statistics.median(x[k] for x in xs)  # noqa: E731
    m = machine(
        ["orchestrator/parsers", "benchmarks"], "the parser or benchmarks", sqlite=sqlite3.sqlite_version
    )
    rows = [
        ("gprof-orch: read_export + attribute_kernels + summarize (fresh process)", ours),
        ("nsys stats --report nvtx_kern_sum --format csv", theirs),
    ]
    print(
        f"## nsys SQLite parsing: {args.kernels:,} kernels in {args.kernels // args.per_range:,} NVTX ranges\n"
    )
    print(f"- date: {m['date']}; commit: {m['commit']}")
    print(f"- machine: {m['cpu']}; {m['os']}")
    print(
        f"- python {m['python']}, pandas {m['pandas']}, numpy {m['numpy']}, sqlite {m['sqlite']}; {nsys_version}"
    )
    print(
        f"- export: {counts['CUPTI_ACTIVITY_KIND_KERNEL']:,} kernels, "
        f"{counts['CUPTI_ACTIVITY_KIND_RUNTIME']:,} runtime calls, {counts['NVTX_EVENTS']:,} NVTX events, "
        f"{size_mb:.0f} MiB; built by replicating {SOURCE.relative_to(ROOT)}"
    )
    print(f"- median of {args.repeat} runs, each a fresh process, alternating\n")
    print("| what | wall s (median) | wall s (min..max) | CPU s | peak RSS MiB |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for label, xs in rows:
        walls = [x[0] for x in xs]
        print(
            f"| {label} | {statistics.median(walls):.2f} | {min(walls):.2f}..{max(walls):.2f} | "
            f"{med(xs, 1):.2f} | {med(xs, 2):.0f} |"
        )
    print(
        f"\ngprof-orch phases (last run): import {phases['import']:.2f} s, read_export {phases['read']:.2f} s, "
        f"attribute_kernels {phases['attribute']:.2f} s, summarize {phases['summarize']:.2f} s"
    )
    print(
        f'\nper-range launches and total GPU ns equal to nsys\'s ("" = outside every range): '
        f"**{'yes' if same else 'NO'}** "
        f"({json.dumps(mine, sort_keys=True)})"
    )
    if not same:
        print(f"\nnsys: {json.dumps(nsys_r, sort_keys=True)}")
        sys.exit(1)


if __name__ == "__main__":
    main()
