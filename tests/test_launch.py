"""Tests of the fast launch path (workloads/kernels/_launch.py) of fast_mean and triton_square.

On a CPU the Triton kernels run in the interpreter, which has no compiled kernel: the fast
path's bookkeeping (keys, learning from a plain call, the arguments it passes) runs with a
fake backend whose "launch" rebuilds the tensors from the int pointers it is given and runs
the same kernel through the interpreter. A wrong grid, pointer, size or constexpr shows as a
wrong result. On a GPU the real path is tested against the plain one (gpu-marked tests).
"""

from __future__ import annotations

import ctypes
import os
from types import SimpleNamespace

import pytest
import torch

HAS_CUDA = torch.cuda.is_available()
if not HAS_CUDA:
    # before triton is first imported (conftest.py does the same; either is enough)
    os.environ.setdefault("TRITON_INTERPRET", "1")


def _interpreting() -> tuple[bool, str]:
    from test_kernels import _triton_interpreting

    if HAS_CUDA:
        return False, "a GPU is present: the gpu tests cover the real launch path"
    return _triton_interpreting()


INTERP_OK, INTERP_WHY = _interpreting()
requires_interp = pytest.mark.skipif(not INTERP_OK, reason=INTERP_WHY)


def _tensor_at(ptr: int, dtype) -> torch.Tensor:
    """A one-element CPU tensor at address `ptr` (the interpreter reads memory by address, so
    the kernel sees the whole buffer the pointer starts)."""
    size = torch.empty((), dtype=dtype).element_size()
    return torch.frombuffer((ctypes.c_byte * size).from_address(ptr), dtype=dtype)


class FakeBackend:
    """CPU tensors on "device 0", on a stream the test sets; a bound launch replays the kernel
    through the interpreter with the arguments the fast path passes."""

    def __init__(self, refuse: str | None = None):
        self.stream = 7
        self.refuse = refuse
        self.fast_launches = 0
        self.bound: list = []

    def describe(self) -> str:
        return "fake: interpreter replay"

    def where(self, x):
        return (0, self.stream) if x.device.type == "cpu" else None

    def bind(self, record, stream):
        if self.refuse:
            return None, self.refuse
        dtypes = [a.dtype if hasattr(a, "data_ptr") else None for a in record.args]
        options = {k: v for k, v in record.kwargs.items() if k not in record.kernel.arg_names}
        self.bound.append((record, stream))

        def launch(*args):
            assert len(args) == len(record.kernel.arg_names), args
            self.fast_launches += 1
            real = list(args)
            for i, dt in enumerate(dtypes):
                if dt is not None:
                    assert isinstance(args[i], int), "pointers go to the C launcher as ints"
                    real[i] = _tensor_at(args[i], dt)
            # constexprs arrive positionally, as the C launcher gets them: same values as planned
            for name, value in zip(record.kernel.arg_names[len(record.args) :], args[len(record.args) :]):
                assert record.kwargs[name] == value, (name, value)
            record.kernel[record.grid](*real, **options)

        return launch, "fake"


