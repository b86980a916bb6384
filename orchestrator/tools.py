"""Finding a backend's tool: an explicit path, then its variable ($GPROF_NSYS, $GPROF_NCU), then
PATH, then the places NVIDIA and the project's own installer put them. nsys and ncu are known
here; any other tool is looked for by its name alone (--<name>, $GPROF_<NAME>, PATH), or by the
ToolSpec its backend declares."""

from __future__ import annotations

import glob
import os
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

from orchestrator import proc
from orchestrator.errors import ToolNotFoundError, ToolTimeoutError

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
# how long `<tool> --version` may take at most (less when --timeout is shorter)
VERSION_TIMEOUT_S = 60.0
ENV = {"nsys": "GPROF_NSYS", "ncu": "GPROF_NCU"}
HOW_TO_GET = {
    "nsys": "install Nsight Systems (on Debian: scripts/install-nsys.sh puts it in .tools/nsys), "
    "or point --nsys / $GPROF_NSYS at the nsys executable",
    "ncu": "install Nsight Compute (part of the CUDA toolkit), or point --ncu / $GPROF_NCU at the ncu executable",
}


@dataclass(frozen=True)
class ToolSpec:
    """Where a tool is looked for: its variable, the install places (glob patterns), and what
    to do when it is missing."""

    name: str
    env: str
    search: tuple[str, ...] = ()
    how_to_get: str = ""


def spec_for(name: str) -> ToolSpec:
    """The ToolSpec of `name`: nsys's and ncu's from the tables above, else by its name alone."""
    return ToolSpec(
        name,
        ENV.get(name, f"GPROF_{name.upper()}"),
        tuple(SEARCH.get(name, ())),
        HOW_TO_GET.get(
            name, f"install {name}, or point --{name} / ${ENV.get(name, 'GPROF_' + name.upper())} at it"
        ),
    )


@dataclass
class Tool:
    name: str
    path: Path
    version: str
    found_via: str


def _executable(p: str | Path) -> bool:
    return os.path.isfile(p) and os.access(p, os.X_OK)


def version_of(path: Path, timeout: float | None = None) -> str:
    """`path --version`, run like every child (orchestrator.proc: own process group, ended on
    timeout) within min(VERSION_TIMEOUT_S, timeout): a tool that hangs is a ToolTimeoutError."""
    import tempfile

    limit = VERSION_TIMEOUT_S if timeout is None else min(VERSION_TIMEOUT_S, timeout)
    with tempfile.TemporaryDirectory(prefix="gprof-version-") as tmp:
        try:
            res = proc.run([str(path), "--version"], log_dir=Path(tmp), name="version", timeout=limit)
        except ToolNotFoundError as exc:
            return f"unknown ({exc.message})"
        except ToolTimeoutError as exc:
            raise ToolTimeoutError(
                f"`{path} --version` did not answer within {limit:g} s; it was ended",
                argv=exc.argv,
                log_tail=exc.log_tail,
                hint=f"check that {path} works: run it with --version yourself",
            ) from None
        text = res.stdout.read_text(errors="replace") + res.stderr.read_text(errors="replace")
    m = re.search(r"(\d{4}\.\d+\.\d+(?:\.\d+)?)", text)
    return m.group(1) if m else (text.strip().splitlines() or ["unknown"])[-1]


def find(
    tool: str | ToolSpec,
    explicit: str | Path | None = None,
    *,
    with_version: bool = True,
    timeout: float | None = None,
) -> Tool:
    """Locate `tool` (a name, or the ToolSpec a backend declares); ToolNotFoundError says how
    to get it. Its version probe is bounded by `timeout` (the run's --timeout) and VERSION_TIMEOUT_S."""
    spec = spec_for(tool) if isinstance(tool, str) else tool
    name = spec.name
    candidates: list[tuple[str, str]] = []
    if explicit:
        if not _executable(explicit):
            raise ToolNotFoundError(f"--{name} {explicit} is not an executable file", hint=spec.how_to_get)
        candidates.append((str(explicit), f"--{name}"))
    env = os.environ.get(spec.env)
    if env and not explicit:
        if not _executable(env):
            raise ToolNotFoundError(f"${spec.env}={env} is not an executable file", hint=spec.how_to_get)
        candidates.append((env, f"${spec.env}"))
    on_path = shutil.which(name)
    if on_path:
        candidates.append((on_path, "PATH"))
    for pattern in spec.search:
        for p in sorted(glob.glob(pattern), reverse=True):  # newest version first
            candidates.append((p, "install location"))
    for path, via in candidates:
        if _executable(path):
            p = Path(os.path.abspath(path))  # Path("./nsys") would be "nsys", looked up on PATH
            return Tool(name, p, version_of(p, timeout) if with_version else "", via)
    raise ToolNotFoundError(
        f"{name} not found (looked at --{name}, ${spec.env}, PATH"
        + (f" and {', '.join(spec.search)})" if spec.search else ")"),
        hint=spec.how_to_get,
    )
