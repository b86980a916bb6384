"""What every backend is: build the commands (pure), run them (one subprocess helper), parse
what they left (pure). `check()` says whether the backend can run here and why not."""
from __future__ import annotations

import json
import signal
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from orchestrator import proc
from orchestrator.errors import GprofError, InterruptedRunError, ToolFailedError, UsageError
from orchestrator.request import Request
from orchestrator.runfolder import WORKLOAD_MANIFEST, RunFolder
from reports.merge import MergedTime

RUNNER_MODULE = "workloads"


@dataclass
class Step:
    name: str
    argv: list[str]
    env: dict[str, str] = field(default_factory=dict)
    # exit codes that do not stop the run (the runner's 1 = a variant failed, reported later)
    ok_codes: tuple[int, ...] = (0,)


@dataclass
class Availability:
    ok: bool
    detail: str  # where and which version, or why not


class Backend:
    name = ""
    mode = "profile"            # the runner's mode
    default_iters = 10
    default_warmup = 3
    description = ""
    # its median's column in the merged table of `all`, what it measures and why it may disagree
    # (reports.merge.MergedTime); None: not one of `all`'s backends
    merged: MergedTime | None = None
    # it measures only on an NVIDIA GPU: elsewhere `all` skips it, saying so
    needs_gpu = False
    # the help of its command, `gprof-orch NAME WORKLOAD` (the registry holds the one-line summary)
    help = ""

    @classmethod
    def cli_options(cls) -> list:
        """The click options of its own command, beside those every backend shares
        (orchestrator/cli.py run_options). A value reaches the Request by its name: a Request
        field of that name, else `Request.options[name]`."""
        return []

    def check(self, req: Request | None = None) -> Availability:
        return Availability(True, "needs only torch")

    def require(self, req: Request) -> dict[str, str]:
        """Find the tools this backend needs (raising ToolNotFoundError); their paths and versions."""
        return {}

    def runner_argv(self, req: Request, run_dir: Path) -> list[str]:
        """The workload runner's command line, the one child every backend launches."""
        argv = [sys.executable, "-m", RUNNER_MODULE, "run", req.workload, "--mode", self.mode,
                "--out", str(run_dir), "--device", req.device,
                "--warmup", str(req.warmup if req.warmup is not None else self.default_warmup),
                "--seed", str(req.seed), "--dtype", req.dtype]
        if req.variants:
            argv += ["--variants", ",".join(req.variants)]
        if req.size:
            argv += ["--size", req.size]
        if not req.flush_l2:
            argv.append("--no-flush-l2")
        iters = req.iters or self.default_iters
        if iters:
            argv += ["--iters", str(iters)]
        if self.mode == "time":
            if req.timer != Request.timer:
                argv += ["--timer", req.timer]
            if req.cuda_graph:
                argv.append("--cuda-graph")
            if req.gpu_sleep_us != Request.gpu_sleep_us:
                argv += ["--gpu-sleep-us", f"{req.gpu_sleep_us:g}"]
            if not iters:  # the stop rule, spelled out so commands.sh reproduces the run
                argv += ["--max-noise", f"{req.max_noise:g}", "--min-samples", str(req.min_samples),
                         "--min-time", f"{req.min_time:g}", "--max-time", f"{req.max_time:g}"]
        if req.workload_file:
            argv += ["--workload-file", str(Path(req.workload_file).resolve())]
        if req.triton_interpret:
            argv.append("--triton-interpret")
        if req.fail_variant:
            argv += ["--fail-variant", req.fail_variant]
        return argv

    def commands(self, req: Request, run_dir: Path) -> list[Step]:
        return [Step("workload", self.runner_argv(req, run_dir), ok_codes=(0, 1))]

    def execute(self, req: Request, rf: RunFolder) -> None:
        for step in self.commands(req, rf.path.resolve()):
            rf.add_command(step.name, step.argv, step.env)
            res = proc.run(step.argv, log_dir=rf.logs, name=step.name, timeout=req.timeout, env=step.env)
            self.after_step(step, res, rf)

    def after_step(self, step: Step, res: proc.Result, rf: RunFolder) -> None:
        if res.returncode in step.ok_codes:
            return
        raise self.failure(step, res)

    def failure(self, step: Step, res: proc.Result) -> GprofError:
        """The error a runner (or a tool wrapping it) exit code stands for."""
        rc = res.returncode
        last = (res.tail(5).strip().splitlines() or [""])[-1].removeprefix("gprof-orch runner: ")
        if rc == 2:
            return UsageError(last or "bad input", log=res.stderr)
        if rc == 130:
            return InterruptedRunError(f"{step.name} was interrupted", log=res.stderr)
        if rc < 0:
            sig = signal.Signals(-rc).name if -rc in signal.valid_signals() else str(-rc)
            hint = "SIGKILL often means the machine ran out of memory: try a smaller --size" if -rc == 9 else None
            return ToolFailedError(f"{step.name} was killed by {sig}", argv=res.argv, returncode=rc,
                                   log_tail=res.tail(), hint=hint, log=res.stderr)
        if rc == 3 and step.name == "workload":
            # where it failed and why, not the whole traceback (that stays in the log)
            why = f": {last.removeprefix('crashed: ')}" if last else " and left no message (its log is empty)"
            return ToolFailedError(f"the workload runner crashed{why}", argv=res.argv,
                                   returncode=rc, log_tail=traceback_summary(res.tail(60)), log=res.stderr,
                                   hint="the whole traceback is in the log")
        return ToolFailedError(f"{step.name} exited with status {rc}", argv=res.argv, returncode=rc,
                               log_tail=res.tail(), log=res.stderr)

    def parse(self, rf: RunFolder) -> pd.DataFrame:
        raise NotImplementedError

    def warnings(self, rf: RunFolder) -> list[str]:
        """What the tool's own logs say that the reader of the table must know."""
        return []

    def rules(self, rf: RunFolder) -> pd.DataFrame | None:
        """The profiler's own findings (ncu's rule results, `NcuReport.rules`); None where the
        tool has none."""
        return None


