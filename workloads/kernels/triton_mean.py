"""Mean of a whole tensor in Triton: the GPU-MODE lecture 1 style kernel and a fast one.

``lecture_mean(x)``
    The lecture's pattern: a 2-D view of ``x`` (rows = every dimension but the last), **one
    program per row**, each looping over its row in ``BLOCK_SIZE`` chunks with a *scalar*
    accumulator (``acc += tl.sum(chunk)``: every chunk ends in a cross-warp reduction before the
    next load is issued), then dividing by the row length; the mean of the whole tensor is the
    mean of the row means (``row_means.mean()`` in torch, a second kernel). 1-D input is one row,
    so one program walks the whole tensor: the small-grid slow case. On the H200 the lecture's
    kernel of this shape measured 2.22 ms at 10000x10000 float32 against torch.mean's 0.114 ms
    (shared/NSIGHT.md); what this copy measures is in the benchmark's table.

``fast_mean(x, config=None)``
    One kernel launch in all, the division fused in, deterministic. See ``_fast_mean_kernel``.

Both accumulate in float32 (float64 for float64 input), return a 0-d tensor of the input's
dtype like ``torch.mean`` (NaN for an empty tensor), copy non-contiguous input to a contiguous
one first, and take any number of elements (offsets are 64-bit where they can pass 2**31).
Integer and complex input raise TypeError (torch.mean raises for integers too).

Triton is imported on first call, and the kernels are defined then: TRITON_INTERPRET=1 must be
set before that (before ``import triton`` anywhere) for CPU tensors to run in the interpreter.
"""

from __future__ import annotations

import functools
import threading
from dataclasses import dataclass

from workloads.kernels import _launch
from workloads.kernels._common import (
    as_matrix,
    cdiv,
    coerce_config,
    device_props,
    float_dtype_or_raise,
    max_programs_per_sm,
    next_pow2,
    num_sms,
    on_device,
    pick_config,
)
from workloads.kernels._launch import fast_calls, launch_plain


@dataclass(frozen=True)
class MeanConfig:
    """Launch configuration of ``fast_mean``.

    block: elements each program loads per loop iteration (a power of two).
    num_warps: warps per program.
    programs_per_sm: persistent grid = programs_per_sm x SM count (fewer when the tensor has
        fewer blocks; fewer also when that many programs would not fit on an SM at once).
    """

    block: int = 4096
    num_warps: int = 8
    programs_per_sm: int = 4
    stages: int = 1  # >1: Triton software-pipelines the loop's loads (cp.async via shared memory)

    def __post_init__(self) -> None:
        if self.block < 16 or self.block & (self.block - 1):
            raise ValueError(f"block must be a power of two >= 16, got {self.block}")
        if self.num_warps not in (1, 2, 4, 8, 16, 32):
            raise ValueError(f"num_warps must be a power of two <= 32, got {self.num_warps}")
        if self.programs_per_sm < 1:
            raise ValueError(f"programs_per_sm must be >= 1, got {self.programs_per_sm}")
        if not 1 <= self.stages <= 8:
            raise ValueError(f"stages must be in 1..8, got {self.stages}")

    @property
    def name(self) -> str:
        return f"b{self.block}_w{self.num_warps}_p{self.programs_per_sm}" + (
            f"_s{self.stages}" if self.stages != 1 else ""
        )

    @classmethod
    def parse(cls, value) -> MeanConfig:
        """A MeanConfig from a MeanConfig, a dict, a (block, warps, pps[, stages]) tuple or a
        name like 'b4096_w8_p4' / 'b4096_w8_p4_s2'."""

        def from_name(text: str) -> MeanConfig:
            parts = dict((p[0], int(p[1:])) for p in text.split("_"))
            return cls(parts["b"], parts["w"], parts["p"], parts.get("s", 1))

        return coerce_config(cls, value, from_name)


# Heuristic: (largest numel the row applies to, config); the first row that fits is used.
# The winners of `benchmarks/bench_kernels.py --sweep-configs` on the H200 (2026-12-02,
# docs/kernels-h200.md): at 1e6 elements 2048-element tiles, 4 warps, 4 programs per SM
# (0.66x torch.mean's time); at 1e8 4096-element tiles, 8 warps, 4 programs per SM with the
# loads software-pipelined 3 deep (0.885x). Re-tune on another GPU.
FAST_MEAN_HEURISTIC: tuple[tuple[int | None, MeanConfig], ...] = (
    (1 << 15, MeanConfig(block=1024, num_warps=4, programs_per_sm=4)),
    (1 << 22, MeanConfig(block=2048, num_warps=4, programs_per_sm=4)),
    (None, MeanConfig(block=4096, num_warps=8, programs_per_sm=4, stages=3)),
)

