"""What every backend is: build the commands (pure), run them (one subprocess helper), parse
what they left (pure). `check()` says whether the backend can run here and why not.

Every backend launches the same child, the workload runner, from one resolved spec: `run_spec()`
settles the request into a workloads.spec.RunSpec (the shape, the device, this backend's
iterations and warm-up), `runner_argv()` writes it as `spec.json` into the run folder and returns
`python -m workloads run --spec RUN/spec.json --out RUN`, and `plan()` shows both for --dry-run.
"""

from __future__ import annotations

import json
import signal
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Generic, TypeVar

from orchestrator import proc, tools
from orchestrator.backends.options import BackendOptions
from orchestrator.base_request import BaseRequest
from orchestrator.ending import Ending, final_status, reporting_error
from orchestrator.errors import (
    GprofError,
    InterruptedRunError,
    SamplesLostError,
    ToolFailedError,
    ToolNotFoundError,
    UsageError,
)
from orchestrator.request import Request, resolve_spec
from orchestrator.runfolder import MANIFEST, WORKLOAD_MANIFEST, RunFolder, disk_error, write_json
from reports.schema import MergedTime
from workloads.manifest import EXIT_NOT_SAVED
from workloads.spec import SPEC_FILE, RunSpec

if TYPE_CHECKING:  # pandas at run time only where a report is built (parse)
    import pandas as pd

    from orchestrator.results import Run

RUNNER_MODULE = "workloads"
# the request a backend takes: a workload run's (request.Request) unless it says otherwise
R = TypeVar("R", bound=BaseRequest)


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


@dataclass
class Parsed:
    """What a backend read from a run folder, once (Backend.parse): the unified long-form `frame`
    (reports/schema.py), the profiler's own `findings` (ncu's rule results; None where the tool
    has none), the `warnings` the reader of the table must see (the tool's own log lines), `lost`:
    why the tool's report may lack part of what ran (nsys's lost events) or None, and `meta`:
    anything else the backend read beside them."""

    frame: pd.DataFrame
    findings: pd.DataFrame | None = None
    warnings: list[str] = field(default_factory=list)
    lost: str | None = None
    meta: dict = field(default_factory=dict)


@dataclass
class Plan:
    """What a request would run (--dry-run): the runner's resolved spec, as spec.json would
    hold it, and the exact commands."""

    spec: RunSpec
    steps: list[Step]