def traceback_summary(text: str) -> str:
    """The innermost frame of the last Python traceback in `text` and its exception line."""
    lines = text.splitlines()
    frames = [i for i, ln in enumerate(lines) if ln.lstrip().startswith('File "')]
    if not frames:
        return text
    i = frames[-1]
    exc = next((ln for ln in lines[i + 1:] if ln and not ln.startswith((" ", "\t"))), "")
    return "\n".join([lines[i].strip(), exc])


def stop_workload_first(run_dir: Path, tool: str):
    """The Ctrl-C policy under a profiler (see proc.OnInterrupt): while the workload measures,
    stop it, not the profiler, so the profiler sees its target exit as in any run and writes
    all it recorded (the runner catches the SIGINT and exits cleanly); once the workload has
    ended, only wait while the profiler writes its report. Before the workload has started,
    None: the profiler itself is told."""
    def policy() -> proc.OnInterrupt | None:
        try:
            wman = json.loads((run_dir / WORKLOAD_MANIFEST).read_text())
        except (OSError, ValueError):
            return None
        pid = wman.get("pid")
        if wman.get("status") == "running" and isinstance(pid, int) and _is_runner(pid, run_dir):
            return proc.OnInterrupt(f"interrupted: stopping the workload; {tool} keeps what it recorded", pid)
        return proc.OnInterrupt(f"interrupted: the workload has ended and {tool} is writing its report; "
                                "waiting for it")
    return policy


def _is_runner(pid: int, run_dir: Path) -> bool:
    """Whether pid is still this run's workload runner (not a recycled pid)."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    return RUNNER_MODULE.encode() in cmdline and str(run_dir).encode() in cmdline


class ToolBackend(Backend):
    """A backend that wraps an external profiler (`tool`: 'nsys' or 'ncu'), found by
    orchestrator.tools from the request's explicit path (`req.<tool>`), its variable, PATH."""

    tool = ""

    @classmethod
    def tool_option(cls):
        """--<tool> PATH: the profiler to use (also on `all`)."""
        import click

        return click.option(f"--{cls.tool}", default=None,
                            help=f"Path to {cls.tool} (else $GPROF_{cls.tool.upper()}, PATH, install places).")

    @classmethod
    def cli_options(cls) -> list:
        return [cls.tool_option()]

    def _explicit(self, req: Request | None) -> str | None:
        return getattr(req, self.tool) if req is not None else None

    def check(self, req: Request | None = None) -> Availability:
        from orchestrator import tools
        from orchestrator.errors import ToolNotFoundError

        try:
            t = tools.find(self.tool, self._explicit(req), timeout=req.timeout if req is not None else None)
        except ToolNotFoundError as exc:
            return Availability(False, exc.render())
        return Availability(True, f"{t.path} ({t.version})")

    def require(self, req: Request) -> dict[str, str]:
        from orchestrator import tools

        t = tools.find(self.tool, self._explicit(req), timeout=req.timeout)
        self._found = t
        return {self.tool: str(t.path), f"{self.tool}_version": t.version, f"{self.tool}_found_via": t.found_via}

    def exe(self, req: Request) -> str:
        """The tool's path: the one require() found, else a lookup (for --dry-run), else as given."""
        from orchestrator import tools
        from orchestrator.errors import ToolNotFoundError

        t = getattr(self, "_found", None)
        if t is None:
            try:
                t = tools.find(self.tool, self._explicit(req), with_version=False)
            except ToolNotFoundError:
                return self._explicit(req) or self.tool
        return str(t.path)

