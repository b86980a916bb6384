"""A profiling request: what every run takes, as plain values, and its backend's own options,
checked before anything starts (so a bad name or size never costs a profiler launch)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from orchestrator import envinfo, proc
from orchestrator.base_request import BaseRequest
from orchestrator.cluster.spec import ClusterSpec, parse_spec
from orchestrator.errors import ToolTimeoutError, UnknownNameError, UsageError, check_seconds
from workloads import registry
from workloads.shapes import parse_size
from workloads.spec import RunSpec, resolve

if TYPE_CHECKING:
    from workloads.spec import RunSpec

DEVICES = ("auto", "cuda", "cpu")
# the Request fields that say where the points run: the parent's, never passed on to a point's run
CLUSTER_FIELDS = ("cluster", "scheduler_file", "retries", "each_gpu", "connect_timeout")


def parse_list(text: str | tuple | list | None) -> list[str]:
    if not text:
        return []
    items = text if isinstance(text, (list, tuple)) else [text]
    out: list[str] = []
    for item in items:
        out += [s.strip() for s in str(item).split(",") if s.strip()]
    return out


def workload_catalog(
    workload_file: str | Path | None = None, timeout: float | None = None
) -> list[dict[str, Any]]:
    """Every workload as plain data (workloads.registry.describe), the user's file included.

    The file is the user's code: it may exit, hang or crash on import. So it is imported only in
    a child, `python -m workloads list --workload-file F --json`, run by orchestrator.proc with
    `timeout` (a hang is the timeout, exit 124); whatever stops it from loading is a UsageError
    naming the file. Without a file the built-ins are described here: they import no torch."""
    if not workload_file:
        return registry.describe()
    path = Path(workload_file).resolve()
    if not path.is_file():
        raise UsageError(f"workload file {path} does not exist")
    st = path.stat()
    key = (str(path), st.st_mtime_ns, st.st_size)
    if key not in _CATALOGS:
        _CATALOGS[key] = _list_in_child(path, timeout)
    return _CATALOGS[key]


# what a workload file's listing said, by (path, mtime, size): a sweep or `all` lists it once
_CATALOGS: dict[tuple[str, int, int], list[dict[str, Any]]] = {}


def _list_in_child(path: Path, timeout: float | None) -> list[dict[str, Any]]:
    import json
    import sys
    import tempfile

    argv = [sys.executable, "-m", "workloads", "list", "--workload-file", str(path), "--json"]
    with tempfile.TemporaryDirectory(prefix="gprof-list-") as tmp:
        try:
            res = proc.run(argv, log_dir=Path(tmp), name="workload-list", timeout=timeout)
        except ToolTimeoutError as exc:
            # where the import was when it was ended: the last frame in the user's file
            lines = exc.log_tail.splitlines()
            at = [i for i, ln in enumerate(lines) if ln.strip().startswith(f'File "{path}"')]
            where = " ".join(ln.strip() for ln in lines[at[-1] : at[-1] + 2]) if at else ""
            raise ToolTimeoutError(
                f"importing workload file {path} ran past the timeout of {timeout:g} s; "
                "its process was ended" + (f" (it was at {where})" if where else ""),
                argv=argv,
                hint="a workload file should only define workloads when "
                "imported; raise --timeout if its import is slow",
            ) from None
        out = res.stdout.read_text(errors="replace").strip().splitlines()
        why = (res.tail(5).strip().splitlines() or [""])[-1].removeprefix("gprof-orch runner: ")
        if res.returncode != 0 or not out:
            if str(path) in why:
                raise UsageError(why)
            raise UsageError(
                f"workload file {path} could not be loaded: "
                + (why or f"its import ended the process with status {res.returncode} and no output")
            )
    try:
        return json.loads(out[-1])
    except ValueError:
        raise UsageError(
            f"workload file {path} could not be listed: its import printed over the listing"
        ) from None


@dataclass
class Request(BaseRequest):
    """A workload run's request: what every run takes (BaseRequest: the backend, iterations, time
    limit, folder, and the backend's own options, the frozen dataclass its backend declares,
    orchestrator/backends/options.py) and what a workload run takes beside. Built from flat
    keyword arguments by orchestrator.backends.request(), which gives each key to its owner; read
    back from a run folder's request record by backends.request_from_record()."""

    workload: str
    backend: str = field(default="time", kw_only=True)
    variants: list[str] = field(default_factory=list)
    size: str | None = None
    dtype: str = "float32"
    device: str = "auto"
    warmup: int | None = None
    seed: int = 0
    workload_file: str | None = None
    triton_interpret: bool = False
    dry_run: bool = False
    fail_variant: str | None = None  # testing aid: the runner makes this variant raise
    # (options, from BaseRequest: `all`'s is every one of its backends' options by name, a dict)
    # scale-out (orchestrator/cluster.py): where the points run; none of these reach a point's own run
    cluster: str | None = None  # local:N, local-cuda, tcp://HOST:PORT
    scheduler_file: str | None = None  # a running scheduler's file (dask scheduler --scheduler-file)
    retries: int = 2  # resubmissions of a point whose worker was lost
    each_gpu: bool = False  # the one point once on every worker's GPU
    connect_timeout: float = 10.0  # seconds a scheduler has to answer

    def workload_name(self) -> str:
        return self.workload

    def cluster_spec(self) -> ClusterSpec | None:
        """Where the points run (orchestrator.cluster.ClusterSpec), or None: here, one by one.
        --each-gpu without --cluster means local-cuda. Raises UsageError on a bad spec."""
        spec = parse_spec(self.cluster, self.scheduler_file)
        if spec is None and self.each_gpu:
            spec = parse_spec("local-cuda", None)
        return spec

    def catalog_entry(self) -> dict[str, Any]:
        """The workload as plain data (workloads.registry.describe: variants, dtypes, default
        shapes), known without importing a --workload-file; UnknownNameError for a name no
        workload has."""
        catalog = {w["workload"]: w for w in workload_catalog(self.workload_file, self.timeout)}
        if self.workload not in catalog:
            raise UnknownNameError("workload", self.workload, sorted(catalog))
        return catalog[self.workload]

    def on_cpu(self) -> bool:
        """Whether the run is on the CPU: --device cpu, or auto where auto_device() finds no GPU
        (the spec settles auto the same way; a profiler's flags must agree with it)."""
        return self.device == "cpu" or (self.device == "auto" and auto_device()[0] == "cpu")

    def selected_variants(self) -> list[str]:
        """The variants that run, in the workload's order, the baseline always among them (as
        workloads.registry.Workload.select does), known without importing a --workload-file."""
        w = self.catalog_entry()
        names = [v["name"] for v in w["variants"]]
        wanted = set(self.variants) | {w["baseline"]}
        return [n for n in names if n in wanted] if self.variants else names

    def validate(self) -> Request:
        """Check every value against the registries; raises UsageError / UnknownNameError.
        Changes nothing: the values the run takes are settled by resolve_spec()."""
        check_seconds(self.timeout, "--timeout")
        if type(self.retries) is not int or self.retries < 0:
            raise UsageError(f"--retries must be a whole number >= 0, not {self.retries}")
        check_seconds(self.connect_timeout, "--connect-timeout")
        self.cluster_spec()
        if self.out is not None and Path(self.out).exists() and not Path(self.out).is_dir():
            raise UsageError(f"--out {self.out} exists and is a file, not a folder; choose a new folder")
        w = self.catalog_entry()
        names = [v["name"] for v in w["variants"]]
        for v in self.variants:
            if v not in names:
                raise UnknownNameError(f"variant of {self.workload}", v, names)
        if self.size is not None:
            dims = parse_size(self.size).split("x")
            if w.get("needs_square_size") and (len(dims) != 2 or dims[0] != dims[1]):
                raise UsageError(
                    f"workload {self.workload} needs a square size, --size NxN (its input is one n x n "
                    f"matrix), not {'x'.join(dims)}"
                )
        if self.dtype not in registry.DTYPES:  # named with what this workload takes, not every workload's
            raise UsageError(
                f"--dtype {self.dtype!r} unknown; workload {self.workload} takes {', '.join(w['dtypes'])}"
            )
        if self.dtype not in w["dtypes"]:
            raise UsageError(
                f"workload {self.workload} supports --dtype {', '.join(w['dtypes'])}, not {self.dtype}"
            )
        if self.device not in DEVICES:
            raise UsageError(f"--device {self.device!r} unknown; valid: {', '.join(DEVICES)}")
        super().validate()
        if self.warmup is not None and self.warmup < 0:
            raise UsageError(f"--warmup must be >= 0, not {self.warmup}")
        if self.options is not None and not isinstance(self.options, dict):
            self.options.validate()
        return self


