"""Anyone's program, anyone's capture: each NVTX range becomes a variant.

`import_capture(path)` builds a run folder around an existing Nsight Systems capture (a
`.nsys-rep`, or its SQLite export, `.xz`/`.gz` too); `profile_program(argv)` runs a program
under nsys and does the same with what it recorded. Either way the ranges picked by a
`RangeFilter` (`--ranges DOMAIN@PREFIX`; by default every range, nested ones too) are the variants of
a synthetic workload.json, so `report`, `compare` and the HTML report work on the folder as on
any run. The run folder's backend is `program` (orchestrator/backends/program.py).

Ranges from the `nvtx` package (annotate as a context manager or a decorator, push/pop,
start/end) and from `torch.cuda.nvtx` (the default domain) are all NVTX ranges to nsys; which
ones nsys 2023.4.4 drops is said before the run (`nvtx_problem`).

Which ranges are variants is orchestrator/capture_ranges.py; the synthetic workload.json,
orchestrator/capture_manifest.py.

Example:
    >>> from orchestrator import import_capture, profile_program
    >>> run = profile_program(["python", "train.py", "--steps", "50"], ranges="@step")
    >>> run.table[["variant", "samples", "time_median_us"]]
    >>> import_capture("report.nsys-rep").table        # every range, nested ones too
"""

from __future__ import annotations

import shutil
import sys
from functools import partial
from pathlib import Path
from typing import Any

from orchestrator import backends
from orchestrator.capture_manifest import TRACE, sibling_workload, trace_prefix
from orchestrator.capture_ncu import import_ncu
from orchestrator.capture_request import BACKEND, ProgramRequest, capture_kind
from orchestrator.errors import ParseError, UsageError
from orchestrator.execution import Launch, run_request
from orchestrator.nvtx_support import nvtx_problem, program_nvtx_version
from orchestrator.parsers import compressed

# what `gprof-orch exec` and `import` call as capture.X, beside the library calls
__all__ = ["ProgramRequest", "import_capture", "profile_program"]

# --------------------------------------------------------------------------- the library calls


def profile_program(argv: list[str], tool: str = "nsys", *, ranges: str | None = None, **options: Any):
    """Run `argv` under `tool` (nsys) and report it per NVTX range: each range named by
    `ranges` ("DOMAIN@PREFIX"; default: every range, nested ones too) is a variant, each of its
    instances one iteration (or `iters` of them). Returns the same Run a built-in run does;
    raises as a built-in run does (a non-zero exit of the program: RunFailedError, after the
    report is written; --timeout: ToolTimeoutError; Ctrl-C: InterruptedRunError).

    Example:
        >>> run = profile_program(["python", "train.py", "--steps", "50"], ranges="@step")
        >>> run.table[["variant", "samples", "time_median_us", "kernels"]]
    """

    cli_argv = options.pop("cli_argv", None)
    be = backends.get(BACKEND)
    req = ProgramRequest.of(be, argv=list(argv), tool=tool, ranges=ranges, **options).validate()
    tools = be.require(req)  # a missing nsys fails here, before a run folder exists
    notes = []
    problem = nvtx_problem(program_nvtx_version(req.argv), tools.get("nsys_version"))
    if problem:
        print(f"gprof-orch: warning: {problem}", file=sys.stderr, flush=True)
        notes.append(problem)

    program = {"argv": req.argv, "tool": req.tool, "ranges": req.filter.spec}
    launch = Launch(
        BACKEND,
        req.workload_name(),
        tools,
        partial(be.execute, req),
        dict(kind="exec", notes=notes, program=program),
    )
    return run_request(req, cli_argv, launch=launch)


def import_capture(path: str | Path, *, ranges: str | None = None, **options: Any):
    """Build a run folder around an existing capture (`.nsys-rep`, or its `.sqlite` export,
    also `.xz`/`.gz`) and report it per NVTX range as profile_program() does. A capture that
    sits in a gprof-orch run folder keeps that run's ranges, iterations, labels and bytes.

    Raises ParseError (exit 4) when the capture holds no matching range, naming those it holds.

    Example:
        >>> import_capture("report.nsys-rep", ranges="gprof@variant:").table
    """

    cli_argv = options.pop("cli_argv", None)
    src = Path(path)
    if not src.is_file():
        raise ParseError(src, "no such file")
    kind = capture_kind(src)
    borrowed = sibling_workload(src)
    if kind == "torch-trace":
        return _import_trace(src, ranges, borrowed, cli_argv, options)
    if kind == "ncu-rep":
        return import_ncu(src, ranges, borrowed, cli_argv, options)
    nv = (borrowed or {}).get("nvtx") or {}
    if ranges is None and borrowed and nv.get("prefix") is not None and nv.get("api") != "capture":
        ranges = f"{nv.get('domain') or ''}@{nv['prefix']}"
    if options.get("iters") is None and borrowed and isinstance(borrowed.get("iters"), int):
        options["iters"] = (
            borrowed["iters"] if nv.get("api") != "capture" else borrowed.get("iters_per_range")
        )
    if options.get("name") is None and borrowed and isinstance(borrowed.get("workload"), str):
        options["name"] = borrowed["workload"]  # so that `compare` pairs it with the run it came from
    if options.get("attribute") is None and borrowed and isinstance(borrowed.get("attribute"), str):
        options["attribute"] = borrowed["attribute"]  # the view the run it came from was reported in
    be = backends.get(BACKEND)
    req = ProgramRequest.of(
        be, ranges=ranges, capture=str(src.resolve()), given=str(src), **options
    ).validate()
    tools = be.require(req) if kind == "nsys-rep" else {}
    program = {"capture": str(src.resolve()), "tool": "nsys", "ranges": req.filter.spec}

    launch = Launch(
        BACKEND,
        req.workload_name(),
        tools,
        lambda rf: be.ingest(req, rf, src, kind),
        dict(kind="import", notes=[], program=program),
    )
    return run_request(req, cli_argv, launch=launch)


def _import_trace(
    src: Path, ranges: str | None, borrowed: dict[str, Any] | None, cli_argv, options: dict[str, Any]
):
    """import_capture() of a torch.profiler Chrome trace: a `torch-trace` run folder whose
    variants are the record_function ranges named PREFIX..."""

    if options.get("iters") is not None:
        raise UsageError(
            "--iters applies to NVTX captures; a torch.profiler trace's iterations are its `iter` "
            "record_function ranges, or else each range"
        )
    if options.pop("attribute", None) is not None:
        raise UsageError(
            "--attribute applies to Nsight Systems captures; a torch.profiler trace's kernels count "
            "in the record_function range of the thread that launched them"
        )
    prefix = trace_prefix(ranges, borrowed)
    if options.get("name") is None and borrowed and isinstance(borrowed.get("workload"), str):
        options["name"] = borrowed["workload"]
    req = ProgramRequest.of(
        backends.get(BACKEND), ranges=prefix, capture=str(src.resolve()), given=str(src), **options
    )
    program = {"capture": str(src.resolve()), "tool": "torch.profiler", "ranges": prefix}
    suffix = compressed.suffix_of(src)

    def step(rf) -> None:
        dest = rf.path / (TRACE + suffix)
        shutil.copyfile(src, dest)
        rf.add_command("import", ["cp", str(src), str(dest)])

    facts = dict(kind="import", notes=[], program=program)
    return run_request(req, cli_argv, launch=Launch("torch-trace", req.workload_name(), {}, step, facts))