# The partial-sum buffer is at least this many programs per SM long (so that the last
# program's final reduction has one compiled size for every programs_per_sm up to this).
_PARTIALS_PER_SM = 8


def choose_config(numel: int) -> MeanConfig:
    return pick_config(FAST_MEAN_HEURISTIC, numel)


def sweep_configs() -> list[MeanConfig]:
    """Configurations worth timing on a new GPU: 4 to 64 elements per thread, 1 to 8 programs
    per SM, and a few with the loop software-pipelined (stages 2 and 3)."""
    out = []
    for block in (2048, 4096, 8192, 16384):
        for warps in (4, 8, 16):
            per_thread = block // (32 * warps)
            if not 4 <= per_thread <= 64:
                continue
            for pps in (1, 2, 4, 8):
                out.append(MeanConfig(block, warps, pps))
    for block in (4096, 8192):
        for stages in (2, 3):
            for pps in (1, 2, 4):
                out.append(MeanConfig(block, 8, pps, stages))
    return out


def _kernels():
    """The two Triton kernels (lecture_row_mean_kernel, fast_mean_kernel), defined on first
    use: triton is imported only then (see the module's note on TRITON_INTERPRET)."""
    return _lecture_kernel(), _fast_kernel()


@functools.cache
def _lecture_kernel():
    """The lecture's kernel: one program per row (see ``lecture_mean``)."""
    import triton
    import triton.language as tl

    @triton.jit
    def lecture_row_mean_kernel(x_ptr, out_ptr, n_cols, BLOCK_SIZE: tl.constexpr, ACC_FP64: tl.constexpr):
        # The lecture's shape: one program per row, one scalar loop over the row's elements.
        # Every load is a single 4-byte element and each iteration waits on the previous add,
        # which is why it ran at 0.18 TB/s on the H200 (shared/NSIGHT.md): the gap the report
        # exists to show. BLOCK_SIZE is kept for the lecture's signature; the loop ignores it.
        row = tl.program_id(0)
        row_ptr = x_ptr + row.to(tl.int64) * n_cols
        if ACC_FP64:
            acc = tl.full([], 0.0, tl.float64)
        else:
            acc = tl.full([], 0.0, tl.float32)
        for col in range(0, n_cols):
            acc += tl.load(row_ptr + col).to(acc.dtype)
        tl.store(out_ptr + row, acc / n_cols)

    return lecture_row_mean_kernel


@functools.cache
def _fast_kernel():
    """The fast kernel: a persistent grid-stride sum, one launch in all (see ``fast_mean``)."""
    import triton
    import triton.language as tl

    @triton.jit(do_not_specialize=["n"])
    def fast_mean_kernel(
        x_ptr,
        partial_ptr,
        counter_ptr,
        out_ptr,
        n,
        BLOCK: tl.constexpr,
        P_BLOCK: tl.constexpr,
        ACC_FP64: tl.constexpr,
        STAGES: tl.constexpr,
    ):
        """Persistent grid-stride sum; the last program to finish reduces the partials.

        Each program walks tiles pid, pid + G, pid + 2G, ... (G programs) with BLOCK-wide
        unmasked loads (16-byte vectors, evict_first: the data is read once) into a BLOCK-wide
        register accumulator (BLOCK/threads independent accumulators a thread, no reduction in
        the loop). The ragged tail goes, masked, to the program whose turn it would be.
        Then one tl.sum, one store of the partial, one atomic increment of a counter: the
        program that sees G-1 sums the G partials in a fixed order (float64), divides by n,
        writes the mean in the output dtype and resets the counter to 0 for the next call.
        """
        pid = tl.program_id(0)
        nprog = tl.num_programs(0)
        offs = tl.arange(0, BLOCK)
        if ACC_FP64:
            acc = tl.zeros([BLOCK], dtype=tl.float64)
        else:
            acc = tl.zeros([BLOCK], dtype=tl.float32)
        num_full = n // BLOCK
        for t in tl.range(pid, num_full, nprog, num_stages=STAGES):
            # t * BLOCK is 64-bit whenever n is (n >= 2**31 makes the loop variable int64)
            x = tl.load(x_ptr + t * BLOCK + offs, eviction_policy="evict_first")
            acc += x.to(acc.dtype)
        tail = num_full * BLOCK
        is_tail_prog = pid == num_full % nprog
        x = tl.load(x_ptr + tail + offs, mask=offs < tl.where(is_tail_prog, n - tail, 0), other=0.0)
        acc += x.to(acc.dtype)
        partial = tl.sum(acc, axis=0).to(tl.float64)
        tl.store(partial_ptr + pid, partial)
        # every thread's part of this program is done before the release below
        tl.debug_barrier()
        count = tl.atomic_add(counter_ptr, 1, sem="acq_rel")
        is_last = count == nprog - 1
        p_offs = tl.arange(0, P_BLOCK)
        parts = tl.load(
            partial_ptr + p_offs, mask=p_offs < tl.where(is_last, nprog, 0), other=0.0, cache_modifier=".cg"
        )
        mean = tl.sum(parts, axis=0) / n
        if ACC_FP64:
            tl.store(out_ptr, mean, mask=is_last)
        else:
            tl.store(out_ptr, mean.to(tl.float32).to(out_ptr.dtype.element_ty), mask=is_last)
        tl.store(counter_ptr, 0, mask=is_last)

    return fast_mean_kernel


