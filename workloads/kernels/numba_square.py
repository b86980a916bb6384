"""Elementwise square with numba.cuda: ``numba_square(x) == x * x``.

The kernel is a grid-stride loop with 4 independent loads per thread in flight before the
first store (loads written before stores in the source: numba cannot know the arrays do not
alias, so it keeps that order), and a remainder loop. Numba has no 16-byte vector type, so
each access is 4 bytes; the grid is by default large enough for one loop trip per thread
(``blocks_per_sm=0``), or ``blocks_per_sm`` x SM count blocks.

Torch tensors go to numba through ``__cuda_array_interface__``
(``numba.cuda.as_cuda_array(t, sync=False)``: no copy, and no synchronisation on the
tensor's stream, which the default ``sync=True`` would do every call), and the kernel is
launched on torch's current stream (``numba.cuda.external_stream``), so it orders with torch's
own work like any torch op.

float32 and float64 (numba and numpy have no bfloat16; float16 is left out); TypeError
otherwise. Non-contiguous input is copied to a contiguous tensor first.

Under the CUDA simulator (NUMBA_ENABLE_CUDASIM=1 before numba is imported) ``numba_square``
takes numpy arrays (and CPU torch tensors, through numpy) and returns the same kind: slow,
one Python thread per GPU thread, for tests on machines without a GPU.

numba is imported on first call, never at module import.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from workloads.kernels._common import cdiv, num_sms, on_device

UNROLL = 4


@dataclass(frozen=True)
class NumbaSquareConfig:
    threads: int = 256
    blocks_per_sm: int = 0  # 0: enough blocks for one loop trip per thread

    @property
    def name(self) -> str:
        return f"t{self.threads}_k{self.blocks_per_sm}"


DEFAULT_CONFIG = NumbaSquareConfig(threads=128, blocks_per_sm=0)


def sweep_configs() -> list[NumbaSquareConfig]:
    return [NumbaSquareConfig(t, k) for t in (128, 256, 512) for k in (0, 8)] + [NumbaSquareConfig(256, 16)]


@functools.cache
def _numba_cuda():
    import numpy as np

    # numba-cuda 0.2x registers an overload of np.row_stack at import; NumPy 2.4 removed that
    # alias (seen on the H200 image: numpy 2.5 + its numba-cuda fail to import). vstack is what
    # row_stack always was.
    if not hasattr(np, "row_stack"):
        np.row_stack = np.vstack
    from numba import cuda

    return cuda


def simulating() -> bool:
    from numba import config

    return bool(config.ENABLE_CUDASIM)


# numba.cuda, bound on first use. The kernel below must reach it as a module global: the
# simulator swaps a kernel's global `cuda` for its fake module, not a closure variable.
cuda = None


def _square_kernel_py(x, out, n):
    stride = cuda.gridsize(1)
    i = cuda.grid(1)
    while i + 3 * stride < n:
        a0 = x[i]
        a1 = x[i + stride]
        a2 = x[i + 2 * stride]
        a3 = x[i + 3 * stride]
        out[i] = a0 * a0
        out[i + stride] = a1 * a1
        out[i + 2 * stride] = a2 * a2
        out[i + 3 * stride] = a3 * a3
        i += 4 * stride
    while i < n:
        a = x[i]
        out[i] = a * a
        i += stride


@functools.cache
def _kernel():
    global cuda
    cuda = _numba_cuda()
    return cuda.jit(_square_kernel_py)


_streams: dict = {}


def _external_stream(cuda, handle: int):
    s = _streams.get(handle)
    if s is None:
        s = cuda.external_stream(handle)
        _streams[handle] = s
    return s


def _grid(n: int, cfg: NumbaSquareConfig, sms: int) -> int:
    full = max(1, cdiv(n, cfg.threads * UNROLL))
    if cfg.blocks_per_sm <= 0:
        return full
    return max(1, min(full, sms * cfg.blocks_per_sm))


def _square_simulated(x, cfg: NumbaSquareConfig):
    import numpy as np

    is_torch = type(x).__module__.startswith("torch")
    arr = x.detach().cpu().numpy() if is_torch else np.asarray(x)
    if arr.dtype not in (np.float32, np.float64):
        raise TypeError(f"numba_square supports float32 and float64; got {arr.dtype}")
    flat = np.ascontiguousarray(arr).reshape(-1)
    out = np.empty_like(flat)
    n = flat.size
    if n:
        threads = min(cfg.threads, 32)  # the simulator runs one Python thread per GPU thread
        blocks = max(1, min(cdiv(n, threads * UNROLL), 4))
        _kernel()[blocks, threads](flat, out, n)
    out = out.reshape(arr.shape)
    if is_torch:
        import torch

        return torch.from_numpy(out)
    return out


def numba_square(x, config: NumbaSquareConfig | None = None):
    """x * x with a numba.cuda kernel on torch's current stream (float32/float64)."""
    cfg = config or DEFAULT_CONFIG
    if simulating():
        return _square_simulated(x, cfg)
    import torch

    if x.dtype not in (torch.float32, torch.float64):
        raise TypeError(
            f"numba_square supports float32 and float64; got {str(x.dtype).replace('torch.', '')}"
        )
    if x.device.type != "cuda":
        raise RuntimeError(f"numba_square needs a CUDA tensor (or NUMBA_ENABLE_CUDASIM=1); got {x.device}")
    cuda = _numba_cuda()
    src = x if x.is_contiguous() else x.contiguous()
    out = torch.empty_like(src, memory_format=torch.contiguous_format)
    n = src.numel()
    if n == 0:
        return out
    flat_in = src.view(-1)
    flat_out = out.view(-1)
    kernel = _kernel()
    with on_device(src.device):
        stream = _external_stream(cuda, int(torch.cuda.current_stream(src.device).cuda_stream))
        try:
            xa = cuda.as_cuda_array(flat_in, sync=False)
            oa = cuda.as_cuda_array(flat_out, sync=False)
        except TypeError:  # a numba without the sync argument
            xa = cuda.as_cuda_array(flat_in)
            oa = cuda.as_cuda_array(flat_out)
        kernel[_grid(n, cfg, num_sms(src.device)), cfg.threads, stream](xa, oa, n)
    return out
