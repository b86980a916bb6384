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

import re
import shutil
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from orchestrator import proc
from orchestrator.capture_manifest import (
    TRACE,
    sibling_workload,
    trace_manifest,
    trace_prefix,
    workload_manifest,
)
from orchestrator.capture_ncu import NCU_SUFFIXES, import_ncu
from orchestrator.capture_ranges import RangeFilter
from orchestrator.errors import (
    GprofError,
    InterruptedRunError,
    ParseError,
    ToolTimeoutError,
    UsageError,
    check_seconds,
    interrupt_in,
)

SQLITE = "report.sqlite"
REPORT = "report.nsys-rep"
BACKEND = "program"
NSYS_SUFFIXES = (".nsys-rep", ".qdrep")
SQLITE_SUFFIXES = (".sqlite", ".sqlite.xz", ".sqlite.gz", ".db")
TRACE_SUFFIXES = (".json", ".json.gz", ".json.xz")  # torch.profiler's export_chrome_trace


# --------------------------------------------------------------------------- nvtx vs nsys


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


# --------------------------------------------------------------------------- requests


@dataclass
class ProgramRequest:
    """What `exec` and `import` were asked: the program (or the capture), the range filter,
    where the tool is and what it is given, limits and the folder."""

    argv: list[str] = field(default_factory=list)
    tool: str = "nsys"
    ranges: str | None = None
    name: str | None = None
    iters: int | None = None  # iterations in one range instance (None: 1)
    nsys: str | None = None
    nsys_args: list[str] = field(default_factory=list)
    trace_osrt: bool = False
    cuda: bool | None = None  # trace CUDA (None: when nvidia-smi sees a GPU)
    timeout: float | None = None
    out: Path | None = None
    root: Path | None = None
    capture: str | None = None  # import: the source file
    compare_ranges: bool = False  # the ranges are alternatives: speedups between them

    def validate(self) -> ProgramRequest:
        RangeFilter.parse(self.ranges)
        if self.capture is None and not self.argv:
            raise UsageError("no program given: gprof-orch exec nsys -- CMD [ARGS...]")
        if self.tool not in ("nsys", "ncu"):
            raise UsageError(f"exec {self.tool}: the profilers are nsys and ncu")
        if self.iters is not None and self.iters < 1:
            raise UsageError(f"--iters must be at least 1, not {self.iters}")
        check_seconds(self.timeout, "--timeout")
        return self

    @property
    def filter(self) -> RangeFilter:
        return RangeFilter.parse(self.ranges)

    def workload_name(self) -> str:
        if self.name:
            return self.name
        if self.capture:
            base = Path(self.capture).name
            for suffix in (*NSYS_SUFFIXES, *SQLITE_SUFFIXES, *TRACE_SUFFIXES, ".pt.trace"):
                base = base.removesuffix(suffix)
            return base or "capture"
        script = (
            next((a for a in self.argv[1:] if a.endswith(".py")), None) if _is_python(self.argv) else None
        )
        return Path(script or self.argv[0]).stem or "program"

    def to_json(self) -> dict[str, Any]:
        return {k: (str(v) if isinstance(v, Path) else v) for k, v in asdict(self).items()}


def _is_python(argv: list[str]) -> bool:
    return bool(argv) and (
        bool(re.fullmatch(r"python[0-9.]*", Path(argv[0]).name)) or argv[0] == sys.executable
    )


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
    from orchestrator import backends, envinfo

    cli_argv = options.pop("cli_argv", None)
    req = ProgramRequest(argv=list(argv), tool=tool, ranges=ranges, **options).validate()
    be = backends.get(BACKEND)
    tools = be.require(req)  # a missing nsys fails here, before a run folder exists
    notes = []
    problem = nvtx_problem(program_nvtx_version(req.argv), tools.get("nsys_version"))
    if problem:
        print(f"gprof-orch: warning: {problem}", file=sys.stderr, flush=True)
        notes.append(problem)
    from orchestrator.runfolder import RunFolder

    rf = RunFolder.create(
        BACKEND, req.workload_name(), out=req.out, root=req.root, request=req.to_json(), argv=cli_argv
    )
    rf.update(
        machine=envinfo.machine(),
        tools=tools,
        kind="exec",
        notes=notes,
        program={"argv": req.argv, "tool": req.tool, "ranges": req.filter.spec},
    )
    return _finish_run(rf, req, lambda: be.execute(req, rf), source=" ".join(req.argv))


