"""What the orchestrator process can say about this machine without importing torch."""

from __future__ import annotations

import functools
import os
import platform
import re
import shutil
from importlib import metadata
from pathlib import Path

from orchestrator import proc

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
    sha = (proc.output(["git", "rev-parse", "--verify", "HEAD"], cwd=here, timeout=5) or "").strip()
    if not re.fullmatch(r"[0-9a-f]{40}", sha):
        return None  # no git, or a copy without .git (the tree sent to a GPU machine): no commit known
    dirty = proc.output(["git", "status", "--porcelain", "--untracked-files=no"], cwd=here, timeout=5)
    if dirty is None:
        return None
    return sha + ("-dirty" if dirty.strip() else "")


def nvidia_smi() -> dict[str, str] | None:
    """GPU name, driver and memory from nvidia-smi, or None where there is none. Asked once per
    process: a run's parent asks several times (--device auto, nsys's trace flags, the backends
    a GPU needs, the machine record), each a spawn of nvidia-smi, and the GPUs do not change
    under a run."""
    found = _nvidia_smi_once()
    return dict(found) if found is not None else None  # a copy: a caller may change its own


@functools.lru_cache(maxsize=1)
def _nvidia_smi_once() -> dict[str, str] | None:
    exe = shutil.which("nvidia-smi")
    if not exe:
        return None
    out = proc.output(
        [exe, "--query-gpu=name,driver_version,memory.total", "--format=csv,noheader"], timeout=10
    )
    if not out or not out.strip():
        return None
    name, driver, mem = (s.strip() for s in out.splitlines()[0].split(",")[:3])
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
