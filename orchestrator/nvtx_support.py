"""Whether Nsight Systems records a program's `nvtx` ranges: the nvtx package version a program
would import, against the nsys that runs it (`exec nsys` warns before the run; `doctor` says it)."""

from __future__ import annotations

import re
import sys
from pathlib import Path

from orchestrator import proc


def _version_tuple(text: str | None) -> tuple[int, ...]:
    return tuple(int(x) for x in re.findall(r"\d+", text or "")[:3])


def nvtx_problem(nvtx_version: str | None, nsys_version: str | None) -> str | None:
    """Why nsys would record none of the program's `nvtx` ranges, or None.

    Measured (docs/nsight-facts.md): nsys 2023.4.4 drops the ranges of nvtx 0.2.13 and newer
    (0.2.10 is recorded; torch.cuda.nvtx always is).

    Example:
        >>> nvtx_problem("0.2.17", "2023.4.4.54")
        'the nvtx package 0.2.17 ...'
    """
    if not nvtx_version or not nsys_version:
        return None
    if _version_tuple(nsys_version)[:1] == (2023,) and _version_tuple(nvtx_version) >= (0, 2, 13):
        return (
            f"the nvtx package {nvtx_version} emits ranges that nsys {nsys_version} does not record (only "
            "their domains' create/destroy events reach the report): its nvtx ranges will be missing; "
            "pip install nvtx==0.2.10 or use a newer nsys (torch.cuda.nvtx ranges are recorded either way)"
        )
    return None


def program_nvtx_version(argv: list[str], timeout: float = 30) -> str | None:
    """The nvtx package version the program's Python would import (None: not Python, or no nvtx)."""
    exe = argv[0]
    if not re.fullmatch(r"python[0-9.]*", Path(exe).name) and exe != sys.executable:
        return None
    out = proc.output(
        [exe, "-c", "import importlib.metadata as m; print(m.version('nvtx'))"], timeout=timeout
    )
    return (out or "").strip() or None
