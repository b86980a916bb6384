"""The one way gprof-orch runs a tool: argv as a list (never a shell), its own process group,
stdout and stderr into log files, a timeout that ends the whole group, and Ctrl-C handled so
that a profiler still writes its report: by default it is forwarded to the group's leader only;
a caller can instead have the first Ctrl-C stop the workload under the profiler (the profiler
then sees its target exit and writes everything), or only wait while the profiler finishes
(`OnInterrupt`). A second Ctrl-C always goes to the leader.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from orchestrator.errors import InterruptedRunError, ToolFailedError, ToolNotFoundError, ToolTimeoutError
from workloads import umask

# after SIGINT to the leader, how long it may take to finish writing (nsys merges its report)
INTERRUPT_GRACE_S = 60.0
# after the first Ctrl-C stopped only the workload (or nothing), how long the profiler may take
# to write its whole report before it is ended (a second Ctrl-C ends it sooner)
REPORT_WAIT_S = 600.0
TERM_GRACE_S = 5.0


# prctl(2)'s PR_SET_PDEATHSIG: the signal the kernel sends a process when its parent dies
PR_SET_PDEATHSIG = 1
# thread id -> its stop request (see stoppable()): set from another thread, taken as Ctrl-C
_STOP_REQUESTS: dict[int, threading.Event] = {}


def _parent_death_signal():
    """A preexec_fn that makes the child get SIGTERM when the thread that started it dies, or None
    off Linux (or without libc).

    Why: the child is put in a session of its own (so the terminal's Ctrl-C reaches gprof-orch
    alone, which then stops it in order), so nothing else ends it when its parent is killed
    outright. On a Dask worker (`--cluster`) that happens: the worker process is killed (out of
    memory, `kill -9`, the cluster closed while a point runs) and its workload runner, or the
    nsys/ncu holding it, would go on measuring on a GPU that another point now uses. SIGTERM,
    not SIGKILL: the runner takes it as Ctrl-C and exits, and nsys/ncu get the chance to end the
    program they hold, which a SIGKILL of theirs would orphan (the signal reaches only the direct
    child, not its process group). The kernel sends it when the *thread* that forked the
    child ends; run() waits for its child in that same thread, so this only fires when the
    whole process dies."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        import ctypes

        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    parent = os.getpid()

    def preexec() -> None:  # between fork and exec: no imports, no locks
        prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
        if os.getppid() != parent:  # the parent died before prctl took effect
            os._exit(1)

    return preexec


@contextlib.contextmanager
def stoppable():
    """While inside, run() in this thread takes `event.set()`, from any other thread, as the
    first Ctrl-C (so a Dask task stops its child the way an interrupted CLI run does).

    Example:
        >>> with stoppable() as stop:
        ...     threading.Timer(5, stop.set).start()
        ...     run(argv, log_dir=logs, name="workload")   # InterruptedRunError after 5 s
    """
    event = threading.Event()
    _STOP_REQUESTS[threading.get_ident()] = event
    try:
        yield event
    finally:
        _STOP_REQUESTS.pop(threading.get_ident(), None)


def _wait(proc: subprocess.Popen, timeout: float | None) -> int:
    """proc.wait(timeout), raising KeyboardInterrupt once this thread's stop request is set."""
    stop = _STOP_REQUESTS.get(threading.get_ident())
    if stop is None:
        return proc.wait(timeout=timeout)
    deadline = None if timeout is None else time.monotonic() + timeout
    while True:
        if stop.is_set():
            raise KeyboardInterrupt("stop requested")
        left = 0.2 if deadline is None else min(0.2, deadline - time.monotonic())
        try:
            return proc.wait(timeout=max(left, 0))
        except subprocess.TimeoutExpired:
            if deadline is not None and time.monotonic() >= deadline:
                raise


@dataclass
class OnInterrupt:
    """What the first Ctrl-C does instead of signalling the tool: SIGINT `pid` (the workload
    under the tool), or, with pid None, nothing but wait. `message` tells the user which."""

    message: str
    pid: int | None = None


class Progress:
    """While a step runs, a row on a terminal's stderr: a spinner, the label and the time taken;
    with `total` (a sweep's points), also a bar, points done of total and the time left. Only on a
    terminal (data stays on stdout, logs and pipes stay clean) and not with GPROF_NO_PROGRESS.
    Drawn by rich, imported only then. Progresses open at once share one display, a row each (a
    step's row under its sweep's bar). A subclass adds to its row by overriding detail() (the
    cluster's points running on each worker).

    Example:
        >>> with Progress("points", total=len(points)) as bar:
        ...     for p in points:
        ...         run_point(p)
        ...         bar.advance()
    """

    def __init__(self, label: str, total: int | None = None):
        self.label, self.total = label, total
        self.enabled = sys.stderr.isatty() and not os.environ.get("GPROF_NO_PROGRESS")
        self._row: tuple[Any, Any] | None = None  # (the shared display, this row's task in it)
        self._detail = ""

    def detail(self) -> str:
        """What the row says after the times, asked about once a second ("" by default)."""
        return ""

    def advance(self, n: int = 1) -> None:
        """`n` more of `total` done."""
        if self._row is not None:
            self._row[0].advance(self._row[1], n)

    def _detail_line(self) -> str:
        try:
            self._detail = self.detail()
        except Exception:  # a line that cannot be made this second (a scheduler gone): the last one stands
            pass
        return self._detail

    def __enter__(self) -> Progress:
        if self.enabled:
            self._row = _add_row(self)
        return self

    def __exit__(self, *exc) -> None:
        if self._row is not None:
            _remove_row(*self._row)
            self._row = None


