"""Elementwise square in CUDA C++, built with torch.utils.cpp_extension.load_inline.

Two kernels in one extension (one build, about as long as one):

``lecture_square(x)``
    GPU-MODE lecture 1's ``square_matrix_kernel``, kernel text as in the lecture: a 2-D grid of
    16x16 thread blocks, one float a thread, ``result[idx] = matrix[idx] * matrix[idx]`` with a
    32-bit ``int`` index. ``x`` is viewed as a matrix (rows = all dimensions but the last; 1-D
    is one row), so it takes fewer than 2**31 elements and at most 65535*16 rows.

``fast_square(x, config=None)``
    Grid-stride loop over 16-byte ``float4`` vectors, ``unroll`` independent vector loads in
    flight per thread before the first store, a scalar tail (n % 4 elements), 64-bit indices;
    the grid is ``blocks_per_sm`` x SM count blocks of ``threads`` threads, capped by how many
    fit on an SM at once (``cudaOccupancyMaxActiveBlocksPerMultiprocessor``: a grid-stride grid
    larger than one wave would run a second, short wave) and by the work. When either pointer
    is not 16-byte aligned (a view starting mid-vector) a scalar grid-stride kernel runs
    instead. ``streaming`` uses ``__ldcs``/``__stcs`` (evict-first cache hints).

float32 only (the lecture's kernel is float32; TypeError otherwise). Non-contiguous input is
copied to a contiguous tensor first. Both launch on torch's current stream of x's device.

Build design, to keep the build short: the .cu text includes only ``cuda_runtime.h`` and the
C++ text only pybind11 (no torch headers: ``torch/extension.h`` alone takes most of a
load_inline build); Python passes data pointers, sizes and the stream handle as integers,
allocates the output and does all the checking. ``-O3 -lineinfo``, and
``-gencode=arch=compute_90,code=sm_90`` when the device is sm_90 (otherwise torch picks the
arch flags). The build goes to ``$GPROF_ORCH_CACHE/torch_extensions/<name>`` (default
``~/.cache/gprof-orch``), created first (load_inline fails if it does not exist); ``<name>``
carries a hash of the sources, flags, torch and CUDA versions, so an edit rebuilds and an
unchanged source loads the cached build.
"""
from __future__ import annotations

import hashlib
import inspect
import os
import sys
import threading
from dataclasses import dataclass

from workloads.kernels._common import as_matrix, cdiv, coerce_config, compute_capability, num_sms, on_device

# ----------------------------------------------------------------------------- sources

LECTURE_CUDA_SRC = r"""
// GPU-MODE lecture 1: square a matrix, one float a thread, 16x16 thread blocks.
__global__ void square_matrix_kernel(const float* matrix, float* result, int width, int height) {
    int row = blockIdx.y * blockDim.y + threadIdx.y;
    int col = blockIdx.x * blockDim.x + threadIdx.x;

    if (row < height && col < width) {
        int idx = row * width + col;
        result[idx] = matrix[idx] * matrix[idx];
    }
}

// The lecture's launch configuration; its torch::Tensor wrapper lives in Python here.
cudaError_t gprof_launch_lecture_square(const float* matrix, float* result, int width, int height,
                                        cudaStream_t stream) {
    dim3 threads_per_block(16, 16);
    dim3 number_of_blocks((width + threads_per_block.x - 1) / threads_per_block.x,
                          (height + threads_per_block.y - 1) / threads_per_block.y);
    square_matrix_kernel<<<number_of_blocks, threads_per_block, 0, stream>>>(matrix, result, width, height);
    return cudaGetLastError();
}
"""

