"""Which Nsight Compute counters count tensor-core work on this GPU: one matmul per precision
(bf16, fp16, tf32, fp32 without tensor cores, a Triton bf16 tl.dot), each in an NVTX range of its
own, warmed up outside it. Run it under ncu with every tensor metric, then compare each counter
with the 2 n^3 FLOPs printed at the end:

    ncu --nvtx --nvtx-include "bf16/" --nvtx-include "tf32/" --nvtx-include "fp32/" \\
        --nvtx-include "triton_bf16/" --metrics "gpu__time_duration.sum,\\
    sm__cycles_elapsed.avg.per_second,regex:sm__ops_path_tensor_.*,\\
    regex:sm__inst_executed_pipe_tensor.*,regex:sm__pipe_tensor.*" \\
        -f -o tensor-probe python benchmarks/probes/probe_ncu_tensor_counters.py 4096
    ncu --import tensor-probe.ncu-rep --page raw --csv > tensor-probe.csv
"""

import sys

import torch
import triton
import triton.language as tl

n = int(sys.argv[1]) if len(sys.argv) > 1 else 4096


@triton.jit
def _mm(a, b, c, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    pm, pn = tl.program_id(0), tl.program_id(1)
    rm, rn, rk = pm * BM + tl.arange(0, BM), pn * BN + tl.arange(0, BN), tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, K, BK):
        x = tl.load(a + rm[:, None] * K + (k + rk)[None, :])
        y = tl.load(b + (k + rk)[:, None] * N + rn[None, :])
        acc += tl.dot(x, y)
    tl.store(c + rm[:, None] * N + rn[None, :], acc.to(c.dtype.element_ty))


def _in_range(name, f):
    f()
    torch.cuda.synchronize()
    torch.cuda.nvtx.range_push(name)
    f()
    torch.cuda.synchronize()
    torch.cuda.nvtx.range_pop()


def _with_tf32(on, f):
    def call():
        torch.backends.cuda.matmul.allow_tf32 = on
        try:
            f()
        finally:
            torch.backends.cuda.matmul.allow_tf32 = False

    return call


a16 = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
h16, a32, out = a16.half(), a16.float(), torch.empty_like(a16)
_in_range("bf16", lambda: a16 @ a16)
_in_range("fp16", lambda: h16 @ h16)
_in_range("tf32", _with_tf32(True, lambda: a32 @ a32))
_in_range("fp32", _with_tf32(False, lambda: a32 @ a32))
_in_range(
    "triton_bf16",
    lambda: _mm[(n // 128, n // 128)](
        a16, a16, out, n, n, n, BM=128, BN=128, BK=64, num_warps=8, num_stages=3
    ),
)
print("flops per matmul", 2 * n**3)
