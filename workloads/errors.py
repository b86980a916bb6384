"""The errors the workload side raises: the base of gprof-orch's error tree and its usage errors.

They live here, not in orchestrator.errors, so that workloads/ imports nothing from
orchestrator/ (the runner process is importable alone); orchestrator.errors builds the rest of
the tree on these same classes, so the CLI shows them as it shows its own.
"""

from __future__ import annotations

from pathlib import Path

# the exit codes of these classes (the README's table, orchestrator.errors, has every code)
EXIT_RUN_FAILED = 1  # a variant raised, a tool exited non-zero, a check failed
EXIT_USAGE = 2  # bad input: unknown name, bad size, unwritable folder, ...


class GprofError(Exception):
    """Base of every expected failure. `exit_code` is what the CLI exits with."""

    exit_code = EXIT_RUN_FAILED

    def __init__(self, message: str, *, hint: str | None = None, log: Path | str | None = None):
        super().__init__(message)
        self.message = message
        self.hint = hint
        self.log = Path(log) if log else None

    def render(self) -> str:
        lines = [self.message]
        if self.hint:
            lines.append(f"hint: {self.hint}")
        if self.log:
            lines.append(f"log: {self.log}")
        return "\n".join(lines)


class UsageError(GprofError):
    exit_code = EXIT_USAGE


class UnknownNameError(UsageError):
    """An unknown workload, variant, backend, metric...; lists the valid names."""

    def __init__(self, kind: str, name: str, valid: list[str] | tuple[str, ...]):
        super().__init__(f"unknown {kind} {name!r}; valid: {', '.join(valid) or '(none)'}")
        self.kind, self.name, self.valid = kind, name, list(valid)


class RunnerUsageError(Exception):
    """Bad input found in the runner process (e.g. a size too large for the device): exit 2."""


class WorkloadCodeError(RuntimeError):
    """The workload's own code (its input or its reference) raised: the run fails (exit 1) and
    says whose code it was; a ValueError there is no usage error of the command line."""