def import_capture(path: str | Path, *, ranges: str | None = None, **options: Any):
    """Build a run folder around an existing capture (`.nsys-rep`, or its `.sqlite` export,
    also `.xz`/`.gz`) and report it per NVTX range as profile_program() does. A capture that
    sits in a gprof-orch run folder keeps that run's ranges, iterations, labels and bytes.

    Raises ParseError (exit 4) when the capture holds no matching range, naming those it holds.

    Example:
        >>> import_capture("report.nsys-rep", ranges="gprof@variant:").table
    """
    from orchestrator import backends, envinfo
    from orchestrator.runfolder import RunFolder

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
    req = ProgramRequest(ranges=ranges, capture=str(src.resolve()), **options).validate()
    be = backends.get(BACKEND)
    tools = be.require(req) if kind == "nsys-rep" else {}
    rf = RunFolder.create(
        BACKEND, req.workload_name(), out=req.out, root=req.root, request=req.to_json(), argv=cli_argv
    )
    rf.update(
        machine=envinfo.machine(),
        tools=tools,
        kind="import",
        notes=[],
        program={"capture": str(src.resolve()), "tool": "nsys", "ranges": req.filter.spec},
    )
    # the copy ingest() makes of an export (a .nsys-rep is read by nsys, which names it itself)
    copy = (
        rf.path / (SQLITE + next((s for s in (".xz", ".gz") if src.name.endswith(s)), ""))
        if kind == "sqlite"
        else None
    )
    return _finish_run(
        rf, req, lambda: be.ingest(req, rf, src, kind), source=str(src), borrowed=borrowed, copy=copy
    )


def _import_trace(
    src: Path, ranges: str | None, borrowed: dict[str, Any] | None, cli_argv, options: dict[str, Any]
):
    """import_capture() of a torch.profiler Chrome trace: a `torch-trace` run folder whose
    variants are the record_function ranges named PREFIX..."""
    from orchestrator import envinfo
    from orchestrator.parsers import compressed
    from orchestrator.parsers import torch_trace as tt
    from orchestrator.runfolder import RunFolder

    if options.get("iters") is not None:
        raise UsageError(
            "--iters applies to NVTX captures; a torch.profiler trace's iterations are its `iter` "
            "record_function ranges, or else each range"
        )
    prefix = trace_prefix(ranges, borrowed)
    if options.get("name") is None and borrowed and isinstance(borrowed.get("workload"), str):
        options["name"] = borrowed["workload"]
    req = ProgramRequest(ranges=prefix, capture=str(src.resolve()), **options)
    rf = RunFolder.create(
        "torch-trace", req.workload_name(), out=req.out, root=req.root, request=req.to_json(), argv=cli_argv
    )
    rf.update(
        machine=envinfo.machine(),
        tools={},
        kind="import",
        notes=[],
        program={"capture": str(src.resolve()), "tool": "torch.profiler", "ranges": prefix},
    )
    dest = rf.path / (TRACE + next((s for s in (".xz", ".gz") if src.name.endswith(s)), ""))

    def step() -> None:
        shutil.copyfile(src, dest)
        rf.add_command("import", ["cp", str(src), str(dest)])

    def manifest() -> dict[str, Any]:
        trace = tt.read_trace(compressed.locate(rf.path / TRACE))
        return trace_manifest(
            trace,
            prefix,
            name=req.workload_name(),
            source=str(src),
            borrowed=borrowed,
            compare_ranges=req.compare_ranges,
        )

    return _finish_run(rf, req, step, source=str(src), manifest=manifest, copy=dest)