# the one display the open Progresses share, drawn from PROGRESS_FIRST_DRAW_S after it opens (a
# --version check that ends before then never flashes a row)
_DISPLAY: Any = None
_DISPLAY_LOCK = threading.Lock()
PROGRESS_FIRST_DRAW_S = 0.5


def _add_row(progress: Progress) -> tuple[Any, Any]:
    global _DISPLAY
    with _DISPLAY_LOCK:
        if _DISPLAY is None:
            _DISPLAY = _new_display()
            timer = threading.Timer(PROGRESS_FIRST_DRAW_S, _start_display, args=(_DISPLAY,))
            timer.daemon = True
            timer.start()
        return _DISPLAY, _DISPLAY.add_task(progress.label, total=progress.total, owner=progress)


def _start_display(display: Any) -> None:
    with _DISPLAY_LOCK:
        if display is _DISPLAY:  # not closed meanwhile
            display.start()


def _remove_row(display: Any, task: Any) -> None:
    global _DISPLAY
    with _DISPLAY_LOCK:
        display.remove_task(task)
        if not display.tasks:
            display.stop()  # transient: the rows are erased
            _DISPLAY = None


def _new_display() -> Any:
    """A rich Progress on stderr: spinner, label, bar, done/total, elapsed, time left, detail."""
    from datetime import timedelta

    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        ProgressColumn,
        SpinnerColumn,
        TextColumn,
        TimeElapsedColumn,
    )
    from rich.progress import Progress as Display
    from rich.table import Column
    from rich.text import Text

    class Counted(ProgressColumn):
        """`column` on a row with a total (points); nothing on a step's row."""

        def __init__(self, column: ProgressColumn):
            super().__init__()
            self.column = column

        def render(self, task: Any) -> Any:
            return self.column(task) if task.total is not None else Text("")

    class TimeLeft(ProgressColumn):
        """The time per point so far, times the points left (rich's own estimate forgets the
        points before its last 30 s, and a sweep's points take minutes)."""

        def render(self, task: Any) -> Any:
            if task.total is None:
                return Text("")
            left = (
                "-:--:--"
                if not task.completed
                else str(timedelta(seconds=round(task.elapsed / task.completed * task.remaining)))
            )
            return Text(f"{left} left", style="progress.remaining")

    class Detail(ProgressColumn):
        max_refresh = 1.0  # a cluster's detail asks the scheduler: once a second is enough

        def __init__(self) -> None:
            super().__init__(
                Column(no_wrap=True, overflow="ellipsis")
            )  # cut, not a row that jumps to two lines

        def render(self, task: Any) -> Any:
            return Text(task.fields["owner"]._detail_line())

    return Display(
        SpinnerColumn(),
        TextColumn("{task.description}"),
        Counted(BarColumn(bar_width=24)),
        Counted(MofNCompleteColumn()),
        TimeElapsedColumn(),
        TimeLeft(),
        Detail(),
        console=Console(stderr=True),
        transient=True,
        refresh_per_second=4,
        redirect_stdout=False,
        redirect_stderr=False,
    )  # stdout is data: never through the display


@dataclass
class Result:
    argv: list[str]
    returncode: int
    stdout: Path
    stderr: Path
    seconds: float

    def tail(self, lines: int = 20) -> str:
        return log_tail(self.stderr, lines) or log_tail(self.stdout, lines)


def log_tail(path: Path, lines: int = 20) -> str:
    try:
        with open(path, "rb") as fh:
            fh.seek(0, os.SEEK_END)
            size = fh.tell()
            fh.seek(max(0, size - 16384))
            text = fh.read().decode("utf-8", "replace")
    except OSError:
        return ""
    return "\n".join(text.splitlines()[-lines:])


def format_argv(argv: list[str], env: dict[str, str] | None = None) -> str:
    """The command as a shell line a person can paste (for commands.sh and --dry-run)."""
    prefix = " ".join(f"{k}={shlex.quote(v)}" for k, v in (env or {}).items())
    return (prefix + " " if prefix else "") + shlex.join(argv)


def _signal_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return True


def _end_group(proc: subprocess.Popen, pgid: int) -> None:
    """SIGTERM the group, then SIGKILL what is left; reap the leader."""
    _signal_group(pgid, signal.SIGTERM)
    deadline = time.monotonic() + TERM_GRACE_S
    while time.monotonic() < deadline and group_alive(pgid):
        if proc.poll() is not None and not group_alive(pgid):
            break
        time.sleep(0.05)
    _signal_group(pgid, signal.SIGKILL)
    try:
        proc.wait(timeout=TERM_GRACE_S)
    except subprocess.TimeoutExpired:
        pass
    # members of the group that outlive the leader (a profiler's daemon, say)
    deadline = time.monotonic() + TERM_GRACE_S
    while group_alive(pgid) and time.monotonic() < deadline:
        time.sleep(0.05)