class Backend(Generic[R]):
    """One way to measure a workload. A backend declares itself with the class attributes below
    and overrides the hooks it needs; each hook's docstring says what a backend overrides it for.
    `R`: the request it runs (a Request, the default; a capture's backend: ProgramRequest)."""

    name = ""  # its command and registry name (orchestrator/backends/__init__.py)
    tool = ""  # the external profiler it wraps (ToolBackend), "" for none
    mode = "profile"  # the runner's mode (workloads/spec.py MODES)
    default_iters = 10  # measured iterations without --iters (None: time's stop rule)
    default_warmup = 3  # warm-up iterations without --warmup
    description = ""  # one line for `doctor` and the docs
    # its median's column in the merged table of `all`, what it measures and why it may disagree
    # (reports.schema.MergedTime); None: not one of `all`'s backends
    merged: MergedTime | None = None
    # it measures only on an NVIDIA GPU: elsewhere `all` skips it, saying so
    needs_gpu = False
    # what its median times on a GPU (reports.schema.MEASURES)
    measure = "kernels"
    # what it times on the CPU: the host, bare (`time`) or under its profiler, whose cost is in it
    host_measure = "host"
    # the help of its command, `gprof-orch NAME WORKLOAD` (the registry holds the one-line summary)
    help = ""
    # its own options, declared once (orchestrator/backends/options.py): its command's click
    # options are built from it and the Request carries an instance
    Options: type[BackendOptions] = BackendOptions
    # set by plan() while it builds the commands: runner_argv() writes no spec.json then
    planning = False
    # `compare` of an `all` folder sets this backend's run against the other side (time's)
    compares_medians = False

    def measures(self, workload: dict, frame: pd.DataFrame) -> dict[str, str]:
        """variant -> what its median times (reports.schema.MEASURES), from its run's workload.json
        and unified frame: `compare` refuses to set two different ones side by side. Override
        where it varies by variant (time's clock, a captured range with no GPU work)."""
        what = self.host_measure if workload.get("device") == "cpu" else self.measure
        return {v["name"]: what for v in workload.get("variants", [])}

    @classmethod
    def cli_options(cls) -> list:
        """The click options of its own command, beside those every backend shares
        (orchestrator/cli.py run_options): built from its Options declaration, whose fields they
        fill (Request.options). Not overridden: declare the options in Options."""
        return cls.Options.click_options()

    def opts(self, req: R) -> BackendOptions:
        """The request's options as this backend's Options: the Request's own, else (a Request
        built without them, `all`'s dict of every backend's) built from them, defaults elsewhere."""
        o = req.options
        return o if isinstance(o, self.Options) else self.Options.build(o if isinstance(o, dict) else {})

    def spec_fields(self, req: Request) -> dict:
        """The runner spec's fields its own options set (workloads/spec.py RunSpec: time's timer
        and stop rule); none by default, the spec's defaults."""
        return {}

    def footer(self, workload: dict) -> list[str]:
        """Lines under its run's table on how it measured (time's timer and clock), from the run's
        workload.json; none by default."""
        return []

    def once_note(self, workload: dict) -> str:
        """Why a variant of its run may be timed once (the footer's no-speedup line); "" by default."""
        return ""

    @classmethod
    def self_test(cls, tmp: Path, timeout: float, explicit: str | None = None) -> dict | None:
        """`gprof-orch doctor --check`'s proof that its tool works here: a tiny real run, and its
        check row (orchestrator.checks.check_row); None (the default): no check of its own."""
        return None

    @classmethod
    def doctor_items(cls, found: dict, packages: dict) -> dict[str, dict]:
        """`gprof-orch doctor`'s rows below its tool's own (`found`: that row; `packages`: name ->
        version); none by default."""
        return {}

    def check(self, req: R | None = None) -> Availability:
        """Whether it can run here, and where its tool is or why not; cheap, raises nothing
        (`doctor` and `all` ask every backend). Override when it needs more than torch: a
        profiler on PATH, a GPU, triton's proton."""
        return Availability(True, "needs only torch")

    def require(self, req: R) -> dict[str, str]:
        """Find the tools this backend needs (raising ToolNotFoundError, or UsageError for a request
        it cannot take) before a run folder exists; their paths and versions, for the manifest.
        Override where check() can say no."""
        return {}

    def run_spec(self, req: Request, run_dir: Path | None = None) -> RunSpec:
        """What its runner child runs: the request settled once (request.resolve_spec), with this
        backend's mode, iterations and warm-up where the request has none. Override only to
        change what the child is asked; the spec is the child's whole input."""
        return resolve_spec(
            req,
            mode=self.mode,
            default_iters=self.default_iters,
            default_warmup=self.default_warmup,
            out=run_dir,
            **self.spec_fields(req),
        )

    def runner_argv(self, req: Request, run_dir: Path) -> list[str]:
        """The workload runner's command line, the one child every backend launches: it reads
        run_dir/spec.json, written here when run_dir is a run folder being run (not while
        plan() builds the commands). `--out` names the folder on the command line too: the
        Ctrl-C policy (_is_runner) knows the runner by it. Backends wrap it, not override it:
        under a profiler (nsys, ncu) or a bootstrap (proton)."""
        path = run_dir / SPEC_FILE
        if not self.planning and (run_dir / MANIFEST).is_file():
            try:
                write_json(path, self.run_spec(req, run_dir).to_json(), indent=1)
            except OSError as exc:
                raise disk_error(run_dir, exc) from exc
        return [sys.executable, "-m", RUNNER_MODULE, "run", "--spec", str(path), "--out", str(run_dir)]

    def commands(self, req: R, run_dir: Path) -> list[Step]:
        """Every command of a run into run_dir, in order, built and not run (pinned by exact-argv
        tests; --dry-run prints them). Override to put the runner under a profiler and to add
        steps (nsys's export)."""
        return [Step("workload", self.runner_argv(req, run_dir), ok_codes=(0, 1))]

    def plan(self, req: Request, run_dir: Path) -> Plan:
        """The spec and the commands a run into run_dir would take, nothing written (--dry-run,
        api.plan). Not overridden: it follows from run_spec() and commands()."""
        self.planning = True
        try:
            return Plan(self.run_spec(req, run_dir), self.commands(req, run_dir))
        finally:
            self.planning = False

    def execute(self, req: R, rf: RunFolder) -> None:
        """Run the commands into the run folder, each recorded (commands.sh) before it starts,
        through orchestrator.proc. Override where a step needs its own Ctrl-C policy, timeout or
        recovery (nsys exports what it wrote after an interrupt)."""
        for step in self.commands(req, rf.path.resolve()):
            rf.add_command(step.name, step.argv, step.env)
            res = proc.run(step.argv, log_dir=rf.logs, name=step.name, timeout=req.timeout, env=step.env)
            self.after_step(step, res, rf)

    def report(
        self,
        req: R,
        rf: RunFolder,
        error: GprofError | None,
        build: Callable[[RunFolder, Parsed | None], Run],
    ) -> Ending:
        """How its run ends once execute() ran (`error`: what went wrong there): the Run built, not
        written, with `build` (execution.build_run: results sit above the backends, so the builder
        is handed down), and the status. A workload run's, by default: the report of the
        workload.json its runner wrote, if it wrote one, the status from what that says. Override
        where the run leaves no workload.json of its own (a capture's: program, program-ncu)."""
        run = None
        try:
            if (rf.path / WORKLOAD_MANIFEST).exists():
                run = build(rf, None)
        except BaseException as exc:
            error = reporting_error(rf, exc, error)
        status, error = final_status(rf, run.workload if run is not None else None, error)
        return Ending(run, status, error)

    def after_step(self, step: Step, res: proc.Result, rf: RunFolder) -> None:
        """Judge a finished step: raise failure() unless its exit code is one of its ok_codes.
        Override to also check what the step should have left (proton's profile file)."""
        if res.returncode in step.ok_codes:
            return
        raise self.failure(step, res)

    def failure(self, step: Step, res: proc.Result) -> GprofError:
        """The error a runner (or a tool wrapping it) exit code stands for. Override to read a
        tool's own log for the reason (ncu's ==ERROR== lines)."""
        rc = res.returncode
        last = (res.tail(5).strip().splitlines() or [""])[-1].removeprefix("gprof-orch runner: ")
        if rc == 2:
            return UsageError(last or "bad input", log=res.stderr)
        if rc == 130:
            return InterruptedRunError(f"{step.name} was interrupted", log=res.stderr)
        if rc < 0:
            sig = signal.Signals(-rc).name if -rc in signal.valid_signals() else str(-rc)
            hint = (
                "SIGKILL often means the machine ran out of memory: try a smaller --size"
                if -rc == 9
                else None
            )
            return ToolFailedError(
                f"{step.name} was killed by {sig}",
                argv=res.argv,
                returncode=rc,
                log_tail=res.tail(),
                hint=hint,
                log=res.stderr,
            )
        if rc == EXIT_NOT_SAVED and step.name == "workload":
            # its stderr may be on the same full disk: the exit code alone says what happened
            why = (
                last.removeprefix("could not save the samples: ") if last else "writing workload.json failed"
            )
            return SamplesLostError(
                f"the workload runner could not save its samples ({why}): what it measured since "
                f"workload.json was last saved is lost; workload.json keeps that last save",
                log=res.stderr,
                hint="free some space and run again (`gprof-orch report` shows only what workload.json kept)",
            )
        if rc == 3 and step.name == "workload":
            # where it failed and why, not the whole traceback (that stays in the log)
            why = f": {last.removeprefix('crashed: ')}" if last else " and left no message (its log is empty)"
            return ToolFailedError(
                f"the workload runner crashed{why}",
                argv=res.argv,
                returncode=rc,
                log_tail=traceback_summary(res.tail(60)),
                log=res.stderr,
                hint="the whole traceback is in the log",
            )
        return ToolFailedError(
            f"{step.name} exited with status {rc}",
            argv=res.argv,
            returncode=rc,
            log_tail=res.tail(),
            log=res.stderr,
        )

    def parse(self, rf: RunFolder) -> Parsed:
        """What a run left in the folder, read once: the unified frame and the findings, warnings
        and lost events that go with it (Parsed). Pure, reads files only, needs no GPU. Every
        backend overrides it, through its reader in orchestrator/parsers."""
        raise NotImplementedError

    def complete(self, rf: RunFolder, *, write: bool) -> None:
        """Make what a run stopped before its last step left undone, from what its folder holds,
        before its report is read (results.build_report): `gprof-orch report` of a folder whose
        run was interrupted. `write` False (a reading that writes nothing, `compare`): raise
        ParseError saying how instead. Override where a tool's step can be made after the run
        (nsys's export); nothing by default."""