def _rand(n, dtype, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.rand(n, generator=g).to(dtype)


def _same_bits(a, b) -> bool:
    """Bit-equal (NaN included: the mean of an empty tensor)."""
    return (
        a.dtype == b.dtype
        and a.shape == b.shape
        and torch.equal(a.reshape(-1).view(torch.uint8), b.reshape(-1).view(torch.uint8))
    )


def _both(fn, x, **kw):
    """(plain result, fast result): the fast one from a cached launch. The first fast-mode
    call learns (on a GPU the first of a config only after its occupancy is known: two)."""
    from workloads.kernels import _launch

    with _launch.launch_mode("plain"):
        plain = fn(x, **kw)
    got = [fn(x, **kw) for _ in range(3)]
    assert all(_same_bits(g, got[-1]) for g in got), got
    return plain, got[-1]


class HookedBackend(FakeBackend):
    """As a CUDA backend with a launch hook registered: Triton's launches must go the plain way
    (where: None), a launch that is not Triton's is placed all the same (place)."""

    def where(self, x):
        return None

    def place(self, x):
        return super().where(x)


def test_a_triton_hook_holds_back_triton_keys_not_the_extensions():
    """call_key(triton=False), the CUDA extension's key, skips the checks of Triton's hooks and
    modes (they cannot see or change its launch); Triton's keys still stop at them."""
    from workloads.kernels import _launch
    from workloads.kernels.cuda_square import CudaSquareConfig
    from workloads.kernels.triton_square import SquareConfig

    x = torch.zeros(64)
    with _launch.use_backend(HookedBackend()):
        assert _launch.call_key(x, None, SquareConfig) is None
        assert _launch.call_key(x, None, CudaSquareConfig, triton=False) == (
            64,
            torch.float32,
            True,
            (0, 7),
            None,
        )
    with _launch.use_backend(FakeBackend()):  # a backend without place(): where() serves both
        assert _launch.call_key(x, None, CudaSquareConfig, triton=False) == _launch.call_key(
            x, None, SquareConfig
        )
    with _launch.launch_mode("plain"):
        assert _launch.call_key(x, None, CudaSquareConfig, triton=False) is None


@requires_interp
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float64])
def test_fast_mean_bit_identical_to_plain(dtype):
    from workloads.kernels import _launch
    from workloads.kernels.triton_mean import MeanConfig, fast_mean

    with _launch.use_backend(FakeBackend()) as fake:
        for n, cfg in ((1, None), (4097, None), (10 * 64 * 4 + 13, MeanConfig(64, 2, 3))):
            x = _rand(n, dtype, seed=n)
            before = fake.fast_launches
            plain, fast = _both(fast_mean, x, config=cfg)
            assert fake.fast_launches == before + 2, "the later fast calls did not take the cached launch"
            assert _same_bits(plain, fast) and fast.dtype == dtype and fast.dim() == 0
        # the kernel's counter is back at zero after cached launches too
        from workloads.kernels import triton_mean as tm

        assert all(c.item() == 0 for _, c in tm._workspaces.values())


@requires_interp
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.float64])
def test_triton_square_bit_identical_to_plain(dtype):
    from workloads.kernels import _launch
    from workloads.kernels.triton_square import SquareConfig, triton_square

    with _launch.use_backend(FakeBackend()) as fake:
        for n, cfg in ((7, None), (1000, SquareConfig(128, 4, False)), (33 * 65, None)):
            x = torch.randn(n, generator=torch.Generator().manual_seed(n)).to(dtype)
            before = fake.fast_launches
            plain, fast = _both(triton_square, x, config=cfg)
            assert fake.fast_launches == before + 2
            assert _same_bits(plain, fast) and torch.equal(fast, x * x)
        m = torch.randn(3, 11, 65)  # shape kept, cached too
        assert torch.equal(triton_square(m), m * m) and torch.equal(triton_square(m), m * m)


@requires_interp
def test_cached_launch_not_reused_across_dtype_size_alignment_stream():
    from workloads.kernels import _launch
    from workloads.kernels.triton_mean import fast_mean
    from workloads.kernels.triton_square import triton_square

    with _launch.use_backend(FakeBackend()) as fake:
        for fn, name in ((fast_mean, "fast_mean"), (triton_square, "triton_square")):
            fc = _launch.fast_calls(name)
            base = _rand(2000, torch.float32, seed=1)
            shapes = [
                (base[:1000], 7),
                (base[:1000].to(torch.bfloat16), 7),
                (base[:999], 7),
                (base[1:1001], 7),
                (base[:1000], 8),
            ]
            seen = set()
            for x, stream in shapes:
                fake.stream = stream
                n_calls, n_fast = len(fc.calls), fake.fast_launches
                fn(x)  # a new shape: learned from a plain call, no cached launch used
                assert fake.fast_launches == n_fast, (name, x.dtype, x.numel(), stream)
                assert len(fc.calls) == n_calls + 1
                key = next(k for k in fc.calls if k not in seen)
                seen.add(key)
                assert fake.bound[-1][1] == stream  # bound to the stream its key names
                again = fn(x)  # the same shape again: the cached launch
                assert fake.fast_launches == n_fast + 1
                assert torch.equal(again, fn(x))
            fake.stream = 7
            # the unaligned view x[1:] got its own key (Triton compiles it apart)
            assert {k[2] for k in fc.calls} == {True, False}
            assert {k[-2] for k in fc.calls} == {(0, 7), (0, 8)}


