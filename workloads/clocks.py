"""The GPU's clocks, temperature and clock-event (throttle) reasons through NVML, read around
every timed variant: a median taken while the GPU slowed down is flagged, not trusted.

nvidia-ml-py (the `gpu` extra; the H200 image has it) is optional: without it, or without a
driver, nothing is read and the run says so once. Clocks are never locked here (that needs root
and changes a shared machine); `gprof-orch doctor` says how to lock them.
"""

from __future__ import annotations

import time
from typing import Any

# the reasons that mean the GPU ran slower than it could: power and thermal caps, hardware
# slowdowns. GpuIdle (nothing to run) and ApplicationsClocksSetting / UserDefinedClocks (the
# clock policy in force, set with nvidia-smi) describe the setting, not a slowdown, and
# SyncBoost / DisplayClockSetting do not lower the SM clock of a compute run.
SLOWDOWNS = {
    0x4: "sw_power_cap",
    0x8: "hw_slowdown",
    0x20: "sw_thermal_slowdown",
    0x40: "hw_thermal_slowdown",
    0x80: "hw_power_brake_slowdown",
}
OTHER_REASONS = {
    0x1: "gpu_idle",
    0x2: "applications_clocks_setting",
    0x10: "sync_boost",
    0x100: "display_clock_setting",
}
# below this fraction of the SM clock at the variant's start, its samples were taken slower
CLOCK_DROP = 0.90
READ_EVERY_S = 0.25  # during a long variant


def reason_names(mask: int) -> list[str]:
    names = {**SLOWDOWNS, **OTHER_REASONS}
    return [n for bit, n in sorted(names.items()) if mask & bit]


class ClockWatch:
    """Reads of one GPU, by the CUDA device's UUID (CUDA_VISIBLE_DEVICES may renumber)."""

    def __init__(self, cuda_index: int = 0):
        import pynvml

        self._nv = pynvml
        pynvml.nvmlInit()
        self.handle = None
        try:
            import torch

            uuid = str(torch.cuda.get_device_properties(cuda_index).uuid)
            self.handle = pynvml.nvmlDeviceGetHandleByUUID(uuid if uuid.startswith("GPU-") else "GPU-" + uuid)
        except Exception:
            self.handle = pynvml.nvmlDeviceGetHandleByIndex(cuda_index)
        self._last = 0.0

    def read(self) -> dict[str, Any]:
        nv, h = self._nv, self.handle
        get_reasons = (
            getattr(nv, "nvmlDeviceGetCurrentClocksEventReasons", None)
            or nv.nvmlDeviceGetCurrentClocksThrottleReasons
        )
        mask = int(get_reasons(h))
        self._last = time.monotonic()
        return {
            "t": round(time.time(), 3),
            "sm_mhz": nv.nvmlDeviceGetClockInfo(h, nv.NVML_CLOCK_SM),
            "mem_mhz": nv.nvmlDeviceGetClockInfo(h, nv.NVML_CLOCK_MEM),
            "temp_c": nv.nvmlDeviceGetTemperature(h, nv.NVML_TEMPERATURE_GPU),
            "power_w": round(nv.nvmlDeviceGetPowerUsage(h) / 1000, 1),
            "reasons": reason_names(mask),
            "reasons_mask": mask,
        }

    def due(self) -> bool:
        return time.monotonic() - self._last >= READ_EVERY_S

    def describe(self) -> dict[str, Any]:
        """What does not change during a run: the maximum clocks, the application clocks and
        whether they were raised or lowered from the default (a `nvidia-smi -ac` setting)."""
        nv, h = self._nv, self.handle
        out: dict[str, Any] = {}
        for key, fn in (
            ("max_sm_mhz", lambda: nv.nvmlDeviceGetMaxClockInfo(h, nv.NVML_CLOCK_SM)),
            ("max_mem_mhz", lambda: nv.nvmlDeviceGetMaxClockInfo(h, nv.NVML_CLOCK_MEM)),
            ("app_sm_mhz", lambda: nv.nvmlDeviceGetApplicationsClock(h, nv.NVML_CLOCK_SM)),
            ("default_app_sm_mhz", lambda: nv.nvmlDeviceGetDefaultApplicationsClock(h, nv.NVML_CLOCK_SM)),
        ):
            try:
                out[key] = fn()
            except Exception:  # not supported on this GPU or driver
                out[key] = None
        # NVML has no getter for clocks locked with `nvidia-smi -lgc`; an application clock
        # moved from its default is the one setting it can see
        if out["app_sm_mhz"] is not None and out["default_app_sm_mhz"] is not None:
            out["app_clocks_changed"] = out["app_sm_mhz"] != out["default_app_sm_mhz"]
        return out


def open_watch(cuda_index: int = 0) -> tuple[ClockWatch | None, str | None]:
    """A ClockWatch, or None and why not (no nvidia-ml-py, no driver)."""
    try:
        return ClockWatch(cuda_index), None
    except ImportError:
        return None, "clocks not read: nvidia-ml-py is not installed (pip install 'gprof-orch[gpu]')"
    except Exception as exc:
        return None, f"clocks not read: NVML failed ({type(exc).__name__}: {exc})"


def verdict(reads: list[dict[str, Any]]) -> str | None:
    """Why the samples taken between these reads are suspect, or None."""
    if not reads:
        return None
    slow = sorted({r for x in reads for r in x["reasons"] if r in SLOWDOWNS.values()})
    start = reads[0]["sm_mhz"]
    low = min(x["sm_mhz"] for x in reads)
    why = []
    if slow:
        why.append("the GPU throttled (" + ", ".join(slow) + ")")
    if start and low < CLOCK_DROP * start:
        why.append(f"its SM clock fell to {low} MHz from {start} MHz at the start")
    return "; ".join(why) or None
