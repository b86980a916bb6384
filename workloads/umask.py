"""The user's umask, carried from the orchestrator to its runner child.

nsys starts its target with umask 0: the runner under `gprof-orch nsys` wrote workload.json and
trace.json 0666 where every other file of the run folder is 0644. The orchestrator passes its
umask in GPROF_UMASK (orchestrator/proc.py, the one subprocess path); the runner sets it first.
"""

from __future__ import annotations

import os

UMASK_ENV = "GPROF_UMASK"


def current() -> str:
    """This process's umask in octal, read without setting it (os.umask sets it, and another
    thread could create a file in between); os.umask only where /proc cannot tell."""
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith("Umask:"):
                    return f"{int(line.split()[1], 8):03o}"
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return f"{mask:03o}"


def restore() -> None:
    """Set the umask the orchestrator had, where it passed one."""
    try:
        os.umask(int(os.environ[UMASK_ENV], 8) & 0o777)
    except (KeyError, ValueError):
        pass
