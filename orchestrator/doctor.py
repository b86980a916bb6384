"""`gprof-orch doctor`: what this machine has, and how to get what is missing."""
from __future__ import annotations

import shutil
from typing import Any

from orchestrator import envinfo, tools
from orchestrator.errors import ToolNotFoundError, ToolTimeoutError


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


LOCK_HINT = ("time never locks clocks (root only, and it changes a shared GPU); to lock them: "
             "sudo nvidia-smi -lgc MIN,MAX -lmc MIN,MAX, and -rgc -rmc to undo")


def _clock_info(torch_info: dict[str, Any]) -> dict[str, Any]:
    """Can `time` read the GPU's clocks and throttle reasons (NVML), and where they stand."""
    if not torch_info.get("gpu"):
        return {"ok": True, "version": "no GPU: no clocks to read"}
    from workloads import clocks

    watch, why = clocks.open_watch(0)
    if watch is None:
        return {"ok": False, "error": why, "fix": "pip install 'gprof-orch[gpu]' (nvidia-ml-py); " + LOCK_HINT}
    r, d = watch.read(), watch.describe()
    return {"ok": True, "version": f"NVML: SM {r['sm_mhz']} of {d.get('max_sm_mhz')} MHz, {r['temp_c']} C, "
                                   f"reasons {', '.join(r['reasons']) or 'none'}; {LOCK_HINT}"}


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
        except (ToolNotFoundError, ToolTimeoutError) as exc:  # missing, or hangs on --version
            report[name] = {"ok": False, "error": exc.message, "fix": exc.hint}
    # `exec nsys` on a program whose nvtx ranges this nsys drops (orchestrator/capture.py)
    from orchestrator.capture import nvtx_problem

    problem = nvtx_problem(pk.get("nvtx"), (report.get("nsys") or {}).get("version"))
    report["nvtx_ranges"] = {"ok": problem is None, "fix": problem,
                             "version": "recorded by this nsys" if problem is None else "NOT recorded by this nsys"}
    report["clocks"] = _clock_info(report["torch"])
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
    for key in ("torch", "triton", "nvtx", "ncu_report", "nsys", "nvtx_ranges", "ncu", "clocks", "compiler"):
        if key not in report:  # a report saved before the key existed
            continue
        item = report[key]
        mark = "ok     " if item.get("ok") else "MISSING"
        detail = item.get("path") or item.get("version") or item.get("nvcc") or item.get("error") or ""
        if key in ("nsys", "ncu") and item.get("ok"):
            detail = f"{item['path']} (version {item['version']}, via {item['found_via']})"
        lines.append(f"  [{mark}] {key:<11} {detail}")
        if item.get("fix") and not item.get("ok") or (key == "torch" and item.get("fix")):
            lines.append(f"            -> {item['fix']}")
    return "\n".join(lines)


# -- doctor --check: a real run of each tool ------------------------------------------------------

_TORCH_CHECK = """
import torch
from torch.profiler import profile, ProfilerActivity
acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if torch.cuda.is_available() else [])
dev = "cuda" if torch.cuda.is_available() else "cpu"
x = torch.ones(1 << 20, device=dev)
with profile(activities=acts) as prof:
    (x * 2).sum().item()
names = [e.name for e in prof.events()]
kernels = [e for e in prof.events() if getattr(e, "device_type", None) is not None and "CUDA" in str(e.device_type)]
print("CUDA" if torch.cuda.is_available() else "CPU", len(names), len(kernels))
"""

_NVTX_CHECK = """
import time, nvtx
with nvtx.annotate("variant:doctor-check", domain="gprof"):
    time.sleep(0.01)
"""

_NCU_CHECK = "import torch; x = torch.ones(1 << 20, device='cuda'); print((x * 2).sum().item())"


def _check(name: str, ok: bool | None, detail: str, fix: str | None = None) -> dict[str, Any]:
    """ok: True passed, False failed, None skipped (not applicable here)."""
    return {"check": name, "ok": ok, "detail": detail, "fix": fix if ok is False else None}


