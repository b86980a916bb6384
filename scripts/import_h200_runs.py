#!/usr/bin/env python3
"""Turn the run folders that scripts/h200_session.sh packed (runs.tar.xz) into test fixtures.

    python scripts/import_h200_runs.py /work/.device/N/runs.tar.xz [--dest tests/fixtures/runs/h200]

Keeps what a report is rebuilt from (manifest.json, workload.json, commands.sh, logs/, the raw
profiler output) and drops what is rebuilt (frame.csv, report.*). A .ncu-rep is stored
xz-compressed (25 MB -> 0.6 MB); tests/conftest.py's `h200_run` fixture unpacks it.
"""

from __future__ import annotations

import argparse
import lzma
import shutil
import tarfile
import tempfile
from pathlib import Path

REBUILT = {"frame.csv", "frame.parquet", "report.csv", "report.json", "report.md", "report.html", ".lock"}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("tarball", type=Path)
    ap.add_argument(
        "--dest", type=Path, default=Path(__file__).resolve().parent.parent / "tests/fixtures/runs/h200"
    )
    ap.add_argument("--only", default="", help="comma-separated run folder names to import")
    args = ap.parse_args()
    only = {s for s in args.only.split(",") if s}
    with tempfile.TemporaryDirectory() as tmp:
        with tarfile.open(args.tarball) as tf:
            tf.extractall(tmp, filter="data")
        for run in sorted(p for p in Path(tmp).iterdir() if p.is_dir()):
            if only and run.name not in only:
                continue
            dest = args.dest / run.name
            shutil.rmtree(dest, ignore_errors=True)
            dest.mkdir(parents=True)
            for f in run.rglob("*"):
                if f.is_dir() or f.name in REBUILT or f.suffix in (".nsys-rep", ".qdstrm"):
                    continue
                rel = f.relative_to(run)
                (dest / rel.parent).mkdir(parents=True, exist_ok=True)
                if f.suffix == ".ncu-rep":
                    with lzma.open(dest / (str(rel) + ".xz"), "wb", preset=9) as out:
                        out.write(f.read_bytes())
                else:
                    shutil.copy2(f, dest / rel)
            size = sum(p.stat().st_size for p in dest.rglob("*") if p.is_file())
            print(f"{dest}: {size / 1e6:.2f} MB")


if __name__ == "__main__":
    main()
