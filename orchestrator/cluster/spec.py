"""Where the points run: --cluster SPEC / --scheduler-file FILE as a ClusterSpec, and that in
words (--dry-run)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from orchestrator.cluster.gpus import visible_gpus
from orchestrator.errors import UsageError

# the resource every point asks for, and every worker must offer (`dask worker --resources GPU=1`)
GPU = "GPU"


@dataclass(frozen=True)
class ClusterSpec:
    """Where the points run: kind 'local' (n_workers), 'local-cuda', 'address' or 'scheduler-file'."""

    kind: str
    n_workers: int | None = None
    address: str | None = None
    scheduler_file: str | None = None

    def __str__(self) -> str:
        return {
            "local": f"local:{self.n_workers}",
            "local-cuda": "local-cuda",
            "address": str(self.address),
        }.get(self.kind, f"--scheduler-file {self.scheduler_file}")


def parse_spec(cluster: str | None, scheduler_file: str | None = None) -> ClusterSpec | None:
    """--cluster SPEC / --scheduler-file FILE as a ClusterSpec; None when neither is given (the
    points run here, one after another). Raises UsageError on a spec it does not know."""
    if cluster is not None and scheduler_file is not None:
        raise UsageError("give --cluster or --scheduler-file, not both")
    if scheduler_file is not None:
        return ClusterSpec("scheduler-file", scheduler_file=str(Path(scheduler_file).expanduser().resolve()))
    if cluster is None or cluster.strip().lower() in ("", "none"):
        return None
    text = cluster.strip()
    if m := re.fullmatch(r"local:(\d+)", text):
        n = int(m.group(1))
        if n < 1:
            raise UsageError(f"--cluster {text}: the number of workers must be at least 1")
        return ClusterSpec("local", n_workers=n)
    if text == "local-cuda":
        return ClusterSpec("local-cuda")
    if re.fullmatch(r"(tcp|tls|ucx|inproc)://\S+", text):
        return ClusterSpec("address", address=text)
    if re.fullmatch(r"[\w.-]+:\d+", text):  # HOST:PORT, as `dask scheduler` prints it without the scheme
        return ClusterSpec("address", address=f"tcp://{text}")
    raise UsageError(
        f"--cluster {text!r} unknown; valid: local:N, local-cuda, tcp://HOST:PORT (or --scheduler-file FILE)"
    )


def describe(spec: ClusterSpec) -> str:
    """Where a run would go, in words (--dry-run); contacts nothing. local-cuda lists the GPUs,
    so with none it raises UsageError as the run would."""
    if spec.kind == "local":
        return (
            f"a LocalCluster of {spec.n_workers} worker process(es) on this machine, 1 thread and "
            f"resource GPU=1 each"
        )
    if spec.kind == "local-cuda":
        gpus = visible_gpus()
        return f"{len(gpus)} worker(s) on this machine, one per GPU: " + ", ".join(
            f"CUDA_VISIBLE_DEVICES={g['uuid'] or g['index']} ({g['name']})" for g in gpus
        )
    if spec.kind == "address":
        return f"the Dask scheduler at {spec.address}, on its workers with resource GPU"
    return f"the Dask scheduler named in {spec.scheduler_file}, on its workers with resource GPU"