@requires_interp
def test_fallbacks_to_the_plain_path():
    from workloads.kernels import _launch
    from workloads.kernels.triton_mean import fast_mean
    from workloads.kernels.triton_square import triton_square

    x = _rand(1500, torch.float32, seed=2)
    want_mean = fast_mean(x)
    # here (TRITON_INTERPRET=1) the real path declines, and says why
    assert "TRITON_INTERPRET" in _launch.status()["path"]
    assert not any(_launch.fast_calls(k).calls for k in ("fast_mean", "triton_square"))
    # a backend that cannot bind: remembered as refused, every call plain and right
    with _launch.use_backend(FakeBackend(refuse="no relaunch here")) as fake:
        for _ in range(3):
            assert torch.equal(fast_mean(x), want_mean)
            assert torch.equal(triton_square(x), x * x)
        assert fake.fast_launches == 0
        assert _launch.fast_calls("fast_mean").refused == {"no relaunch here": 1}
        # non-contiguous input, a config given as a string, integers: the plain path as before
        m = x.reshape(30, 50)[:, ::2]
        assert torch.equal(triton_square(m), m * m) and torch.equal(triton_square(x, "b128_w4"), x * x)
        with pytest.raises(TypeError, match="fast_mean supports"):
            fast_mean(torch.arange(10))
        with pytest.raises(TypeError, match="triton_square supports"):
            triton_square(torch.arange(10))
        assert torch.isnan(fast_mean(torch.empty(0)))
    # plain mode, asked for
    with _launch.use_backend(FakeBackend()) as fake, _launch.launch_mode("plain"):
        fast_mean(x), fast_mean(x)
        assert fake.fast_launches == 0 and "plain" in _launch.status()["path"]


def test_run_contract_and_bind_without_a_gpu():
    """The detection of Triton's launch API and the bound call's argument order, with fakes."""
    from workloads.kernels import _launch, _launch_cuda

    three_six = """
            launch_metadata = kernel.launch_metadata(grid, stream, *bound_args.values())
            kernel.run(grid_0, grid_1, grid_2, stream, kernel.function, kernel.packed_metadata, launch_metadata,
                       knobs.runtime.launch_enter_hook, knobs.runtime.launch_exit_hook, *bound_args.values())
    """
    assert _launch_cuda.run_contract_in(three_six)
    assert not _launch_cuda.run_contract_in(three_six.replace("kernel.packed_metadata, ", ""))
    calls = []
    record = _launch.Launch(
        None,
        (5, 1, 1),
        (),
        {},
        SimpleNamespace(run=lambda *a: calls.append(a), function=1234, packed_metadata=(8, 1, 0)),
    )
    launch, how = _launch_cuda.bind_compiled(record, 99)
    assert how == "run"
    launch(11, 22, 3, "BLOCK")
    assert calls == [(5, 1, 1, 99, 1234, (8, 1, 0), None, None, None, 11, 22, 3, "BLOCK")]

    class Launcher:  # stands for 3.6's CudaLauncher: its C launch called directly
        launch_cooperative_grid, launch_pdl, global_scratch_size, profile_scratch_size = False, False, 0, 0

        def __init__(self):
            self.launch = CLaunch()

        def __call__(self, *a):
            calls.append(("run",) + a)

    class CLaunch:
        def __call__(self, *a):
            calls.append(a)

    calls.clear()
    record = record._replace(
        compiled=SimpleNamespace(run=Launcher(), function=1234, packed_metadata=(8, 1, 0))
    )
    launch, how = _launch_cuda.bind_compiled(record, 99, direct_cls=Launcher)
    assert how == "direct"
    launch(11, 22)
    assert calls == [(5, 1, 1, 99, 1234, False, False, None, None, (8, 1, 0), None, None, None, 11, 22)]
    # scratch memory per launch, no loaded function, another API: not relaunched directly / at all
    record.compiled.run.global_scratch_size = 64
    assert _launch_cuda.bind_compiled(record, 99, direct_cls=Launcher)[1] == "run"
    assert (
        _launch_cuda.bind_compiled(
            record._replace(compiled=SimpleNamespace(run=Launcher(), function=None, packed_metadata=())), 99
        )[0]
        is None
    )
    launch, why = _launch_cuda.bind_compiled(record._replace(compiled=object()), 99)
    assert launch is None and "not a relaunchable CompiledKernel" in why
    with pytest.raises(ValueError):
        _launch.set_mode("turbo")


