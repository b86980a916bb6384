"""What a workload is: its variants, the dtypes and shapes it takes, how its input is made and
how its result is checked; and the one register of them by name (workloads/registry.py looks
them up, workloads/builtin/ registers the built-ins).

Nothing here imports torch at module level: the callables import it when they are first called,
in the runner process.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from workloads.devices import MATH
from workloads.errors import UnknownNameError

# What a variant may need. Each has a probe in workloads.environment.
NEEDS = {
    "cuda": "a CUDA GPU visible to torch",
    "triton": "the triton package (on a CPU only through its interpreter: --triton-interpret)",
    "compiler": "a C++/CUDA compiler for torch.utils.cpp_extension (nvcc and a host compiler)",
    "numba": "numba with CUDA support (numba-cuda)",
}

NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.+-]*$")

# every dtype a workload may declare; the built-in workloads take float32, float16 and bfloat16
# at most (see builtin_dtypes), a --workload-file workload may also take float64
DTYPES = ("float32", "float16", "bfloat16", "float64")
DEFAULT_DTYPES = ("float32", "float16", "bfloat16")

# the shapes of a workload that names none (the built-ins): 1e8 elements on a GPU, 1e6 on the CPU
GPU_DEFAULT_SHAPE, CPU_DEFAULT_SHAPE = (10000, 10000), (1000, 1000)

# Default relative-error bound of a check, by dtype: float32 arithmetic lands far below 1e-4;
# half types round every element to 8 or 11 bits.
DEFAULT_TOLERANCE = {"float32": 1e-4, "float64": 1e-10, "float16": 1e-2, "bfloat16": 2e-2}


@dataclass(frozen=True)
class Variant:
    """One implementation of a workload's operation.

    `fn` takes the input tensor and returns the result. `name` is the id used on the command line
    and in the NVTX range `variant:<name>` (letters, digits, `_ . + -`; never `/`, which ncu's
    NVTX filter reads as nesting). `label` is what a person reads ("a*a").
    """

    name: str
    fn: Callable[[Any], Any]
    label: str = ""
    needs: frozenset[str] = frozenset()
    description: str = ""
    # run once before warm-up, outside every measured range (e.g. build an extension)
    setup: Callable[[], Any] | None = None
    dtypes: tuple[str, ...] | None = None  # None: every dtype of the workload
    tolerance: float | None = None  # overrides the workload's, for this variant
    # which unit its FLOPs run on (workloads/devices.py MATH): "tensor", "tf32", "fp8" or "simt";
    # None: inferred from the dtype (half types on tensor cores, float32/float64 off them)
    math: str | None = None

    def __post_init__(self) -> None:
        if not NAME_RE.match(self.name):
            raise ValueError(f"variant name {self.name!r} must match {NAME_RE.pattern} (no '/', no spaces)")
        unknown = set(self.needs) - set(NEEDS)
        if unknown:
            raise ValueError(f"variant {self.name!r} needs unknown {sorted(unknown)}; known: {sorted(NEEDS)}")
        if self.math is not None and self.math not in MATH:
            raise ValueError(f"variant {self.name!r}: math {self.math!r} is not one of {', '.join(MATH)}")
        if not self.label:
            object.__setattr__(self, "label", self.name)


def default_input(shape: tuple[int, ...], dtype: str, device: str, seed: int):
    import torch

    g = torch.Generator(device="cpu").manual_seed(seed)
    # made on the CPU and copied, so every device gets the same numbers for a seed
    x = torch.randn(shape, generator=g, dtype=torch.float32)
    return x.to(device=device, dtype=getattr(torch, dtype))


@dataclass
class Workload:
    """A named operation with several variants, compared side by side.

    reference: float64 ground truth, called on the input upcast to float64.
    bytes_moved: the fewest bytes a variant must move through memory for an input of `numel`
    elements of `itemsize` bytes (each input read once, each output written once); achieved GB/s
    and % of peak are computed from it.
    flops: the floating-point operations one call does for an input of `shape` and `dtype` (a
    dtype name: "bfloat16"), e.g. 2 n^3 for an n x n matmul; TFLOP/s and % of peak FLOP/s are
    computed from it. None: the workload declares none (the columns stay empty).
    """

    name: str
    description: str
    variants: list[Variant]
    reference: Callable[[Any], Any]
    bytes_moved: Callable[[int, int], int]
    baseline: str = ""
    make_input: Callable[[tuple[int, ...], str, str, int], Any] = default_input
    # the shape a run without --size takes: default_shape on a GPU, cpu_default_shape on the CPU;
    # a workload that sets only default_shape runs it on the CPU too (__post_init__ settles both)
    default_shape: tuple[int, ...] | None = None
    cpu_default_shape: tuple[int, ...] | None = None
    dtypes: tuple[str, ...] = DEFAULT_DTYPES
    # device bytes per input element that a run needs at most (input, output, float64 reference,
    # temporaries); used to refuse a size before allocating
    bytes_per_element: Callable[[int], int] = lambda itemsize: 3 * itemsize + 16
    source: str = "built-in"
    # a --workload-file workload named like a built-in replaces it (the user's wins), and says so
    replaces_builtin: bool = False
    tags: tuple[str, ...] = field(default_factory=tuple)
    flops: Callable[[tuple[int, ...], str], float] | None = None
    # its input is one n x n matrix (matmul's a @ a): the orchestrator refuses any other --size
    # before a run starts, where make_input's own refusal would read as the workload's crash
    needs_square_size: bool = False

    def __post_init__(self) -> None:
        if not NAME_RE.match(self.name):
            raise ValueError(f"workload name {self.name!r} must match {NAME_RE.pattern}")
        names = [v.name for v in self.variants]
        dup = {n for n in names if names.count(n) > 1}
        if dup:
            raise ValueError(f"workload {self.name!r}: duplicate variant names {sorted(dup)}")
        if not self.variants:
            raise ValueError(f"workload {self.name!r} has no variants")
        if not self.baseline:
            self.baseline = names[0]
        if self.baseline not in names:
            raise ValueError(f"workload {self.name!r}: baseline {self.baseline!r} is not a variant")
        if self.cpu_default_shape is None:
            self.cpu_default_shape = self.default_shape or CPU_DEFAULT_SHAPE
        if self.default_shape is None:
            self.default_shape = GPU_DEFAULT_SHAPE

    def variant(self, name: str) -> Variant:
        for v in self.variants:
            if v.name == name:
                return v
        raise UnknownNameError(f"variant of {self.name}", name, [v.name for v in self.variants])

    def select(self, names: Iterable[str] | None) -> list[Variant]:
        """The variants asked for, in the workload's order; the baseline always included."""
        if not names:
            return list(self.variants)
        wanted = [self.variant(n).name for n in names]
        if self.baseline not in wanted:
            wanted.append(self.baseline)
        return [v for v in self.variants if v.name in wanted]

    def tolerance(self, variant: Variant, dtype: str) -> float:
        return variant.tolerance if variant.tolerance is not None else DEFAULT_TOLERANCE.get(dtype, 1e-4)


_REGISTRY: dict[str, Workload] = {}


def register(workload: Workload, *, replace: bool = False) -> Workload:
    if workload.name in _REGISTRY and not replace:
        raise ValueError(
            f"workload {workload.name!r} is already registered ({_REGISTRY[workload.name].source})"
        )
    _REGISTRY[workload.name] = workload
    return workload