def _floating(torch):
    return (torch.float32, torch.float16, torch.bfloat16, torch.float64)


def _empty_mean(x):
    import torch

    return torch.full((), float("nan"), dtype=x.dtype, device=x.device)


# ----------------------------------------------------------------------------- lecture


def lecture_mean(x, block_size: int = 1024, num_warps: int = 4):
    """Mean of `x` the lecture's way: one program per row, then the mean of the row means."""
    import torch

    float_dtype_or_raise(x, _floating(torch), "lecture_mean")
    if x.numel() == 0:
        return _empty_mean(x)
    x2 = as_matrix(x)
    rows, cols = x2.shape
    acc_fp64 = x.dtype == torch.float64
    row_means = torch.empty(rows, dtype=torch.float64 if acc_fp64 else torch.float32, device=x.device)
    kernel, _ = _kernels()
    with on_device(x.device):
        kernel[(rows,)](x2, row_means, cols, BLOCK_SIZE=block_size, ACC_FP64=acc_fp64, num_warps=num_warps)
    return row_means.mean().to(x.dtype)


# ----------------------------------------------------------------------------- fast

_workspaces: dict = {}
_workspace_lock = threading.Lock()
# (device index, config, dtype) -> programs per SM that fit at once, read off the compiled kernel
_occupancy: dict = {}
_fast = fast_calls("fast_mean")


def _workspace(device, size: int):
    """(partials float64[size or more], counter int32[1] = 0) for this device and stream.

    The counter is zero between calls: the kernel's last program resets it. One workspace per
    stream, so calls on different streams never share a counter; calls on one stream are
    ordered by the stream. (Under CUDA graph capture: call once before capturing, so the
    workspace exists; replays then reuse it.)
    """
    import torch

    if device.type == "cuda":
        stream = torch.cuda.current_stream(device).cuda_stream
        key = (device.index if device.index is not None else torch.cuda.current_device(), stream)
    else:
        key = (str(device), 0)
    ws = _workspaces.get(key)
    if ws is None or ws[0].numel() < size:
        with _workspace_lock:
            ws = _workspaces.get(key)
            if ws is None or ws[0].numel() < size:
                partials = torch.zeros(next_pow2(size), dtype=torch.float64, device=device)
                counter = torch.zeros(1, dtype=torch.int32, device=device)
                ws = (partials, counter)
                _workspaces[key] = ws
    return ws


def _plan(n: int, cfg: MeanConfig, dtype, device) -> tuple[int, int, tuple]:
    """(grid, partials length, occupancy key) of a launch: the persistent grid capped by the
    tiles there are and by the programs that fit on an SM (once a compile has told)."""
    import torch

    sms = num_sms(device)
    dev_index = (
        device.index
        if device.index is not None
        else (torch.cuda.current_device() if device.type == "cuda" else 0)
    )
    occ_key = (device.type, dev_index, cfg, dtype)
    pps = min(cfg.programs_per_sm, _occupancy.get(occ_key, cfg.programs_per_sm))
    grid = max(1, min(cdiv(n, cfg.block), sms * pps))
    return grid, next_pow2(max(grid, sms * _PARTIALS_PER_SM)), occ_key


