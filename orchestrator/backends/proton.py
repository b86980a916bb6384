"""`gprof-orch proton`: the workload under Proton, Triton's own profiler (`triton.profiler`).

Proton records every kernel through CUPTI in a tree of scopes, inside the profiled process.
The one child is the runner started through its proton bootstrap (workloads/proton_child.py,
`python -m workloads.proton_child <run>/proton -m workloads run ...`): it starts a proton
session, marks the runner's variants and iterations as proton scopes (proton 3.6 turns only
global-domain NVTX ranges into scopes, ours are in the `gprof` domain), runs the runner in the
same process and always calls `proton.finalize()`, which writes `<run>/proton.hatchet`. Why each
of these: docs/proton.md. The rows: per variant, `time_ns` per iteration (the sum of its kernels' CUPTI durations, as
nsys's and torch.profiler's kernel time), `cpu_time_ns` per iteration (host time between the
iteration scope's enter and exit), `kernel_time_ns` per launch, and per kernel the launch
metadata's `declared_flops[8|16|32|64]` and `declared_bytes` (totals over the measured
iterations; the kernel's author declares them). Proton records kernels only: no memcpy or
memset, no timestamps (so no idle gaps). Needs an NVIDIA GPU (CUPTI) and triton with proton.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import TYPE_CHECKING

from orchestrator import envinfo, proc
from orchestrator.backends.base import Availability, Backend, Parsed, Step
from orchestrator.errors import ToolFailedError, ToolNotFoundError, UsageError
from orchestrator.parsers import compressed
from orchestrator.request import Request
from orchestrator.runfolder import RunFolder
from reports.schema import MergedTime
from workloads.nvtx_ranges import RANGE_PREFIX
from workloads.proton_child import HATCHET, ITER_SCOPE, SESSION

if TYPE_CHECKING:  # pandas and numpy at run time only where a report is built (parse)
    pass

# the child's bootstrap: `python -m CHILD_MODULE <session> -m workloads run ...`
CHILD_MODULE = "workloads.proton_child"
CHILD_ENV = {"TRITON_ENABLE_NVTX": "0"}
# proton's own messages on stderr ("[PROTON] Cannot find graph ...")
PROTON_LOG_TAG = "[PROTON]"


class ProtonBackend(Backend):
    """`gprof-orch proton`: the workload under Proton, Triton's own profiler (CUPTI): kernel time
    per iteration per variant, and the FLOPs and bytes the Triton kernels' launch metadata declares."""

    name = "proton"
    mode = "profile"
    default_iters = 20
    default_warmup = 3
    description = (
        "Proton, Triton's profiler (CUPTI): kernel time per iteration per variant, and the FLOPs "
        "and bytes the Triton kernels' launch metadata declares"
    )
    help = (
        "Profile the workload under Proton, Triton's own profiler (CUPTI): each variant's kernel time per "
        "iteration, and the FLOPs and bytes the Triton kernels' launch_metadata declares. Needs an NVIDIA GPU."
    )
    needs_gpu = True
    measure = "kernels-only"  # proton's CUPTI scope records kernels, not memsets or copies
    host_measure = "host-proton"
    merged = MergedTime(
        "proton_us",
        "proton us",
        "proton",
        on_gpu="kernel durations per iteration (CUPTI)",
        on_cpu=None,
        reason="proton sums each iteration's CUPTI kernel durations (no launch latency, no gaps "
        "between kernels, no L2 flush), as nsys does",
        rank=4,
    ).declare()

    def check(self, req: Request | None = None) -> Availability:
        """Whether proton can run here: triton ships it, and the request can run it (an NVIDIA GPU,
        not --device cpu nor --triton-interpret); where it is, or why not."""
        version, where = find_proton()
        if version is None:
            return Availability(False, where)
        why = _cannot_run(req)
        if why:
            return Availability(False, why)
        return Availability(True, f"triton {version}, proton at {where}")

    def require(self, req: Request) -> dict[str, str]:
        """proton's location and version for the manifest; ToolNotFoundError or UsageError, with
        the fix, where it cannot record CUDA kernels."""
        version, where = find_proton()
        if version is None:
            raise ToolNotFoundError(
                where, hint="pip install triton (3.6 on the H200): proton ships in its wheel"
            )
        if req.device == "cpu" or req.triton_interpret:
            raise UsageError(
                "proton records CUDA kernels through CUPTI: not with --device cpu or --triton-interpret"
            )
        why = _cannot_run(req)
        if why:
            raise ToolNotFoundError(
                why, hint="run it on a machine with an NVIDIA GPU; torch-trace and nsys also run on the CPU"
            )
        return {"proton": where, "proton_version": f"triton {version}"}

    def commands(self, req: Request, run_dir: Path) -> list[Step]:
        """The runner under proton's bootstrap (`python -m workloads.proton_child <session> -m
        workloads run ...`, pure), which starts proton and marks the runner's variants and
        iterations as proton scopes."""
        runner = self.runner_argv(req, run_dir)
        # `-m workloads ...` stays whole in the child's argv: the Ctrl-C policy and the logs know
        # the runner by it (base._is_runner)
        argv = [runner[0], "-m", CHILD_MODULE, str(run_dir / SESSION), *runner[1:]]
        return [Step("workload", argv, env=dict(CHILD_ENV), ok_codes=(0, 1))]

    def after_step(self, step: Step, res: proc.Result, rf: RunFolder) -> None:
        """The runner's exit status, as for every backend, then a ToolFailedError when proton
        wrote no profile although the workload ended."""
        super().after_step(step, res, rf)
        if not (rf.path / HATCHET).exists():
            raise ToolFailedError(
                f"proton wrote no profile ({HATCHET}) although the workload ended with "
                f"status {res.returncode}",
                argv=res.argv,
                returncode=res.returncode,
                log_tail=res.tail(),
                log=res.stderr,
                hint="TRITON_PROTON_DISABLE set, or proton.finalize() failed: see the log",
            )

    def parse(self, rf: RunFolder) -> Parsed:
        """The unified frame of proton's hatchet profile (a compressed one read the same, read
        once) and its warnings (_warnings)."""
        # why lazy: it imports numpy, pandas, which importing proton must not
        from orchestrator.parsers import proton as reader

        # why lazy: it imports numpy, pandas, which importing proton must not
        from reports.unify import RowMaker, variant_facts

        wman = rf.workload_manifest()
        prefix = (wman.get("nvtx") or {}).get("prefix", RANGE_PREFIX)
        prof = reader.read_profile(compressed.locate(rf.file(HATCHET)), prefix=prefix, iter_prefix=ITER_SCOPE)
        rows = RowMaker(rf.path.name, self.name, wman["workload"])
        variant_facts(rows, wman)
        return Parsed(reader.frame_from_profile(prof, rows, wman), warnings=_warnings(rf, prof))


