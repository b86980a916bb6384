"""The backends, by the name the CLI uses. Loaded on first use: `--help` imports none."""
from __future__ import annotations

import importlib

from orchestrator.errors import UnknownNameError

BACKENDS: dict[str, str] = {
    "time": "orchestrator.backends.time:TimeBackend",
    "torch-trace": "orchestrator.backends.torch_trace:TorchTraceBackend",
    "nsys": "orchestrator.backends.nsys:NsysBackend",
    "ncu": "orchestrator.backends.ncu:NcuBackend",
    # `exec` and `import`: a user's program or capture, one variant per NVTX range
    "program": "orchestrator.backends.program:ProgramBackend",
}


def get(name: str):
    """An instance of the backend called `name`."""
    if name not in BACKENDS:
        raise UnknownNameError("backend", name, list(BACKENDS))
    module, cls = BACKENDS[name].split(":")
    return getattr(importlib.import_module(module), cls)()
