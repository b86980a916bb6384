"""Tests of workloads/kernels: Triton mean and square, CUDA (load_inline) and numba square.

On a CPU machine: Triton through its interpreter (TRITON_INTERPRET=1, set before triton is
imported: here and in conftest.py), numba through its simulator in a child process (so that
numba is not left in simulator mode for other tests), the CUDA source compiled by nvcc when
it is installed. On a GPU: the same kernels compiled, at 1e6 to 1e8 elements, against torch.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

REPO = Path(__file__).resolve().parent.parent
HAS_CUDA = torch.cuda.is_available()
if not HAS_CUDA:
    # before triton is first imported (conftest.py does the same; either is enough)
    os.environ.setdefault("TRITON_INTERPRET", "1")

requires_cuda = pytest.mark.skipif(not HAS_CUDA, reason="needs a CUDA GPU")
gpu = [pytest.mark.gpu, requires_cuda]


def _triton_interpreting() -> tuple[bool, str]:
    """Whether Triton kernels can run on CPU tensors in this process."""
    try:
        import triton  # noqa: F401
        import triton.language as tl
        from triton.runtime.jit import JITFunction
    except ImportError as e:
        return False, f"triton not importable: {e}"
    if isinstance(tl.zeros, JITFunction):
        return False, "triton was imported before TRITON_INTERPRET=1 was set in this process"
    return True, ""


if HAS_CUDA:
    INTERP_OK, INTERP_WHY = False, "a GPU is present: the GPU tests cover Triton"
else:
    INTERP_OK, INTERP_WHY = _triton_interpreting()
requires_interp = pytest.mark.skipif(not INTERP_OK, reason=INTERP_WHY)

SIZES = [1, 7, 1000, 4097, 65536 + 3]
# The lecture kernel walks a 1-D input with one scalar loop, one interpreted step an element
# (65539 elements: 10-15 s a dtype). Its largest size only has to be past where a float16
# accumulator stops growing (sums >= 2048 drop every addend < 1): at 8195 float16 accumulation
# gives ~50% error and fails, as at 65539; at 4097 it still passes (measured by mutating the
# kernel's accumulator to the input dtype). bfloat16 accumulation fails from 7 elements on.
LECTURE_SIZES = [1, 7, 1000, 4097, 8192 + 3]
HALF = [torch.float16, torch.bfloat16]


def _rand(n, dtype, seed=0, device="cpu"):
    g = torch.Generator(device="cpu").manual_seed(seed)
    # torch.rand: a mean near 0.5, so relative errors mean something
    return torch.rand(n, generator=g, dtype=torch.float32).to(device=device, dtype=dtype)


def _rel_err(got, x):
    ref = x.double().mean().item()
    return abs(got.double().item() - ref) / abs(ref)


def _tol(dtype):
    return {torch.float32: 1e-5, torch.float64: 1e-12}.get(dtype, 1e-2)


# ----------------------------------------------------------------------------- Triton mean, CPU


@requires_interp
@pytest.mark.parametrize("dtype", [torch.float32, *HALF])
@pytest.mark.parametrize("n", SIZES)
def test_fast_mean_matches_float64(n, dtype):
    from workloads.kernels.triton_mean import MeanConfig, fast_mean

    x = _rand(n, dtype, seed=n)
    for cfg in (None, MeanConfig(block=128, num_warps=4, programs_per_sm=1)):
        got = fast_mean(x, config=cfg)
        assert got.dtype == dtype and got.dim() == 0
        assert _rel_err(got, x) < _tol(dtype), (n, dtype, cfg)


@requires_interp
@pytest.mark.parametrize("dtype", [torch.float32, *HALF])
@pytest.mark.parametrize("n", LECTURE_SIZES)
def test_lecture_mean_matches_float64(n, dtype):
    from workloads.kernels.triton_mean import lecture_mean

    x = _rand(n, dtype, seed=n)
    got = lecture_mean(x)
    assert got.dtype == dtype and got.dim() == 0
    assert _rel_err(got, x) < _tol(dtype)


@requires_interp
@pytest.mark.parametrize("shape", [(1, 1), (3, 5), (17, 241), (64, 130), (2, 3, 67)])
def test_lecture_mean_2d_shapes(shape):
    from workloads.kernels.triton_mean import fast_mean, lecture_mean

    x = _rand(int(torch.tensor(shape).prod()), torch.float32, seed=1).reshape(shape)
    assert _rel_err(lecture_mean(x), x) < 1e-5
    assert _rel_err(lecture_mean(x, block_size=32), x) < 1e-5
    assert _rel_err(fast_mean(x), x) < 1e-5


@requires_interp
def test_mean_persistent_loop_and_tail():
    """More tiles than programs (each program loops), a ragged tail, several programs."""
    from workloads.kernels import triton_mean as tm

    x = _rand(10 * 64 * 4 + 13, torch.float32, seed=3)
    for cfg in (
        tm.MeanConfig(64, 2, 1),
        tm.MeanConfig(64, 2, 3),
        tm.MeanConfig(16, 1, 2),
        tm.MeanConfig(64, 2, 2, stages=3),
    ):
        assert _rel_err(tm.fast_mean(x, config=cfg), x) < 1e-5, cfg
    # the kernel leaves the counter at zero for the next call
    for partials, counter in tm._workspaces.values():
        assert counter.item() == 0


@requires_interp
def test_mean_float64_and_config_forms():
    from workloads.kernels.triton_mean import MeanConfig, fast_mean, lecture_mean

    x = _rand(5000, torch.float64, seed=4)
    assert _rel_err(fast_mean(x), x) < 1e-12
    assert _rel_err(lecture_mean(x), x) < 1e-12
    for form in (
        {"block": 256, "num_warps": 4, "programs_per_sm": 2},
        (256, 4, 2),
        "b256_w4_p2",
        MeanConfig(256, 4, 2),
    ):
        assert _rel_err(fast_mean(x, config=form), x) < 1e-12
    assert MeanConfig.parse("b256_w4_p2").name == "b256_w4_p2"
    assert MeanConfig.parse("b256_w4_p2_s3") == MeanConfig(256, 4, 2, 3)
    with pytest.raises(ValueError):
        MeanConfig(block=1000)


@requires_interp
def test_mean_non_contiguous_and_empty():
    from workloads.kernels.triton_mean import fast_mean, lecture_mean

    base = _rand(37 * 129, torch.float32, seed=5).reshape(37, 129)
    for x in (base[:, ::2], base.t(), base[5:, 3:100]):
        assert not x.is_contiguous()
        assert _rel_err(fast_mean(x), x) < 1e-5
        assert _rel_err(lecture_mean(x), x) < 1e-5
    for dtype in (torch.float32, torch.bfloat16):
        for empty in (torch.empty(0, dtype=dtype), torch.empty(3, 0, dtype=dtype)):
            for fn in (fast_mean, lecture_mean):
                got = fn(empty)
                assert got.dtype == dtype and got.dim() == 0 and torch.isnan(got)
                assert torch.isnan(torch.mean(empty))  # what torch does


def test_mean_rejects_integers():
    from workloads.kernels.triton_mean import fast_mean, lecture_mean

    for fn in (fast_mean, lecture_mean):
        with pytest.raises(TypeError):
            fn(torch.arange(10))


def test_heuristic_and_sweep_configs():
    from workloads.kernels import cuda_square as cs
    from workloads.kernels import triton_mean as tm
    from workloads.kernels import triton_square as ts

    assert tm.choose_config(1).block <= tm.choose_config(10**8).block
    assert tm.choose_config(10**12) == tm.FAST_MEAN_HEURISTIC[-1][1]
    configs = tm.sweep_configs()
    assert len(configs) == len(set(configs)) > 8
    assert all(4 <= c.block // (32 * c.num_warps) <= 64 for c in configs)
    assert ts.SquareConfig.parse("b2048_w8_nohint") == ts.SquareConfig(2048, 8, False)
    assert cs.CudaSquareConfig.parse("t256_k8_u4_cs") == cs.CudaSquareConfig(256, 8, 4, True)
    assert len(ts.sweep_configs()) > 4 and len(cs.sweep_configs()) > 4


def test_occupancy_bound():
    from types import SimpleNamespace

    from workloads.kernels._common import max_programs_per_sm

    h100 = SimpleNamespace(
        regs_per_multiprocessor=65536,
        max_threads_per_multi_processor=2048,
        shared_memory_per_multiprocessor=233472,
    )
    assert max_programs_per_sm(32, 0, 8, h100) == 8  # thread-bound
    assert max_programs_per_sm(40, 0, 8, h100) == 6  # 40 regs -> 1280 a warp
    assert max_programs_per_sm(72, 0, 8, h100) == 3
    assert max_programs_per_sm(255, 0, 32, h100) == 1


# ----------------------------------------------------------------------------- Triton square, CPU


@requires_interp
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, *HALF])
@pytest.mark.parametrize("n", SIZES)
def test_triton_square_matches(n, dtype):
    from workloads.kernels.triton_square import SquareConfig, triton_square

    g = torch.Generator().manual_seed(n)
    x = torch.randn(n, generator=g).to(dtype)
    for cfg in (None, SquareConfig(128, 4, False), SquareConfig(64, 2, True)):
        y = triton_square(x, cfg)
        assert y.dtype == dtype and y.shape == x.shape
        if dtype == torch.bfloat16:
            # the interpreter rounds float32 -> bfloat16 by truncation; the GPU rounds to
            # nearest (exact there: see the GPU test)
            torch.testing.assert_close(y, x * x, rtol=1e-2, atol=0)
        else:
            assert torch.equal(y, x * x), (n, dtype, cfg)


@requires_interp
def test_triton_square_shapes_non_contiguous_empty():
    from workloads.kernels.triton_square import triton_square

    x = torch.randn(33, 65)
    for v in (x, x[:, 1::3], x.t(), x.reshape(3, 11, 65)):
        y = triton_square(v)
        assert y.shape == v.shape and torch.equal(y, v * v)
    assert triton_square(torch.empty(0, 4)).shape == (0, 4)
    with pytest.raises(TypeError):
        triton_square(torch.arange(4))


@pytest.mark.skipif(INTERP_OK or HAS_CUDA, reason="the Triton CPU tests ran in this process")
def test_triton_cpu_tests_in_fresh_interpreter():
    """When triton was imported in this process before TRITON_INTERPRET=1 (by another test
    module), the interpreter tests above skip; run them in a child process instead."""
    env = dict(os.environ, TRITON_INTERPRET="1", PYTHONPATH=str(REPO))
    res = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            __file__,
            "-k",
            "mean or triton_square",
        ],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert res.returncode == 0, res.stdout[-4000:] + res.stderr[-2000:]
    assert " passed" in res.stdout, res.stdout[-2000:]


# ----------------------------------------------------------------------------- numba, simulator

_NUMBA_SIM_SCRIPT = textwrap.dedent("""
    import numpy as np
    from workloads.kernels.numba_square import numba_square, simulating
    assert simulating()
    rng = np.random.default_rng(0)
    for n in (1, 7, 1000, 4097):
        for dt in (np.float32, np.float64):
            x = rng.standard_normal(n).astype(dt)
            y = numba_square(x)
            assert y.dtype == dt and y.shape == x.shape and np.array_equal(y, x * x), (n, dt)
    m = rng.standard_normal((9, 13)).astype(np.float32)[:, ::2]
    assert np.array_equal(numba_square(m), m * m)
    assert numba_square(np.empty(0, np.float32)).shape == (0,)
    try:
        numba_square(np.zeros(3, np.int32))
    except TypeError:
        pass
    else:
        raise AssertionError("int32 accepted")
    import torch
    t = torch.randn(5, 7)
    assert torch.equal(numba_square(t), t * t)
    print("NUMBA-SIM-OK")