class FakeCuda:
    """cuLaunchKernel and cuGetErrorName as C function pointers (ctypes), for the own launcher
    on a machine with no GPU: a launch records what the driver would receive, params read back
    through the kinds the test expects."""

    LAUNCH = ctypes.CFUNCTYPE(
        ctypes.c_int,
        ctypes.c_void_p,
        *([ctypes.c_uint] * 7),
        ctypes.c_void_p,
        ctypes.POINTER(ctypes.c_void_p),
        ctypes.POINTER(ctypes.c_void_p),
    )
    ERROR_NAME = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_int, ctypes.POINTER(ctypes.c_char_p))
    READ = {
        "p": ctypes.c_uint64,
        "L": ctypes.c_uint64,
        "l": ctypes.c_int64,
        "i": ctypes.c_int32,
        "I": ctypes.c_uint32,
    }

    def __init__(self, read: str, result: int = 0):
        self.read, self.result, self.calls = read, result, []
        self._launch = self.LAUNCH(self._record)
        self._name = self.ERROR_NAME(self._error_name)

    def _record(self, fn, gx, gy, gz, bx, by, bz, shared, stream, params, extra):
        vals = [ctypes.cast(params[i], ctypes.POINTER(self.READ[k]))[0] for i, k in enumerate(self.read)]
        self.calls.append(((fn, gx, gy, gz, bx, by, bz, shared, stream), vals, bool(extra)))
        return self.result

    def _error_name(self, code, out):
        out[0] = b"CUDA_ERROR_INVALID_VALUE"
        return 0

    @property
    def entry_points(self) -> tuple[int, int]:
        cast = lambda f: ctypes.cast(f, ctypes.c_void_p).value  # noqa: E731
        return cast(self._launch), cast(self._name)


def _compiled(signature: dict, **meta):
    base = dict(
        launch_cooperative_grid=False,
        launch_pdl=False,
        global_scratch_size=0,
        profile_scratch_size=0,
        tensordesc_meta=None,
    )
    return SimpleNamespace(
        metadata=SimpleNamespace(**dict(base, **meta)),
        src=SimpleNamespace(signature=signature),
        packed_metadata=(4, 1, 512),
        function=0x1234,
    )


SQUARE_SIG = {
    "x_ptr": "*fp32",
    "out_ptr": "*fp32",
    "n": "i32",
    "BLOCK": "constexpr",
    "UPCAST": "constexpr",
    "HINTS": "constexpr",
}


