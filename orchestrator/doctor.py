"""`gprof-orch doctor`: what this machine has, and how to get what is missing."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from orchestrator import backends, envinfo, proc, tools
from orchestrator.checks import check_row
from orchestrator.errors import GprofError, ToolNotFoundError, ToolTimeoutError
from workloads import clocks
from workloads.devices import peak_bandwidth


def _torch_info() -> dict[str, Any]:
    try:
        import torch
    except ImportError as exc:
        return {"ok": False, "error": str(exc), "fix": "pip install torch (see README)"}
    info: dict[str, Any] = {
        "ok": True,
        "version": torch.__version__,
        "cuda_build": torch.version.cuda,
        "cuda_available": torch.cuda.is_available(),
    }
    if torch.cuda.is_available():
        p = torch.cuda.get_device_properties(0)

        peak, src = peak_bandwidth(p.name, p)
        info.update(
            gpu=p.name,
            compute_capability=f"{p.major}.{p.minor}",
            sm_count=p.multi_processor_count,
            memory_gib=round(p.total_memory / 2**30, 1),
            peak_bandwidth_tb_s=peak / 1e12 if peak else None,
            peak_source=src,
        )
    else:
        info["fix"] = (
            "no CUDA GPU visible: time and torch-trace run on the CPU (--device cpu); nsys traces NVTX/OS calls only"
        )
    return info


LOCK_HINT = (
    "time never locks clocks (root only, and it changes a shared GPU); to lock them: "
    "sudo nvidia-smi -lgc MIN,MAX -lmc MIN,MAX, and -rgc -rmc to undo"
)


def _clock_info(torch_info: dict[str, Any]) -> dict[str, Any]:
    """Can `time` read the GPU's clocks and throttle reasons (NVML), and where they stand."""
    if not torch_info.get("gpu"):
        return {"ok": True, "version": "no GPU: no clocks to read"}

    watch, why = clocks.open_watch(0)
    if watch is None:
        return {
            "ok": False,
            "error": why,
            "fix": "pip install 'gprof-orch[gpu]' (nvidia-ml-py); " + LOCK_HINT,
        }
    r, d = watch.read(), watch.describe()
    return {
        "ok": True,
        "version": f"NVML: SM {r['sm_mhz']} of {d.get('max_sm_mhz')} MHz, {r['temp_c']} C, "
        f"reasons {', '.join(r['reasons']) or 'none'}; {LOCK_HINT}",
    }


def _kernel_clock_info(torch_info: dict[str, Any]) -> dict[str, Any]:
    """Can `time` read each call's kernel time from CUPTI (workloads/kernel_clock.py)."""
    if not torch_info.get("gpu"):
        return {"ok": True, "version": "no GPU: time's kernel clock is off"}
    from importlib.metadata import PackageNotFoundError, version

    try:
        import cupti  # noqa: F401

        have = version("cupti-python")
    except (ImportError, PackageNotFoundError) as exc:
        cuda = torch_info.get("cuda_build") or "12.6"
        return {
            "ok": False,
            "error": f"no cupti-python ({exc}): `time` reports the CUDA events only, "
            "without each call's own kernel time",
            "fix": f"pip install 'cupti-python=={cuda}.*' (the CUDA {cuda} of this torch)",
        }
    return {
        "ok": True,
        "version": f"cupti-python {have}: `time` adds each call's kernel time (CUPTI, as nsys)",
    }


def _tool_backends() -> list[type]:
    """The backend classes of the registry (orchestrator/backends) that wrap an external tool,
    the first of each tool, in the registry's order: doctor's rows and checks follow from them."""
    out, seen = [], set()
    for name in backends.BACKENDS:
        cls = backends.backend_class(name)
        tool = cls.tool
        if tool and tool not in seen:
            seen.add(tool)
            out.append(cls)
    return out


def _find_tool(tool: tools.ToolSpec, explicit: str | None) -> dict[str, Any]:
    """A tool's doctor row: where it was found, its version and how; else why not and the fix."""
    try:
        t = tools.find(tool, explicit)
        return {"ok": True, "path": str(t.path), "version": t.version, "found_via": t.found_via}
    except (ToolNotFoundError, ToolTimeoutError) as exc:  # missing, or hangs on --version
        return {"ok": False, "error": exc.message, "fix": exc.hint}