def write_workload(rf) -> None:
    """The workload.json of a folder whose run stopped before it was written (during `nsys
    export`), once the export is made (`gprof-orch report`): the ranges the run's request picks,
    as _finish_run() would have written them."""
    from orchestrator.parsers import compressed
    from orchestrator.parsers import nsys_sqlite as ns
    from orchestrator.runfolder import WORKLOAD_MANIFEST, write_json

    asked = rf.manifest.get("request") or {}
    req = ProgramRequest(**{k: v for k, v in asked.items() if k in ProgramRequest.__dataclass_fields__})
    src = Path(req.capture) if req.capture else None
    borrowed = sibling_workload(src) if src is not None and src.is_file() else None
    with compressed.plain_file(compressed.locate(rf.path / SQLITE)) as plain:
        wman = workload_manifest(
            ns.read_export(plain, lean=True),
            plain,
            req.filter,
            name=req.workload_name(),
            source=req.capture or " ".join(req.argv),
            iters_per_range=req.iters or 1,
            borrowed=borrowed,
            compare_ranges=req.compare_ranges,
        )
    if rf.manifest.get("status") == "interrupted":
        _stopped_inside(wman, InterruptedRunError("interrupted"))
    write_json(rf.path / WORKLOAD_MANIFEST, wman, indent=1)


def _located(sqlite: Path) -> Path | None:
    """The run's export, or its .xz/.gz, if there is one."""
    for p in (sqlite, sqlite.with_name(sqlite.name + ".xz"), sqlite.with_name(sqlite.name + ".gz")):
        if p.is_file():
            return p
    return None


def capture_kind(src: Path) -> str:
    name = src.name.lower()
    if name.endswith(NSYS_SUFFIXES):
        return "nsys-rep"
    if name.endswith(SQLITE_SUFFIXES):
        return "sqlite"
    if name.endswith(NCU_SUFFIXES):
        return "ncu-rep"
    if name.endswith(TRACE_SUFFIXES):
        return "torch-trace"
    with open(src, "rb") as fh:
        head = fh.read(16)
    if head.startswith(b"SQLite format 3"):
        return "sqlite"
    raise UsageError(
        f"{src}: not a capture gprof-orch can import (.nsys-rep, .sqlite from `nsys export`, .ncu-rep, a torch.profiler .json trace)"
    )


def _as_given(exc: GprofError, copy: Path | None, source: str) -> GprofError:
    """An error reading the run folder's copy of an imported capture, naming the file the user
    gave: theirs is the one to fix or take again (and the copy goes with the folder)."""
    if copy is None or not isinstance(exc, ParseError) or exc.path.resolve() != copy.resolve():
        return exc
    err = ParseError(source, exc.reason, hint=exc.hint)
    err.__cause__, err.log = exc, exc.log
    return err


# nsys 2024.2.3 writes a range only once it ends (2023.4.4 ended an open push/pop range at the stop)
OPEN_AT_STOP = (
    "the program was stopped: a range still open then is in the capture only where this nsys ends it "
    "at the stop (2023.4.4 does, 2024.2.3 records a range only once it ends)"
)


def _stopped_inside(wman: dict[str, Any], error: GprofError | None) -> bool:
    """A range the program was inside when the run was stopped (--timeout, Ctrl-C) is timed to
    the stop, not to its end: its variant is `timed out` or `interrupted`, as a built-in run's.
    True when the run was stopped and the capture holds no such range (it may have dropped it)."""
    stop = (
        "timed out"
        if isinstance(error, ToolTimeoutError)
        else "interrupted"
        if isinstance(error, InterruptedRunError)
        else None
    )
    for v in wman.get("variants", []):
        if stop and v.get("unclosed"):
            v["status"] = stop
    return stop is not None and not any(v.get("unclosed") for v in wman.get("variants", []))


