"""Finding nsys and ncu: an explicit path, then $GPROF_NSYS / $GPROF_NCU, then PATH, then the
places NVIDIA and the project's own installer put them."""
from __future__ import annotations

import glob
import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from orchestrator.errors import ToolNotFoundError

_REPO = Path(__file__).resolve().parent.parent

SEARCH = {
    "nsys": [
        str(_REPO / ".tools/nsys/target-linux-x64/nsys"),  # scripts/install-nsys.sh
        "/opt/nvidia/nsight-systems/*/bin/nsys",
        "/opt/nvidia/nsight-systems/*/target-linux-x64/nsys",
        "/usr/local/cuda/bin/nsys",
        "/usr/local/cuda-*/bin/nsys",
        "/usr/lib/nsight-systems/bin/nsys",
    ],
    "ncu": [
        "/opt/nvidia/nsight-compute/*/ncu",
        "/usr/local/cuda/bin/ncu",
        "/usr/local/cuda-*/bin/ncu",
        "/usr/lib/nsight-compute/ncu",
    ],
}
ENV = {"nsys": "GPROF_NSYS", "ncu": "GPROF_NCU"}
HOW_TO_GET = {
    "nsys": "install Nsight Systems (on Debian: scripts/install-nsys.sh puts it in .tools/nsys), "
            "or point --nsys / $GPROF_NSYS at the nsys executable",
    "ncu": "install Nsight Compute (part of the CUDA toolkit), or point --ncu / $GPROF_NCU at the ncu executable",
}


@dataclass
class Tool:
    name: str
    path: Path
    version: str
    found_via: str


def _executable(p: str | Path) -> bool:
    return os.path.isfile(p) and os.access(p, os.X_OK)


def version_of(path: Path) -> str:
    try:
        out = subprocess.run([str(path), "--version"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError) as exc:
        return f"unknown ({exc})"
    text = out.stdout + out.stderr
    m = re.search(r"(\d{4}\.\d+\.\d+(?:\.\d+)?)", text)
    return m.group(1) if m else (text.strip().splitlines() or ["unknown"])[-1]


def find(name: str, explicit: str | Path | None = None, *, with_version: bool = True) -> Tool:
    """Locate `name` ('nsys' or 'ncu'); ToolNotFoundError says how to get it."""
    candidates: list[tuple[str, str]] = []
    if explicit:
        if not _executable(explicit):
            raise ToolNotFoundError(f"--{name} {explicit} is not an executable file", hint=HOW_TO_GET[name])
        candidates.append((str(explicit), f"--{name}"))
    env = os.environ.get(ENV[name])
    if env and not explicit:
        if not _executable(env):
            raise ToolNotFoundError(f"${ENV[name]}={env} is not an executable file", hint=HOW_TO_GET[name])
        candidates.append((env, f"${ENV[name]}"))
    on_path = shutil.which(name)
    if on_path:
        candidates.append((on_path, "PATH"))
    for pattern in SEARCH[name]:
        for p in sorted(glob.glob(pattern), reverse=True):  # newest version first
            candidates.append((p, "install location"))
    for path, via in candidates:
        if _executable(path):
            p = Path(path)
            return Tool(name, p, version_of(p) if with_version else "", via)
    raise ToolNotFoundError(f"{name} not found (looked at --{name}, ${ENV[name]}, PATH and "
                            f"{', '.join(SEARCH[name])})", hint=HOW_TO_GET[name])