def _send(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _interrupt(proc: subprocess.Popen, pgid: int, policy: OnInterrupt | None, grace: float) -> None:
    """The first Ctrl-C arrived: apply `policy` (None: SIGINT the leader), wait for the leader;
    a second Ctrl-C goes to the leader; then end whatever is left of the group."""
    try:
        if policy is None:
            _send(proc.pid, signal.SIGINT)
            proc.wait(timeout=grace)
        else:
            print(f"gprof-orch: {policy.message} (Ctrl-C again to stop it now)", file=sys.stderr, flush=True)
            if policy.pid is not None:
                _send(policy.pid, signal.SIGINT)
            try:
                proc.wait(timeout=REPORT_WAIT_S)
            except KeyboardInterrupt:
                _send(proc.pid, signal.SIGINT)
                proc.wait(timeout=grace)
    except (subprocess.TimeoutExpired, KeyboardInterrupt):
        pass
    _end_group(proc, pgid)


def run(
    argv: list[str],
    *,
    log_dir: Path,
    name: str,
    timeout: float | None = None,
    env: dict[str, str] | None = None,
    cwd: Path | None = None,
    interrupt_grace: float = INTERRUPT_GRACE_S,
    on_interrupt: Callable[[], OnInterrupt | None] | None = None,
) -> Result:
    """Run argv to completion. Returns its Result whatever the exit code (the caller decides
    what a non-zero exit means); raises ToolTimeoutError after ending the group on timeout,
    InterruptedRunError on Ctrl-C (after the leader had `interrupt_grace` seconds to finish, or
    what `on_interrupt()` chose), ToolNotFoundError when argv[0] cannot be executed."""
    log_dir.mkdir(parents=True, exist_ok=True)
    out_path, err_path = log_dir / f"{name}.stdout.log", log_dir / f"{name}.stderr.log"
    full_env = {
        **os.environ,
        umask.UMASK_ENV: umask.current(),
        **(env or {}),
    }  # nsys starts its target with umask 0
    stop = _STOP_REQUESTS.get(threading.get_ident())
    if stop is not None and stop.is_set():
        raise InterruptedRunError(f"interrupted before {name} started")
    t0 = time.monotonic()
    with open(out_path, "wb") as out, open(err_path, "wb") as err:
        try:
            proc = subprocess.Popen(
                argv,
                stdout=out,
                stderr=err,
                stdin=subprocess.DEVNULL,
                env=full_env,
                cwd=cwd,
                start_new_session=True,
                preexec_fn=_parent_death_signal(),
            )
        except (FileNotFoundError, PermissionError) as exc:
            raise ToolNotFoundError(f"cannot run {argv[0]}: {exc.strerror}") from exc
        pgid = proc.pid
        # what the messages call it: the step "workload" is gprof-orch's own runner, not "python"
        what = "the workload runner" if name == "workload" else os.path.basename(argv[0])
        try:
            with Progress(f"{name} ({os.path.basename(argv[0])})"):
                rc = _wait(proc, timeout)
        except subprocess.TimeoutExpired:
            _end_group(proc, pgid)
            raise ToolTimeoutError(
                f"{what} ran past the timeout of {timeout:g} s; its process group was ended",
                argv=argv,
                returncode=None,
                log_tail=log_tail(err_path) or log_tail(out_path),
                log=err_path,
                hint="raise --timeout, or use a smaller --size / fewer --iters",
            ) from None
        except KeyboardInterrupt:
            # the child is in its own session, so the terminal's SIGINT reached only us
            _interrupt(proc, pgid, on_interrupt() if on_interrupt else None, interrupt_grace)
            raise InterruptedRunError(f"interrupted while running {what}", log=err_path) from None
        finally:
            if proc.poll() is None:
                _end_group(proc, pgid)
        # the leader exited: make sure nothing it started lives on
        if group_alive(pgid):
            _end_group(proc, pgid)
    return Result(argv, rc, out_path, err_path, time.monotonic() - t0)


def output(argv: list[str], *, timeout: float, cwd: Path | None = None) -> str | None:
    """The stdout of a short probe (`git rev-parse`, `nvidia-smi -L`), or None where it cannot run,
    exits non-zero or outlasts `timeout`: what it tells is optional, so it never raises."""
    try:
        res = subprocess.run(
            argv, capture_output=True, text=True, timeout=timeout, cwd=cwd, stdin=subprocess.DEVNULL
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return res.stdout if res.returncode == 0 else None


def check(result: Result, what: str, *, hint: str | None = None) -> Result:
    """Raise ToolFailedError with the log tail when `result` exited non-zero."""
    if result.returncode != 0:
        raise ToolFailedError(
            f"{what} exited with status {result.returncode}",
            argv=result.argv,
            returncode=result.returncode,
            log_tail=result.tail(),
            hint=hint,
            log=result.stderr,
        )
    return result