def test_own_launcher_passes_what_cuLaunchKernel_needs():
    """The own launcher, built with this machine's C compiler and called with a fake driver:
    the CUfunction, grid, 32 x num_warps threads, shared memory and stream as bound; one param
    per non-constexpr argument, of the signature's width, then Triton 3.6's two NULL scratch
    pointers; constexprs ignored. Wrong counts, widths and driver errors raise."""
    from workloads.kernels import _launch_own

    mod, why = _launch_own.load()
    if mod is None:
        pytest.skip(why)
    fake = FakeCuda("ppipp")  # x, out, n, then the two scratch pointers
    launch, why = _launch_own.bind(_compiled(SQUARE_SIG), (977, 1, 1), 0x55, fake.entry_points)
    assert why == "" and launch is not None
    assert launch(1 << 40, (2 << 40) + 16, 10**6, 1024, False, True) is None
    assert fake.calls == [
        ((0x1234, 977, 1, 1, 128, 1, 1, 512, 0x55), [1 << 40, (2 << 40) + 16, 10**6, 0, 0], False)
    ]
    with pytest.raises(OverflowError, match="int32"):
        launch(1, 2, 2**31, 1024, False, True)
    with pytest.raises(TypeError, match="takes 6 arguments"):
        launch(1, 2, 3)
    with pytest.raises(TypeError):
        launch(1, "2", 3, 1024, False, True)
    assert len(fake.calls) == 1  # none of the bad calls reached the driver
    # 64-bit and unsigned widths, a constexpr between them
    fake = FakeCuda("lIpLpp")
    sig = {"a": "i64", "b": "u32", "K": "constexpr", "p": "*bf16", "c": "u64"}
    launch, _ = _launch_own.bind(_compiled(sig), (2, 3, 4), 0, fake.entry_points)
    launch(-(2**40), 2**32 - 1, "ignored", 8, 2**64 - 1)
    assert fake.calls[0][0][1:4] == (2, 3, 4) and fake.calls[0][1] == [
        -(2**40),
        2**32 - 1,
        8,
        2**64 - 1,
        0,
        0,
    ]
    with pytest.raises(OverflowError, match="uint32"):
        launch(0, 2**32, None, 8, 0)
    # the driver's error, named
    fake = FakeCuda("ppipp", result=1)
    launch, _ = _launch_own.bind(_compiled(SQUARE_SIG), (1, 1, 1), 0, fake.entry_points)
    with pytest.raises(RuntimeError, match=r"CUDA_ERROR_INVALID_VALUE \(1\)"):
        launch(1, 2, 3, 1024, False, True)
    # an empty grid launches nothing, as Triton's launcher
    fake = FakeCuda("ppipp")
    launch, _ = _launch_own.bind(_compiled(SQUARE_SIG), (0, 1, 1), 0, fake.entry_points)
    launch(1, 2, 3, 1024, False, True)
    assert fake.calls == []


@pytest.mark.parametrize(
    "signature, meta, why",
    [
        ({"x": "fp32"}, {}, "argument type"),
        ({"t": ("*fp32", "i32")}, {}, "argument type"),
        (SQUARE_SIG, {"global_scratch_size": 64}, "scratch"),
        (SQUARE_SIG, {"launch_pdl": True}, "PDL"),
        (SQUARE_SIG, {"tensordesc_meta": [{}]}, "descriptors"),
    ],
)
def test_own_launcher_refuses_what_it_does_not_do(signature, meta, why):
    from workloads.kernels import _launch_own

    if _launch_own.load()[0] is None:
        pytest.skip(_launch_own.load()[1])
    launch, got = _launch_own.bind(_compiled(signature, **meta), (1, 1, 1), 0, FakeCuda("").entry_points)
    assert launch is None and why in got


def test_bind_compiled_prefers_the_own_launcher_then_triton_c():
    """bind_compiled's tiers: 'own' where asked for and the kernel allows, else Triton's C
    launch ('direct'), as before."""
    from workloads.kernels import _launch, _launch_cuda, _launch_own

    if _launch_own.load()[0] is None:
        pytest.skip(_launch_own.load()[1])

    class Launcher:  # stands for 3.6's CudaLauncher
        launch_cooperative_grid, launch_pdl, global_scratch_size, profile_scratch_size = False, False, 0, 0

        def __init__(self):
            self.launch = print  # a C callable, as Triton's generated launch

        def __call__(self, *args):
            raise AssertionError("not called at bind time")

    compiled = _compiled(SQUARE_SIG)
    compiled.run = Launcher()
    record = _launch.Launch(None, (5, 1, 1), (), {}, compiled)
    fake = FakeCuda("ppipp")
    launch, how = _launch_cuda.bind_compiled(record, 99, Launcher, own=True, entry_points=fake.entry_points)
    assert how == "own"
    launch(11, 22, 3, 1024, False, False)
    assert fake.calls == [((0x1234, 5, 1, 1, 128, 1, 1, 512, 99), [11, 22, 3, 0, 0], False)]
    assert _launch_cuda.bind_compiled(record, 99, Launcher, own=False)[1] == "direct"
    # a float argument: Triton's C launch, and the tier says why not ours
    floaty = record._replace(compiled=_compiled(dict(SQUARE_SIG, n="fp32")))
    floaty.compiled.run = compiled.run
    how = _launch_cuda.bind_compiled(floaty, 99, Launcher, own=True, entry_points=fake.entry_points)[1]
    assert how.startswith("direct (not ours: an argument type not launched here"), how
    compiled.metadata.global_scratch_size = 64  # our launcher does not allocate scratch: Triton's does
    compiled.run.global_scratch_size = 64
    assert (
        _launch_cuda.bind_compiled(record, 99, Launcher, own=True, entry_points=fake.entry_points)[1] == "run"
    )
    # another Triton's launcher class (not 3.6's layout): never ours
    assert (
        _launch_cuda.bind_compiled(record._replace(compiled=_compiled(SQUARE_SIG)), 99, None, own=True)[1]
        != "own"
    )


