"""gprof-orch: which of my implementations is fastest, and why.

The entry points: `profile` (one run), `sweep` (every size/dtype), `profile_all` (every
backend), `load_run` (a run folder read back). They are imported lazily so that `import orchestrator` (and the CLI's
--help) stays light.
"""

from __future__ import annotations

__version__ = "0.1.0"
__all__ = [
    "profile",
    "sweep",
    "profile_all",
    "load_run",
    "Run",
    "profile_program",
    "import_capture",
    "__version__",
]


def __getattr__(name: str):
    if name in ("profile", "sweep", "profile_all", "load_run", "Run"):
        # why lazy: `import orchestrator` and the CLI's --help stay light
        from orchestrator import api

        return getattr(api, name)
    if name in ("profile_program", "import_capture"):
        # why lazy: it imports numpy, pandas, which importing orchestrator must not
        from orchestrator import capture

        return getattr(capture, name)
    raise AttributeError(name)
