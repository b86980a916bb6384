"""The CUDA C++ and C++ texts of the cuda_square extension (workloads/kernels/cuda_square.py says
what each kernel does and how the extension is built): GPU-MODE lecture 1's kernel, the float4
grid-stride kernel, and the pybind11 bindings, which include no torch headers."""

from __future__ import annotations

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
    // blocks_per_sm x SMs, capped by the work only: a grid above one wave is oversubscribed on
    // purpose (on the H200 torch's own one-float4-a-thread kernel beat every persistent grid,
    // kernels-h200.md). No occupancy query per launch: its answer capped nothing, and the call
    // was host time on every launch (the host-side goal: 1.2x torch's op).
    int64_t blocks = (int64_t)blocks_per_sm * (int64_t)sms;
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

// The cached call's launch (fast_square's second and later calls on the same input shape):
// the same launch as fast_square, bound with CPython's vectorcall convention instead of
// pybind11, whose dispatch (overload resolution, a type caster per argument) was host time on
// every call (the host-side goal: 1.2x torch's op). Same arguments; returns None.
static PyObject* gprof_fast_square_call(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
    if (nargs != 9) {
        PyErr_Format(PyExc_TypeError, "fast_square_call takes 9 arguments (%zd given)", nargs);
        return nullptr;
    }
    const unsigned long long x = PyLong_AsUnsignedLongLong(args[0]);
    const unsigned long long y = PyLong_AsUnsignedLongLong(args[1]);
    const long long n = PyLong_AsLongLong(args[2]);
    const long threads = PyLong_AsLong(args[3]);
    const long blocks_per_sm = PyLong_AsLong(args[4]);
    const long unroll = PyLong_AsLong(args[5]);
    const int streaming = PyObject_IsTrue(args[6]);
    const long sms = PyLong_AsLong(args[7]);
    const unsigned long long stream = PyLong_AsUnsignedLongLong(args[8]);
    if (PyErr_Occurred()) return nullptr;
    int blocks = 0;
    const cudaError_t err = gprof_launch_fast_square(
        reinterpret_cast<const float*>(static_cast<uintptr_t>(x)), reinterpret_cast<float*>(static_cast<uintptr_t>(y)),
        n, (int)threads, (int)blocks_per_sm, (int)unroll, streaming != 0, (int)sms,
        reinterpret_cast<cudaStream_t>(static_cast<uintptr_t>(stream)), &blocks);
    if (err != cudaSuccess) {
        PyErr_Format(PyExc_RuntimeError, "fast_square launch: %s: %s", cudaGetErrorName(err), cudaGetErrorString(err));
        return nullptr;
    }
    Py_RETURN_NONE;
}

static PyMethodDef gprof_fast_square_call_def = {
    "fast_square_call", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)(void)>(gprof_fast_square_call)),
    METH_FASTCALL, "fast_square's launch without pybind11's dispatch; returns None"};

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
    m.doc() = "gprof-orch square kernels (lecture and fast)";
    m.def("lecture_square", &lecture_square, "lecture square_matrix_kernel launch");
    m.def("fast_square", &fast_square, "float4 grid-stride square launch; returns the grid size");
    PyObject* call = PyCFunction_New(&gprof_fast_square_call_def, nullptr);
    if (call == nullptr) throw pybind11::error_already_set();
    m.attr("fast_square_call") = pybind11::reinterpret_steal<pybind11::object>(call);
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
