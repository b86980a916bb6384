"""`exec nsys`'s own options (the program backend's Options), apart from the backend so that the
CLI builds the command's flags from them without importing the backend's numpy and pandas."""

from __future__ import annotations

from dataclasses import dataclass

from orchestrator.backends.nsys import NsysOptions
from orchestrator.backends.options import BackendOptions, option, reuse


@dataclass(frozen=True)
class ProgramOptions(BackendOptions):
    """`exec nsys`'s own options: nsys's (--nsys, --nsys-arg, --osrt, declared by NsysOptions) and
    whether CUDA is traced (a program may run on the CPU alone)."""

    nsys: str | None = reuse(NsysOptions, "nsys")
    nsys_args: tuple[str, ...] = reuse(NsysOptions, "nsys_args")
    trace_osrt: bool = reuse(
        NsysOptions, "trace_osrt", help="Also trace OS runtime calls (always on without a GPU)."
    )
    cuda: bool | None = option(
        None, "--cuda/--no-cuda", help="Trace CUDA (default: when nvidia-smi sees a GPU)."
    )
