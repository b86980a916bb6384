"""The error tree of gprof-orch, and the exit code of each kind.

Every expected failure is one of these; the CLI turns them into one message and an exit code in
one place (`orchestrator.cli`). Anything else is a bug and shows its traceback.
"""
from __future__ import annotations

from pathlib import Path

# Exit codes (documented in the README's table).
EXIT_OK = 0
EXIT_RUN_FAILED = 1        # a variant raised, a tool exited non-zero, a check failed
EXIT_USAGE = 2             # bad input: unknown name, bad size, unwritable folder, ...
EXIT_TOOL_NOT_FOUND = 3    # nsys / ncu / a compiler is not installed
EXIT_PARSE = 4             # a report or run folder could not be read
EXIT_PERMISSION = 5        # e.g. GPU counters restricted to admin users
EXIT_TIMEOUT = 124         # like coreutils' timeout(1)
EXIT_INTERRUPTED = 130     # SIGINT, like a shell


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


class ToolNotFoundError(GprofError):
    exit_code = EXIT_TOOL_NOT_FOUND


class ToolFailedError(GprofError):
    """A child process exited non-zero. Keeps argv, return code and the log tail."""

    def __init__(self, message: str, *, argv: list[str] | None = None, returncode: int | None = None,
                 log_tail: str = "", hint: str | None = None, log: Path | str | None = None):
        super().__init__(message, hint=hint, log=log)
        self.argv, self.returncode, self.log_tail = argv or [], returncode, log_tail

    def render(self) -> str:
        text = super().render()
        if self.log_tail.strip():
            tail = "\n".join("  | " + ln for ln in self.log_tail.rstrip().splitlines()[-15:])
            text += "\nlast lines of the log:\n" + tail
        return text


class PermissionDeniedError(ToolFailedError):
    exit_code = EXIT_PERMISSION


class ToolTimeoutError(ToolFailedError):
    exit_code = EXIT_TIMEOUT


class ClusterUnavailableError(GprofError):
    """A Dask scheduler that does not answer within --connect-timeout, or has no worker that can
    take a point (none with the resource GPU): like a missing tool, the message says how to get one."""

    exit_code = EXIT_TOOL_NOT_FOUND


class InterruptedRunError(GprofError):
    exit_code = EXIT_INTERRUPTED


class ParseError(GprofError):
    """A raw report (SQLite, .ncu-rep, trace JSON) or a run folder could not be read."""

    exit_code = EXIT_PARSE

    def __init__(self, path: Path | str, reason: str, *, hint: str | None = None):
        super().__init__(f"cannot read {path}: {reason}", hint=hint)
        self.path = Path(path)
        self.reason = reason


class RunFailedError(GprofError):
    """The run finished but something in it failed (a variant raised, a check failed)."""

    exit_code = EXIT_RUN_FAILED
