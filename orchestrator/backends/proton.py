"""`gprof-orch proton`: the workload under Proton, Triton's own profiler (`triton.profiler`).

Proton records every kernel through CUPTI in a tree of scopes, inside the profiled process.
The one child is the runner started through a bootstrap (`child_main`, run with `python -c`):
it starts a proton session, bridges the runner's NVTX ranges to proton scopes (`ScopeBridge`:
proton 3.6 turns only global-domain NVTX ranges into scopes, ours are in the `gprof` domain),
runs `python -m workloads run ...` in the same process and always calls `proton.finalize()`,
which writes `<run>/proton.hatchet`. Why each of these: docs/proton.md. The rows: per variant, `time_ns` per iteration (the sum of its kernels' CUPTI durations, as
nsys's and torch.profiler's kernel time), `cpu_time_ns` per iteration (host time between the
iteration scope's enter and exit), `kernel_time_ns` per launch, and per kernel the launch
metadata's `declared_flops[8|16|32|64]` and `declared_bytes` (totals over the measured
iterations; the kernel's author declares them). Proton records kernels only: no memcpy or
memset, no timestamps (so no idle gaps). Needs an NVIDIA GPU (CUPTI) and triton with proton.
"""

from __future__ import annotations

import importlib.util
import runpy
import sys
import traceback
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from orchestrator import envinfo, proc
from orchestrator.backends.base import RUNNER_MODULE, Availability, Backend, Parsed, Step
from orchestrator.errors import ToolFailedError, ToolNotFoundError, UsageError
from orchestrator.parsers import compressed
from orchestrator.request import Request
from orchestrator.runfolder import RunFolder
from reports.schema import MergedTime
from workloads.nvtx_ranges import RANGE_PREFIX

if TYPE_CHECKING:  # pandas and numpy at run time only where a report is built (parse)
    pass

SESSION = "proton"  # proton.start's name: it writes <name>.hatchet
HATCHET = SESSION + ".hatchet"
ITER_SCOPE = "iter:"  # + the iteration's index in its variant
# the bootstrap the child runs: `python -c CHILD <session> -m workloads run ...`
CHILD = "from orchestrator.backends.proton import child_main; child_main()"
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
        """The runner under proton's bootstrap (`python -c CHILD <session> -m workloads run ...`,
        pure), which starts proton and bridges the runner's ranges into proton scopes."""
        runner = self.runner_argv(req, run_dir)
        # `-m workloads ...` stays whole in the child's argv: the Ctrl-C policy and the logs know
        # the runner by it (base._is_runner)
        argv = [runner[0], "-c", CHILD, str(run_dir / SESSION), *runner[1:]]
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


# -- in the child ------------------------------------------------------------------------------

# where the runner keeps what the bridge hooks: the Ranges class and RANGE_PREFIX (its NVTX
# ranges), ITER_LABEL (the record_function around each iteration); the first module that has a
# name gives it (workloads/runner.py, or the modules it is split into)
RUNNER_PARTS = ("workloads.runner", "workloads.nvtx_ranges", "workloads.profiled")


def runner_contract(parts: tuple[str, ...] = RUNNER_PARTS) -> tuple[type, str, str]:
    """(Ranges, RANGE_PREFIX, ITER_LABEL) of the runner; RuntimeError naming what is missing."""
    found: dict[str, Any] = {}
    for name in parts:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError:
            continue
        for attr in ("Ranges", "RANGE_PREFIX", "ITER_LABEL"):
            if attr not in found and hasattr(module, attr):
                found[attr] = getattr(module, attr)
    missing = [a for a in ("Ranges", "RANGE_PREFIX", "ITER_LABEL") if a not in found]
    if "Ranges" in found:
        missing += [f"Ranges.{m}" for m in ("push", "pop") if not callable(getattr(found["Ranges"], m, None))]
    if missing:
        raise RuntimeError(
            f"the runner ({', '.join(parts)}) has no {', '.join(missing)}: the proton backend "
            "cannot mark its variants and iterations"
        )
    return found["Ranges"], found["RANGE_PREFIX"], found["ITER_LABEL"]


