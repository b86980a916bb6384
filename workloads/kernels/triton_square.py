"""Elementwise square in Triton: ``triton_square(x) == x * x``, same shape and dtype.

One program per tile of ``block`` elements. Every tile but the last is full, and takes an
unmasked branch (16-byte vector loads and stores whatever n is: a mask ``offs < n`` with an n
not known to be a multiple of 16 splits the vectors into single elements); the last tile takes
the masked branch. Both are in one kernel: one launch. Loads are marked evict_first and stores
streaming (``.cs``) when ``hints`` is on: the data passes through once.

Half types are squared in float32 and rounded once, like torch (the product of two float16 or
bfloat16 numbers is exact in float32, so the result equals torch's bit for bit). float32,
float16, bfloat16 and float64 are taken; other dtypes raise TypeError. Non-contiguous input is
copied to a contiguous tensor first; the result is contiguous. Offsets are 64-bit (more than
2**31 elements work).

Triton is imported on first call; for CPU tensors set TRITON_INTERPRET=1 before that.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from workloads.kernels import _launch
from workloads.kernels._common import cdiv, coerce_config, float_dtype_or_raise, on_device, pick_config
from workloads.kernels._launch import fast_calls, launch_plain


@dataclass(frozen=True)
class SquareConfig:
    block: int = 4096
    num_warps: int = 8
    hints: bool = True  # evict_first loads, streaming stores

    def __post_init__(self) -> None:
        if self.block < 16 or self.block & (self.block - 1):
            raise ValueError(f"block must be a power of two >= 16, got {self.block}")
        if self.num_warps not in (1, 2, 4, 8, 16, 32):
            raise ValueError(f"num_warps must be a power of two <= 32, got {self.num_warps}")

    @property
    def name(self) -> str:
        return f"b{self.block}_w{self.num_warps}" + ("" if self.hints else "_nohint")

    @classmethod
    def parse(cls, value) -> SquareConfig:
        def from_name(text: str) -> SquareConfig:
            parts = text.split("_")
            kv = dict((p[0], int(p[1:])) for p in parts if p[0] in "bw" and p[1:].isdigit())
            return cls(kv["b"], kv["w"], "nohint" not in parts)

        return coerce_config(cls, value, from_name)


# (largest numel the row applies to, config). On the H200 (2026-12-02, docs/kernels-h200.md)
# 1024-element tiles with 4 warps and no cache hints won at 1e6 and at 1e8 (0.997x
# torch.square's time at 1e8; the evict_first/.cs hints cost 5% there).
SQUARE_HEURISTIC: tuple[tuple[int | None, SquareConfig], ...] = (
    (None, SquareConfig(block=1024, num_warps=4, hints=False)),
)


def choose_config(numel: int) -> SquareConfig:
    return pick_config(SQUARE_HEURISTIC, numel)


def sweep_configs() -> list[SquareConfig]:
    out = []
    for block in (1024, 2048, 4096, 8192):
        for warps in (4, 8, 16):
            if 4 <= block // (32 * warps) <= 32:
                out.append(SquareConfig(block, warps, True))
    out.append(SquareConfig(4096, 8, False))
    out.append(SquareConfig(1024, 4, False))
    return out


_fast = fast_calls("triton_square")


@functools.cache
def _kernel():
    import triton
    import triton.language as tl

    @triton.jit(do_not_specialize=["n"])
    def square_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr, UPCAST: tl.constexpr, HINTS: tl.constexpr):
        pid = tl.program_id(0)
        start = pid.to(tl.int64) * BLOCK
        offs = tl.arange(0, BLOCK)
        xp = x_ptr + start
        op = out_ptr + start
        if start + BLOCK <= n:
            if HINTS:
                x = tl.load(xp + offs, eviction_policy="evict_first")
            else:
                x = tl.load(xp + offs)
            if UPCAST:
                xf = x.to(tl.float32)
                y = (xf * xf).to(x.dtype, fp_downcast_rounding="rtne")
            else:
                y = x * x
            if HINTS:
                tl.store(op + offs, y, cache_modifier=".cs")
            else:
                tl.store(op + offs, y)
        else:
            mask = offs < (n - start)
            x = tl.load(xp + offs, mask=mask, other=0.0)
            if UPCAST:
                xf = x.to(tl.float32)
                y = (xf * xf).to(x.dtype, fp_downcast_rounding="rtne")
            else:
                y = x * x
            tl.store(op + offs, y, mask=mask)

    return square_kernel


def triton_square(x, config: SquareConfig | dict | tuple | str | None = None):
    """x * x, elementwise, in one Triton launch. config: SquareConfig; None: SQUARE_HEURISTIC.

    A call whose shape (numel, dtype, alignments, device, stream, config) has been launched
    before repeats that launch through Triton's C launcher directly (workloads/kernels/_launch.py);
    the first call of each shape takes the plain path."""
    key = _launch.call_key(x, config, SquareConfig)
    call = None if key is None else _fast.calls.get(key)
    if call is not None:
        launch, empty_like, contiguous, block, upcast, hints = call
        n = key[0]
        # a contiguous 1-D x of n > 1 has stride 1, so empty_like's default
        # (preserve_format) is the contiguous result, without parsing the keyword
        if n > 1 and x.dim() == 1:
            out = empty_like(x)
        else:
            out = empty_like(x, memory_format=contiguous)
        op = out.data_ptr()
        # the learned kernel assumes a 16-byte aligned output, as torch's allocator
        # gives; any other allocator's output takes the plain path
        if not op & 15:
            launch(x.data_ptr(), op, n, block, upcast, hints)
            return out
        key = None
    return _triton_square_plain(x, config, key)


def _triton_square_plain(x, config, key):
    """triton_square through Triton's own launch; learns the launch for `key` (None: don't)."""
    import torch

    float_dtype_or_raise(x, (torch.float32, torch.float16, torch.bfloat16, torch.float64), "triton_square")
    src = x if x.is_contiguous() else x.contiguous()
    out = torch.empty_like(src, memory_format=torch.contiguous_format)
    n = src.numel()
    if n == 0:
        return out
    cfg = choose_config(n) if config is None else SquareConfig.parse(config)
    upcast = x.dtype in (torch.float16, torch.bfloat16)
    with on_device(src.device):
        record = launch_plain(
            _kernel(),
            (cdiv(n, cfg.block),),
            (src, out, n),
            dict(BLOCK=cfg.block, UPCAST=upcast, HINTS=cfg.hints, num_warps=cfg.num_warps),
        )
    if key is not None and not out.data_ptr() & 15:
        _fast.learn(
            key,
            record,
            key[3][1],
            lambda launch: (launch, torch.empty_like, torch.contiguous_format, cfg.block, upcast, cfg.hints),
        )
    return out