def _unreported_too(error: GprofError, exc: GprofError) -> None:
    """The program failed (or was stopped) and its capture cannot be reported either: both said,
    and where it was stopped, why a range open then may be missing."""
    error.message += f"; {exc.message}"
    stopped = isinstance(error, (ToolTimeoutError, InterruptedRunError))
    error.hint = (f"{OPEN_AT_STOP}; " if stopped else "") + (error.hint or exc.hint or "")


def _finish_run(
    rf,
    req: ProgramRequest,
    step,
    *,
    source: str,
    borrowed: dict[str, Any] | None = None,
    manifest=None,
    copy: Path | None = None,
    parsed=None,
):
    """Run `step` (the profiler, or the copy of a capture), write the synthetic workload.json
    (`manifest()`'s; by default the NVTX ranges of the folder's nsys export), the report and the
    final status, as api.profile does for a built-in run. `copy`: the folder's copy of an
    imported capture, which an error reading it names as the user's file (`source`). `parsed()`:
    the backend's Parsed of what `manifest()` already read (ncu's report), read once."""
    from orchestrator.execution import conclude, reporting_error

    t0 = time.monotonic()
    error: GprofError | None = None
    try:
        step()
    except GprofError as exc:
        error = exc
    except KeyboardInterrupt:
        error = InterruptedRunError("interrupted")
    rf.manifest["wall_s"] = round(time.monotonic() - t0, 3)
    run, unreadable = None, False  # unreadable: the imported file itself could not be read
    located = _located(rf.path / SQLITE)
    handed: list = []  # the export nsys_manifest() read, handed on to the report: the file is read once

    def nsys_manifest() -> dict[str, Any]:
        from orchestrator.parsers import compressed
        from orchestrator.parsers import nsys_sqlite as ns

        with compressed.plain_file(located) as plain:
            # lean: what the manifest and the report use (a million-kernel capture read twice in
            # full took longer than `nsys stats` on it)
            export = ns.read_export(plain, lean=True)
            wman = workload_manifest(
                export,
                plain,
                req.filter,
                name=req.workload_name(),
                source=source,
                iters_per_range=req.iters or 1,
                borrowed=borrowed,
                compare_ranges=req.compare_ranges,
            )
        handed.append(export)
        return wman

    if manifest is None and located is not None:
        manifest = nsys_manifest
    if manifest is not None and (error is None or located is not None):
        try:
            run = _capture_report(rf, manifest, error, located, handed, parsed)
        except BaseException as raised:
            exc = _as_given(raised, copy, source) if isinstance(raised, GprofError) else raised
            if error is None and isinstance(exc, GprofError):
                unreadable = exc is not raised
            elif error is not None and isinstance(exc, GprofError) and not interrupt_in(exc):
                _unreported_too(error, exc)
            error = reporting_error(rf, exc, error)
    elif error is None:
        error = ParseError(rf.path, "the profiler left no report")
    status = "interrupted" if isinstance(error, InterruptedRunError) else "failed" if error else "ok"
    return conclude(rf, run, status, error, unreadable_input=unreadable)


def _capture_report(rf, manifest, error: GprofError | None, located: Path | None, handed: list, given=None):
    """The capture's workload.json written (`manifest()`'s), its Run built (not written). pandas is
    imported here, inside the caller's guard: a Ctrl-C during its import ends the run as any other."""
    from orchestrator.results import build_report
    from orchestrator.runfolder import WORKLOAD_MANIFEST, write_json

    wman = manifest()
    if _stopped_inside(wman, error):
        rf.manifest.setdefault("notes", []).append(OPEN_AT_STOP)
    write_json(rf.path / WORKLOAD_MANIFEST, wman, indent=1)
    parsed = given() if given is not None else None
    if handed:  # the rows from the export already in memory, by workload.json as written
        from orchestrator.backends.program import ProgramBackend, frame_from_capture

        frame = frame_from_capture(located, rf.workload_manifest(), run=rf.path.name, export=handed.pop())
        parsed = ProgramBackend().with_frame(rf, frame)
    return build_report(rf, parsed, write=False)