""")


def test_numba_square_in_simulator():
    pytest.importorskip("numba")
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="1", PYTHONPATH=str(REPO))
    res = subprocess.run(
        [sys.executable, "-c", _NUMBA_SIM_SCRIPT],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert res.returncode == 0 and "NUMBA-SIM-OK" in res.stdout, res.stdout[-3000:] + res.stderr[-3000:]


def test_kernel_modules_import_without_heavy_packages():
    code = (
        "import sys\n"
        "import workloads.kernels.triton_mean, workloads.kernels.triton_square\n"
        "import workloads.kernels.cuda_square, workloads.kernels.numba_square\n"
        "heavy = [m for m in ('torch', 'triton', 'numba') if m in sys.modules]\n"
        "assert not heavy, heavy\n"
    )
    res = subprocess.run(
        [sys.executable, "-c", code],
        cwd=REPO,
        capture_output=True,
        text=True,
        env=dict(os.environ, PYTHONPATH=str(REPO)),
        timeout=60,
    )
    assert res.returncode == 0, res.stderr


# ----------------------------------------------------------------------------- CUDA source

requires_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc")


def test_cuda_sources_text():
    from workloads.kernels.cuda_square import extension_name
    from workloads.kernels.cuda_square_sources import cuda_sources

    src = cuda_sources()
    assert (
        "__global__ void square_matrix_kernel(const float* matrix, float* result, int width, int height)"
        in src["lecture"]
    )
    assert "dim3 threads_per_block(16, 16);" in src["lecture"]
    assert "result[idx] = matrix[idx] * matrix[idx];" in src["lecture"]
    assert "float4" in src["fast"] and "gprof_launch_vec4" in src["fast"]
    # the launch asks the runtime nothing per call (host time on every launch)
    assert "cudaOccupancy" not in src["fast"] and "cudaFuncGetAttributes" not in src["fast"]
    assert src["cuda"].count("__global__") == 3
    assert "PYBIND11_MODULE(TORCH_EXTENSION_NAME" in src["cpp"] and "torch/" not in src["cpp"]
    assert extension_name(["-O3"]) != extension_name(["-O3", "-lineinfo"])
    assert extension_name(["-O3"]).startswith("gprof_orch_square_")


def test_cuda_square_without_cuda_raises():
    if HAS_CUDA:
        pytest.skip("has CUDA")
    from workloads.kernels.cuda_square import fast_square, lecture_square

    with pytest.raises(TypeError):
        fast_square(torch.zeros(4, dtype=torch.float16))
    for fn in (fast_square, lecture_square):
        with pytest.raises(RuntimeError):
            fn(torch.zeros(4))


@pytest.fixture(scope="module")
def nvcc_object(tmp_path_factory):
    """(nvcc's result, the object) of the CUDA source compiled once for sm_90: -Xptxas -v for
    the register and spill report, -Xcompiler -fPIC so that the link test below puts this same
    object into the extension (nvcc once, not twice)."""
    from workloads.kernels.cuda_square_sources import cuda_sources

    d = tmp_path_factory.mktemp("nvcc")
    cu = d / "square.cu"
    cu.write_text(cuda_sources()["cuda"])
    res = subprocess.run(
        [
            "nvcc",
            "-c",
            "-O3",
            "-gencode=arch=compute_90,code=sm_90",
            "-Xptxas",
            "-v",
            "-Xcompiler",
            "-fPIC",
            str(cu),
            "-o",
            str(d / "square.o"),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    return res, d / "square.o"


@requires_nvcc
def test_cuda_source_compiles_with_nvcc(nvcc_object):
    res, _ = nvcc_object
    assert res.returncode == 0, res.stderr[-4000:]
    log = res.stdout + res.stderr
    assert "square_matrix_kernel" in log and "square_vec4_kernel" in log
    assert "bytes spill" not in log or all(" 0 bytes spill" in ln for ln in log.splitlines() if "spill" in ln)


@pytest.mark.slow
@requires_nvcc
def test_cuda_extension_links_and_imports(tmp_path, nvcc_object):
    """Build the extension the way load_inline does (nvcc + g++ + pybind11 from torch's
    headers), import it, and see a launch fail cleanly with a CUDA error on a GPU-less machine."""
    import sysconfig

    from torch.utils import cpp_extension

    from workloads.kernels.cuda_square_sources import cuda_sources

    cxx = shutil.which("g++") or shutil.which("c++")
    if cxx is None:
        pytest.skip("needs a C++ compiler")
    candidates = [
        os.environ.get("CUDA_HOME"),
        os.environ.get("CUDA_PATH"),
        cpp_extension.CUDA_HOME,
        str(Path(shutil.which("nvcc")).resolve().parent.parent),
        "/usr/local/cuda",
    ]
    homes = [Path(c) for c in candidates if c and (Path(c) / "include" / "cuda_runtime_api.h").exists()]
    if not homes:
        pytest.skip("no CUDA toolkit folder with include/cuda_runtime_api.h found")
    cuda_home = homes[0]
    (tmp_path / "main.cpp").write_text(cuda_sources()["cpp"])
    name = "gprof_square_linktest"

    def run(cmd):
        return subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=600)

    r, cuda_o = nvcc_object  # cuda_sources()["cuda"], nvcc -c -O3 sm_90 -Xcompiler -fPIC
    assert r.returncode == 0, r.stderr[-3000:]
    incs = [f"-I{p}" for p in cpp_extension.include_paths()] + [
        f"-I{sysconfig.get_paths()['include']}",
        f"-I{cuda_home / 'include'}",
    ]
    r = run(
        [
            cxx,
            "-O2",
            "-fPIC",
            "-std=c++17",
            f"-DTORCH_EXTENSION_NAME={name}",
            *incs,
            "-c",
            "main.cpp",
            "-o",
            "main.o",
        ]
    )
    assert r.returncode == 0, r.stderr[-3000:]
    so = name + sysconfig.get_config_var("EXT_SUFFIX")
    libdirs = [d for d in (cuda_home / "lib64", cuda_home / "lib") if d.exists()]
    r = run([cxx, "-shared", "main.o", str(cuda_o), *[f"-L{d}" for d in libdirs], "-lcudart", "-o", so])
    assert r.returncode == 0, r.stderr[-3000:]
    # without a GPU a launch must fail cleanly (RuntimeError naming the launch); with one, only import
    code = textwrap.dedent(f"""
        import {name} as m
        assert hasattr(m, "lecture_square") and hasattr(m, "fast_square") and hasattr(m, "fast_square_call")
        try:
            m.fast_square_call(0, 0, 100)
        except TypeError as e:
            assert "9 arguments (3 given)" in str(e), e
        else:
            raise AssertionError("fast_square_call took 3 arguments")
        if {not HAS_CUDA}:
            for f in (m.fast_square, m.fast_square_call):
                try:
                    f(0, 0, 100, 256, 8, 4, False, 132, 0)
                except RuntimeError as e:
                    assert "fast_square launch" in str(e), e
                    print("RAISED", e)
                else:
                    print("RAN")
        print("IMPORTED")
    """)
    env = dict(
        os.environ,
        LD_LIBRARY_PATH=os.pathsep.join([str(d) for d in libdirs] + [os.environ.get("LD_LIBRARY_PATH", "")]),
    )
    r = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, env=env, timeout=120
    )
    assert r.returncode == 0 and "IMPORTED" in r.stdout, r.stdout + r.stderr
    assert HAS_CUDA or "RAISED" in r.stdout, r.stdout


# ----------------------------------------------------------------------------- Triton for sm_90

_TRITON_SM90_SCRIPT = textwrap.dedent("""
    import re, sys
    import triton
    from triton.compiler import ASTSource
    from triton.backends.compiler import GPUTarget
    from workloads.kernels import triton_mean as tm, triton_square as ts
    lecture, fast = tm._kernels()
    square = ts._kernel()
    target = GPUTarget("cuda", 90, 32)
    aligned = lambda *idx: {(i,): [["tt.divisibility", 16]] for i in idx}
    def ptx(fn, sig, constexprs, warps, attrs):
        k = triton.compile(ASTSource(fn=fn, signature=sig, constexprs=constexprs, attrs=attrs),
                           target=target, options={"num_warps": warps})
        return k.asm["ptx"]
    for dt in ("fp32", "bf16", "fp16"):
        p = ptx(fast, {"x_ptr": "*" + dt, "partial_ptr": "*fp64", "counter_ptr": "*i32", "out_ptr": "*" + dt,
                       "n": "i32", "BLOCK": "constexpr", "P_BLOCK": "constexpr", "ACC_FP64": "constexpr",
                       "STAGES": "constexpr"},
                {"BLOCK": 4096, "P_BLOCK": 2048, "ACC_FP64": False, "STAGES": 1}, 8, aligned(0, 1, 2, 3))
        assert re.search(r"ld\\.global[^\\n]*\\.v4", p), "fast_mean: no 16-byte loads"
        assert "atom.global.gpu.acq_rel.add" in p, "fast_mean: no acq_rel counter"
        p = ptx(fast, {"x_ptr": "*" + dt, "partial_ptr": "*fp64", "counter_ptr": "*i32", "out_ptr": "*" + dt,
                       "n": "i64", "BLOCK": "constexpr", "P_BLOCK": "constexpr", "ACC_FP64": "constexpr",
                       "STAGES": "constexpr"},
                {"BLOCK": 8192, "P_BLOCK": 2048, "ACC_FP64": False, "STAGES": 3}, 8, aligned(0, 1, 2, 3))
        p = ptx(square, {"x_ptr": "*" + dt, "out_ptr": "*" + dt, "n": "i32", "BLOCK": "constexpr",
                         "UPCAST": "constexpr", "HINTS": "constexpr"},
                {"BLOCK": 4096, "UPCAST": dt != "fp32", "HINTS": True}, 8, aligned(0, 1))
        assert re.search(r"ld\\.global[^\\n]*\\.v4", p) and re.search(r"st\\.global[^\\n]*\\.v4", p), "square"
        p = ptx(lecture, {"x_ptr": "*" + dt, "out_ptr": "*fp32", "n_cols": "i32", "BLOCK_SIZE": "constexpr",
                          "ACC_FP64": "constexpr"}, {"BLOCK_SIZE": 1024, "ACC_FP64": False}, 4, aligned(0, 1))
    ptx(fast, {"x_ptr": "*fp64", "partial_ptr": "*fp64", "counter_ptr": "*i32", "out_ptr": "*fp64",
               "n": "i32", "BLOCK": "constexpr", "P_BLOCK": "constexpr", "ACC_FP64": "constexpr",
               "STAGES": "constexpr"},
        {"BLOCK": 2048, "P_BLOCK": 1024, "ACC_FP64": True, "STAGES": 1}, 8, aligned(0, 1, 2, 3))
    ptx(lecture, {"x_ptr": "*fp64", "out_ptr": "*fp64", "n_cols": "i32", "BLOCK_SIZE": "constexpr",
                  "ACC_FP64": "constexpr"}, {"BLOCK_SIZE": 1024, "ACC_FP64": True}, 4, aligned(0, 1))
    print("SM90-OK")
""")


@pytest.mark.slow
def test_triton_kernels_compile_for_sm90():
    """Compile the Triton kernels for Hopper without a GPU (triton's own ptxas), and check
    the fast ones use 16-byte vector accesses."""
    pytest.importorskip("triton")
    env = dict(os.environ, PYTHONPATH=str(REPO), TRITON_INTERPRET="0")
    res = subprocess.run(
        [sys.executable, "-c", _TRITON_SM90_SCRIPT],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    if res.returncode != 0 and ("ImportError" in res.stderr or "cannot import name" in res.stderr):
        pytest.skip("this triton has no ASTSource/GPUTarget compile API: " + res.stderr[-300:])
    assert res.returncode == 0 and "SM90-OK" in res.stdout, res.stdout[-2000:] + res.stderr[-4000:]


# ----------------------------------------------------------------------------- GPU

GPU_SIZES = [10**6, 10**7, 10**8]
ALL_DTYPES = [torch.float32, torch.float16, torch.bfloat16]


@pytest.mark.gpu
@requires_cuda
@pytest.mark.parametrize("dtype", ALL_DTYPES)
@pytest.mark.parametrize("n", GPU_SIZES)
def test_gpu_means_vs_torch(n, dtype):
    from workloads.kernels.triton_mean import fast_mean, lecture_mean

    x = _rand(n, dtype, seed=7, device="cuda")
    ref = torch.mean(x, dtype=torch.float64).item()
    # the lecture kernel walks a row with one scalar loop: a 1-D input is one row, minutes long
    # at 1e8, so it gets the 2-D view below, like the lecture's matrix
    got = fast_mean(x)
    assert got.dtype == dtype and got.dim() == 0
    assert abs(got.double().item() - ref) / abs(ref) < _tol(dtype)
    # deterministic: same bits twice; torch's own mean agrees
    assert torch.equal(fast_mean(x), fast_mean(x))
    assert abs(fast_mean(x).double().item() - torch.mean(x).double().item()) / abs(ref) < _tol(dtype)
    x2 = x[: (n // 1000) * 1000].reshape(-1, 1000)
    assert abs(lecture_mean(x2).double().item() - x2.double().mean().item()) / abs(ref) < _tol(dtype)


@pytest.mark.gpu
@requires_cuda
@pytest.mark.parametrize("dtype", ALL_DTYPES)
@pytest.mark.parametrize("n", GPU_SIZES)
def test_gpu_triton_square_exact(n, dtype):
    from workloads.kernels.triton_square import triton_square

    x = torch.randn(n, device="cuda").to(dtype)
    assert torch.equal(triton_square(x), torch.square(x))
    assert torch.equal(triton_square(x[1:]), torch.square(x[1:]))  # misaligned start, ragged


@pytest.mark.gpu
@requires_cuda
@pytest.mark.parametrize("n", GPU_SIZES)
def test_gpu_cuda_square_exact(n):
    from workloads.kernels.cuda_square import CudaSquareConfig, fast_square, lecture_square

    x = torch.randn(n, device="cuda")
    want = torch.square(x)
    assert torch.equal(fast_square(x), want)
    assert torch.equal(fast_square(x[1:]), want[1:])  # not 16-byte aligned: scalar path
    assert torch.equal(fast_square(x[: n - 3]), want[: n - 3])  # tail
    for cfg in (CudaSquareConfig(512, 4, 8, True), CudaSquareConfig(128, 2, 1)):
        assert torch.equal(fast_square(x, cfg), want)
    m = x[: (n // 1000) * 1000].reshape(-1, 1000)
    assert torch.equal(lecture_square(m), torch.square(m))
    with pytest.raises(TypeError):
        fast_square(x.half())


@pytest.mark.gpu
@requires_cuda
@pytest.mark.parametrize("n", GPU_SIZES)
def test_gpu_numba_square_exact(n):
    pytest.importorskip("numba")
    from workloads.kernels.numba_square import NumbaSquareConfig, numba_square

    x = torch.randn(n, device="cuda")
    assert torch.equal(numba_square(x), torch.square(x))
    assert torch.equal(numba_square(x, NumbaSquareConfig(256, 8)), torch.square(x))
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        y = numba_square(x)
    s.synchronize()
    assert torch.equal(y, torch.square(x))


@pytest.mark.gpu
@pytest.mark.slow
@requires_cuda
def test_gpu_more_than_2_31_elements():
    from workloads.kernels.triton_mean import fast_mean
    from workloads.kernels.triton_square import triton_square

    free, _ = torch.cuda.mem_get_info()
    n = 2**31 + 4099
    if free < 4 * n * 2 + (1 << 30):
        pytest.skip("not enough GPU memory")
    x = torch.rand(n, device="cuda", dtype=torch.bfloat16)
    ref = torch.mean(x, dtype=torch.float64).item()
    assert abs(fast_mean(x).double().item() - ref) / ref < 1e-2
    y = triton_square(x)
    tail = slice(n - 5000, n)
    assert torch.equal(y[tail], torch.square(x[tail])) and torch.equal(y[:5000], torch.square(x[:5000]))


# ----------------------------------------------------------------------------- the benchmark script


def test_bench_kernels_dry_run(tmp_path):
    """benchmarks/bench_kernels.py end to end on the CPU: checks, timing loop, sweep, md + json."""
    pytest.importorskip("triton")
    out = tmp_path / "bench.md"
    env = dict(
        os.environ,
        PYTHONPATH=str(REPO),
        TRITON_INTERPRET="1",
        NUMBA_ENABLE_CUDASIM="1",
        GPROF_COMMIT="test-commit",
    )
    res = subprocess.run(
        [
            sys.executable,
            str(REPO / "benchmarks" / "bench_kernels.py"),
            "--dry-run",
            "--sweep-configs",
            "--reps",
            "2",
            "--sweep-reps",
            "1",
            "--sizes",
            "1000",
            "--bf16-sizes",
            "300",
            "--sweep-sizes",
            "1000",
            "--sweep-limit",
            "1",
            "--out",
            str(out),
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-5000:]
    import json

    data = json.loads(out.with_suffix(".json").read_text())
    rows = {(r["dtype"], r["variant"]): r for r in data["rows"]}
    for name in (
        "copy_d2d",
        "torch.mean",
        "triton_mean_lecture",
        "triton_mean_fast",
        "torch.square",
        "triton_square",
    ):
        assert rows[("float32", name)]["status"] == "ok", rows[("float32", name)]
        assert rows[("float32", name)]["median_ms"] > 0
    assert rows[("float32", "triton_mean_fast")]["vs_torch"] > 0
    assert rows[("float32", "cuda_square_fast")]["status"] == "n/a"
    assert rows[("bfloat16", "numba_square")]["status"] == "n/a"
    if importlib_util_find("numba"):
        assert rows[("float32", "numba_square")]["status"] == "ok"
    assert {b["family"] for b in data["sweep_best"]} >= {"fast_mean", "triton_square"}
    assert data["meta"]["git_commit"] in ("test-commit",) or len(data["meta"]["git_commit"]) >= 7
    md = out.read_text()
    assert "| size | dtype | variant | median ms | IQR ms | GB/s | % copy | vs torch | check |" in md


def importlib_util_find(name: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(name) is not None
