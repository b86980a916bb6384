"""What the orchestrator process can say about this machine without importing torch."""
from __future__ import annotations

import os
import platform
import re
import shutil
import subprocess
from importlib import metadata
from pathlib import Path

PACKAGES = ("gprof-orch", "torch", "triton", "nvtx", "pandas", "click", "ncu-report", "numba", "numba-cuda")


def package_versions() -> dict[str, str | None]:
    out: dict[str, str | None] = {}
    for name in PACKAGES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = None
    return out


def git_commit(cwd: Path | None = None) -> str | None:
    """$GPROF_COMMIT when set (a copy of the tree sent to a GPU machine may carry a stale .git:
    seen on the H200, whose copy reported a commit four behind), else the checkout's commit
    (with -dirty), looked up beside the package, or None."""
    if os.environ.get("GPROF_COMMIT"):
        return os.environ["GPROF_COMMIT"]
    here = cwd or Path(__file__).resolve().parent.parent
    try:
        out = subprocess.run(["git", "rev-parse", "--verify", "HEAD"], cwd=here, capture_output=True, text=True,
                             timeout=5)
        sha = out.stdout.strip()
        if out.returncode != 0 or not re.fullmatch(r"[0-9a-f]{40}", sha):
            # a copy without .git (e.g. the tree sent to a GPU machine) says its commit here
            return os.environ.get("GPROF_COMMIT") or None
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=here,
                               capture_output=True, text=True, timeout=5).stdout.strip()
        return sha + ("-dirty" if dirty else "")
    except (OSError, subprocess.SubprocessError):
        return None


def nvidia_smi() -> dict[str, str] | None:
    """GPU name, driver and memory from nvidia-smi, or None where there is none."""
    exe = shutil.which("nvidia-smi")
    if not exe:
        return None
    try:
        out = subprocess.run([exe, "--query-gpu=name,driver_version,memory.total", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    if out.returncode != 0 or not out.stdout.strip():
        return None
    name, driver, mem = (s.strip() for s in out.stdout.splitlines()[0].split(",")[:3])
    return {"gpu": name, "driver": driver, "memory": mem}


def machine() -> dict:
    return {
        "hostname": platform.node(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "packages": package_versions(),
        "git_commit": git_commit(),
        "nvidia_smi": nvidia_smi(),
    }
