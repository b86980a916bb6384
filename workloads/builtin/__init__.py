"""The built-in workloads, from GPU-MODE lecture 1 (and the faster kernels that close its gaps).

Importing this package registers them. Callables import torch and the kernels lazily.
"""

from __future__ import annotations

from workloads.workload import Variant, Workload, default_input, register

# -- the operations --------------------------------------------------------------------------


def _torch_square(a):
    import torch

    return torch.square(a)


def _mul(a):
    return a * a


def _pow(a):
    return a**2


def _torch_mean(a):
    import torch

    return torch.mean(a)


def _tensor_mean(a):
    return a.mean()


def _sum_div_numel(a):
    return a.sum() / a.numel()


def _triton_lecture_mean(a):
    # why lazy: the kernels load when a variant first runs, not with the registry
    from workloads.kernels.triton_mean import lecture_mean

    # the lecture's kernel takes a matrix, one program a row; a 1-D --size (1e8) is laid out
    # as rows of 10000 (or the largest of these that divides it), as the lecture's 10000x10000
    if a.dim() == 1:
        for cols in (10000, 8192, 4096, 1000, 1024, 100):
            if a.numel() % cols == 0 and a.numel() > cols:
                return lecture_mean(a.view(-1, cols))
    return lecture_mean(a)


def _triton_fast_mean(a):
    # why lazy: the kernels load when a variant first runs, not with the registry
    from workloads.kernels.triton_mean import fast_mean

    return fast_mean(a)


def _triton_square(a):
    # why lazy: the kernels load when a variant first runs, not with the registry
    from workloads.kernels.triton_square import triton_square

    return triton_square(a)


def _numba_square(a):
    # why lazy: the kernels load when a variant first runs, not with the registry
    from workloads.kernels.numba_square import numba_square

    return numba_square(a)


def _cuda_lecture_square(a):
    # why lazy: the kernels load when a variant first runs, not with the registry
    from workloads.kernels.cuda_square import lecture_square

    return lecture_square(a)


def _cuda_fast_square(a):
    # why lazy: the kernels load when a variant first runs, not with the registry
    from workloads.kernels.cuda_square import fast_square

    return fast_square(a)


def _build_cuda_square():
    # why lazy: the kernels load when a variant first runs, not with the registry
    from workloads.kernels.cuda_square import build_extensions

    return build_extensions()


# -- references, inputs, bytes -----------------------------------------------------------------


def _ref_square(x64):
    return x64 * x64


def _ref_mean(x64):
    return x64.mean()


def _bytes_square(numel: int, itemsize: int) -> int:
    return 2 * numel * itemsize  # read a, write a*a


def _bytes_mean(numel: int, itemsize: int) -> int:
    return numel * itemsize  # read a once; the scalar written is negligible


def _uniform_input(shape, dtype, device, seed):
    """Uniform [0, 1): a mean of about 0.5, so a relative error of the mean is meaningful
    (the mean of randn is about 0 and any rounding would look like a 100% error)."""
    import torch

    g = torch.Generator(device="cpu").manual_seed(seed)
    x = torch.rand(shape, generator=g, dtype=torch.float32)
    return x.to(device=device, dtype=getattr(torch, dtype))


# -- the variants, shared between workloads ----------------------------------------------------

TORCH_SQUARE = Variant(
    "torch_square",
    _torch_square,
    label="torch.square",
    description="torch.square(a): aten::square -> aten::pow",
)
MUL = Variant("mul", _mul, label="a*a", description="a * a: aten::mul")
POW = Variant("pow", _pow, label="a**2", description="a ** 2: aten::pow")
TRITON_SQUARE = Variant(
    "triton",
    _triton_square,
    label="triton square",
    needs=frozenset({"triton"}),
    description="a Triton elementwise square (workloads/kernels/triton_square.py)",
)
NUMBA_SQUARE = Variant(
    "numba",
    _numba_square,
    label="numba square",
    needs=frozenset({"cuda", "numba"}),
    dtypes=("float32",),
    description="numba.cuda.jit square on torch's stream (workloads/kernels/numba_square.py)",
)
CUDA_LECTURE = Variant(
    "cuda_lecture",
    _cuda_lecture_square,
    label="load_inline (lecture)",
    needs=frozenset({"cuda", "compiler"}),
    setup=_build_cuda_square,
    dtypes=("float32",),
    description="the lecture's CUDA kernel: 16x16 blocks, one float a thread",
)
CUDA_FAST = Variant(
    "cuda_fast",
    _cuda_fast_square,
    label="load_inline (fast)",
    needs=frozenset({"cuda", "compiler"}),
    setup=_build_cuda_square,
    dtypes=("float32",),
    description="grid-stride loop, 16-byte vector loads/stores, grid from the SM count",
)

TORCH_MEAN = Variant("torch_mean", _torch_mean, label="torch.mean", description="torch.mean(a)")
TENSOR_MEAN = Variant("tensor_mean", _tensor_mean, label="tensor.mean", description="a.mean()")
SUM_DIV_NUMEL = Variant(
    "sum_div_numel",
    _sum_div_numel,
    label="sum/numel",
    description="a.sum() / a.numel(): a reduction, then a division kernel",
)
TRITON_LECTURE_MEAN = Variant(
    "triton_lecture",
    _triton_lecture_mean,
    label="triton mean (lecture)",
    needs=frozenset({"triton"}),
    description="the lecture's Triton mean: one program a row, a scalar loop",
)
TRITON_FAST_MEAN = Variant(
    "triton_fast",
    _triton_fast_mean,
    label="triton mean (fast)",
    needs=frozenset({"triton"}),
    description="wide coalesced loads, float32 tl.sum per program, partials combined",
)

