"""What the benchmark scripts share: timing one child process on its own."""
from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def run_child(argv: list[str], env: dict[str, str] | None = None, cwd: Path = ROOT) -> tuple[float, float, float, str]:
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
