"""Peak memory bandwidth of known GPUs, for "% of peak" columns.

Datasheet numbers (bytes/s). A device not listed falls back to 2 x memory clock x bus width
from its CUDA properties, when torch exposes them. The source is always reported beside the
number, since a datasheet peak is above what a copy kernel reaches (the H200 measured 4.0 to
4.3 TB/s on a device-to-device copy against 4.8 TB/s on paper, see docs/).
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