def test_each_launch_mode_keeps_its_own_cached_launches():
    """A launch learned in one mode is served only in that mode (the bench times our launcher
    and Triton's side by side), and comes back when its mode does."""
    from workloads.kernels import _launch

    fc = _launch.fast_calls("mode-switch-test")
    fc.calls["k"] = ("bound in this mode",)
    here = _launch.mode()
    other = "triton-c" if here != "triton-c" else "fast"
    with _launch.launch_mode(other):
        assert "k" not in fc.calls
        fc.calls["k"] = ("bound in the other mode",)
    assert fc.calls["k"] == ("bound in this mode",)
    with _launch.launch_mode(other):
        assert fc.calls["k"] == ("bound in the other mode",)
    _launch.clear()
    assert "k" not in fc.calls


def test_kernel_modules_still_import_nothing_heavy():
    import subprocess
    import sys
    from pathlib import Path

    repo = Path(__file__).resolve().parent.parent
    code = (
        "import sys\nimport workloads.kernels._launch, workloads.kernels.triton_mean\n"
        "import workloads.kernels.triton_square\n"
        "heavy = [m for m in ('torch', 'triton') if m in sys.modules]\nassert not heavy, heavy\n"
    )
    res = subprocess.run(
        [sys.executable, "-c", code],
        cwd=repo,
        capture_output=True,
        text=True,
        timeout=60,
        env=dict(os.environ, PYTHONPATH=str(repo)),
    )
    assert res.returncode == 0, res.stderr


# ----------------------------------------------------------------------------- GPU


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_gpu_fast_path_bit_identical_and_keyed(dtype):
    if not HAS_CUDA:
        pytest.skip("needs a CUDA GPU")
    from workloads.kernels import _launch
    from workloads.kernels.triton_mean import fast_mean
    from workloads.kernels.triton_square import triton_square

    assert _launch.status()["path"].startswith("fast"), _launch.status()
    for n in (1, 4097, 10**6 + 3, 10**7):
        x = torch.rand(n, device="cuda").to(dtype)
        # x[1:]: not 16-byte aligned, another compiled kernel, another key (empty for n=1: NaN)
        for v in (x, x[1:]):
            for fn in (fast_mean, triton_square):
                plain, fast = _both(fn, v)
                assert _same_bits(plain, fast), (fn.__name__, v.numel(), dtype)
            assert torch.equal(triton_square(v), torch.square(v))
    for name in ("fast_mean", "triton_square"):
        fc = _launch.fast_calls(name)
        assert any(v is not None for v in fc.calls.values()), fc.describe()
        assert not fc.refused, fc.refused
        # our cuLaunchKernel launcher serves every learned launch of these kernels
        assert set(fc.tiers) == {"own"}, (name, fc.describe(), _launch.status()["path"])
    # another stream: its own launches (and workspace), results the same
    x = torch.rand(10**6 + 3, device="cuda").to(dtype)
    want = fast_mean(x), triton_square(x)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        got = [(fast_mean(x), triton_square(x)) for _ in range(3)][-1]
    s.synchronize()
    assert _same_bits(got[0], want[0]) and _same_bits(got[1], want[1])
    keys = [k for k in _launch.fast_calls("fast_mean").calls if k[0] == x.numel() and k[1] == dtype]
    assert len({k[3] for k in keys}) >= 2


