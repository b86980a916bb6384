"""What `exec` and `import` were asked (ProgramRequest, a BaseRequest as a workload run's is), the files a capture run folder holds,
and what kind of capture a file is (capture_kind, by its name or else its first bytes)."""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from orchestrator.base_request import BaseRequest
from orchestrator.capture_ranges import RangeFilter
from orchestrator.errors import UsageError

SQLITE = "report.sqlite"
REPORT = "report.nsys-rep"
BACKEND = "program"  # the backend of `exec nsys` and of an nsys or torch.profiler capture's `import`
PROGRAM_NCU = "program-ncu"  # of `exec ncu` and of a .ncu-rep's `import`
NSYS_SUFFIXES = (".nsys-rep", ".qdrep")
SQLITE_SUFFIXES = (".sqlite", ".sqlite.xz", ".sqlite.gz", ".db")
TRACE_SUFFIXES = (".json", ".json.gz", ".json.xz")  # torch.profiler's export_chrome_trace
NCU_SUFFIXES = (".ncu-rep", ".ncu-rep.xz", ".ncu-rep.gz")
# the program backend's options an older request record kept beside the generic fields
FLAT_OPTIONS = ("nsys", "nsys_args", "trace_osrt", "cuda")


@dataclass
class ProgramRequest(BaseRequest):
    """What `exec` and `import` were asked: what every run is (BaseRequest: the backend, `program`
    or `program-ncu`; `iters`, the iterations in one range instance, None: 1), the program (or the
    capture), the range filter and the name; what only the tool takes (where it is, its flags) is
    the backend's `options` (its Options, or a dict of them: Backend.opts builds them)."""

    backend: str = field(default=BACKEND, kw_only=True)
    argv: list[str] = field(default_factory=list)
    tool: str = "nsys"
    ranges: str | None = None
    name: str | None = None
    capture: str | None = None  # import: the source file, resolved
    given: str | None = None  # import: the source file as the user named it, which messages name
    compare_ranges: bool = False  # the ranges are alternatives: speedups between them
    options: Any = field(default_factory=dict, kw_only=True)

    @classmethod
    def of(cls, be, **kw: Any) -> ProgramRequest:
        """A request to backend `be` of the generic keywords; its own (its Options' fields: nsys=,
        nsys_args=, a library call's keywords) become its `options`, beside those given as options=."""
        names = set(be.Options.names())
        own = {k: kw.pop(k) for k in list(kw) if k in names}
        given = kw.pop("options", None)
        base = given.to_json() if given is not None and not isinstance(given, dict) else dict(given or {})
        return cls(**{"backend": be.name, **kw}, options=be.Options.build({**base, **own}))

    @classmethod
    def from_record(cls, record: dict[str, Any]) -> ProgramRequest:
        """The request a capture folder's request record (manifest.json's "request") holds: the
        options nested under "options", or flat beside the generic fields (older records). An older
        record names no backend: `exec ncu`'s said tool "ncu", a .ncu-rep's import its file."""
        generic = {f.name for f in fields(cls)} - {"options"}
        flat = {k: record[k] for k in FLAT_OPTIONS if k in record}
        own = {**flat, **(record.get("options") or {})}
        kw = {k: v for k, v in record.items() if k in generic}
        if "backend" not in kw:
            ncu = kw.get("tool") == "ncu" or str(kw.get("capture") or "").endswith(NCU_SUFFIXES)
            kw["backend"] = PROGRAM_NCU if ncu else BACKEND
        return cls(**kw, options=own)

    def validate(self) -> ProgramRequest:
        RangeFilter.parse(self.ranges)
        if self.capture is None and not self.argv:
            raise UsageError("no program given: gprof-orch exec nsys -- CMD [ARGS...]")
        if self.tool not in ("nsys", "ncu"):
            raise UsageError(f"exec {self.tool}: the profilers are nsys and ncu")
        if not isinstance(self.options, dict):  # built by the backend's Options (of()): its own checks
            self.options.validate()
        super().validate()
        return self

    @property
    def filter(self) -> RangeFilter:
        return RangeFilter.parse(self.ranges)

    def workload_name(self) -> str:
        if self.name:
            return self.name
        if self.capture:
            base = Path(self.capture).name
            for suffix in (*NSYS_SUFFIXES, *SQLITE_SUFFIXES, *TRACE_SUFFIXES, *NCU_SUFFIXES, ".pt.trace"):
                base = base.removesuffix(suffix)
            return base or "capture"
        script = (
            next((a for a in self.argv[1:] if a.endswith(".py")), None) if _is_python(self.argv) else None
        )
        return Path(script or self.argv[0]).stem or "program"


def _is_python(argv: list[str]) -> bool:
    return bool(argv) and (
        bool(re.fullmatch(r"python[0-9.]*", Path(argv[0]).name)) or argv[0] == sys.executable
    )


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