def resolve_spec(
    req: Request,
    *,
    mode: str,
    default_iters: int | None,
    default_warmup: int,
    out: Path | None = None,
    **backend_fields: Any,
) -> RunSpec:
    """Everything the runner child needs for `req`, settled here once, as a new frozen RunSpec
    (workloads/spec.py; `req` is not changed): the variants that run (the baseline among them),
    the shape (--size, else the workload's default for the device), the device (auto:
    auto_device()), the backend's `mode`, its `default_iters` and `default_warmup` where the
    request has none, an absolute --workload-file, and the RunSpec fields the backend sets from its
    own options (`backend_fields`: time's timer and stop rule). Imports no torch: it reads the
    workload catalog and, for --device auto, nvidia-smi. Raises as validate() does.

    Example:
        >>> resolve_spec(Request("square", device="cpu"), mode="time", default_iters=None,
        ...              default_warmup=10).shape
        (1000, 1000)
    """
    entry = req.catalog_entry()
    shape = tuple(int(d) for d in parse_size(req.size).split("x")) if req.size else None
    spec = RunSpec(
        workload=req.workload,
        variants=tuple(req.selected_variants()),
        shape=shape,
        dtype=req.dtype,
        device=req.device,
        iters=req.iters if req.iters is not None else default_iters,
        warmup=req.warmup if req.warmup is not None else default_warmup,
        seed=req.seed,
        mode=mode,
        triton_interpret=req.triton_interpret,
        fail_variant=req.fail_variant,
        workload_file=str(Path(req.workload_file).resolve()) if req.workload_file else None,
        out=out,
        **backend_fields,
    )
    return resolve(spec, entry, auto_device)


def auto_device() -> tuple[str, str]:
    """--device auto, settled in the parent, which never imports torch: cuda where nvidia-smi
    finds a GPU and CUDA_VISIBLE_DEVICES does not hide them all, else cpu; (device, how it was
    chosen: the spec says so). The child refuses a cuda its torch cannot see (a CPU-only torch
    build), naming this reason."""
    import os

    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None and visible.strip() in ("", "-1"):
        return "cpu", f"auto: CUDA_VISIBLE_DEVICES={visible!r} hides every GPU"
    smi = envinfo.nvidia_smi()
    if smi is None:
        return "cpu", "auto: nvidia-smi finds no GPU (the parent does not import torch)"
    return "cuda", f"auto: nvidia-smi finds {smi['gpu']} (the parent does not import torch)"
