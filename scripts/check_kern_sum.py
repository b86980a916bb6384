"""Check a program run folder (`gprof-orch exec nsys` / `import`) against nsys's own numbers.

    python scripts/check_kern_sum.py RUN_FOLDER [--nsys PATH]

Per variant (NVTX range): kernel launches and total GPU ns of the run's frame rebuilt by thread
(`--attribute thread`: a kernel counts in the range open on the thread that launched it, as nsys
counts it; the folder's own choice, window by default, is left as it is), beside `nsys stats
--report nvtx_kern_sum` on the run's own export (nested ranges inclusive, as nsys counts them).
Prints both in full and exits 1 when any range differs.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import lzma
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path


def nsys_kern_sum(nsys: str, sqlite: Path) -> dict[str, list[int]]:
    """nvtx_kern_sum's rows summed per range name (nsys names a non-default domain's range
    "domain:text"; a range holding others counts their kernels too)."""
    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp) / "export.sqlite"
        if sqlite.suffix == ".xz":
            copy.write_bytes(lzma.decompress(sqlite.read_bytes()))
        else:
            shutil.copyfile(sqlite, copy)
        out = subprocess.run(
            [nsys, "stats", "--report", "nvtx_kern_sum:base", "--format", "csv", "--output", "-", str(copy)],
            capture_output=True,
            text=True,
            timeout=600,
            check=True,
        ).stdout
    lines = out.splitlines()
    head = next(i for i, ln in enumerate(lines) if "NVTX Range" in ln)
    sums: dict[str, list[int]] = {}
    for row in csv.DictReader(io.StringIO("\n".join(lines[head:]))):
        acc = sums.setdefault(row["NVTX Range"].lstrip(":"), [0, 0])
        acc[0] += int(row["Kern Inst"])
        acc[1] += int(float(row["Total Time (ns)"]))
    return sums


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run")
    ap.add_argument("--nsys", default=shutil.which("nsys") or "nsys")
    args = ap.parse_args()
    from orchestrator.backends.program import frame_from_capture
    from orchestrator.parsers import compressed

    folder = Path(args.run)
    sqlite = next((p for p in (folder / "report.sqlite", folder / "report.sqlite.xz") if p.exists()), None)
    if sqlite is None:
        print(f"no report.sqlite in {folder}", file=sys.stderr)
        return 2
    wman = json.loads((folder / "workload.json").read_text())
    with compressed.plain_file(sqlite) as plain:  # by thread, in memory: the folder keeps its choice
        f = frame_from_capture(plain, {**wman, "attribute": "thread"}, run=folder.name)
    # one kernel_time_ns row per launch; memcpy/memset rows ("[memcpy]") are not kernels
    kt = f[
        (f["metric"] == "kernel_time_ns")
        & ~f["kernel"].astype(str).str.startswith("[")
        & f["variant"].notna()
    ]
    mine = {str(v): [len(g), int(g["value"].sum())] for v, g in kt.groupby("variant")}
    from reports.schema import OUTSIDE

    mine.pop(OUTSIDE, None)
    theirs = nsys_kern_sum(args.nsys, sqlite)
    names = sorted(set(mine) | {n for n in theirs if n in mine or any(n.endswith(":" + m) for m in mine)})
    print(f"{'range':<28} {'launches':>10} {'nsys launches':>14} {'GPU ns':>14} {'nsys GPU ns':>14}  same")
    bad = 0
    for name in names:
        a = mine.get(name, [None, None])
        b = theirs.get(name, [None, None])
        same = a == b
        bad += not same
        print(f"{name:<28} {a[0]!s:>10} {b[0]!s:>14} {a[1]!s:>14} {b[1]!s:>14}  {'yes' if same else 'NO'}")
    print(f"{len(names) - bad} of {len(names)} ranges equal nvtx_kern_sum" + ("" if bad else " (all)"))
    return 1 if bad or not names else 0


if __name__ == "__main__":
    sys.exit(main())
