"""The backends, by the name the CLI uses: one line each. A backend module is loaded on first
use: the CLI lists the commands from these lines alone, so `--help` imports no backend (and no
pandas). Everything else about a backend (its help, options, tool, merged column, whether it
needs a GPU) is declared on its class (orchestrator/backends/base.py)."""

from __future__ import annotations

import importlib
from dataclasses import dataclass

from orchestrator.errors import UnknownNameError


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
}


def commands() -> dict[str, str]:
    """name -> summary of the backends that are CLI commands (`gprof-orch NAME WORKLOAD`)."""
    return {n: e.summary for n, e in BACKENDS.items() if e.summary}


def backend_class(name: str) -> type:
    """The backend class registered as `name`, its module imported now; UnknownNameError
    naming the valid ones for any other name."""
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
