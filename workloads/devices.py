"""Peak memory bandwidth and peak arithmetic throughput of known GPUs, for the "% of peak" columns.

Datasheet numbers (bytes/s). A device not listed falls back to 2 x memory clock x bus width
from its CUDA properties, when torch exposes them. The source is always reported beside the
number, since a datasheet peak is above what a copy kernel reaches (the H200 measured 4.0 to
4.3 TB/s on a device-to-device copy against 4.8 TB/s on paper, see docs/).

The FLOP/s peaks are dense figures from NVIDIA's datasheets: the datasheets print tensor-core
rates "with sparsity", twice what a GEMM on dense inputs can reach, so the dense half is kept.
H100 SXM and H200 (NVIDIA H100 and H200 datasheets): FP64 34 TFLOP/s (67 on tensor cores), FP32
67, TF32 tensor 494.7, BF16/FP16 tensor 989.4, FP8 tensor 1978.9. A device not listed has no
peak FLOP/s: the column stays empty and the report says why (no fallback: the clocks and SM
count torch exposes do not give the tensor cores' rate per SM).
"""

from __future__ import annotations

# substring of torch.cuda.get_device_name() -> (bytes/s, source)
DATASHEET_PEAK_BW: list[tuple[str, float, str]] = [
    ("H200", 4.8e12, "NVIDIA H200 datasheet: 4.8 TB/s HBM3e"),
    ("H100 NVL", 3.9e12, "NVIDIA H100 NVL datasheet: 3.9 TB/s"),
    ("H100 PCIe", 2.0e12, "NVIDIA H100 PCIe datasheet: 2.0 TB/s"),
    ("H100", 3.35e12, "NVIDIA H100 SXM datasheet: 3.35 TB/s"),
    ("GH200", 4.0e12, "NVIDIA GH200 datasheet: 4.0 TB/s (96 GB HBM3)"),
    ("B200", 8.0e12, "NVIDIA B200 datasheet: 8 TB/s"),
    ("A100-SXM4-80GB", 2.039e12, "NVIDIA A100 80GB SXM datasheet: 2.039 TB/s"),
    ("A100 80GB PCIe", 1.935e12, "NVIDIA A100 80GB PCIe datasheet: 1.935 TB/s"),
    ("A100", 1.555e12, "NVIDIA A100 40GB datasheet: 1.555 TB/s"),
    ("L40S", 864e9, "NVIDIA L40S datasheet: 864 GB/s"),
    ("L4", 300e9, "NVIDIA L4 datasheet: 300 GB/s"),
    ("A10G", 600e9, "NVIDIA A10G: 600 GB/s"),
    ("RTX 4090", 1008e9, "GeForce RTX 4090: 1008 GB/s"),
    ("T4", 320e9, "NVIDIA T4 datasheet: 320 GB/s"),
]


def peak_bandwidth(name: str, props=None) -> tuple[float | None, str]:
    """(bytes/s, where the number comes from) for a device name; (None, reason) if unknown."""
    for key, bw, source in DATASHEET_PEAK_BW:
        if key in name:
            return bw, source
    clock_khz = getattr(props, "memory_clock_rate", None)
    bus_bits = getattr(props, "memory_bus_width", None)
    if clock_khz and bus_bits:
        bw = 2 * clock_khz * 1e3 * bus_bits / 8
        return bw, f"2 x memory clock ({clock_khz / 1e3:.0f} MHz) x bus width ({bus_bits} bit)"
    return None, f"no peak bandwidth known for {name!r}"


T = 1e12
# the units a FLOP/s peak is kept for: name -> what a person reads under the table
FLOP_UNITS = {
    "fp8": "dense FP8 tensor",
    "bf16": "dense BF16 tensor",
    "fp16": "dense FP16 tensor",
    "tf32": "dense TF32 tensor",
    "fp32": "FP32, no tensor cores",
    "fp64": "FP64, no tensor cores",
    "fp64-tensor": "FP64 tensor",
}


def _flops_row(fp64: float, fp64_tensor: float, fp32: float, tf32: float, half: float, fp8: float) -> dict:
    row = {"fp64": fp64, "fp64-tensor": fp64_tensor, "fp32": fp32, "tf32": tf32, "bf16": half, "fp16": half}
    return {k: v * T for k, v in (row | {"fp8": fp8}).items() if v}


# substring of the device name -> (unit -> FLOP/s, source); the first match wins, so longer names
# come first ("GH200" holds "H200", "H100 PCIe" holds "H100"); 0: the datasheet gives none
DATASHEET_PEAK_FLOPS: list[tuple[str, dict[str, float], str]] = [
    ("GH200", _flops_row(34, 67, 67, 494.7, 989.4, 1978.9), "NVIDIA GH200 datasheet"),
    ("H200 NVL", _flops_row(30, 60, 60, 417.5, 835.5, 1670.5), "NVIDIA H200 NVL datasheet"),
    ("H200", _flops_row(34, 67, 67, 494.7, 989.4, 1978.9), "NVIDIA H200 datasheet"),
    ("H100 NVL", _flops_row(30, 60, 60, 417.5, 835.5, 1670.5), "NVIDIA H100 NVL datasheet"),
    ("H100 PCIe", _flops_row(26, 51, 51, 378, 756, 1513), "NVIDIA H100 PCIe datasheet"),
    ("H100", _flops_row(34, 67, 67, 494.7, 989.4, 1978.9), "NVIDIA H100 SXM datasheet"),
    ("A100", _flops_row(9.7, 19.5, 19.5, 156, 312, 0), "NVIDIA A100 datasheet"),
    ("L40S", _flops_row(0, 0, 91.6, 183, 362.05, 733), "NVIDIA L40S datasheet"),
    ("L4", _flops_row(0, 0, 30.3, 60, 121, 242.5), "NVIDIA L4 datasheet"),
]

# a variant's `math`: which unit its FLOPs run on, where its dtype alone does not say
MATH = ("tensor", "tf32", "fp8", "simt")
_BY_DTYPE = {"bfloat16": "bf16", "float16": "fp16", "float32": "fp32", "float64": "fp64"}
_TENSOR = {"bfloat16": "bf16", "float16": "fp16", "float32": "tf32", "float64": "fp64-tensor"}


def flop_unit(dtype: str, math: str | None = None) -> str:
    """The unit a variant's FLOPs are counted against: its `math` where it declares one, else
    inferred from the dtype: bfloat16 and float16 on tensor cores (what cuBLAS and tl.dot use),
    float32 and float64 on the plain pipes (torch's default: allow_tf32 is off).

    Example:
        >>> flop_unit("bfloat16"), flop_unit("float32"), flop_unit("float32", "tf32")
        ('bf16', 'fp32', 'tf32')
    """
    if math is None:
        return _BY_DTYPE.get(dtype, dtype)
    if math == "simt":  # half types off the tensor cores: no datasheet gives their peak
        return {"bfloat16": "bf16-simt", "float16": "fp16-simt"}.get(dtype, _BY_DTYPE.get(dtype, dtype))
    if math == "tensor":
        return _TENSOR.get(dtype, dtype)
    return math  # tf32, fp8: the unit whatever the input's dtype


def peak_flops(name: str) -> tuple[dict[str, float], str]:
    """({unit: FLOP/s}, where the numbers come from) for a device name; ({}, why) if unknown.

    Example:
        >>> peak_flops("NVIDIA H200")[0]["bf16"]
        989400000000000.0
    """
    for key, row, source in DATASHEET_PEAK_FLOPS:
        if key in name:
            return dict(row), source
    return {}, f"no peak FLOP/s known for {name!r}"