def fast_mean(x, config: MeanConfig | dict | tuple | str | None = None):
    """Mean of all elements of `x`, as a 0-d tensor of x's dtype, in one kernel launch.

    Design (why not the alternatives):
    - A persistent grid (programs_per_sm x SMs, capped by occupancy and by the number of tiles)
      each program streaming many tiles: every element is read once with wide coalesced loads,
      and the number of partial results is a few hundred, not n/BLOCK.
    - Partials combined by a last-program-done counter, not by float atomics: one launch in
      all (atomics into an output need it zeroed first: a memset launch, about 2-3 us, and a
      cast kernel for half types); the result is deterministic for a given config and GPU
      (float atomics add in whatever order programs finish); the final division and the cast
      to the output dtype are fused into the last program. A plain two-stage reduction pays a
      second launch.
    - The counter lives in a cached workspace (per device and stream) and is reset by the
      kernel itself, so no zeroing launch either.
    - The host side: a call whose shape (numel, dtype, alignment, device, stream, config) has
      been launched before repeats that launch through Triton's C launcher directly (see
      workloads/kernels/_launch.py): none of Triton's per-call argument specialisation, no
      config choice, no workspace lookup. The first call of each shape takes the plain path.

    config: a MeanConfig (or dict/tuple/'b4096_w8_p4'); None picks from FAST_MEAN_HEURISTIC.
    """
    key = _launch.call_key(x, config, MeanConfig)
    call = None if key is None else _fast.calls.get(key)
    if call is not None:
        launch, empty_like, template, pp, cp, block, p_block, acc_fp64, stages, _ = call
        out = empty_like(template)
        op = out.data_ptr()
        # Triton compiled the learned kernel for a 16-byte aligned output; torch's
        # allocator always gives one, the check keeps any other allocator correct
        if not op & 15:
            launch(x.data_ptr(), pp, cp, op, key[0], block, p_block, acc_fp64, stages)
            return out
        key = None
    return _fast_mean_plain(x, config, key)


def _fast_mean_plain(x, config, key):
    """fast_mean through Triton's own launch; learns the launch for `key` (None: don't)."""
    import torch

    float_dtype_or_raise(x, _floating(torch), "fast_mean")
    n = x.numel()
    if n == 0:
        return _empty_mean(x)
    cfg = choose_config(n) if config is None else MeanConfig.parse(config)
    flat = x.reshape(-1)
    if not flat.is_contiguous():
        flat = flat.contiguous()
    device = flat.device
    grid, p_block, occ_key = _plan(n, cfg, flat.dtype, device)
    partials, counter = _workspace(device, p_block)
    out = torch.empty((), dtype=x.dtype, device=device)
    _, kernel = _kernels()
    acc_fp64 = x.dtype == torch.float64
    with on_device(device):
        record = launch_plain(
            kernel,
            (grid,),
            (flat, partials, counter, out, n),
            dict(
                BLOCK=cfg.block,
                P_BLOCK=p_block,
                ACC_FP64=acc_fp64,
                STAGES=cfg.stages,
                num_warps=cfg.num_warps,
            ),
        )
    compiled = record.compiled
    if occ_key not in _occupancy and device.type == "cuda":
        props = device_props(device)
        n_regs = getattr(compiled, "n_regs", None)
        shared = getattr(getattr(compiled, "metadata", None), "shared", 0)
        if props is not None and n_regs:
            _occupancy[occ_key] = max_programs_per_sm(n_regs, shared, cfg.num_warps, props)
    # learned only when the next plain call would launch the same grid: the first compile of
    # a config caps the grid by occupancy from then on
    if (
        key is not None
        and not out.data_ptr() & 15
        and _plan(n, cfg, flat.dtype, device)[:2] == (grid, p_block)
    ):
        template = torch.empty((), dtype=x.dtype, device=device)
        _fast.learn(
            key,
            record,
            key[3][1],
            lambda launch: (
                launch,
                torch.empty_like,
                template,
                partials.data_ptr(),
                counter.data_ptr(),
                cfg.block,
                p_block,
                acc_fp64,
                cfg.stages,
                (partials, counter),
            ),
        )  # the last keeps the workspace alive
    return out