FAST_CUDA_SRC = r"""
#include <stdint.h>

__device__ __forceinline__ float4 gprof_sq4(float4 v) {
    return make_float4(v.x * v.x, v.y * v.y, v.z * v.z, v.w * v.w);
}

template <bool STREAMING>
__device__ __forceinline__ float4 gprof_load4(const float4* p) {
    if (STREAMING) return __ldcs(p);
    return *p;
}

template <bool STREAMING>
__device__ __forceinline__ void gprof_store4(float4* p, float4 v) {
    if (STREAMING) __stcs(p, v);
    else *p = v;
}

// y[i] = x[i]^2 for i < n; x and y 16-byte aligned. Grid-stride over float4 vectors, UNROLL
// independent 16-byte loads in flight per thread; the n % 4 tail by the first threads.
template <int UNROLL, bool STREAMING>
__global__ void square_vec4_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t n) {
    const float4* __restrict__ x4 = reinterpret_cast<const float4*>(x);
    float4* __restrict__ y4 = reinterpret_cast<float4*>(y);
    const int64_t n4 = n >> 2;
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    for (; i + (UNROLL - 1) * stride < n4; i += UNROLL * stride) {
        float4 v[UNROLL];
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) v[u] = gprof_load4<STREAMING>(x4 + i + u * stride);
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) gprof_store4<STREAMING>(y4 + i + u * stride, gprof_sq4(v[u]));
    }
    for (; i < n4; i += stride) gprof_store4<STREAMING>(y4 + i, gprof_sq4(gprof_load4<STREAMING>(x4 + i)));
    const int64_t t = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    const int64_t tail = (n4 << 2) + t;
    if (tail < n) {
        float v = x[tail];
        y[tail] = v * v;
    }
}

// Fallback for pointers that are not 16-byte aligned: grid-stride over single floats.
template <int UNROLL>
__global__ void square_scalar_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t n) {
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    for (; i + (UNROLL - 1) * stride < n; i += UNROLL * stride) {
        float v[UNROLL];
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) v[u] = x[i + u * stride];
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) y[i + u * stride] = v[u] * v[u];
    }
    for (; i < n; i += stride) {
        float v = x[i];
        y[i] = v * v;
    }
}

template <typename Kernel>
static cudaError_t gprof_launch(Kernel kernel, const float* x, float* y, int64_t n, int64_t items,
                                int threads, int blocks_per_sm, int sms, cudaStream_t stream,
                                int* blocks_used) {
    int fit = 0;
    cudaError_t err = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&fit, kernel, threads, 0);
    if (err != cudaSuccess) return err;
    if (fit < 1) fit = 1;
    // blocks_per_sm up to what fits on an SM gives a persistent grid (one wave); above that the
    // grid is oversubscribed on purpose: on the H200 torch's own one-float4-a-thread kernel
    // beat every persistent grid (kernels-h200.md), so large k is measured too.
    int64_t per_sm = blocks_per_sm;
    (void)fit;
    int64_t blocks = per_sm * (int64_t)sms;
    int64_t needed = (items + threads - 1) / threads;
    if (needed < 1) needed = 1;
    if (blocks > needed) blocks = needed;
    if (blocks < 1) blocks = 1;
    if (blocks_used) *blocks_used = (int)blocks;
    kernel<<<(unsigned int)blocks, threads, 0, stream>>>(x, y, n);
    return cudaGetLastError();
}

template <bool STREAMING>
static cudaError_t gprof_launch_vec4(int unroll, const float* x, float* y, int64_t n, int threads,
                                     int blocks_per_sm, int sms, cudaStream_t stream, int* used) {
    const int64_t items = (n >> 2) / unroll + 1;  // one loop trip per thread when the grid allows
    switch (unroll) {
        case 1: return gprof_launch(square_vec4_kernel<1, STREAMING>, x, y, n, items, threads, blocks_per_sm, sms, stream, used);
        case 2: return gprof_launch(square_vec4_kernel<2, STREAMING>, x, y, n, items, threads, blocks_per_sm, sms, stream, used);
        case 4: return gprof_launch(square_vec4_kernel<4, STREAMING>, x, y, n, items, threads, blocks_per_sm, sms, stream, used);
        case 8: return gprof_launch(square_vec4_kernel<8, STREAMING>, x, y, n, items, threads, blocks_per_sm, sms, stream, used);
        default: return cudaErrorInvalidValue;
    }
}

// Returns the CUDA error; *blocks_used gets the grid that ran.
cudaError_t gprof_launch_fast_square(const float* x, float* y, int64_t n, int threads, int blocks_per_sm,
                                     int unroll, bool streaming, int sms, cudaStream_t stream,
                                     int* blocks_used) {
    if (n <= 0) return cudaSuccess;
    const bool aligned = ((reinterpret_cast<uintptr_t>(x) | reinterpret_cast<uintptr_t>(y)) & 15) == 0;
    if (aligned) {
        if (streaming) return gprof_launch_vec4<true>(unroll, x, y, n, threads, blocks_per_sm, sms, stream, blocks_used);
        return gprof_launch_vec4<false>(unroll, x, y, n, threads, blocks_per_sm, sms, stream, blocks_used);
    }
    const int64_t items = n / 4 + 1;
    return gprof_launch(square_scalar_kernel<4>, x, y, n, items, threads, blocks_per_sm, sms, stream, blocks_used);
}
"""

CUDA_PRELUDE = "#include <cuda_runtime.h>\n#include <stdint.h>\n"