def _warnings(rf: RunFolder, prof) -> list[str]:
    """proton's own [PROTON] log lines and the launches left out as launch-metadata work (five at
    most), then the reader's notes on the profile `prof`."""
    said: list[str] = []
    for name in ("workload.stderr.log", "workload.stdout.log"):
        for line in proc.log_tail(rf.logs / name, 200).splitlines():
            line = line.strip()
            if line.startswith(PROTON_LOG_TAG) and f"proton: {line}" not in said:
                said.append(f"proton: {line}")
    if prof.metadata_launches:
        said.append(
            f"{prof.metadata_launches} launch(es) made while computing Triton launch metadata are "
            "left out (as proton's viewer leaves them out)"
        )
    return said[:5] + prof.notes


def find_proton() -> tuple[str | None, str]:
    """(triton's version, where its proton is) without importing triton; (None, why not)."""
    from importlib import metadata

    spec = importlib.util.find_spec("triton")
    if spec is None or not spec.submodule_search_locations:
        return None, "triton is not installed: proton ships in its wheel (triton.profiler)"
    root = Path(next(iter(spec.submodule_search_locations)))
    try:
        version = metadata.version("triton")
    except metadata.PackageNotFoundError:
        version = "(unknown version)"
    if not (root / "profiler" / "__init__.py").is_file() or not any((root / "_C").glob("libproton*")):
        return None, (
            f"triton {version} at {root} has no proton (triton/profiler and triton/_C/libproton): "
            "a build without it"
        )
    return version, str(root / "profiler")


def _cannot_run(req: Request | None) -> str | None:
    if req is not None and (req.device == "cpu" or req.triton_interpret):
        return "proton records CUDA kernels through CUPTI: not with --device cpu or --triton-interpret"
    if envinfo.nvidia_smi() is None:
        return "proton needs an NVIDIA GPU (it records kernels through CUPTI); nvidia-smi finds none here"
    return None
