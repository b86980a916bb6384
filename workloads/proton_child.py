"""The proton backend's child: `python -m workloads.proton_child SESSION -m workloads run ...`.

It starts a proton session (triton.profiler), marks the runner's variants and iterations as
proton scopes through the runner's hook (profiled.observe: proton 3.6 turns only global-domain
NVTX ranges into scopes, the runner's are in the `gprof` domain), runs `python -m workloads run
...` in the same process and always calls `proton.finalize()`, which writes `SESSION.hatchet`.
Why each of these: docs/proton.md. Like all of workloads/, it imports nothing of the parent; it
imports triton and torch only when it runs."""

from __future__ import annotations

import contextlib
import runpy
import sys
import traceback
from typing import Any, NoReturn

from workloads import profiled

SESSION = "proton"  # proton.start's name: it writes <name>.hatchet
HATCHET = SESSION + ".hatchet"
ITER_SCOPE = "iter:"  # + the iteration's index in its variant
RUNNER_MODULE = "workloads"


class ScopeBridge:
    """The runner's observer (profiled.observe): each variant's block is a `profiler.scope(label)`
    and each iteration in it a `profiler.cpu_timed_scope("iter:<n>")`, n counting from 0 in each
    variant (proton keeps sums per scope path, so per-iteration scopes make per-iteration time)."""

    def __init__(self, profiler: Any):
        self.profiler = profiler
        self._next_iteration = 0

    @contextlib.contextmanager
    def variant(self, label: str):
        self._next_iteration = 0
        with self.profiler.scope(label):
            yield

    def iteration(self):
        scope = self.profiler.cpu_timed_scope(f"{ITER_SCOPE}{self._next_iteration}")
        self._next_iteration += 1
        return scope


def main(argv: list[str] | None = None, profiler: Any = None) -> NoReturn:
    """`SESSION -m workloads run ...`: starts proton (`profiler`: triton.profiler unless given,
    for tests), hooks the ScopeBridge into the runner, runs the runner module as `python -m
    workloads` would, finalizes proton, exits with the runner's code. A failure of proton itself
    is the runner's exit 3 with a last line saying so; a bad command line exit 2."""
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) < 3 or args[1:3] != ["-m", RUNNER_MODULE]:
        _say(
            f"gprof-orch runner: usage: python -m workloads.proton_child SESSION -m {RUNNER_MODULE} run WORKLOAD ..."
        )
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
    profiled.observe(ScopeBridge(profiler))
    sys.argv = [RUNNER_MODULE, *rest]
    code: Any = 0
    try:
        runpy.run_module(RUNNER_MODULE, run_name="__main__", alter_sys=True)
    except SystemExit as exc:
        code = exc.code
    finally:
        profiled.observe(None)
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


if __name__ == "__main__":
    main()
