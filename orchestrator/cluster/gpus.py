"""The NVIDIA GPUs of this machine, without CUDA (NVML or nvidia-smi): every one, those this
process may use (CUDA_VISIBLE_DEVICES), and the one it uses."""

from __future__ import annotations

import os
import re
import shutil
from typing import Any

from orchestrator import proc
from orchestrator.errors import UsageError


def _all_gpus() -> list[dict[str, Any]]:
    """Every NVIDIA GPU of this machine, in NVML's (nvidia-smi's) order: index, uuid, name. NVML
    (nvidia-ml-py, the [gpu] extra) first, else `nvidia-smi -L`; [] where there is neither."""
    try:
        import pynvml

        pynvml.nvmlInit()
        try:
            out = []
            for i in range(pynvml.nvmlDeviceGetCount()):
                h = pynvml.nvmlDeviceGetHandleByIndex(i)
                name, uid = pynvml.nvmlDeviceGetName(h), pynvml.nvmlDeviceGetUUID(h)
                out.append(
                    {
                        "index": i,
                        "uuid": uid.decode() if isinstance(uid, bytes) else uid,
                        "name": name.decode() if isinstance(name, bytes) else name,
                    }
                )
            return out
        finally:
            pynvml.nvmlShutdown()
    except Exception:  # not installed, no driver, no GPU: nvidia-smi may still know (or not)
        pass
    exe = shutil.which("nvidia-smi")
    if not exe:
        return []
    gpus = []
    for line in (proc.output([exe, "-L"], timeout=10) or "").splitlines():
        if m := re.match(r"GPU (\d+): (.+?) \(UUID: (\S+)\)", line.strip()):
            gpus.append({"index": int(m.group(1)), "name": m.group(2), "uuid": m.group(3)})
    return gpus


def visible_gpus() -> list[dict[str, Any]]:
    """The GPUs this process may use: all of them, or those CUDA_VISIBLE_DEVICES names (by index
    or UUID). Raises UsageError where there is none (local-cuda has nothing to run on)."""
    gpus = _all_gpus()
    want = os.environ.get("CUDA_VISIBLE_DEVICES")
    if want is not None:
        picked = []
        for item in (s.strip() for s in want.split(",") if s.strip()):
            match = [
                g
                for g in gpus
                if str(g["index"]) == item
                or g["uuid"] == item
                or (item.startswith("GPU-") and g["uuid"].startswith(item))
            ]
            picked += [g for g in match[:1] if g not in picked]
        gpus = picked
    if not gpus:
        raise UsageError(
            "--cluster local-cuda: no NVIDIA GPU visible here (nvidia-ml-py and nvidia-smi find none"
            + (f", CUDA_VISIBLE_DEVICES={want!r}" if want is not None else "")
            + ")",
            hint="use --cluster local:N to run the points on the CPU, or a scheduler that has "
            "GPU workers (--cluster tcp://HOST:PORT)",
        )
    return gpus


def this_gpu() -> dict[str, Any]:
    """The GPU this process uses, as far as it can be told without CUDA: the first of
    CUDA_VISIBLE_DEVICES (a UUID is unambiguous; an index is read in nvidia-smi's order), or the
    only GPU there is. gpu_name and gpu_uuid are None on a machine without one, or when several
    are visible and none is chosen."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    found: dict[str, Any] = {"gpu_name": None, "gpu_uuid": None, "cuda_visible_devices": visible}
    gpus = _all_gpus()
    first = (visible or "").split(",")[0].strip()
    pick = (
        [g for g in gpus if g["uuid"] == first or str(g["index"]) == first]
        if first
        else gpus
        if len(gpus) == 1
        else []
    )
    if visible is not None and not first:
        pick = []  # CUDA_VISIBLE_DEVICES="" hides every GPU
    if pick:
        found.update(gpu_name=pick[0]["name"], gpu_uuid=pick[0]["uuid"])
    return found