class ScopeBridge:
    """Proton scopes for the runner's ranges: every `Ranges.push(text)` also enters
    `profiler.scope(text)` (popped with it), and inside a `prefix` (variant) range every
    `record_function(iter_label)` also enters `profiler.cpu_timed_scope("iter:<n>")`, n counting
    from 0 in each variant. `install()` patches the `ranges` class and
    `torch_profiler.record_function` (the runner looks both up when it calls them);
    `uninstall()` puts them back."""

    def __init__(self, profiler: Any, ranges: type, prefix: str, iter_label: str, torch_profiler: Any):
        if not hasattr(torch_profiler, "record_function"):
            raise RuntimeError(
                "torch.profiler has no record_function: the proton backend cannot mark iterations"
            )
        self.profiler, self.ranges, self.torch_profiler = profiler, ranges, torch_profiler
        self.prefix, self.iter_label = prefix, iter_label
        self._open: list[tuple[str, Any]] = []  # the runner's open ranges and their scopes
        self._next_iteration = 0
        self._undo: list[tuple[Any, str, Any]] = []

    def push(self, text: str) -> None:
        """Enter a proton scope for the runner's range `text`; a variant range restarts the
        iteration count."""
        scope = self.profiler.scope(text)
        scope.__enter__()
        self._open.append((text, scope))
        if text.startswith(self.prefix):
            self._next_iteration = 0

    def pop(self) -> None:
        """Leave the scope of the innermost open range (nothing when none is open)."""
        if self._open:
            self._open.pop()[1].__exit__(None, None, None)

    def enter_iteration(self) -> Any:
        """The iteration's scope, entered; None outside every variant range."""
        if not any(text.startswith(self.prefix) for text, _ in self._open):
            return None
        scope = self.profiler.cpu_timed_scope(f"{ITER_SCOPE}{self._next_iteration}")
        self._next_iteration += 1
        scope.__enter__()
        return scope

    def install(self) -> ScopeBridge:
        """Patch the ranges class's push/pop and torch.profiler.record_function so the runner's
        ranges and iterations also enter proton scopes; returns self (undone by uninstall)."""
        ranges, bridge = self.ranges, self
        push, pop = ranges.push, ranges.pop

        def bridged_push(self_, text):
            push(self_, text)
            bridge.push(text)

        def bridged_pop(self_):
            bridge.pop()
            pop(self_)

        base = self.torch_profiler.record_function

        class record_function(base):
            def __enter__(self_):
                out = super().__enter__()
                self_._proton_scope = (
                    bridge.enter_iteration() if getattr(self_, "name", None) == bridge.iter_label else None
                )
                return out

            def __exit__(self_, *exc):
                scope = getattr(self_, "_proton_scope", None)
                if scope is not None:
                    scope.__exit__(None, None, None)
                return super().__exit__(*exc)

        self._undo = [
            (ranges, "push", push),
            (ranges, "pop", pop),
            (self.torch_profiler, "record_function", base),
        ]
        ranges.push, ranges.pop = bridged_push, bridged_pop
        self.torch_profiler.record_function = record_function
        return self

    def uninstall(self) -> None:
        """Put back the push, pop and record_function that install() replaced."""
        for owner, attr, original in reversed(self._undo):
            setattr(owner, attr, original)
        self._undo = []


def child_main(argv: list[str] | None = None, profiler: Any = None) -> NoReturn:
    """The child's bootstrap: `python -c CHILD <session> -m workloads run ...`. Starts proton
    (`profiler`: triton.profiler unless given, for tests), installs the ScopeBridge, runs the
    runner module as `python -m workloads` would, finalizes proton, exits with the runner's
    code. A failure of proton itself is the runner's exit 3 with a last line saying so."""
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) < 3 or args[1:3] != ["-m", RUNNER_MODULE]:
        _say(f"gprof-orch runner: usage: python -c ... SESSION -m {RUNNER_MODULE} run WORKLOAD ...")
        sys.exit(2)
    session, rest = args[0], args[3:]
    try:
        if profiler is None:
            import triton.profiler as profiler
        started = profiler.start(session, context="shadow", data="tree", backend="cupti", hook="triton")
    except Exception as exc:
        traceback.print_exc()
        _say(f"gprof-orch runner: crashed: proton could not start: {type(exc).__name__}: {exc}")
        sys.exit(3)
    if started is None:
        _say("gprof-orch runner: crashed: proton did not start (TRITON_PROTON_DISABLE is set)")
        sys.exit(3)
    try:
        import torch.profiler as torch_profiler

        ScopeBridge(profiler, *runner_contract(), torch_profiler).install()
    except Exception as exc:
        traceback.print_exc()
        _say(
            f"gprof-orch runner: crashed: proton cannot mark the runner's variants: {type(exc).__name__}: {exc}"
        )
        _finalize(profiler)
        sys.exit(3)
    sys.argv = [RUNNER_MODULE, *rest]
    code: Any = 0
    try:
        runpy.run_module(RUNNER_MODULE, run_name="__main__", alter_sys=True)
    except SystemExit as exc:
        code = exc.code
    finally:
        if not _finalize(profiler):
            code = 3
    sys.exit(code)


def _finalize(profiler: Any) -> bool:
    """proton.finalize(), which writes the profile; False (and said) when it fails."""
    try:
        profiler.finalize()
        return True
    except Exception as exc:
        traceback.print_exc()
        _say(f"gprof-orch runner: crashed: proton.finalize() failed: {type(exc).__name__}: {exc}")
        return False


def _say(message: str) -> None:
    try:
        print(message, file=sys.stderr, flush=True)
    except OSError:
        pass
