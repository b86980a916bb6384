"""The error tree of gprof-orch, and the exit code of each kind.

Every expected failure is one of these; the CLI turns them into one message and an exit code in
one place (`orchestrator.cli`). Anything else is a bug and shows its traceback.
"""

from __future__ import annotations

from pathlib import Path

# the base of the tree is the workload side's (it raises these too); the orchestrator's modules
# import the whole tree from here
from workloads.errors import EXIT_RUN_FAILED, GprofError, UnknownNameError, UsageError

__all__ = [
    "EXIT_OK",
    "EXIT_RUN_FAILED",
    "EXIT_TOOL_NOT_FOUND",
    "EXIT_PARSE",
    "EXIT_PERMISSION",
    "EXIT_TIMEOUT",
    "EXIT_INTERRUPTED",
    "EXIT_BROKEN_PIPE",
    "GprofError",
    "UsageError",
    "UnknownNameError",
    "ToolNotFoundError",
    "ToolFailedError",
    "PermissionDeniedError",
    "ToolTimeoutError",
    "ClusterUnavailableError",
    "InterruptedRunError",
    "interrupt_in",
    "note_interrupt",
    "ParseError",
    "RunFailedError",
    "SamplesLostError",
    "EXIT_INCOMPLETE",
    "EXIT_SUSPECT",
    "SuspectResultError",
    "IncompleteReportError",
]

# Exit codes (documented in the README's table); 1 (EXIT_RUN_FAILED) and 2 (EXIT_USAGE) are
# defined with the base classes in workloads.errors.
EXIT_OK = 0
EXIT_TOOL_NOT_FOUND = 3  # nsys / ncu / a compiler is not installed
EXIT_PARSE = 4  # a report or run folder could not be read
EXIT_PERMISSION = 5  # e.g. GPU counters restricted to admin users
EXIT_INCOMPLETE = 6  # the run ended, but the profiler's report lacks part of what ran
EXIT_SUSPECT = 7  # the run ended, but a variant's number cannot stand for its work
EXIT_TIMEOUT = 124  # like coreutils' timeout(1)
EXIT_INTERRUPTED = 130  # SIGINT, like a shell
EXIT_BROKEN_PIPE = 141  # stdout closed early (`| head`), like a tool SIGPIPE ended


class ToolNotFoundError(GprofError):
    exit_code = EXIT_TOOL_NOT_FOUND


class ToolFailedError(GprofError):
    """A child process exited non-zero. Keeps argv, return code and the log tail."""

    def __init__(
        self,
        message: str,
        *,
        argv: list[str] | None = None,
        returncode: int | None = None,
        log_tail: str = "",
        hint: str | None = None,
        log: Path | str | None = None,
    ):
        super().__init__(message, hint=hint, log=log)
        self.argv, self.returncode, self.log_tail = argv or [], returncode, log_tail

    def render(self) -> str:
        return with_tail(super().render(), self.log_tail, "last lines of the log")


def with_tail(text: str, tail: str, title: str) -> str:
    """An error's text with the last lines of a log under it, each marked `  | `."""
    if tail.strip():
        text += f"\n{title}:\n" + "\n".join("  | " + ln for ln in tail.rstrip().splitlines()[-15:])
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


# Whether this process was sent SIGINT or SIGTERM, as the CLI's handlers note it: after one, what is
# raised is its doing even with no interrupt in the exception's chain. An interrupt that stopped an
# import half-way leaves the module broken in sys.modules (pandas' compiled modules stay, tied to a
# pandas module that is gone), and the next import of it raises a plain AttributeError or SystemError.
_signalled = False


def note_interrupt(received: bool = True) -> None:
    """Record that SIGINT or SIGTERM arrived (`received=False`: a new command starts unsignalled)."""
    global _signalled
    _signalled = received


def interrupt_in(exc: BaseException | None) -> bool:
    """Whether `exc` is an interrupt (Ctrl-C; SIGTERM, which the CLI raises as one), or an error
    one caused: anything raised once the CLI was signalled (note_interrupt), and pybind11 modules'
    (matplotlib's) ImportError("initialization failed"), the interrupt that stopped their import its
    cause."""
    if _signalled and exc is not None:
        return True
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        if isinstance(exc, (KeyboardInterrupt, InterruptedRunError)):
            return True
        seen.add(id(exc))
        exc = exc.__cause__ or exc.__context__
    return False


class ParseError(GprofError):
    """A raw report (SQLite, .ncu-rep, trace JSON) or a run folder could not be read."""

    exit_code = EXIT_PARSE

    def __init__(self, path: Path | str, reason: str, *, hint: str | None = None):
        super().__init__(f"cannot read {path}: {reason}", hint=hint)
        self.path = Path(path)
        self.reason = reason


class IncompleteReportError(GprofError):
    """The run ended, but the profiler's report lacks part of what ran (it lost events, a variant's
    range or launches are missing): those rows are marked, never passed off as results."""

    exit_code = EXIT_INCOMPLETE


class SuspectResultError(GprofError):
    """The run ended, but a variant's number cannot stand for its work: a rate above what the
    device can do, or GPU work on a stream the timer cannot join. Those rows are marked, never
    ranked."""

    exit_code = EXIT_SUSPECT


class RunFailedError(GprofError):
    """The run finished but something in it failed (a variant raised, a check failed, the
    profiled program exited non-zero: `log_tail`, what it said last, shown under `tail_title`)."""

    exit_code = EXIT_RUN_FAILED

    def __init__(
        self,
        message: str,
        *,
        hint: str | None = None,
        log: Path | str | None = None,
        log_tail: str = "",
        tail_title: str = "last lines of the log",
    ):
        super().__init__(message, hint=hint, log=log)
        self.log_tail, self.tail_title = log_tail, tail_title

    def render(self) -> str:
        return with_tail(super().render(), self.log_tail, self.tail_title)


class SamplesLostError(RunFailedError):
    """The runner could not save what it measured (workload.json would not take it): `report`
    cannot bring it back, only a new run can."""


def check_seconds(value: float | None, flag: str) -> None:
    """A time limit from the command line: None (none), or a positive, finite number of seconds
    (NaN compares false with everything: `--timeout nan` would turn the limit off)."""
    import math

    if value is not None and not (isinstance(value, (int, float)) and math.isfinite(value) and value > 0):
        raise UsageError(f"{flag} must be a positive number of seconds, not {value}")