# pybind11 only: no torch headers (they dominate a load_inline build's time).
CPP_SRC = r"""
#include <pybind11/pybind11.h>
#include <cuda_runtime_api.h>
#include <stdint.h>
#include <stdexcept>
#include <string>

cudaError_t gprof_launch_lecture_square(const float* matrix, float* result, int width, int height,
                                        cudaStream_t stream);
cudaError_t gprof_launch_fast_square(const float* x, float* y, int64_t n, int threads, int blocks_per_sm,
                                     int unroll, bool streaming, int sms, cudaStream_t stream,
                                     int* blocks_used);

static void gprof_check(cudaError_t err, const char* what) {
    if (err != cudaSuccess) {
        throw std::runtime_error(std::string(what) + ": " + cudaGetErrorName(err) + ": " +
                                 cudaGetErrorString(err));
    }
}

// Pointers and the stream come from Python as integers (tensor.data_ptr(), stream.cuda_stream).
void lecture_square(uintptr_t matrix, uintptr_t result, int width, int height, uintptr_t stream) {
    gprof_check(gprof_launch_lecture_square(reinterpret_cast<const float*>(matrix),
                                            reinterpret_cast<float*>(result), width, height,
                                            reinterpret_cast<cudaStream_t>(stream)),
                "lecture_square launch");
}

int fast_square(uintptr_t x, uintptr_t y, int64_t n, int threads, int blocks_per_sm, int unroll,
                bool streaming, int sms, uintptr_t stream) {
    int blocks = 0;
    gprof_check(gprof_launch_fast_square(reinterpret_cast<const float*>(x), reinterpret_cast<float*>(y), n,
                                         threads, blocks_per_sm, unroll, streaming, sms,
                                         reinterpret_cast<cudaStream_t>(stream), &blocks),
                "fast_square launch");
    return blocks;
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
    m.doc() = "gprof-orch square kernels (lecture and fast)";
    m.def("lecture_square", &lecture_square, "lecture square_matrix_kernel launch");
    m.def("fast_square", &fast_square, "float4 grid-stride square launch; returns the grid size");
}
"""


def cuda_sources() -> dict[str, str]:
    """The source texts: 'lecture' and 'fast' (.cu parts), 'cuda' (the whole .cu), 'cpp'."""
    return {
        "lecture": LECTURE_CUDA_SRC,
        "fast": FAST_CUDA_SRC,
        "cuda": CUDA_PRELUDE + LECTURE_CUDA_SRC + FAST_CUDA_SRC,
        "cpp": CPP_SRC,
    }


# ----------------------------------------------------------------------------- build

EXT_PREFIX = "gprof_orch_square"
_lock = threading.Lock()
_module = None


def cache_root() -> str:
    root = os.environ.get("GPROF_ORCH_CACHE") or os.path.join(os.path.expanduser("~"), ".cache", "gprof-orch")
    return os.path.join(root, "torch_extensions")


def cuda_flags(device=None) -> list[str]:
    """nvcc flags: -O3 -lineinfo, plus sm_90 code when the device is sm_90 (else torch picks)."""
    flags = ["-O3", "-lineinfo"]
    if device is not None and compute_capability(device) == (9, 0):
        flags.append("-gencode=arch=compute_90,code=sm_90")
    return flags


def extension_name(flags: list[str]) -> str:
    import torch

    h = hashlib.sha256()
    for part in (CUDA_PRELUDE, LECTURE_CUDA_SRC, FAST_CUDA_SRC, CPP_SRC, " ".join(flags),
                 torch.__version__, str(torch.version.cuda), sys.version.split()[0]):
        h.update(part.encode())
        h.update(b"\0")
    return f"{EXT_PREFIX}_{h.hexdigest()[:16]}"


def build_extensions(verbose: bool = False, device=None):
    """Build (or load the cached build of) the extension holding both kernels; returns it.

    Thread-safe; the first call builds (tens of seconds), later calls return the loaded module.
    """
    global _module
    if _module is not None:
        return _module
    with _lock:
        if _module is not None:
            return _module
        import torch

        if not torch.cuda.is_available():
            raise RuntimeError("cuda_square needs a CUDA build of torch and a GPU "
                               f"(torch {torch.__version__}, cuda available: False)")
        from torch.utils.cpp_extension import load_inline

        if device is None:
            device = torch.device("cuda", torch.cuda.current_device())
        flags = cuda_flags(device)
        name = extension_name(flags)
        build_dir = os.path.join(cache_root(), name)
        os.makedirs(build_dir, exist_ok=True)
        kwargs = dict(
            name=name,
            cpp_sources=[CPP_SRC],
            cuda_sources=[CUDA_PRELUDE + LECTURE_CUDA_SRC + FAST_CUDA_SRC],
            extra_cflags=["-O2"],
            extra_cuda_cflags=flags,
            build_directory=build_dir,
            verbose=verbose,
            with_cuda=True,
        )
        # without it (older torch) load_inline prepends torch headers: harmless, only slower
        if "no_implicit_headers" in inspect.signature(load_inline).parameters:
            kwargs["no_implicit_headers"] = True
        _module = load_inline(**kwargs)
        return _module