@pytest.mark.gpu
def test_gpu_own_and_triton_c_launches_agree():
    """The two cached launchers, ours (mode fast) and Triton's C launch (mode triton-c), give
    bit-identical results to the plain path, each through the tier it names."""
    if not HAS_CUDA:
        pytest.skip("needs a CUDA GPU")
    from workloads.kernels import _launch
    from workloads.kernels.triton_mean import fast_mean
    from workloads.kernels.triton_square import triton_square

    x = torch.rand(10**6 + 5, device="cuda")
    with _launch.launch_mode("plain"):
        want = fast_mean(x), triton_square(x)
    for mode, tier in (("fast", "own"), ("triton-c", "direct")):
        with _launch.launch_mode(mode):
            got = [(fast_mean(x), triton_square(x)) for _ in range(3)][-1]
            tiers = {n: dict(_launch.fast_calls(n).tiers) for n in ("fast_mean", "triton_square")}
        assert _same_bits(got[0], want[0]) and torch.equal(got[1], want[1]), mode
        assert all(set(t) == {tier} for t in tiers.values()), (mode, tiers)


@pytest.mark.gpu
def test_gpu_launch_hooks_take_the_plain_path():
    if not HAS_CUDA:
        pytest.skip("needs a CUDA GPU")
    from triton import knobs

    from workloads.kernels.triton_mean import fast_mean

    chain = getattr(knobs.runtime.launch_enter_hook, "add", None)
    if chain is None:
        pytest.skip("this triton's launch hooks are not a HookChain")
    x = torch.rand(10**6, device="cuda")
    fast_mean(x), fast_mean(x)
    seen = []
    hook = lambda metadata: seen.append(metadata)  # noqa: E731
    knobs.runtime.launch_enter_hook.add(hook)
    try:
        got = fast_mean(x)
    finally:
        knobs.runtime.launch_enter_hook.remove(hook)
    assert len(seen) == 1, "a registered launch hook did not see the launch"
    assert _same_bits(got, fast_mean(x))


@pytest.mark.gpu
def test_gpu_cuda_fast_square_cached_call_is_torch_square():
    """The load_inline fast_square's cached call (a seen size, stream and alignment skips the
    checks and the config choice) gives torch.square's bits, per stream and alignment."""
    if not HAS_CUDA:
        pytest.skip("needs a CUDA GPU")
    from workloads.kernels import cuda_square

    for n in (1, 4097, 10**6 + 3, 2**24 + 4):
        x = torch.rand(n, device="cuda")
        for v in (x, x[1:]):
            got = [cuda_square.fast_square(v) for _ in range(3)]
            for g in got:
                assert torch.equal(g, torch.square(v)), v.numel()
    keys = [k for k in cuda_square._CALLS if k[0] == 10**6 + 3]
    assert keys, "no cached call was learned"
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    x = torch.rand(10**6 + 3, device="cuda")
    with torch.cuda.stream(s):
        got = [cuda_square.fast_square(x) for _ in range(3)][-1]
    s.synchronize()
    assert torch.equal(got, torch.square(x))
    assert len({k[3] for k in cuda_square._CALLS if k[0] == x.numel()}) >= 2


def test_cuda_square_config_follows_the_size():
    """Small inputs take two float4 loads a thread, large ones torch's one (the H200 sweeps)."""
    from workloads.kernels import cuda_square

    assert cuda_square.choose_config(10**6).name == "t256_k1024_u2"
    assert cuda_square.choose_config(1 << 24).name == "t256_k1024_u2"
    assert cuda_square.choose_config((1 << 24) + 1) == cuda_square.DEFAULT_CONFIG
    assert cuda_square.choose_config(10**8).name == "t128_k1024_u1"