def check_tools(nsys: str | None = None, ncu: str | None = None, timeout: float = 180) -> list[dict[str, Any]]:
    """Prove each tool works here with a tiny real run; each failure comes with its fix."""
    import sys
    import tempfile
    from pathlib import Path

    from orchestrator import proc
    from orchestrator.errors import GprofError

    out: list[dict[str, Any]] = []
    tmp = Path(tempfile.mkdtemp(prefix="gprof-doctor-"))
    py = sys.executable
    # torch.profiler
    try:
        res = proc.run([py, "-c", _TORCH_CHECK], log_dir=tmp, name="torch", timeout=timeout)
        words = (proc.log_tail(res.stdout, 1) or "").split()
        if res.returncode != 0 or len(words) != 3:
            out.append(_check("torch.profiler", False, f"exited {res.returncode}: {res.tail(3)}",
                              "reinstall torch; see the log"))
        elif words[0] == "CUDA":
            ok = int(words[2]) > 0
            out.append(_check("torch.profiler", ok, f"recorded {words[2]} CUDA kernel event(s)",
                              "CUPTI could not trace kernels: check the driver matches torch's CUDA build"))
        else:
            out.append(_check("torch.profiler", int(words[1]) > 0, f"CPU only (no CUDA GPU): {words[1]} CPU events"))
    except GprofError as exc:
        out.append(_check("torch.profiler", False, exc.message, "see the log"))
    has_cuda = bool(out and out[-1]["detail"].startswith("recorded"))
    # nsys records an NVTX range of ours
    try:
        t = tools.find("nsys", nsys, timeout=timeout)
        rep = tmp / "nsys-check"
        res = proc.run([str(t.path), "profile", "--trace=nvtx", "--sample=none", "--cpuctxsw=none",
                        f"--output={rep}", "--force-overwrite=true", py, "-c", _NVTX_CHECK],
                       log_dir=tmp, name="nsys", timeout=timeout)
        exp = proc.run([str(t.path), "export", "--type=sqlite", f"--output={rep}.sqlite", "--force-overwrite=true",
                        f"{rep}.nsys-rep"], log_dir=tmp, name="nsys-export", timeout=timeout)
        if res.returncode != 0 or exp.returncode != 0:
            out.append(_check("nsys", False, f"nsys {t.version} failed: {res.tail(3) or exp.tail(3)}",
                              "see the logs in " + str(tmp)))
        else:
            from orchestrator.parsers import nsys_sqlite as ns

            ex = ns.read_export(f"{rep}.sqlite")
            ranges = ns.variant_ranges(ex)
            if (ranges["variant"] == "doctor-check").any():
                out.append(_check("nsys", True, f"nsys {t.version} recorded the NVTX range gprof@variant:doctor-check"))
            else:
                out.append(_check("nsys", False, f"nsys {t.version} ran but recorded no gprof range",
                                  ns.missing_ranges_hint(ex) or "pip install nvtx==0.2.10"))
    except ToolNotFoundError as exc:
        out.append(_check("nsys", False, exc.message, exc.hint))
    except GprofError as exc:
        out.append(_check("nsys", False, exc.message, exc.hint))
    # ncu reads a counter of a real kernel
    if not has_cuda:
        out.append(_check("ncu", None, "skipped: ncu needs a CUDA GPU"))
    else:
        try:
            t = tools.find("ncu", ncu, timeout=timeout)
            rep = tmp / "ncu-check.ncu-rep"
            log = tmp / "ncu.log"
            res = proc.run([str(t.path), "--clock-control", "none", "--metrics", "gpu__time_duration.sum",
                            "--launch-count", "1", "--export", str(rep), "--force-overwrite", "--log-file", str(log),
                            py, "-c", _NCU_CHECK], log_dir=tmp, name="ncu", timeout=timeout)
            from orchestrator.backends import ncu_tool

            text = log.read_text(errors="replace") if log.exists() else res.tail(20)
            kind = ncu_tool.classify_ncu_failure(text)
            if kind == "permission":
                out.append(_check("ncu", False, "ERR_NVGPUCTRPERM: counters are restricted to admin users",
                                  "run as root, or set NVreg_RestrictProfilingToAdminUsers=0 for the nvidia module"))
            elif not rep.exists():
                out.append(_check("ncu", False, f"ncu {t.version} wrote no report: "
                                  + "; ".join(ncu_tool.ncu_errors(text)[:3]), "see " + str(log)))
            else:
                k = ncu_tool.load(rep, domain=None, prefix="").kernels
                ns_ = float(k["duration_ns"].iloc[0]) if len(k) else float("nan")
                out.append(_check("ncu", len(k) > 0, f"ncu {t.version} read gpu__time_duration.sum = {ns_:.0f} ns "
                                  f"of {k['kernel'].iloc[0] if len(k) else '?'}", "see " + str(log)))
        except ToolNotFoundError as exc:
            out.append(_check("ncu", False, exc.message, exc.hint))
        except GprofError as exc:
            out.append(_check("ncu", False, exc.message, exc.hint))
    return out


def render_checks(checks: list[dict[str, Any]]) -> str:
    lines = []
    for c in checks:
        mark = {True: "pass", False: "FAIL", None: "skip"}[c["ok"]]
        lines.append(f"  [{mark}] {c['check']:<15} {c['detail']}")
        if c.get("fix"):
            lines.append(f"                  -> {c['fix']}")
    return "\n".join(lines)
