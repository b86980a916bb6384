"""Dask plugins of the clusters gprof-orch starts. A module of its own because it imports
distributed at module level (a plugin must subclass distributed's), and only a cluster run
imports it."""

from __future__ import annotations

import signal
import threading

from distributed import WorkerPlugin


def _ignore(signum, frame) -> None:
    pass


class IgnoreSigint(WorkerPlugin):
    """The worker processes of a cluster gprof-orch starts (local:N, local-cuda) share the
    terminal's process group, so Ctrl-C reaches them too. They ignore it: the client decides what
    stops (its running points, in order, keeping what they took; then the cluster).

    A handler that does nothing, not SIG_IGN: an ignored signal stays ignored across exec, so the
    workload runner a point starts would ignore the SIGINT that stops it in order; a handler is
    reset to the default at exec."""

    name = "gprof-orch-ignore-sigint"
    idempotent = True

    def setup(self, worker) -> None:
        # signal handlers can only be set from the main thread (a worker process runs its loop there)
        if threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGINT, _ignore)