_SQUARE = dict(reference=_ref_square, bytes_moved=_bytes_square, baseline="torch_square")
_MEAN = dict(
    reference=_ref_mean,
    bytes_moved=_bytes_mean,
    baseline="torch_mean",
    make_input=_uniform_input,
    bytes_per_element=lambda itemsize: itemsize + 16,
)

register(
    Workload(
        "square",
        "elementwise square: torch.square vs a*a vs a**2 (and Triton, Numba)",
        [TORCH_SQUARE, MUL, POW, TRITON_SQUARE, NUMBA_SQUARE],
        **_SQUARE,
    )
)
register(
    Workload(
        "mean",
        "mean of all elements: torch.mean vs tensor.mean vs sum/numel",
        [TORCH_MEAN, TENSOR_MEAN, SUM_DIV_NUMEL],
        **_MEAN,
    )
)
register(
    Workload(
        "triton-mean",
        "the lecture's Triton mean and a fast one, beside torch.mean",
        [TORCH_MEAN, TRITON_LECTURE_MEAN, TRITON_FAST_MEAN],
        **_MEAN,
    )
)
register(
    Workload(
        "load-inline-square",
        "CUDA square kernels built with load_inline, beside torch.square",
        [TORCH_SQUARE, CUDA_LECTURE, CUDA_FAST],
        dtypes=("float32",),
        **_SQUARE,
    )
)
register(
    Workload("triton-square", "a Triton square beside torch.square", [TORCH_SQUARE, TRITON_SQUARE], **_SQUARE)
)
register(
    Workload(
        "numba-square",
        "a Numba CUDA square beside torch.square",
        [TORCH_SQUARE, NUMBA_SQUARE],
        dtypes=("float32",),
        **_SQUARE,
    )
)


# -- matmul: the compute-bound counterpart of square ---------------------------------------------


def _torch_matmul(a):
    import torch

    return torch.matmul(a, a)


def _matmul_tf32_set(a, allowed: bool):
    """a @ a with TF32 allowed or not whatever the process set; restored for the next variant."""
    import torch

    before = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = allowed
    try:
        return a @ a
    finally:
        torch.backends.cuda.matmul.allow_tf32 = before


def _matmul_no_tf32(a):
    return _matmul_tf32_set(a, False)  # float32 off the tensor cores


def _matmul_tf32(a):
    return _matmul_tf32_set(a, True)


def _triton_matmul(a):
    # why lazy: it imports triton, which only this variant needs
    from workloads.kernels.triton_matmul import triton_matmul

    return triton_matmul(a, a)


def _ref_matmul(x64):
    return x64 @ x64


def _bytes_matmul(numel: int, itemsize: int) -> int:
    return 3 * numel * itemsize  # read a twice as both operands (a, b), write c: n^2 each


def _flops_matmul(shape: tuple[int, ...], dtype: str) -> int:
    n = shape[0]
    return 2 * n**3  # n^2 outputs, each n multiplies and n adds


def _square_matrix(shape, dtype, device, seed):
    """randn of n x n (the default input), refused unless square: a @ a needs it."""
    if len(shape) != 2 or shape[0] != shape[1]:
        raise ValueError(
            f"matmul multiplies an n x n matrix by itself: --size NxN, not {'x'.join(map(str, shape))}"
        )
    return default_input(shape, dtype, device, seed)


register(
    Workload(
        "matmul",
        "a @ a of an n x n matrix: torch.matmul, float32 with and without TF32, a Triton blocked GEMM",
        [
            Variant(
                "torch_matmul", _torch_matmul, label="torch.matmul", description="torch.matmul(a, a): cuBLAS"
            ),
            Variant(
                "matmul_fp32",
                _matmul_no_tf32,
                label="a @ a (fp32)",
                dtypes=("float32",),
                math="simt",
                description="a @ a in float32 with allow_tf32 off: no tensor cores",
            ),
            Variant(
                "matmul_tf32",
                _matmul_tf32,
                label="a @ a (tf32)",
                dtypes=("float32",),
                math="tf32",
                tolerance=5e-3,  # TF32 keeps 10 bits of mantissa
                description="a @ a in float32 with allow_tf32 on: TF32 tensor cores on a GPU",
            ),
            Variant(
                "triton_matmul",
                _triton_matmul,
                label="triton matmul",
                needs=frozenset({"triton"}),
                description="the Triton tutorial's blocked GEMM, 4 autotuned tiles (workloads/kernels/triton_matmul.py)",
            ),
        ],
        reference=_ref_matmul,
        bytes_moved=_bytes_matmul,
        flops=_flops_matmul,
        baseline="torch_matmul",
        make_input=_square_matrix,
        needs_square_size=True,
        default_shape=(4096, 4096),
        cpu_default_shape=(256, 256),
        # a, a @ a, and the float64 input and reference of the check
        bytes_per_element=lambda itemsize: 2 * itemsize + 16,
    )
)
