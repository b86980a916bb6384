"""The backends, by the name the CLI uses: one line each. A backend module is loaded on first
use: the CLI lists the commands from these lines alone, so `--help` imports no backend (and no
pandas). Everything else about a backend (its help, options, tool, merged column, whether it
needs a GPU) is declared on its class (orchestrator/backends/base.py).

A backend from outside this package is one more line, given by the environment:
GPROF_ORCH_BACKENDS="name=module:Class[:summary];..." adds each to the registry (the summary makes
it a command, `gprof-orch name WORKLOAD`), so a project or a test registers its own without
editing this file."""

from __future__ import annotations

import importlib
import os
from dataclasses import dataclass, fields
from typing import Any

from orchestrator.backends.options import BackendOptions
from orchestrator.errors import UnknownNameError, UsageError
from orchestrator.request import Request


@dataclass(frozen=True)
class Entry:
    """One registry line: where the backend class is ("module:Class", imported on first use) and
    the summary `gprof-orch --help` lists ("" for a backend with no command of its own)."""

    path: str  # "module:Class"
    summary: str  # the line `gprof-orch --help` shows; "" for a backend with no command of its own


BACKENDS: dict[str, Entry] = {
    "time": Entry(
        "orchestrator.backends.time:TimeBackend",
        "CUDA events around every call, no host cost inside; sampled to a known noise.",
    ),
    "torch-trace": Entry(
        "orchestrator.backends.torch_trace:TorchTraceBackend",
        "torch.profiler: kernels, self CPU and CUDA time per variant.",
    ),
    "nsys": Entry(
        "orchestrator.backends.nsys:NsysBackend",
        "Nsight Systems: every kernel attributed to its variant through its launch.",
    ),
    "ncu": Entry(
        "orchestrator.backends.ncu:NcuBackend",
        "Nsight Compute: each variant's kernels' throughput vs peak, roofline, findings.",
    ),
    "proton": Entry(
        "orchestrator.backends.proton:ProtonBackend",
        "Proton, Triton's profiler: kernel time per iteration, declared FLOPs and bytes.",
    ),
    # `exec` and `import`: a user's program or capture, one variant per NVTX range
    "program": Entry("orchestrator.backends.program:ProgramBackend", ""),
    "program-ncu": Entry("orchestrator.backends.program_ncu:ProgramNcuBackend", ""),
}


# the variable that adds backends from outside this package (see the module's docstring)
EXTRA_ENV = "GPROF_ORCH_BACKENDS"
# the pseudo-backend that runs every backend of `of_all()` into one folder
ALL = "all"


def _extra(text: str) -> dict[str, Entry]:
    """The registry lines of GPROF_ORCH_BACKENDS: `name=module:Class[:summary]`, `;` between them
    (a summary may hold commas)."""
    out = {}
    for item in filter(None, (t.strip() for t in text.split(";"))):
        name, _, spec = item.partition("=")
        module, _, rest = spec.partition(":")
        cls, _, summary = rest.partition(":")
        if not (name.strip() and module.strip() and cls.strip()):
            raise UsageError(f"${EXTRA_ENV}: {item!r} is not name=module:Class[:summary]")
        out[name.strip()] = Entry(f"{module.strip()}:{cls.strip()}", summary.strip())
    return out


def _register_extra() -> UsageError | None:
    """BACKENDS plus GPROF_ORCH_BACKENDS' lines; a bad line is kept, raised at the first use of the
    registry (an import raises nothing)."""
    try:
        BACKENDS.update(_extra(os.environ.get(EXTRA_ENV, "")))
    except UsageError as exc:
        return exc
    return None


_BAD_EXTRA = _register_extra()


def is_all(name: str) -> bool:
    """Whether `name` is `all`, every backend of of_all() into one folder, not one backend."""
    return name == ALL


def commands() -> dict[str, str]:
    """name -> summary of the backends that are CLI commands (`gprof-orch NAME WORKLOAD`)."""
    if _BAD_EXTRA is not None:
        raise _BAD_EXTRA
    return {n: e.summary for n, e in BACKENDS.items() if e.summary}


def backend_class(name: str) -> type:
    """The backend class registered as `name`, its module imported now; UnknownNameError
    naming the valid ones for any other name."""
    if _BAD_EXTRA is not None:
        raise _BAD_EXTRA
    if name not in BACKENDS:
        raise UnknownNameError("backend", name, list(BACKENDS))
    module, cls = BACKENDS[name].path.split(":")
    return getattr(importlib.import_module(module), cls)


def get(name: str):
    """An instance of the backend called `name`."""
    return backend_class(name)()


def of_all() -> list[str]:
    """The backends `all` runs, in the registry's order: those with a merged column."""
    return [n for n in BACKENDS if backend_class(n).merged is not None]


def merged_sources(names) -> dict:
    """backend -> its reports.schema.MergedTime, for the named backends that have one."""
    return {
        n: backend_class(n).merged for n in names if n in BACKENDS and backend_class(n).merged is not None
    }


def option_names(backend: str) -> set[str]:
    """The names of `backend`'s own options (its Options' fields); `all`: every one of its backends'."""
    names = of_all() if is_all(backend) else [backend]
    return {n for b in names for n in backend_class(b).Options.names()}


def request(workload: str, backend: str = "time", **options: Any) -> Request:
    """A Request from flat keyword arguments (a command's options, profile()'s): each generic one
    to its field, the backend's own to its Options (`all`: every one of its backends' options, as
    a dict; `options=` may also give them). A name neither takes is a UsageError naming the valid
    ones."""
    generic = {f.name for f in fields(Request)} - {"workload", "backend", "options"}
    own = {k: options.pop(k) for k in [k for k in options if k not in generic]}
    given = own.pop("options", None)
    own.update(given.to_json() if isinstance(given, BackendOptions) else given or {})
    known = option_names(backend)
    unknown = sorted(set(own) - known)
    if unknown:
        raise UsageError(
            f"{backend} takes no option {', '.join(unknown)}; its own: {', '.join(sorted(known)) or 'none'}"
        )
    opts = own if is_all(backend) else backend_class(backend).Options.build(own)
    return Request(workload=workload, backend=backend, options=opts, **options)


def request_from_record(record: dict[str, Any]) -> Request:
    """The Request a run folder's request record (manifest.json's "request") holds: "options"
    nested (this version), or the flat keys of older records, where every backend's options were
    fields of the Request (those of other backends are dropped)."""
    generic = {f.name for f in fields(Request)} - {"workload", "backend", "options"}
    backend = record.get("backend", "time")
    names = option_names(backend)
    flat = {k: v for k, v in record.items() if k in names}  # an older record's
    own = {**flat, **{k: v for k, v in (record.get("options") or {}).items() if k in names}}
    kw = {k: v for k, v in record.items() if k in generic}
    return request(record.get("workload", ""), backend, **kw, **own)


def point_options(req: Request, backend: str) -> dict[str, Any]:
    """The flat options of `req` a point of `backend` takes: the generic ones and that backend's own
    (a backend of `all` takes only its own of the parent's)."""
    d = {k: v for k, v in req.to_json().items() if k not in ("workload", "backend")}
    opts = d.pop("options") or {}
    names = option_names(backend)
    return {**d, **{k: v for k, v in opts.items() if k in names}}
