"""`gprof-orch doctor`: what this machine has, and how to get what is missing."""
from __future__ import annotations

import shutil
from typing import Any

from orchestrator import envinfo, tools
from orchestrator.errors import ToolNotFoundError


def _torch_info() -> dict[str, Any]:
    try:
        import torch
    except ImportError as exc:
        return {"ok": False, "error": str(exc), "fix": "pip install torch (see README)"}
    info: dict[str, Any] = {"ok": True, "version": torch.__version__, "cuda_build": torch.version.cuda,
                            "cuda_available": torch.cuda.is_available()}
    if torch.cuda.is_available():
        p = torch.cuda.get_device_properties(0)
        from workloads.devices import peak_bandwidth

        peak, src = peak_bandwidth(p.name, p)
        info.update(gpu=p.name, compute_capability=f"{p.major}.{p.minor}", sm_count=p.multi_processor_count,
                    memory_gib=round(p.total_memory / 2**30, 1), peak_bandwidth_tb_s=peak / 1e12 if peak else None,
                    peak_source=src)
    else:
        info["fix"] = "no CUDA GPU visible: time and torch-trace run on the CPU (--device cpu); nsys traces NVTX/OS calls only"
    return info


def collect(nsys: str | None = None, ncu: str | None = None) -> dict[str, Any]:
    report: dict[str, Any] = {"machine": envinfo.machine(), "torch": _torch_info()}
    pk = report["machine"]["packages"]
    report["triton"] = {"ok": pk.get("triton") is not None, "version": pk.get("triton"),
                        "fix": None if pk.get("triton") else "pip install triton"}
    report["nvtx"] = {"ok": pk.get("nvtx") == "0.2.10", "version": pk.get("nvtx"),
                      "fix": None if pk.get("nvtx") == "0.2.10" else
                      "pip install nvtx==0.2.10 (newer nvtx ranges are not recorded by nsys 2023.4.4)"}
    report["ncu_report"] = {"ok": pk.get("ncu-report") is not None, "version": pk.get("ncu-report"),
                            "fix": None if pk.get("ncu-report") else "pip install ncu-report (reads .ncu-rep without ncu)"}
    for name, explicit in (("nsys", nsys), ("ncu", ncu)):
        try:
            t = tools.find(name, explicit)
            report[name] = {"ok": True, "path": str(t.path), "version": t.version, "found_via": t.found_via}
        except ToolNotFoundError as exc:
            report[name] = {"ok": False, "error": exc.message, "fix": exc.hint}
    report["compiler"] = {"ok": bool(shutil.which("nvcc")), "nvcc": shutil.which("nvcc"), "cxx": shutil.which("c++"),
                          "fix": None if shutil.which("nvcc") else "install the CUDA toolkit for load_inline variants"}
    return report


def render(report: dict[str, Any]) -> str:
    m = report["machine"]
    lines = [f"gprof-orch {m['packages'].get('gprof-orch')}  python {m['python']}  {m['platform']}",
             f"git commit: {m.get('git_commit') or '-'}"]
    smi = m.get("nvidia_smi")
    lines.append(f"GPU (nvidia-smi): {smi['gpu']}, driver {smi['driver']}, {smi['memory']}" if smi
                 else "GPU (nvidia-smi): none found")
    t = report["torch"]
    if t.get("ok"):
        gpu = (f"{t['gpu']} (sm {t['compute_capability']}, {t['sm_count']} SMs, {t['memory_gib']} GiB, "
               f"peak {t['peak_bandwidth_tb_s']} TB/s)") if t.get("gpu") else "no CUDA device"
        lines.append(f"torch {t['version']} (CUDA build {t['cuda_build']}): {gpu}")
    for key in ("torch", "triton", "nvtx", "ncu_report", "nsys", "ncu", "compiler"):
        item = report[key]
        mark = "ok     " if item.get("ok") else "MISSING"
        detail = item.get("path") or item.get("version") or item.get("nvcc") or item.get("error") or ""
        if key in ("nsys", "ncu") and item.get("ok"):
            detail = f"{item['path']} (version {item['version']}, via {item['found_via']})"
        lines.append(f"  [{mark}] {key:<11} {detail}")
        if item.get("fix") and not item.get("ok") or (key == "torch" and item.get("fix")):
            lines.append(f"            -> {item['fix']}")
    return "\n".join(lines)
