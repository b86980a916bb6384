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
    the grid is ``blocks_per_sm`` x SM count blocks of ``threads`` threads, capped by the work
    only (a grid of several waves is allowed on purpose: it is torch's own shape, and the fastest
    at the copy roof on the H200). When either pointer
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

from workloads.kernels import _launch
from workloads.kernels._common import as_matrix, cdiv, coerce_config, compute_capability, num_sms, on_device
from workloads.kernels.cuda_square_sources import CPP_SRC, CUDA_PRELUDE, FAST_CUDA_SRC, LECTURE_CUDA_SRC

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
    for part in (
        CUDA_PRELUDE,
        LECTURE_CUDA_SRC,
        FAST_CUDA_SRC,
        CPP_SRC,
        " ".join(flags),
        torch.__version__,
        str(torch.version.cuda),
        sys.version.split()[0],
    ):
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
            raise RuntimeError(
                "cuda_square needs a CUDA build of torch and a GPU "
                f"(torch {torch.__version__}, cuda available: False)"
            )
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
    def parse(cls, value) -> CudaSquareConfig:
        def from_name(text: str) -> CudaSquareConfig:
            parts = text.split("_")
            kv = dict((p[0], int(p[1:])) for p in parts if p[0] in "tku" and p[1:].isdigit())
            return cls(kv["t"], kv["k"], kv["u"], "cs" in parts)

        return coerce_config(cls, value, from_name)


DEFAULT_CONFIG = CudaSquareConfig(threads=128, blocks_per_sm=1024, unroll=1)
# (largest numel, config), first match wins; None: every larger size. Chosen from the H200
# sweeps (docs/sweep-cuda-square-h200.md, docs/launch-h200.md): below 2**24 elements the input
# is a few waves of the GPU, and two float4 loads in flight a thread (u2) beat torch's one; from
# there on one float4 a thread (torch's own shape) is the fastest at the copy roof.
CUDA_SQUARE_HEURISTIC: tuple[tuple[int | None, CudaSquareConfig], ...] = (
    (1 << 24, CudaSquareConfig(threads=256, blocks_per_sm=1024, unroll=2)),
    (None, DEFAULT_CONFIG),
)


def choose_config(numel: int) -> CudaSquareConfig:
    """The configuration fast_square uses for `numel` elements when none is given."""
    return next(cfg for limit, cfg in CUDA_SQUARE_HEURISTIC if limit is None or numel <= limit)


def sweep_configs() -> list[CudaSquareConfig]:
    out = []
    for threads in (128, 256, 512):
        for k in (4, 8, 32, 128, 1024):
            for unroll in (1, 2, 4):
                out.append(CudaSquareConfig(threads, k, unroll, False))
    out += [
        CudaSquareConfig(256, 2, 8, False),
        CudaSquareConfig(128, 1024, 1, True),
        CudaSquareConfig(256, 1024, 1, True),
    ]
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


# call key (workloads/kernels/_launch.py call_key) -> (the extension's launch, torch.empty_like,
# torch.contiguous_format, its arguments after the pointers): what a plain call worked out
_CALLS: dict[tuple, tuple] = {}


def fast_square(x, config: CudaSquareConfig | dict | tuple | str | None = None):
    """x * x with the float4 grid-stride kernel (float32, CUDA). Returns a contiguous tensor.
    config: a CudaSquareConfig (or its name); None picks from CUDA_SQUARE_HEURISTIC.

    A call whose (numel, dtype, alignment, device, stream, config) was seen before skips the
    checks, the config choice and the current-stream lookup the first call made, and calls the
    extension with what that call worked out: its host side is then torch.square's
    (docs/launch-h200.md). Under the same switch as the Triton kernels' cached launch."""
    key = _launch.call_key(x, config, CudaSquareConfig, triton=False)
    call = None if key is None else _CALLS.get(key)
    if call is not None:
        launch, empty_like, contiguous, args = call
        n = key[0]
        # a contiguous 1-D x of n > 1 is its own contiguous layout: no keyword to parse
        out = empty_like(x) if n > 1 and x.dim() == 1 else empty_like(x, memory_format=contiguous)
        launch(x.data_ptr(), out.data_ptr(), n, *args)
        return out
    return _fast_square_plain(x, config, key)


def _fast_square_plain(x, config, key):
    """fast_square with every check; remembers the call's launch for `key` (None: don't)."""
    import torch

    _check_input(x, "fast_square")
    src = x if x.is_contiguous() else x.contiguous()
    out = torch.empty_like(src, memory_format=torch.contiguous_format)
    n = src.numel()
    cfg = choose_config(n) if config is None else CudaSquareConfig.parse(config)
    if n:
        ext = build_extensions(device=src.device)
        args = (
            cfg.threads,
            cfg.blocks_per_sm,
            cfg.unroll,
            bool(cfg.streaming),
            num_sms(src.device),
            _stream(src.device),
        )
        with on_device(src.device):
            ext.fast_square(src.data_ptr(), out.data_ptr(), n, *args)
        if key is not None and n > 0:
            # the same launch bound without pybind11's per-call dispatch
            _CALLS[key] = (ext.fast_square_call, torch.empty_like, torch.contiguous_format, args)
    return out
