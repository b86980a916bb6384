"""The workloads by name: the built-ins (registered when this module is imported) and those of a
--workload-file; what a workload is, workloads/workload.py.

Nothing here imports torch at module level: `gprof-orch list` and `--help` stay fast, and the
orchestrator process (which only launches and parses) never loads torch. The callables import
torch when they are first called, in the runner process.
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from workloads import builtin  # noqa: F401  (registers the built-ins on import)
from workloads.errors import UnknownNameError, UsageError
from workloads.workload import (
    _REGISTRY,
    CPU_DEFAULT_SHAPE,
    DEFAULT_DTYPES,
    DEFAULT_TOLERANCE,
    DTYPES,
    GPU_DEFAULT_SHAPE,
    NEEDS,
    Variant,
    Workload,
    register,
)

# what a workload file and the rest of the project name as registry.X
__all__ = [
    "CPU_DEFAULT_SHAPE",
    "DEFAULT_DTYPES",
    "DEFAULT_TOLERANCE",
    "DTYPES",
    "GPU_DEFAULT_SHAPE",
    "NEEDS",
    "Variant",
    "Workload",
    "all_workloads",
    "builtin_dtypes",
    "describe",
    "get",
    "load_file",
    "register",
]


def all_workloads() -> dict[str, Workload]:
    return dict(_REGISTRY)


def get(name: str) -> Workload:
    workloads = all_workloads()
    if name not in workloads:
        raise UnknownNameError("workload", name, sorted(workloads))
    return workloads[name]


def builtin_dtypes() -> list[str]:
    """The dtypes at least one built-in workload takes, in DTYPES order (what --help offers)."""
    taken = {d for w in all_workloads().values() if w.source == "built-in" for d in w.dtypes}
    return [d for d in DTYPES if d in taken]


def describe(workloads: Iterable[Workload] | None = None) -> list[dict[str, Any]]:
    """Plain data for `list --json` and for checking a request in a process that must not import
    a user's workload file (the orchestrator asks `python -m workloads list --json` instead)."""
    return [
        {
            "workload": w.name,
            "description": w.description,
            "baseline": w.baseline,
            "dtypes": list(w.dtypes),
            "source": w.source,
            "replaces_builtin": w.replaces_builtin,
            # the shape a run without --size takes, by device (the parent settles it: workloads/spec.py)
            "default_shape": list(w.default_shape),
            "cpu_default_shape": list(w.cpu_default_shape),
            "needs_square_size": w.needs_square_size,
            "variants": [
                {"name": v.name, "label": v.label, "needs": sorted(v.needs), "description": v.description}
                for v in w.variants
            ],
        }
        for w in (all_workloads().values() if workloads is None else workloads)
    ]


# what --workload-file takes, said where a file is refused
WORKLOAD_FILE = (
    "a workload file is a Python file (.py) that builds Workload(...) objects at module level or "
    "lists them in WORKLOADS (see README: Adding a workload)"
)


def load_file(path: str | Path) -> list[Workload]:
    """Import a user's Python file and register every `Workload` it defines at module level.

    The file may build `Workload(...)` objects under any names, or list them in `WORKLOADS`.
    A workload with a built-in's name replaces it for this process (`replaces_builtin` says so).
    """
    path = Path(path).resolve()
    if not path.is_file():
        raise UsageError(f"workload file {path} does not exist")
    mod_name = f"gprof_user_workload_{abs(hash(str(path)))}"
    # Python finds a loader by the suffix only: a .json or .yaml file has none, and the reason
    # is that it is not a Python file, not that its import went wrong
    spec = importlib.util.spec_from_file_location(mod_name, path) if path.suffix == ".py" else None
    if spec is None or spec.loader is None:
        raise UsageError(f"workload file {path} is not a Python file: {WORKLOAD_FILE}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[mod_name] = module
    try:
        spec.loader.exec_module(module)
    except SystemExit as exc:  # sys.exit() on import would otherwise end the process silently
        raise UsageError(f"workload file {path} called sys.exit({exc.code!r}) on import") from None
    except Exception as exc:  # the user's code: show what broke, keep it a usage error
        raise UsageError(f"workload file {path} raised {type(exc).__name__}: {exc}") from exc
    found = list(getattr(module, "WORKLOADS", []) or [])
    found += [v for v in vars(module).values() if isinstance(v, Workload) and v not in found]
    if not found:
        raise UsageError(f"workload file {path} defines no Workload: {WORKLOAD_FILE}")
    for w in found:
        w.source = str(path)
        prior = _REGISTRY.get(w.name)
        w.replaces_builtin = (
            prior is not None and prior is not w and (prior.source == "built-in" or prior.replaces_builtin)
        )
        register(w, replace=True)
    return found
