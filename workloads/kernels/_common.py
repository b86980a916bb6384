"""Helpers shared by the kernels in this folder: device facts, launch context, occupancy.

Everything imports torch lazily, inside functions: importing this module costs nothing.
"""

from __future__ import annotations

import contextlib
import functools
import os

# Programs a CPU "device" pretends to have as streaming multiprocessors, so that the persistent
# kernels run several programs (and loop) under the Triton interpreter and the numba simulator.
FAKE_SMS_ENV = "GPROF_ORCH_FAKE_SMS"
DEFAULT_FAKE_SMS = 4


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


def next_pow2(n: int) -> int:
    return 1 << max(0, (int(n) - 1).bit_length())


def interpreting() -> bool:
    """True when Triton runs through its interpreter (TRITON_INTERPRET=1 at triton import)."""
    return os.environ.get("TRITON_INTERPRET", "0").lower() in ("1", "true", "yes", "on")


@functools.cache
def _cuda_props(index: int):
    import torch

    return torch.cuda.get_device_properties(index)


def device_props(device):
    """torch's CUDA properties of `device`, or None for a CPU device."""
    if device.type != "cuda":
        return None
    import torch

    index = device.index if device.index is not None else torch.cuda.current_device()
    return _cuda_props(index)


def num_sms(device) -> int:
    props = device_props(device)
    if props is None:
        return max(1, int(os.environ.get(FAKE_SMS_ENV, DEFAULT_FAKE_SMS)))
    return int(props.multi_processor_count)


def compute_capability(device) -> tuple[int, int] | None:
    props = device_props(device)
    if props is None:
        return None
    return int(props.major), int(props.minor)


def on_device(device):
    """Context that makes `device` current (Triton and numba launch on the current device)."""
    if device.type != "cuda":
        return contextlib.nullcontext()
    import torch

    if device.index is None or device.index == torch.cuda.current_device():
        return contextlib.nullcontext()
    return torch.cuda.device(device)


def max_programs_per_sm(n_regs: int, shared_bytes: int, num_warps: int, props) -> int:
    """How many programs (CTAs) of a compiled kernel fit on one SM at once.

    A persistent grid larger than what fits runs in two waves (the last programs start only
    when the first finish), which for equal work per program nearly doubles the time; this
    bounds the grid. Registers are allocated per warp in units of 256.
    """
    regs_per_sm = int(getattr(props, "regs_per_multiprocessor", 0) or 65536)
    max_threads = int(getattr(props, "max_threads_per_multi_processor", 0) or 2048)
    smem_per_sm = int(getattr(props, "shared_memory_per_multiprocessor", 0) or 228 * 1024)
    limits = [max_threads // (32 * num_warps), 32]
    if n_regs and n_regs > 0:
        regs_per_warp = cdiv(int(n_regs) * 32, 256) * 256
        limits.append((regs_per_sm // regs_per_warp) // num_warps)
    if shared_bytes and shared_bytes > 0:
        # 1 KB a block is reserved by the system on sm_80 and newer
        limits.append(smem_per_sm // (int(shared_bytes) + 1024))
    return max(1, min(limits))


def float_dtype_or_raise(x, allowed, what: str):
    if x.dtype not in allowed:
        names = ", ".join(str(d).replace("torch.", "") for d in allowed)
        raise TypeError(f"{what} supports {names}; got {str(x.dtype).replace('torch.', '')}")


def as_matrix(x):
    """x as a contiguous 2-D (rows, last dim) view: a scalar is 1x1, a vector one row. The
    lecture's kernels take matrices."""
    if x.dim() == 0:
        m = x.reshape(1, 1)
    elif x.dim() == 1:
        m = x.reshape(1, -1)
    else:
        m = x.reshape(-1, x.shape[-1])
    return m.contiguous()


def pick_config(heuristic, numel: int):
    """The config of the first (largest numel, config) row of `heuristic` that `numel` fits;
    a limit of None matches everything."""
    for limit, cfg in heuristic:
        if limit is None or numel <= limit:
            return cfg
    return heuristic[-1][1]


def coerce_config(cls, value, from_name):
    """An instance of the frozen config dataclass `cls` from an instance, a dict of its fields,
    a tuple in field order, or a name string (`from_name(str) -> cls`, e.g. 'b4096_w8_p4')."""
    if isinstance(value, cls):
        return value
    if isinstance(value, dict):
        return cls(**value)
    if isinstance(value, (tuple, list)):
        return cls(*value)
    if isinstance(value, str):
        return from_name(value)
    raise TypeError(f"cannot make a {cls.__name__} of {value!r}")
