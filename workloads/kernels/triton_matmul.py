"""Matrix multiply in Triton: ``triton_matmul(a, b) == a @ b`` for 2-D float32, float16 and
bfloat16 tensors, the Triton tutorial's blocked kernel (03-matrix-multiplication).

Each program computes one BLOCK_M x BLOCK_N tile of the result, walking K in BLOCK_K steps with
``tl.dot`` into a float32 accumulator; programs are ordered in groups of GROUP_M rows of tiles so
that neighbours reuse the same rows of ``a`` from L2. A small autotune set (keyed on M, N, K)
picks the tile on a GPU, during the warm-up. float32 input is multiplied in IEEE float32
(``input_precision="ieee"``), not TF32: the variant counts its FLOPs against the FP32 peak, as
torch's float32 matmul with allow_tf32 off. Half types take the tensor cores.

The kernel declares its work through ``launch_metadata`` as the tutorial does (2 M N K FLOPs at
the inputs' width, the bytes of a, b and c once), which proton reads at every launch.

Triton is imported on first call; for CPU tensors set TRITON_INTERPRET=1 before that. Under the
interpreter the first autotune configuration runs as is, unbenchmarked.
"""

from __future__ import annotations

import functools

from workloads.kernels._common import cdiv, float_dtype_or_raise, interpreting, on_device

# (BLOCK_M, BLOCK_N, BLOCK_K, GROUP_M, num_warps, num_stages): the tutorial's CUDA set, trimmed to
# four; the first is the interpreter's (small tiles: a 256 x 256 product in a few programs)
CONFIGS = (
    (64, 64, 32, 8, 4, 4),
    (128, 128, 64, 8, 8, 3),
    (128, 256, 64, 8, 8, 3),
    (64, 256, 32, 8, 4, 4),
)


def declared(grid, kernel, args) -> dict:
    """One launch's work, as proton's launch hook reads it: 2 M N K FLOPs at the inputs' width,
    and a, b and c each moved once."""
    m, n, k = args["M"], args["N"], args["K"]
    size = args["a_ptr"].element_size()
    return {f"flops{8 * size}": 2.0 * m * n * k, "bytes": size * (m * k + k * n + m * n)}


@functools.cache
def _kernel():
    import triton
    import triton.language as tl

    @triton.jit(launch_metadata=declared)
    def matmul_kernel(
        a_ptr, b_ptr, c_ptr, M, N, K,
        stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
        BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
        IEEE: tl.constexpr, UPCAST: tl.constexpr,
    ):  # fmt: skip
        pid = tl.program_id(0)
        num_m, num_n = tl.cdiv(M, BLOCK_M), tl.cdiv(N, BLOCK_N)
        group = GROUP_M * num_n
        first_m = (pid // group) * GROUP_M
        size_m = min(num_m - first_m, GROUP_M)
        pid_m = first_m + ((pid % group) % size_m)
        pid_n = (pid % group) // size_m
        offs_m = (pid_m * BLOCK_M + tl.arange(0, BLOCK_M)) % M
        offs_n = (pid_n * BLOCK_N + tl.arange(0, BLOCK_N)) % N
        offs_k = tl.arange(0, BLOCK_K)
        a_ptrs = a_ptr + offs_m[:, None] * stride_am + offs_k[None, :] * stride_ak
        b_ptrs = b_ptr + offs_k[:, None] * stride_bk + offs_n[None, :] * stride_bn
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for kk in range(0, tl.cdiv(K, BLOCK_K)):
            a = tl.load(a_ptrs, mask=offs_k[None, :] < K - kk * BLOCK_K, other=0.0)
            b = tl.load(b_ptrs, mask=offs_k[:, None] < K - kk * BLOCK_K, other=0.0)
            if UPCAST:
                a = a.to(tl.float32)
                b = b.to(tl.float32)
            if IEEE:
                acc = tl.dot(a, b, acc, input_precision="ieee")
            else:
                acc = tl.dot(a, b, acc)
            a_ptrs += BLOCK_K * stride_ak
            b_ptrs += BLOCK_K * stride_bk
        c = acc.to(c_ptr.dtype.element_ty)
        rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
        cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
        c_ptrs = c_ptr + rows[:, None] * stride_cm + cols[None, :] * stride_cn
        tl.store(c_ptrs, c, mask=(rows[:, None] < M) & (cols[None, :] < N))

    return matmul_kernel


@functools.cache
def _tuned():
    import triton

    configs = [
        triton.Config(dict(BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, GROUP_M=g), num_warps=w, num_stages=s)
        for bm, bn, bk, g, w, s in CONFIGS
    ]
    return triton.autotune(configs=configs, key=["M", "N", "K"])(_kernel())


def triton_matmul(a, b):
    """a @ b in one Triton launch (2-D, same dtype, float32, float16 or bfloat16)."""
    import torch

    float_dtype_or_raise(a, (torch.float32, torch.float16, torch.bfloat16), "triton_matmul")
    if a.dim() != 2 or b.dim() != 2 or a.shape[1] != b.shape[0] or a.dtype != b.dtype:
        raise ValueError(
            f"triton_matmul takes two 2-D matrices of one dtype, not {tuple(a.shape)} @ {tuple(b.shape)}"
        )
    m, k = a.shape
    n = b.shape[1]
    c = torch.empty((m, n), device=a.device, dtype=a.dtype)
    args = (a, b, c, m, n, k, a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1))
    # Triton 3.9's interpreter multiplies bfloat16 tiles wrongly in tl.dot (relative error 1e10 at
    # 64x64): there the tiles go to float32 first, exact for bfloat16, and are multiplied in IEEE
    upcast = interpreting() and a.dtype == torch.bfloat16
    ieee = a.dtype == torch.float32 or upcast

    def grid(meta):
        return (cdiv(m, meta["BLOCK_M"]) * cdiv(n, meta["BLOCK_N"]),)

    with on_device(a.device):
        if interpreting():
            bm, bn, bk, g, _, _ = CONFIGS[0]
            _kernel()[grid](*args, BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, GROUP_M=g, IEEE=ieee, UPCAST=upcast)
        else:
            _tuned()[grid](*args, IEEE=ieee, UPCAST=False)
    return c
