"""What the benchmark scripts share: timing one child process on its own, and the machine and
commit a result was measured on."""

from __future__ import annotations

import datetime as dt
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def run_child(
    argv: list[str], env: dict[str, str] | None = None, cwd: Path = ROOT
) -> tuple[float, float, float, str]:
    """(wall s, CPU s, peak RSS MiB, stdout) of one child, measured with wait4 on it alone."""
    with tempfile.TemporaryFile() as out_f, tempfile.TemporaryFile() as err_f:
        t0 = time.perf_counter()
        proc = subprocess.Popen(argv, stdout=out_f, stderr=err_f, env=env, cwd=cwd)
        _, status, ru = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t0
        proc.returncode = os.waitstatus_to_exitcode(status)
        out_f.seek(0)
        err_f.seek(0)
        if proc.returncode != 0:
            sys.exit(f"failed ({proc.returncode}): {' '.join(argv)}\n{err_f.read().decode()[-2000:]}")
        return wall, ru.ru_utime + ru.ru_stime, ru.ru_maxrss / 1024, out_f.read().decode()


def machine(watched: list[str], what: str, **versions: str) -> dict[str, str]:
    """CPU, OS, python, pandas and numpy versions, `versions`, the commit (marked when the
    `watched` paths have uncommitted changes: "+ uncommitted changes to `what`") and the date."""
    import numpy
    import pandas

    cpu = "unknown"
    try:
        cpu = next(ln.split(":", 1)[1].strip() for ln in open("/proc/cpuinfo") if ln.startswith("model name"))
    except (OSError, StopIteration):
        pass
    try:
        git = ["git", "-C", str(ROOT)]
        commit = (
            subprocess.run(
                git + ["rev-parse", "--short", "HEAD"], capture_output=True, text=True
            ).stdout.strip()
            or "none (no commit yet)"
        )
        dirty = subprocess.run(
            git + ["status", "--porcelain", "--", *watched], capture_output=True, text=True
        ).stdout.strip()
        if dirty:
            commit += f" + uncommitted changes to {what}"
    except OSError:
        commit = "unknown"
    mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return {
        "cpu": f"{cpu}, {os.cpu_count()} cores, {mem:.0f} GiB RAM",
        "os": platform.platform(),
        "python": platform.python_version(),
        "pandas": pandas.__version__,
        "numpy": numpy.__version__,
        **versions,
        "commit": commit,
        "date": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
    }
