"""`gprof-orch import FILE.ncu-rep` and `gprof-orch exec ncu -- CMD`: an Nsight Compute report
made by anyone, or a program run under ncu, reported per NVTX range as `gprof-orch ncu` reports
its own. Here the run is launched: the request, the folder's name, its step (the copy of the
report, or ncu over the program). Which ranges are variants, and the synthetic workload.json the
report is built from, are the program-ncu backend's report hook (backends/program_ncu.py). The
run folder is an `ncu` one: the report, a synthetic workload.json, the ncu backend's parse and
the same table.
"""

from __future__ import annotations

import shutil
from functools import partial
from pathlib import Path
from typing import Any

from orchestrator import backends
from orchestrator.backends.ncu import REPORT
from orchestrator.backends.program_ncu import ncu_filter
from orchestrator.capture_request import PROGRAM_NCU, ProgramRequest
from orchestrator.errors import UsageError
from orchestrator.execution import Launch, run_request
from orchestrator.parsers import compressed


def import_ncu(
    src: Path, ranges: str | None, borrowed: dict[str, Any] | None, cli_argv, options: dict[str, Any]
):
    """import_capture() of a `.ncu-rep` (also `.xz`/`.gz`): an `ncu` run folder whose variants
    are the report's NVTX ranges. Raises ParseError (exit 4) when no kernel is in a matching
    range, naming the ranges the report holds."""
    domain, prefix = ncu_filter(ranges, borrowed)
    if options.get("name") is None and borrowed and isinstance(borrowed.get("workload"), str):
        options["name"] = borrowed["workload"]  # so that `compare` pairs it with the run it came from
    if options.pop("nsys", None) is not None:
        raise UsageError("--nsys applies to nsys captures, not to a .ncu-rep")
    if options.pop("attribute", None) is not None:
        raise UsageError(
            "--attribute applies to nsys captures; a .ncu-rep holds each kernel's NVTX ranges as "
            "ncu saw them on the thread that launched it"
        )
    req = ProgramRequest(
        backend=PROGRAM_NCU, ranges=ranges, capture=str(src.resolve()), given=str(src), tool="nsys", **options
    ).validate()
    name = req.workload_name()
    program = {"capture": str(src.resolve()), "tool": "ncu", "ranges": f"{domain or ''}@{prefix}"}
    suffix = compressed.suffix_of(src)

    def step(rf) -> None:
        dest = rf.path / (REPORT + suffix)
        shutil.copyfile(src, dest)
        rf.add_command("import", ["cp", str(src), str(dest)])

    facts = dict(kind="import", notes=[], program=program)
    return run_request(req, cli_argv, launch=Launch("ncu", name, {}, step, facts))


def profile_program_ncu(argv: list[str], *, ranges: str | None = None, cli_argv=None, **options: Any):
    """`gprof-orch exec ncu -- CMD`: run CMD under Nsight Compute (every kernel it launches is
    replayed and measured: limit them with `--ncu-arg=--launch-count=N` or `-k REGEX`) and report
    it per NVTX range as `import` reports a `.ncu-rep`. Default ranges: every innermost range of
    any domain. `ncu=`, `ncu_args=`: the program-ncu backend's options. A non-zero exit of ncu or
    the program fails the run (ToolFailedError, exit 1); the folder keeps whatever report ncu
    wrote (`gprof-orch import` reads it)."""
    be = backends.get(PROGRAM_NCU)  # its commands() and execute() run ncu, as `exec nsys`'s backend does
    req = ProgramRequest.of(be, argv=list(argv), tool="ncu", ranges=ranges, **options).validate()
    domain, prefix = ncu_filter(ranges, None) if ranges is not None else (None, "")
    found = be.require(req)  # missing: fails before a folder exists
    name = req.workload_name()
    program = {"argv": req.argv, "tool": "ncu", "ranges": f"{domain or '*'}@{prefix}"}

    facts = dict(kind="exec", notes=[], program=program)
    return run_request(req, cli_argv, launch=Launch("ncu", name, found, partial(be.execute, req), facts))
