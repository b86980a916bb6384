"""The program backends' own options (`exec nsys`'s, `exec ncu`'s), apart from the backends so
that the CLI builds the commands' flags from them without importing the backends' pandas."""

from __future__ import annotations

from dataclasses import dataclass

from orchestrator.backends.nsys import NsysOptions
from orchestrator.backends.options import BackendOptions, option, reuse, tool_path


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


@dataclass(frozen=True)
class ProgramNcuOptions(BackendOptions):
    """`exec ncu`'s own options: where ncu is and the flags it is given besides gprof-orch's."""

    ncu: str | None = tool_path("ncu")
    ncu_args: tuple[str, ...] = option(
        (),
        "--ncu-arg",
        multiple=True,
        help="Extra flag passed to ncu (repeatable), e.g. --ncu-arg=--launch-count=20.",
    )
