#!/usr/bin/env python3
"""Capture tests/fixtures/nsys/cpu_nvtx0210_gprof/capture.sqlite with a real nsys, on the CPU.

Runs the fixture's program.py under `nsys profile -t nvtx,osrt`, exports SQLite, scrubs what
would identify the capture machine (environment variables, working folders, the repo's path),
and VACUUMs so no deleted text survives in free pages.

Usage: python scripts/capture_nsys_cpu_fixture.py [--nsys PATH] [--out DIR]

nsys is found as $GPROF_NSYS, then on PATH, then at .tools/nsys/target-linux-x64/nsys
(scripts/install-nsys.sh puts it there). The interpreter running this script runs program.py,
and its nvtx must be 0.2.10: nsys 2023.4.4 does not record the ranges of nvtx 0.2.13+.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CASE = ROOT / "tests" / "fixtures" / "nsys" / "cpu_nvtx0210_gprof"
NVTX_VERSION = "0.2.10"
MAX_BYTES = 2 * 1024 * 1024


def find_nsys() -> Path | None:
    """$GPROF_NSYS, then PATH, then the repo's .tools install."""
    candidates = [
        os.environ.get("GPROF_NSYS"),
        shutil.which("nsys"),
        str(ROOT / ".tools" / "nsys" / "target-linux-x64" / "nsys"),
    ]
    for c in candidates:
        if c and os.access(c, os.X_OK):
            return Path(c)
    return None


def run(argv: list[str], *, cwd: Path, env: dict[str, str]) -> None:
    proc = subprocess.run(
        argv, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=300
    )
    if proc.returncode != 0:
        sys.exit(f"failed ({proc.returncode}): {' '.join(argv)}\n{proc.stdout[-3000:]}")


def scrub(db: Path, replacements: dict[str, str]) -> None:
    """Remove the environment and rewrite machine paths in every text column, then VACUUM."""
    con = sqlite3.connect(db)
    try:
        con.execute("DELETE FROM META_DATA_CAPTURE WHERE name LIKE '%ENVIRONMENT_VARIABLE%'")
        con.execute(
            "UPDATE TARGET_INFO_SYSTEM_ENV SET value = '(environment removed)' "
            "WHERE name = 'DeviceEnvironment'"
        )
        con.execute("UPDATE TARGET_INFO_SYSTEM_ENV SET value = 'vm' WHERE name = 'Hostname'")
        con.execute("UPDATE META_DATA_EXPORT SET value = 'vm' WHERE name = 'EXPORT_HOST'")
        # Environment strings that OS-runtime tracing picked up (getenv/putenv arguments).
        con.execute(
            "UPDATE StringIds SET value = '(environment removed)' "
            "WHERE value GLOB '[A-Za-z_]*=*' AND value NOT GLOB '* *'"
        )
        tables = [r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        for table in tables:
            for _, col, ctype, *_ in con.execute(f'PRAGMA table_info("{table}")').fetchall():
                if ctype.upper() != "TEXT":
                    continue
                for old, new in replacements.items():
                    con.execute(
                        f'UPDATE "{table}" SET "{col}" = replace("{col}", ?, ?) WHERE instr("{col}", ?) > 0',
                        (old, new, old),
                    )
        con.commit()
        con.execute("VACUUM")
    finally:
        con.close()


def replacements(nsys: Path, work: Path) -> dict[str, str]:
    """Machine paths -> neutral ones, longest first (the nsys install may sit inside the repo)."""
    pairs = {
        str(nsys.resolve().parent.parent): "/opt/nsys",
        str(ROOT): "/repo",
        str(work): "/tmp/capture",
        sys.base_prefix: "/opt/python",
        sys.prefix: "/opt/python",
    }
    return dict(sorted(pairs.items(), key=lambda kv: -len(kv[0])))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nsys", type=Path, default=None)
    ap.add_argument("--out", type=Path, default=CASE)
    args = ap.parse_args()

    nsys = args.nsys or find_nsys()
    if nsys is None:
        sys.exit("nsys not found: run scripts/install-nsys.sh or set GPROF_NSYS")
    have = importlib.metadata.version("nvtx")
    if have != NVTX_VERSION:
        sys.exit(f"nvtx {have} is installed; nsys 2023.4.4 records ranges of nvtx=={NVTX_VERSION} only")

    out = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="gprof-capture-") as tmp:
        work = Path(tmp)
        shutil.copy(CASE / "program.py", work / "program.py")
        # A bare environment: nsys stores the profiled process's environment in the report.
        env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": str(work), "LANG": "C.UTF-8", "TMPDIR": "/tmp"}
        run(
            [
                str(nsys),
                "profile",
                "-t",
                "nvtx,osrt",
                "--sample=none",
                "--cpuctxsw=none",
                "-o",
                "capture",
                "--force-overwrite",
                "true",
                sys.executable,
                "program.py",
            ],
            cwd=work,
            env=env,
        )
        run(
            [
                str(nsys),
                "export",
                "--type",
                "sqlite",
                "-o",
                "capture.sqlite",
                "--force-overwrite",
                "true",
                "capture.nsys-rep",
            ],
            cwd=work,
            env=env,
        )
        # longest paths first: the nsys install may sit inside the repo
        scrub(work / "capture.sqlite", replacements(nsys, work))
        size = (work / "capture.sqlite").stat().st_size
        if size > MAX_BYTES:
            sys.exit(f"capture.sqlite is {size} bytes, more than the {MAX_BYTES} a fixture may take")
        shutil.copy(work / "capture.sqlite", out / "capture.sqlite")
    version = subprocess.run([str(nsys), "--version"], capture_output=True, text=True).stdout.strip()
    print(f"{out / 'capture.sqlite'}: {size} bytes; {version}; nvtx {have}; python {sys.version.split()[0]}")


if __name__ == "__main__":
    main()