# ----------------------------------------------------------------------------- python API


@dataclass(frozen=True)
class CudaSquareConfig:
    threads: int = 256
    blocks_per_sm: int = 8
    unroll: int = 4
    streaming: bool = False

    def __post_init__(self) -> None:
        if self.threads % 32 or not 32 <= self.threads <= 1024:
            raise ValueError(f"threads must be a multiple of 32 in [32, 1024], got {self.threads}")
        if self.unroll not in (1, 2, 4, 8):
            raise ValueError(f"unroll must be 1, 2, 4 or 8, got {self.unroll}")
        if self.blocks_per_sm < 1:
            raise ValueError(f"blocks_per_sm must be >= 1, got {self.blocks_per_sm}")

    @property
    def name(self) -> str:
        return f"t{self.threads}_k{self.blocks_per_sm}_u{self.unroll}" + ("_cs" if self.streaming else "")

    @classmethod
    def parse(cls, value) -> "CudaSquareConfig":
        def from_name(text: str) -> "CudaSquareConfig":
            parts = text.split("_")
            kv = dict((p[0], int(p[1:])) for p in parts if p[0] in "tku" and p[1:].isdigit())
            return cls(kv["t"], kv["k"], kv["u"], "cs" in parts)

        return coerce_config(cls, value, from_name)


DEFAULT_CONFIG = CudaSquareConfig(threads=128, blocks_per_sm=1024, unroll=1)


def sweep_configs() -> list[CudaSquareConfig]:
    out = []
    for threads in (128, 256, 512):
        for k in (4, 8, 32, 128, 1024):
            for unroll in (1, 2, 4):
                out.append(CudaSquareConfig(threads, k, unroll, False))
    out += [CudaSquareConfig(256, 2, 8, False), CudaSquareConfig(128, 1024, 1, True),
            CudaSquareConfig(256, 1024, 1, True)]
    return out


def _check_input(x, what: str):
    import torch

    if x.dtype != torch.float32:
        raise TypeError(f"{what} supports float32 only; got {str(x.dtype).replace('torch.', '')}")
    if x.device.type != "cuda":
        raise RuntimeError(f"{what} needs a CUDA tensor; got one on {x.device}")


def _stream(device) -> int:
    import torch

    return int(torch.cuda.current_stream(device).cuda_stream)


def lecture_square(x):
    """x * x with the lecture's 16x16-block kernel (float32, CUDA, < 2**31 elements)."""
    import torch

    _check_input(x, "lecture_square")
    m = as_matrix(x)
    height, width = m.shape
    if m.numel() >= 2**31:
        raise ValueError(f"lecture_square indexes with int: fewer than 2**31 elements, got {m.numel()}")
    if cdiv(height, 16) > 65535:
        raise ValueError(f"lecture_square's grid has at most 65535 rows of 16: got {height} rows")
    out = torch.empty_like(m)
    if m.numel():
        ext = build_extensions(device=m.device)
        with on_device(m.device):
            ext.lecture_square(m.data_ptr(), out.data_ptr(), width, height, _stream(m.device))
    return out.view(x.shape)


def fast_square(x, config: CudaSquareConfig | dict | tuple | str | None = None):
    """x * x with the float4 grid-stride kernel (float32, CUDA). Returns a contiguous tensor."""
    import torch

    _check_input(x, "fast_square")
    cfg = DEFAULT_CONFIG if config is None else CudaSquareConfig.parse(config)
    src = x if x.is_contiguous() else x.contiguous()
    out = torch.empty_like(src, memory_format=torch.contiguous_format)
    n = src.numel()
    if n:
        ext = build_extensions(device=src.device)
        with on_device(src.device):
            ext.fast_square(src.data_ptr(), out.data_ptr(), n, cfg.threads, cfg.blocks_per_sm,
                            cfg.unroll, bool(cfg.streaming), num_sms(src.device), _stream(src.device))
    return out
