"""What the runner process runs on: the device and library versions it records, whether a
variant's needs are met here, whether a size fits in memory, and waiting for the device."""

from __future__ import annotations

import os
import platform
from pathlib import Path
from typing import TYPE_CHECKING, Any

from workloads import memory_roof
from workloads.devices import peak_bandwidth
from workloads.errors import RunnerUsageError

if TYPE_CHECKING:
    from workloads import registry
    from workloads.spec import RunSpec


def _version(dist: str) -> str | None:
    from importlib import metadata

    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def describe_device(device: str, measure_roof: bool = False) -> dict[str, Any]:
    """The device and library versions a run records; with measure_roof, the GPU's measured
    memory roof too (workloads/memory_roof.py), before any variant's range opens."""
    import torch

    info: dict[str, Any] = {
        "torch": torch.__version__,
        "torch_cuda": torch.version.cuda,
        "triton": _version("triton"),
        "nvtx": _version("nvtx"),
        "numba": _version("numba"),
        "python": platform.python_version(),
        "cuda_available": torch.cuda.is_available(),
        "device": device,
    }
    if device == "cuda":
        idx = torch.cuda.current_device()
        props = torch.cuda.get_device_properties(idx)
        peak, source = peak_bandwidth(props.name, props)
        info.update(
            device_name=props.name,
            compute_capability=f"{props.major}.{props.minor}",
            sm_count=props.multi_processor_count,
            l2_bytes=getattr(props, "L2_cache_size", None),
            total_memory_bytes=props.total_memory,
            peak_bandwidth_bytes_per_s=peak,
            peak_bandwidth_source=source,
        )
        if measure_roof:
            info["memory_roof"], info["memory_roof_source"] = memory_roof.attainable(torch, idx)
    else:
        info.update(
            device_name=platform.processor() or platform.machine(),
            peak_bandwidth_bytes_per_s=None,
            peak_bandwidth_source="no peak for a CPU run",
        )
    return info


def probe_needs(needs: frozenset[str], device: str, triton_interpret: bool) -> str | None:
    """None if every need is met here, else the reason the variant is skipped."""
    import importlib.util
    import shutil

    import torch

    for need in sorted(needs):
        if need == "cuda" and device != "cuda":
            return (
                "needs CUDA; this run is on the CPU"
                if not torch.cuda.is_available()
                else "needs CUDA; this run is on the CPU (--device cpu)"
            )
        if need == "triton":
            if importlib.util.find_spec("triton") is None:
                return "needs triton (pip install triton)"
            if device != "cuda" and not triton_interpret:
                return "Triton needs a GPU; on the CPU pass --triton-interpret (TRITON_INTERPRET=1)"
        if need == "compiler":
            if shutil.which("nvcc") is None and not os.environ.get("CUDA_HOME"):
                return "needs nvcc (CUDA toolkit) for torch.utils.cpp_extension.load_inline"
            if shutil.which(os.environ.get("CXX", "c++")) is None:
                return "needs a host C++ compiler (c++) for load_inline"
        if need == "numba":
            if importlib.util.find_spec("numba") is None:
                return "needs numba with CUDA support (pip install numba-cuda)"
    return None


def check_memory(spec: RunSpec, workload: registry.Workload, numel: int, itemsize: int) -> None:
    """Raise RunnerUsageError (exit 2) when the size would not fit in the device's free memory."""
    need = numel * workload.bytes_per_element(itemsize)
    if spec.device == "cuda":
        import torch

        free, total = torch.cuda.mem_get_info()
        where = f"the GPU has {gib(free)} free of {gib(total)}"
    else:
        free = _mem_available_bytes()
        where = f"this machine has {gib(free)} available" if free else ""
    if free and need > 0.9 * free:
        shape = "x".join(map(_count, spec.shape or ()))
        raise RunnerUsageError(
            f"size {shape} ({_count(numel, ',')} elements of {spec.dtype}) needs about {gib(need)}; {where}. "
            f"Choose a smaller --size."
        )


def gib(nbytes: float) -> str:
    """A size in GiB as a person reads it: 22.1 GiB, 1,536 GiB, and 2.6e+22 GiB for a size no
    machine has (`--size 1e30`), not its 23 digits."""
    x = nbytes / 2**30
    return f"{x:.1f} GiB" if x < 1000 else f"{x:,.0f} GiB" if x < 1e6 else f"{x:.2g} GiB"


def _count(n: int, sep: str = "") -> str:
    """A count (elements, a dimension) in full up to 15 digits, past them in 3 significant digits:
    a float size's 31-digit integer (1e30 -> 1000000000000000019884624838656) says nothing more."""
    return f"{n:{sep}}" if n < 10**15 else f"{n:.3g}"


def _mem_available_bytes() -> int | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def sync(device: str) -> None:
    """Wait for the device to finish what was queued (nothing to wait for on the CPU)."""
    if device == "cuda":
        import torch

        torch.cuda.synchronize()