def _package_rows(pk: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The rows of the Python packages gprof-orch uses beside torch: triton, nvtx, ncu-report."""
    return {
        "triton": {
            "ok": pk.get("triton") is not None,
            "version": pk.get("triton"),
            "fix": None if pk.get("triton") else "pip install triton",
        },
        "nvtx": {
            "ok": pk.get("nvtx") == "0.2.10",
            "version": pk.get("nvtx"),
            "fix": None
            if pk.get("nvtx") == "0.2.10"
            else "pip install nvtx==0.2.10 (newer nvtx ranges are not recorded by nsys 2023.4.4)",
        },
        "ncu_report": {
            "ok": pk.get("ncu-report") is not None,
            "version": pk.get("ncu-report"),
            "fix": None if pk.get("ncu-report") else "pip install ncu-report (reads .ncu-rep without ncu)",
        },
    }


def collect(**explicit: str | None) -> dict[str, Any]:
    """What this machine has, one row per item (ok, version or path, the fix when missing): the
    machine, torch, the packages, each tool of the backend registry (`explicit`: a tool's path by
    its name, e.g. nsys=..., as --nsys gives it) and the rows its backend adds, clocks, compiler.

    Example:
        >>> collect(nsys="/opt/nsys/bin/nsys")["nsys"]["ok"]
    """
    report: dict[str, Any] = {"machine": envinfo.machine(), "torch": _torch_info()}
    pk = report["machine"]["packages"]
    report.update(_package_rows(pk))
    for cls in _tool_backends():
        report[cls.tool] = _find_tool(cls.tool_spec(), explicit.get(cls.tool))
        # e.g. nsys: whether it records the nvtx package's ranges (Backend.doctor_items)
        report.update(cls.doctor_items(report[cls.tool], pk))
    report["clocks"] = _clock_info(report["torch"])
    report["cupti"] = _kernel_clock_info(report["torch"])
    report["compiler"] = {
        "ok": bool(shutil.which("nvcc")),
        "nvcc": shutil.which("nvcc"),
        "cxx": shutil.which("c++"),
        "fix": None if shutil.which("nvcc") else "install the CUDA toolkit for load_inline variants",
    }
    return report


def render(report: dict[str, Any]) -> str:
    """collect()'s report as the lines `gprof-orch doctor` prints: the machine, then one line per
    item in the report's order, with the fix under each missing one; a row whose `ok` is None
    was not checked (what it depends on is missing) and reads `skip`, neither ok nor missing."""
    m = report["machine"]
    lines = [
        f"gprof-orch {m['packages'].get('gprof-orch')}  python {m['python']}  {m['platform']}",
        f"git commit: {m.get('git_commit') or '-'}",
    ]
    smi = m.get("nvidia_smi")
    lines.append(
        f"GPU (nvidia-smi): {smi['gpu']}, driver {smi['driver']}, {smi['memory']}"
        if smi
        else "GPU (nvidia-smi): none found"
    )
    t = report["torch"]
    if t.get("ok"):
        gpu = (
            (
                f"{t['gpu']} (sm {t['compute_capability']}, {t['sm_count']} SMs, {t['memory_gib']} GiB, "
                f"peak {t['peak_bandwidth_tb_s']} TB/s)"
            )
            if t.get("gpu")
            else "no CUDA device"
        )
        lines.append(f"torch {t['version']} (CUDA build {t['cuda_build']}): {gpu}")
    for key, item in report.items():
        if key in ("machine", "checks") or not isinstance(item, dict):
            continue
        mark = {True: "ok     ", None: "skip   "}.get(item.get("ok"), "MISSING")
        detail = item.get("path") or item.get("version") or item.get("nvcc") or item.get("error") or ""
        if item.get("found_via") and item.get("ok"):  # a tool's row
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


def _torch_check(tmp, timeout: float) -> dict[str, Any]:
    """torch.profiler's proof: a tiny profiled run must record CUDA kernels on a GPU, CPU events
    elsewhere."""
    import sys

    try:
        res = proc.run([sys.executable, "-c", _TORCH_CHECK], log_dir=tmp, name="torch", timeout=timeout)
    except GprofError as exc:
        return check_row("torch.profiler", False, exc.message, "see the log")
    words = (proc.log_tail(res.stdout, 1) or "").split()
    if res.returncode != 0 or len(words) != 3:
        return check_row(
            "torch.profiler", False, f"exited {res.returncode}: {res.tail(3)}", "reinstall torch; see the log"
        )
    if words[0] == "CUDA":
        return check_row(
            "torch.profiler",
            int(words[2]) > 0,
            f"recorded {words[2]} CUDA kernel event(s)",
            "CUPTI could not trace kernels: check the driver matches torch's CUDA build",
        )
    return check_row("torch.profiler", int(words[1]) > 0, f"CPU only (no CUDA GPU): {words[1]} CPU events")


def check_tools(
    timeout: float = 180, *, scratch: Path | None = None, **explicit: str | None
) -> list[dict[str, Any]]:
    """Prove each tool works here with a tiny real run, each failure with its fix: torch.profiler,
    then the `self_test` hook of every tool backend of the registry that has one (`explicit`: a
    tool's path by its name, e.g. nsys=...); one that needs a GPU is skipped without CUDA.
    The runs' reports and logs go to `scratch`, kept; without it, to a temporary folder removed
    at the end unless a failed check's fix points at its logs.

    Example:
        >>> [c["check"] for c in check_tools()]
        ['torch.profiler', 'nsys', 'ncu']
    """
    import tempfile

    tmp = scratch or Path(tempfile.mkdtemp(prefix="gprof-doctor-"))
    out: list[dict[str, Any]] = []
    try:
        out.append(_torch_check(tmp, timeout))
        has_cuda = out[-1]["detail"].startswith("recorded")
        for cls in _tool_backends():
            if cls.needs_gpu and not has_cuda:
                out.append(check_row(cls.tool, None, f"skipped: {cls.tool} needs a CUDA GPU"))
                continue
            row = cls.self_test(tmp, timeout, explicit.get(cls.tool))  # None: no check of its own
            if row is not None:
                out.append(row)
    finally:
        # each call left about 700 KB of reports behind; kept only where a message sends the reader
        pointed = any(str(tmp) in f"{c['detail']} {c.get('fix') or ''}" for c in out if c["ok"] is False)
        if scratch is None and not pointed:
            shutil.rmtree(tmp, ignore_errors=True)
    return out


def render_checks(checks: list[dict[str, Any]]) -> str:
    """check_tools()' rows as the lines `doctor --check` prints: pass, FAIL or skip, and the fix."""
    lines = []
    for c in checks:
        mark = {True: "pass", False: "FAIL", None: "skip"}[c["ok"]]
        lines.append(f"  [{mark}] {c['check']:<15} {c['detail']}")
        if c.get("fix"):
            lines.append(f"                  -> {c['fix']}")
    return "\n".join(lines)
