"""The program backends' own options (`exec nsys`'s, `exec ncu`'s), apart from the backends so
that the CLI builds the commands' flags from them without importing the backends' pandas."""

from __future__ import annotations

from dataclasses import dataclass

import click

from orchestrator.backends.nsys import NsysOptions
from orchestrator.backends.options import BackendOptions, option, reuse, tool_path
from orchestrator.errors import UsageError

# how `--attribute` gives a launch to a range (orchestrator/parsers/nsys/attribution.py names the
# same two, which a test holds equal; importing it here would load pandas with the CLI)
ATTRIBUTE_WINDOW, ATTRIBUTE_THREAD = "window", "thread"


@dataclass(frozen=True)
class ProgramOptions(BackendOptions):
    """`exec nsys`'s own options: nsys's (--nsys, --nsys-arg, --osrt, declared by NsysOptions),
    whether CUDA is traced (a program may run on the CPU alone), and how a launch is given to a
    range (`attribute`; None: not given, ATTRIBUTE_WINDOW). `import` of an nsys capture takes
    those named in CAPTURE too."""

    CAPTURE = ("nsys", "attribute")

    nsys: str | None = reuse(NsysOptions, "nsys")
    nsys_args: tuple[str, ...] = reuse(NsysOptions, "nsys_args")
    trace_osrt: bool = reuse(
        NsysOptions, "trace_osrt", help="Also trace OS runtime calls (always on without a GPU)."
    )
    cuda: bool | None = option(
        None, "--cuda/--no-cuda", help="Trace CUDA (default: when nvidia-smi sees a GPU)."
    )
    attribute: str | None = option(
        None,
        "--attribute",
        type=click.Choice([ATTRIBUTE_WINDOW, ATTRIBUTE_THREAD]),
        help="Which range a kernel (memset, copy) counts in. window (default): the innermost range "
        "open on the thread that launched it, else, where that thread has none open (PyTorch's "
        "backward launches from autograd's own thread), the one open then on another thread that "
        "started last. thread: the launching thread's range only, as nsys's nvtx_kern_sum counts.",
    )

    def validate(self) -> None:
        if self.attribute not in (None, ATTRIBUTE_WINDOW, ATTRIBUTE_THREAD):
            raise UsageError(f"--attribute {self.attribute!r}: one of {ATTRIBUTE_WINDOW}, {ATTRIBUTE_THREAD}")


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
