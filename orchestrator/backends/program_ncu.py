"""`gprof-orch exec ncu -- CMD`: a user's program under Nsight Compute, every kernel it launches
measured with its NVTX stack. The steps, as every backend has them: commands() builds the one
`ncu --nvtx ... CMD` (pure; the ncu backend's sections and metrics, so the table has its
columns), execute() runs it through orchestrator.proc. The folder it fills is an `ncu` one:
orchestrator/capture_ncu.py writes its workload.json and the ncu backend reads it."""

from __future__ import annotations

from pathlib import Path

from orchestrator import proc
from orchestrator.backends.base import Parsed, Step, ToolBackend
from orchestrator.backends.ncu import REPORT, NcuBackend
from orchestrator.backends.program_options import ProgramNcuOptions
from orchestrator.capture_request import ProgramRequest
from orchestrator.errors import ToolFailedError
from orchestrator.runfolder import RunFolder


class ProgramNcuBackend(ToolBackend):
    """`exec ncu -- CMD`: not a command of its own and not one of `all`'s backends; its run
    folder is the ncu backend's, read as an `ncu` run."""

    name = "program-ncu"
    tool = "ncu"
    mode = "capture"
    merged = None  # a user's program is not one of `all`'s backends
    description = "any program (exec ncu) under Nsight Compute, one variant per NVTX range"
    Options = ProgramNcuOptions

    @classmethod
    def tool_spec(cls):
        return NcuBackend.tool_spec()

    def commands(self, req: ProgramRequest, run_dir: Path) -> list[Step]:  # type: ignore[override]
        """`ncu --nvtx` over the whole program, one report in run_dir (pure)."""
        o: ProgramNcuOptions = self.opts(req)  # type: ignore[assignment]
        return [Step("ncu", NcuBackend.program_argv(self.exe(req), req.argv, run_dir, list(o.ncu_args)))]

    def execute(self, req: ProgramRequest, rf: RunFolder) -> None:  # type: ignore[override]
        """Run ncu over the program; a non-zero exit of either fails the run, the report ncu
        wrote kept (`gprof-orch import` reads it)."""
        (step,) = self.commands(req, rf.path.resolve())
        rf.add_command(step.name, step.argv)
        res = proc.run(step.argv, log_dir=rf.logs, name=step.name, timeout=req.timeout)
        if res.returncode != 0:
            kept = (
                " (the report it wrote is kept: `gprof-orch import` reads it)"
                if (rf.path / REPORT).exists()
                else ""
            )
            raise ToolFailedError(
                f"ncu (or the program under it) exited with status {res.returncode}{kept}",
                argv=step.argv,
                returncode=res.returncode,
                log_tail=res.tail(),
                log=res.stderr,
            )

    def parse(self, rf: RunFolder) -> Parsed:
        """Its folder is an `ncu` one: the ncu backend's reading."""
        return NcuBackend().parse(rf)


__all__ = ["ProgramNcuBackend"]