def traceback_summary(text: str) -> str:
    """The innermost frame of the last Python traceback in `text` and its exception line."""
    lines = text.splitlines()
    frames = [i for i, ln in enumerate(lines) if ln.lstrip().startswith('File "')]
    if not frames:
        return text
    i = frames[-1]
    exc = next((ln for ln in lines[i + 1 :] if ln and not ln.startswith((" ", "\t"))), "")
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
        return proc.OnInterrupt(
            f"interrupted: the workload has ended and {tool} is writing its report; waiting for it"
        )

    return policy


def _is_runner(pid: int, run_dir: Path) -> bool:
    """Whether pid is still this run's workload runner (not a recycled pid)."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    return RUNNER_MODULE.encode() in cmdline and str(run_dir).encode() in cmdline


class ToolBackend(Backend[R]):
    """A backend that wraps an external profiler (`tool`: its name, 'nsys' or 'ncu'), found by
    orchestrator.tools from the path its Options declare with tool_path() (--<tool>), its
    variable, PATH, its install places (`tool_spec()`)."""

    tool = ""

    @classmethod
    def tool_spec(cls):
        """Where orchestrator.tools looks for the tool: nsys's and ncu's places, else by its name
        ($GPROF_<TOOL>, PATH). Override to name a tool's own variable and install places."""
        return tools.spec_for(cls.tool)

    def _explicit(self, req: R | None) -> str | None:
        return self.opts(req).tool_path() if req is not None else None

    def check(self, req: R | None = None) -> Availability:
        """The tool found (path and version), or why not with how to get it."""
        try:
            t = tools.find(
                self.tool_spec(), self._explicit(req), timeout=req.timeout if req is not None else None
            )
        except ToolNotFoundError as exc:
            return Availability(False, exc.render())
        return Availability(True, f"{t.path} ({t.version})")

    def require(self, req: R) -> dict[str, str]:
        """The tool's path, version and how it was found; ToolNotFoundError without it."""
        t = tools.find(self.tool_spec(), self._explicit(req), timeout=req.timeout)
        self._found = t
        return {
            self.tool: str(t.path),
            f"{self.tool}_version": t.version,
            f"{self.tool}_found_via": t.found_via,
        }

    def exe(self, req: R) -> str:
        """The tool's path: the one require() found, else a lookup (for --dry-run), else as given."""
        t = getattr(self, "_found", None)
        if t is None:
            try:
                t = tools.find(self.tool_spec(), self._explicit(req), with_version=False)
            except ToolNotFoundError:
                return self._explicit(req) or self.tool
        return str(t.path)
