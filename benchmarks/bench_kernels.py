#!/usr/bin/env python3
"""Benchmark every mean and square variant (torch, lecture, fast) on one GPU, in one run.

    python benchmarks/bench_kernels.py --out OUT.md [--sweep-configs] [--reps 200]
    python benchmarks/bench_kernels.py --dry-run            # CPU: tiny sizes, Triton interpreter

What it does, in order:
1. starts building the CUDA extension (load_inline, workloads/kernels/cuda_square.py) in a
   background thread, so the build overlaps the Triton and numba compiles;
2. makes the inputs: float32 at each --sizes (as 2-D matrices: 1e6 -> 1000x1000,
   1e7 -> 3125x3200, 1e8 -> 10000x10000) and bfloat16 at each --bf16-sizes;
3. checks every variant's result once against a reference (mean: torch.mean in float64, rel.
   error < 1e-5 for float32, < 1e-2 for bfloat16; square: bit-equal to torch.square; copy:
   equal), and warms each up;
4. times them: per repetition, every variant once, round-robin (the starting variant rotates),
   each call preceded by an L2 flush (a --flush-mb buffer written) and a short GPU sleep
   (--slack-us, so that the host has queued the timed call before the GPU gets to it), timed
   with CUDA events; median and IQR of --reps repetitions;
5. prints and writes (--out FILE.md and FILE.json) a table: size, dtype, variant, median ms,
   IQR, GB/s from the minimum bytes moved (mean: n x itemsize read; square and copy: 2 x n x
   itemsize), % of the device-to-device copy's GB/s measured in the same run, and the ratio to
   torch's own op (torch.mean / torch.square) measured in the same run;
6. with --sweep-configs: times every configuration of fast_mean, the Triton square, the CUDA
   fast square and the numba square at --sweep-sizes (float32), interleaved the same way, and
   names the fastest of each at each size.

Progress goes to stderr. A variant that fails to build, run or check is reported in the table
and the JSON (with the error) and the run goes on. Exit status: 0 if every variant that could
run gave a correct result, 1 if one gave a wrong result or failed, 2 for a usage error.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import math
import os
import platform
import sys
import threading
import time
import traceback
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from workloads.timers import DEFAULT_GPU_SLEEP_US  # noqa: E402 (after the path above)

T0 = time.monotonic()


def log(msg: str) -> None:
    print(f"[bench {time.monotonic() - T0:6.1f}s] {msg}", file=sys.stderr, flush=True)


# ----------------------------------------------------------------------------- arguments


def _size_list(text: str) -> list[int]:
    out = []
    for part in text.split(","):
        part = part.strip()
        if part:
            out.append(int(float(part)))
    return out


def parse_args(argv=None):
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--out", help="write the table to this .md file and the data to the same name .json")
    p.add_argument(
        "--device",
        choices=("cuda", "cpu"),
        default="cuda",
        help="cpu: exercise the code paths with the Triton interpreter and numba simulator",
    )
    p.add_argument("--dry-run", action="store_true", help="= --device cpu with tiny sizes and few reps")
    p.add_argument("--sizes", type=_size_list, default=None, help="float32 sizes (default 1e6,1e7,1e8)")
    p.add_argument("--bf16-sizes", type=_size_list, default=None, help="bfloat16 sizes (default 1e8)")
    p.add_argument("--reps", type=int, default=None, help="timed repetitions per variant (default 200)")
    p.add_argument("--warmup", type=int, default=None, help="warm-up calls per variant (default 5)")
    p.add_argument("--flush-mb", type=int, default=256, help="L2 flush buffer written before each call")
    p.add_argument(
        "--slack-us",
        type=float,
        default=DEFAULT_GPU_SLEEP_US,
        help="GPU sleep after the flush, before each timed call (host launch latency)",
    )
    p.add_argument("--only", default=None, help="comma list of variant names to run (plus the references)")
    p.add_argument("--skip", default="", help="comma list of variant names to leave out")
    p.add_argument("--sweep-configs", action="store_true", help="also time every kernel configuration")
    p.add_argument("--sweep-only", action="store_true", help="only the configuration sweep")
    p.add_argument(
        "--sweep-families",
        type=lambda t: [s for s in t.split(",") if s],
        default=[],
        help="comma list: fast_mean, triton_square, cuda_square_fast, numba_square (default: all)",
    )
    p.add_argument("--sweep-sizes", type=_size_list, default=None, help="default 1e6,1e8")
    p.add_argument("--sweep-reps", type=int, default=None, help="default 100")
    p.add_argument("--sweep-limit", type=int, default=None, help="at most this many configs per family")
    p.add_argument(
        "--time-budget",
        type=float,
        default=225.0,
        help="seconds; sweep families that would start after this are skipped",
    )
    p.add_argument("--verbose-build", action="store_true", help="show the load_inline build output")
    a = p.parse_args(argv)
    if a.dry_run:
        a.device = "cpu"
    cpu = a.device == "cpu"
    a.sizes = a.sizes or ([1000, 4097] if cpu else [10**6, 10**7, 10**8])
    a.bf16_sizes = a.bf16_sizes if a.bf16_sizes is not None else ([4097] if cpu else [10**8])
    a.reps = a.reps or (3 if cpu else 200)
    a.warmup = a.warmup if a.warmup is not None else (1 if cpu else 5)
    a.sweep_sizes = a.sweep_sizes or ([1000, 4097] if cpu else [10**6, 10**8])
    a.sweep_reps = a.sweep_reps or (2 if cpu else 100)
    if a.sweep_limit is None and cpu:
        a.sweep_limit = 2
    if a.sweep_only:
        a.sweep_configs = True
    if a.reps < 1 or a.sweep_reps < 1:
        p.error("--reps and --sweep-reps must be >= 1")
    a.only = set(filter(None, (a.only or "").split(","))) or None
    a.skip = set(filter(None, a.skip.split(",")))
    return a


# ----------------------------------------------------------------------------- environment


def git_commit() -> str:
    """gprof-orch's own lookup (orchestrator.envinfo: $GPROF_COMMIT, else the checkout's commit,
    -dirty when modified), or "unknown"."""
    from orchestrator import envinfo

    return envinfo.git_commit(REPO) or "unknown"


def _version(dist: str) -> str | None:
    try:
        from importlib.metadata import version

        return version(dist)
    except Exception:
        return None


def environment(torch, device) -> dict:
    from orchestrator import envinfo

    meta: dict[str, Any] = {
        "date_utc": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC"),
        "git_commit": git_commit(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "torch_cuda": torch.version.cuda,
        "triton": _version("triton"),
        "numba": _version("numba"),
        "numba_cuda": _version("numba-cuda"),
        "host": platform.node(),
        "device_type": device.type,
    }
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        meta.update(
            {
                "device": torch.cuda.get_device_name(device),
                "compute_capability": f"{props.major}.{props.minor}",
                "sms": props.multi_processor_count,
                "l2_bytes": getattr(props, "L2_cache_size", None),
                "memory_bytes": props.total_memory,
                "driver": (envinfo.nvidia_smi() or {}).get("driver"),
            }
        )
    else:
        meta["device"] = f"CPU ({platform.processor() or platform.machine()}) - dry run"
    return meta


# ----------------------------------------------------------------------------- timing


class Timer:
    """CUDA events on a GPU, each call after an L2 flush and the runner's GPU sleep
    (workloads/timers.py, `time --timer sleep`); perf_counter on CPU."""

    def __init__(self, torch, device, flush_mb: int, slack_us: float):
        from workloads import timers

        self.torch = torch
        self.cuda = device.type == "cuda"
        self.device = device
        self.flush_buf = None
        self.hold = timers.NoHold()
        if self.cuda:
            if flush_mb > 0:
                self.flush_buf = torch.empty(flush_mb * (1 << 20) // 4, dtype=torch.float32, device=device)
            if slack_us > 0:
                self.hold = self._sleep(timers, slack_us)

    @staticmethod
    def _sleep(timers, slack_us: float):
        try:
            hold, _ = timers.make("sleep", "cuda", slack_us)
        except AttributeError:  # a torch without torch.cuda._sleep
            log("torch.cuda._sleep missing: no GPU slack before timed calls")
            return timers.NoHold()
        log(f"GPU sleep: {slack_us:.0f} us of slack before each timed call")
        return hold

    def prepare(self) -> None:
        if self.flush_buf is not None:
            self.flush_buf.zero_()
        self.hold.hold()

    def new_pair(self):
        if self.cuda:
            return (self.torch.cuda.Event(enable_timing=True), self.torch.cuda.Event(enable_timing=True))
        return [0.0, 0.0]

    def start(self, pair) -> None:
        if self.cuda:
            pair[0].record()
        else:
            pair[0] = time.perf_counter()

    def stop(self, pair) -> None:
        if self.cuda:
            pair[1].record()
        else:
            pair[1] = time.perf_counter()

    def ms(self, pair) -> float:
        if self.cuda:
            return pair[0].elapsed_time(pair[1])
        return (pair[1] - pair[0]) * 1000.0

    def sync(self) -> None:
        if self.cuda:
            self.torch.cuda.synchronize()


def stats(ms: list[float]) -> dict:
    """gprof-orch's statistics of the samples (reports.summary.sample_stats: the median and IQR its
    tables show; one sample has no IQR, written as null), with the quartiles and maximum beside."""
    import numpy as np

    from reports.summary import sample_stats

    s = sample_stats(np.asarray(ms, dtype=np.float64))
    q1, q3 = (float(q) for q in np.percentile(ms, [25, 75]))  # sample_stats's rule: numpy's linear
    return {
        "median_ms": s["median"],
        "iqr_ms": s["iqr"] if s["n"] > 1 else None,
        "q1_ms": q1,
        "q3_ms": q3,
        "min_ms": s["min"],
        "max_ms": max(ms),
        "reps": len(ms),
    }


# ----------------------------------------------------------------------------- variants


@dataclass
class Variant:
    name: str
    group: str  # "mean" | "square" | "copy"
    fn: Callable | None = None  # x -> result
    dtypes: tuple = ("float32", "bfloat16")
    needs_ext: bool = False  # waits for the CUDA extension build
    config: str | None = None  # sweep: the configuration's name
    family: str | None = None  # sweep: which kernel the config belongs to
    unavailable: str | None = None  # why it cannot run here


def shape_for(n: int) -> tuple[int, int]:
    """A 2-D shape with n elements, as square as n's divisors allow (1e6 -> 1000x1000)."""
    r = int(math.isqrt(n))
    for rows in range(r, 0, -1):
        if n % rows == 0:
            return (rows, n // rows)
    return (1, n)


def bytes_moved(group: str, numel: int, itemsize: int) -> int:
    """The built-in workloads' own rule (their `bytes_moved`): a mean reads the input once; a
    square, and so a copy, reads it and writes as much."""
    from workloads import registry

    return registry.get("mean" if group == "mean" else "square").bytes_moved(numel, itemsize)


def main_variants(args, device, torch, ext_state) -> list[Variant]:
    from workloads.kernels import cuda_square, numba_square, triton_mean, triton_square

    v = [
        Variant("torch.mean", "mean", lambda x: torch.mean(x)),
        Variant("x.mean()", "mean", lambda x: x.mean()),
        Variant("x.sum()/x.numel()", "mean", lambda x: x.sum() / x.numel()),
        Variant("triton_mean_lecture", "mean", triton_mean.lecture_mean),
        Variant("triton_mean_fast", "mean", triton_mean.fast_mean),
        Variant("torch.square", "square", torch.square),
        Variant("x*x", "square", lambda x: x * x),
        Variant("x**2", "square", lambda x: x**2),
        Variant(
            "cuda_square_lecture", "square", cuda_square.lecture_square, dtypes=("float32",), needs_ext=True
        ),
        Variant("cuda_square_fast", "square", cuda_square.fast_square, dtypes=("float32",), needs_ext=True),
        Variant("triton_square", "square", triton_square.triton_square),
        Variant("numba_square", "square", numba_square.numba_square, dtypes=("float32",)),
    ]
    for var in v:
        if var.needs_ext and device.type != "cuda":
            var.unavailable = "needs a CUDA GPU (load_inline CUDA extension)"
    return v


REFERENCE = {"mean": "torch.mean", "square": "torch.square"}


def check_result(torch, group: str, x, got, dst=None) -> tuple[bool, str]:
    """(passed, what was seen). On the CPU (Triton interpreter) bfloat16 squares may be 1 ulp
    off: the interpreter rounds float32 -> bfloat16 by truncation, the GPU to nearest."""
    if group == "mean":
        ref = torch.mean(x, dtype=torch.float64).item()
        if not torch.is_tensor(got) or got.dim() != 0:
            return False, f"not a 0-d tensor: {type(got).__name__} {getattr(got, 'shape', '')}"
        if got.dtype != x.dtype:
            return False, f"dtype {got.dtype} != {x.dtype}"
        err = abs(got.double().item() - ref) / max(abs(ref), 1e-30)
        tol = 1e-5 if x.dtype == torch.float32 else 1e-2
        return err < tol, f"rel err {err:.2e} (tol {tol:.0e})"
    if group == "square":
        want = torch.square(x)
        if not torch.is_tensor(got) or got.shape != want.shape or got.dtype != want.dtype:
            return False, f"shape/dtype {getattr(got, 'shape', None)} {getattr(got, 'dtype', None)}"
        if torch.equal(got, want):
            return True, "bit-equal to torch.square"
        diff = (got.float() - want.float()).abs()
        what = f"{int((diff > 0).sum())} elements differ, max abs diff {diff.max().item():.3g}"
        if x.device.type == "cpu" and x.dtype == torch.bfloat16:
            ok = bool((diff <= want.float().abs() * 2.0**-7).all())
            return ok, what + (" (within 1 bfloat16 ulp: the interpreter truncates)" if ok else "")
        return False, what
    if group == "copy":
        ok = torch.equal(dst, x)
        return ok, "equal" if ok else "copy differs"
    return False, f"unknown group {group}"


# ----------------------------------------------------------------------------- extension build


class ExtBuild:
    """The load_inline build, in a background thread."""

    def __init__(self):
        self.thread: threading.Thread | None = None
        self.error: str | None = None
        self.seconds: float | None = None
        self.done = threading.Event()

    def start(self, device, verbose: bool) -> None:
        def run():
            t = time.monotonic()
            try:
                from workloads.kernels.cuda_square import build_extensions

                build_extensions(verbose=verbose, device=device)
            except BaseException as e:
                self.error = f"{type(e).__name__}: {e}"
                self.trace = traceback.format_exc()
            self.seconds = time.monotonic() - t
            self.done.set()

        self.thread = threading.Thread(target=run, name="load_inline-build", daemon=True)
        self.thread.start()
        log("CUDA extension build started in the background")

    def wait(self, timeout: float = 420.0) -> str | None:
        if self.thread is None:
            return "not built"
        if not self.done.wait(timeout):
            return f"build still running after {timeout:.0f} s"
        if self.error:
            log(f"CUDA extension build FAILED after {self.seconds:.1f} s: {self.error}")
            print(getattr(self, "trace", ""), file=sys.stderr, flush=True)
        else:
            log(f"CUDA extension ready ({self.seconds:.1f} s)")
        return self.error


# ----------------------------------------------------------------------------- running


@dataclass
class Case:
    numel: int
    dtype: str
    x: Any
    dst: Any  # the copy's destination
    variants: list = field(default_factory=list)
    rows: list = field(default_factory=list)


def prepare_variant(torch, timer, case: Case, var: Variant, warmup: int) -> dict:
    """Check once and warm up; returns the row (status ok / wrong / error / n/a)."""
    row = {
        "size": case.numel,
        "shape": list(case.x.shape),
        "dtype": case.dtype,
        "variant": var.name,
        "group": var.group,
        "config": var.config,
        "family": var.family,
    }
    if var.unavailable:
        row.update(status="n/a", note=var.unavailable)
        return row
    if case.dtype not in var.dtypes:
        row.update(status="n/a", note=f"{case.dtype} not supported")
        return row
    try:
        t = time.monotonic()
        got = var.fn(case.x)
        timer.sync()
        ok, note = check_result(torch, var.group, case.x, got, case.dst)
        del got
        for _ in range(warmup):
            var.fn(case.x)
        timer.sync()
        row.update(status="ok" if ok else "wrong", check=note, first_call_s=round(time.monotonic() - t, 3))
        if not ok:
            log(f"  WRONG RESULT {var.name} {case.dtype} n={case.numel}: {note}")
    except Exception as e:
        row.update(status="error", note=f"{type(e).__name__}: {e}")
        log(f"  ERROR {var.name} {case.dtype} n={case.numel}: {type(e).__name__}: {e}")
        print(traceback.format_exc(), file=sys.stderr, flush=True)
    return row


def time_case(torch, timer, case: Case, runnable: list[tuple[Variant, dict]], reps: int) -> None:
    """Round-robin: each repetition calls every variant once, the starting one rotating."""
    if not runnable:
        return
    pairs = {id(v): [timer.new_pair() for _ in range(reps)] for v, _ in runnable}
    k = len(runnable)
    for r in range(reps):
        for j in range(k):
            var, _ = runnable[(r + j) % k]
            pair = pairs[id(var)][r]
            timer.prepare()
            timer.start(pair)
            var.fn(case.x)
            timer.stop(pair)
        if not timer.cuda or (r + 1) % 50 == 0:
            timer.sync()
    timer.sync()
    for var, row in runnable:
        ms = [timer.ms(p) for p in pairs[id(var)]]
        row.update(stats(ms))


def finish_rows(case: Case, rows: list[dict], itemsize: int) -> None:
    by_name = {r["variant"]: r for r in rows if "median_ms" in r}
    copy = by_name.get("copy_d2d")
    copy_gbs = (2 * case.numel * itemsize / (copy["median_ms"] * 1e-3) / 1e9) if copy else None
    for r in rows:
        if "median_ms" not in r:
            continue
        b = bytes_moved(r["group"], case.numel, itemsize)
        r["bytes"] = b
        r["gb_per_s"] = b / (r["median_ms"] * 1e-3) / 1e9 if r["median_ms"] > 0 else None
        r["pct_of_copy_bw"] = (100.0 * r["gb_per_s"] / copy_gbs) if copy_gbs and r["gb_per_s"] else None
        ref = by_name.get(REFERENCE.get(r["group"], ""))
        r["vs_torch"] = r["median_ms"] / ref["median_ms"] if ref and ref["median_ms"] > 0 else None
        r["torch_reference"] = ref["variant"] if ref else None


def make_cases(torch, device, sizes: list[int], bf16_sizes: list[int]) -> list[Case]:
    cases = []
    g = torch.Generator(device=device)
    g.manual_seed(1234)
    for dtype_name, ns in (("float32", sizes), ("bfloat16", bf16_sizes)):
        dtype = getattr(torch, dtype_name)
        for n in ns:
            shape = shape_for(n)
            # torch.rand: a mean near 0.5, so the relative error of a mean is meaningful
            x = torch.rand(shape, generator=g, device=device, dtype=torch.float32).to(dtype)
            cases.append(Case(n, dtype_name, x, torch.empty_like(x)))
    return cases


def run_cases(
    args,
    torch,
    device,
    timer,
    cases: list[Case],
    variants: list[Variant],
    ext: ExtBuild | None,
    reps: int,
    label: str,
) -> list[dict]:
    all_rows = []
    # 1. check + warm up everything that does not need the extension (overlaps its build)
    for case in cases:
        copy = Variant("copy_d2d", "copy", (lambda d: lambda x: d.copy_(x))(case.dst))
        case.variants = [copy] + variants
        case.rows = [None] * len(case.variants)
        for i, var in enumerate(case.variants):
            if not var.needs_ext:
                case.rows[i] = prepare_variant(torch, timer, case, var, args.warmup)
        log(f"{label}: checked {case.dtype} n={fmt_size(case.numel)} shape={tuple(case.x.shape)}")
    # 2. the extension's variants
    if any(v.needs_ext and not v.unavailable for v in variants):
        err = ext.wait() if ext else "not built"
        for case in cases:
            for i, var in enumerate(case.variants):
                if var.needs_ext:
                    if err and not var.unavailable:
                        var.unavailable = f"CUDA extension build failed: {err}"
                    case.rows[i] = prepare_variant(torch, timer, case, var, args.warmup)
    else:
        for case in cases:
            for i, var in enumerate(case.variants):
                if case.rows[i] is None:
                    case.rows[i] = prepare_variant(torch, timer, case, var, args.warmup)
    # 3. time
    for case in cases:
        runnable = [(v, r) for v, r in zip(case.variants, case.rows) if r["status"] in ("ok", "wrong")]
        t = time.monotonic()
        try:
            time_case(torch, timer, case, runnable, reps)
        except Exception as e:
            log(f"{label}: timing {case.dtype} n={case.numel} FAILED: {type(e).__name__}: {e}")
            print(traceback.format_exc(), file=sys.stderr, flush=True)
            for _, row in runnable:
                row.update(status="error", note=f"timing failed: {type(e).__name__}: {e}")
                for k in ("median_ms", "iqr_ms", "q1_ms", "q3_ms", "min_ms", "max_ms", "reps"):
                    row.pop(k, None)
            try:
                timer.sync()
            except Exception:
                pass
        finish_rows(case, case.rows, case.x.element_size())
        log(
            f"{label}: timed {len(runnable)} variants x {reps} reps, {case.dtype} n={fmt_size(case.numel)} "
            f"in {time.monotonic() - t:.1f} s"
        )
        all_rows.extend(case.rows)
    return all_rows


# ----------------------------------------------------------------------------- sweep


def sweep_families(args, torch, device) -> dict[str, list[Variant]]:
    from workloads.kernels import cuda_square, numba_square, triton_mean, triton_square

    def limit(cfgs, choose=None):
        out = list(cfgs[: args.sweep_limit] if args.sweep_limit else cfgs)
        # the configurations the heuristics pick at the sweep sizes are always timed
        for n in args.sweep_sizes:
            d = choose(n) if choose else None
            if d is not None and d not in out:
                out.append(d)
        return out

    def bind(fn, cfg):
        return lambda x: fn(x, cfg)

    fam: dict[str, list[Variant]] = {}
    fam["fast_mean"] = [Variant("torch.mean", "mean", lambda x: torch.mean(x))] + [
        Variant(
            f"fast_mean[{c.name}]", "mean", bind(triton_mean.fast_mean, c), config=c.name, family="fast_mean"
        )
        for c in limit(triton_mean.sweep_configs(), triton_mean.choose_config)
    ]
    fam["triton_square"] = [Variant("torch.square", "square", torch.square)] + [
        Variant(
            f"triton_square[{c.name}]",
            "square",
            bind(triton_square.triton_square, c),
            config=c.name,
            family="triton_square",
        )
        for c in limit(triton_square.sweep_configs(), triton_square.choose_config)
    ]
    cuda_vs = [
        Variant(
            f"cuda_square_fast[{c.name}]",
            "square",
            bind(cuda_square.fast_square, c),
            dtypes=("float32",),
            needs_ext=True,
            config=c.name,
            family="cuda_square_fast",
        )
        for c in limit(cuda_square.sweep_configs(), cuda_square.choose_config)
    ]
    numba_vs = [
        Variant(
            f"numba_square[{c.name}]",
            "square",
            bind(numba_square.numba_square, c),
            dtypes=("float32",),
            config=c.name,
            family="numba_square",
        )
        for c in limit(numba_square.sweep_configs(), lambda n: numba_square.DEFAULT_CONFIG)
    ]
    for var in cuda_vs:
        if device.type != "cuda":
            var.unavailable = "needs a CUDA GPU (load_inline CUDA extension)"
    fam["cuda_square_fast"] = [Variant("torch.square", "square", torch.square)] + cuda_vs
    fam["numba_square"] = [Variant("torch.square", "square", torch.square)] + numba_vs
    return fam


def defaults_by_family(n: int) -> dict[str, str]:
    from workloads.kernels import cuda_square, numba_square, triton_mean, triton_square

    return {
        "fast_mean": triton_mean.choose_config(n).name,
        "triton_square": triton_square.choose_config(n).name,
        "cuda_square_fast": cuda_square.choose_config(n).name,
        "numba_square": numba_square.DEFAULT_CONFIG.name,
    }


def run_sweep(args, torch, device, timer, ext: ExtBuild | None) -> tuple[list[dict], list[str]]:
    rows: list[dict] = []
    notes: list[str] = []
    families = sweep_families(args, torch, device)
    if args.sweep_families:
        families = {k: v for k, v in families.items() if k in args.sweep_families}
    cases = make_cases(torch, device, args.sweep_sizes, [])
    for fam_name, variants in families.items():
        if time.monotonic() - T0 > args.time_budget:
            msg = f"sweep of {fam_name} skipped: past the time budget ({args.time_budget:.0f} s)"
            log(msg)
            notes.append(msg)
            continue
        for var in variants:
            if var.family is None:
                var.family = fam_name  # the torch reference row
        fam_cases = [Case(c.numel, c.dtype, c.x, c.dst) for c in cases]
        got = run_cases(
            args, torch, device, timer, fam_cases, variants, ext, args.sweep_reps, f"sweep {fam_name}"
        )
        rows.extend(r for r in got if r["variant"] != "copy_d2d" or fam_name == "fast_mean")
    return rows, notes


def sweep_summary(rows: list[dict]) -> list[dict]:
    best = []
    for n in sorted({r["size"] for r in rows}):
        defaults = defaults_by_family(n)
        for fam in ("fast_mean", "triton_square", "cuda_square_fast", "numba_square"):
            cand = [
                r
                for r in rows
                if r["size"] == n
                and r.get("family") == fam
                and r.get("config")
                and r.get("status") == "ok"
                and "median_ms" in r
            ]
            if not cand:
                continue
            cand.sort(key=lambda r: r["median_ms"])
            d = next((r for r in cand if r["config"] == defaults[fam]), None)
            best.append(
                {
                    "size": n,
                    "family": fam,
                    "best_config": cand[0]["config"],
                    "best_ms": cand[0]["median_ms"],
                    "best_vs_torch": cand[0].get("vs_torch"),
                    "default_config": defaults[fam],
                    "default_ms": d["median_ms"] if d else None,
                    "default_vs_torch": d.get("vs_torch") if d else None,
                    "top5": [(r["config"], round(r["median_ms"], 5)) for r in cand[:5]],
                }
            )
    return best


# ----------------------------------------------------------------------------- output


def fmt_size(n: int) -> str:
    """1e6 for round powers of ten and their multiples (2e7), the exact number otherwise."""
    m, e = f"{n:.0e}".split("e")
    return f"{m}e{int(e)}" if float(f"{m}e{e}") == n and n >= 1000 else str(n)


def _f(v, fmt):
    return "" if v is None else format(v, fmt)


def table(rows: list[dict], with_config: bool = False) -> str:
    head = ["size", "dtype", "variant", "median ms", "IQR ms", "GB/s", "% copy", "vs torch", "check"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        status = r.get("status")
        if "median_ms" in r:
            check = "ok" if status == "ok" else f"WRONG: {r.get('check', '')}"
            cells = [
                fmt_size(r["size"]),
                r["dtype"],
                r["variant"],
                _f(r["median_ms"], ".4f"),
                _f(r["iqr_ms"], ".4f"),
                _f(r.get("gb_per_s"), ".0f"),
                _f(r.get("pct_of_copy_bw"), ".1f"),
                (_f(r.get("vs_torch"), ".3f") + "x") if r.get("vs_torch") is not None else "",
                check,
            ]
        else:
            cells = [
                fmt_size(r["size"]),
                r["dtype"],
                r["variant"],
                "",
                "",
                "",
                "",
                "",
                f"{status}: {r.get('note', '')}",
            ]
        lines.append("| " + " | ".join(str(c).replace("|", "\\|") for c in cells) + " |")
    return "\n".join(lines)


def render_md(
    meta: dict, rows: list[dict], sweep_rows: list[dict], best: list[dict], notes: list[str]
) -> str:
    out = ["# Kernel benchmark: mean and square variants", ""]
    keys = [
        "device",
        "compute_capability",
        "sms",
        "l2_bytes",
        "driver",
        "date_utc",
        "git_commit",
        "torch",
        "torch_cuda",
        "triton",
        "numba",
        "numba_cuda",
        "python",
        "method",
        "bytes_rule",
        "columns",
        "ext_build_s",
        "wall_s",
    ]
    for k in keys:
        if meta.get(k) is not None:
            out.append(f"- {k}: {meta[k]}")
    out.append("")
    if rows:
        out += ["## Variants", "", table(rows), ""]
    if best:
        out += [
            "## Configuration sweep: fastest per kernel and size",
            "",
            "| size | kernel | best config | best ms | vs torch | default config | default ms | default vs torch | top 5 |",
            "|---|---|---|---|---|---|---|---|---|",
        ]
        for b in best:
            out.append(
                f"| {fmt_size(b['size'])} | {b['family']} | {b['best_config']} | {b['best_ms']:.4f} | "
                f"{_f(b['best_vs_torch'], '.3f')} | {b['default_config']} | {_f(b['default_ms'], '.4f')} | "
                f"{_f(b['default_vs_torch'], '.3f')} | "
                + ", ".join(f"{c} {m:.4f}" for c, m in b["top5"])
                + " |"
            )
        out.append("")
    if sweep_rows:
        out += ["## Configuration sweep: every config", "", table(sweep_rows), ""]
    if notes:
        out += ["## Notes", ""] + [f"- {n}" for n in notes] + [""]
    return "\n".join(out)


def write_outputs(path: str | None, md: str, data: dict) -> None:
    if not path:
        return
    p = Path(path)
    if p.suffix == ".json":
        md_path, json_path = p.with_suffix(".md"), p
    else:
        md_path, json_path = p, p.with_suffix(".json")
    md_path.parent.mkdir(parents=True, exist_ok=True)
    md_path.write_text(md + "\n")
    json_path.write_text(json.dumps(data, indent=1, default=str) + "\n")
    log(f"wrote {md_path} and {json_path}")


# ----------------------------------------------------------------------------- main


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.device == "cpu":
        # before triton and numba are imported (the kernel modules import them on first call)
        os.environ.setdefault("TRITON_INTERPRET", "1")
        os.environ.setdefault("NUMBA_ENABLE_CUDASIM", "1")
    warnings.filterwarnings("ignore", message=".*Grid size.*under-utilization.*")
    warnings.filterwarnings("ignore", message=".*TRITON_DEFAULT_FP_FUSION.*")
    import torch

    if args.device == "cuda" and not torch.cuda.is_available():
        print("no CUDA GPU visible to torch: run on a GPU, or use --dry-run / --device cpu", file=sys.stderr)
        return 2
    device = (
        torch.device("cuda", torch.cuda.current_device()) if args.device == "cuda" else torch.device("cpu")
    )
    meta = environment(torch, device)
    log(
        f"device: {meta.get('device')}; torch {meta['torch']}, triton {meta['triton']}, numba {meta['numba']}"
        f" (numba-cuda {meta['numba_cuda']}); commit {meta['git_commit']}"
    )
    meta["method"] = (
        f"{'CUDA events' if device.type == 'cuda' else 'perf_counter (CPU dry run)'}; median of {args.reps} "
        f"repetitions after {args.warmup} warm-up calls; before each call an L2 flush ({args.flush_mb} MB written) "
        f"and {args.slack_us:.0f} us of GPU sleep; variants interleaved round-robin per repetition, "
        f"the starting variant rotating"
    )
    meta["bytes_rule"] = (
        "minimum bytes moved: mean reads n*itemsize; square and copy read and write 2*n*itemsize"
    )
    meta["columns"] = (
        "GB/s = bytes / median; % copy = GB/s / the copy_d2d GB/s of the same size and dtype; "
        "vs torch = median / median of torch.mean (mean rows) or torch.square (square rows) "
        "in the same run: below 1 is faster than torch"
    )
    meta["args"] = {k: (sorted(v) if isinstance(v, set) else v) for k, v in vars(args).items()}

    ext = ExtBuild()
    want_ext = not any(s in args.skip for s in ("cuda_square_lecture", "cuda_square_fast", "cuda"))
    if device.type == "cuda" and want_ext:
        ext.start(device, args.verbose_build)
    timer = Timer(torch, device, args.flush_mb, args.slack_us)

    rows: list[dict] = []
    if not args.sweep_only:
        variants = main_variants(args, device, torch, ext)
        variants = [
            v
            for v in variants
            if v.name not in args.skip
            and (args.only is None or v.name in args.only or v.name in REFERENCE.values())
        ]
        for v in variants:
            if v.needs_ext and not want_ext:
                v.unavailable = "skipped (--skip)"
        cases = make_cases(torch, device, args.sizes, args.bf16_sizes)
        log("inputs: " + ", ".join(f"{c.dtype} {tuple(c.x.shape)}" for c in cases))
        rows = run_cases(args, torch, device, timer, cases, variants, ext, args.reps, "main")
        del cases
        if args.sweep_configs:  # something to keep should the sweep not finish
            print(table(rows), flush=True)
            write_outputs(
                args.out,
                render_md(meta, rows, [], [], ["(written before the sweep)"]),
                {"meta": meta, "rows": rows, "partial": True},
            )
    sweep_rows: list[dict] = []
    notes: list[str] = []
    best: list[dict] = []
    if args.sweep_configs:
        sweep_rows, notes = run_sweep(args, torch, device, timer, ext)
        best = sweep_summary(sweep_rows)
    if ext.seconds is not None:
        meta["ext_build_s"] = round(ext.seconds, 1)
        if ext.error:
            notes.append(f"CUDA extension build failed: {ext.error}")
    meta["wall_s"] = round(time.monotonic() - T0, 1)

    md = render_md(meta, rows, sweep_rows, best, notes)
    print(md, flush=True)
    write_outputs(
        args.out,
        md,
        {"meta": meta, "rows": rows, "sweep_rows": sweep_rows, "sweep_best": best, "notes": notes},
    )
    bad = [r for r in rows + sweep_rows if r.get("status") in ("wrong", "error")]
    for r in bad:
        log(
            f"PROBLEM: {r['variant']} {r['dtype']} n={r['size']}: {r['status']} {r.get('check') or r.get('note')}"
        )
    log(f"done in {time.monotonic() - T0:.1f} s")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
