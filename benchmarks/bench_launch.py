#!/usr/bin/env python3
"""Host time per call and GPU time of the Triton kernels' launch paths, against torch's own op.

    python3 benchmarks/bench_launch.py --out launch.json          # a CUDA GPU: about 1-2 minutes
    python3 benchmarks/bench_launch.py --dry-run --out x.json     # CPU: Triton interpreter, tiny sizes

Variants, at each float32 size (--sizes, default 1e5,1e6,1e7,1e8) and bfloat16 size
(--bf16-sizes, default 1e8): torch.mean, fast_mean through Triton's plain launch, fast_mean
through the cached launch (workloads/kernels/_launch.py); torch.square and triton_square the
same two ways. The plain path is forced with ``_launch.launch_mode("plain")`` (the
GPROF_ORCH_TRITON_LAUNCH=plain switch), set outside the timed calls.

- host us: perf_counter_ns around the call alone, median of --host-calls calls after warm-up;
  calls go in batches of --sync-every with a torch.cuda.synchronize between batches (never
  inside a timing) so that the launch queue never fills and blocks a launch; the variants of
  a case are interleaved batch by batch.
- GPU us: the package's own `time` method: the L2 flushed (workloads/timed.py's flusher), the
  stream held by the blocking kernel (workloads/timers.py) while the call is queued, CUDA
  events around the call; sampled until workloads.stopping's rule knows the median to +-1%
  (at most --gpu-time-s a variant).
- check: mean: the fast path's result bit-equal to the plain path's (and within 1e-5 / 1e-2 of
  a float64 mean); square: bit-equal to torch.square.
- the breakdown (GPU only): the host cost of each step of the plain fast_mean call, timed on
  its own at 1e6 float32 (Triton 3.6's internals; a step this Triton lacks is marked n/a).

Prints a markdown table (ratios to torch's op of the same case) and writes --out (JSON, and
the table beside it as .md). On a CPU (--dry-run or --device cpu) the kernels run in Triton's
interpreter: host times then measure the interpreter and there is no GPU time; the output
says so. Exit status: 0, 1 if a check failed, 2 for a usage error.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import traceback
from pathlib import Path
from types import SimpleNamespace

REPO = Path(__file__).resolve().parent.parent
for p in (str(REPO), str(REPO / "benchmarks")):
    if p not in sys.path:
        sys.path.insert(0, p)

from bench_kernels import environment, fmt_size, git_commit  # noqa: E402

T0 = time.monotonic()
GOAL = 1.2  # the goal: the fast kernels' host side at most 1.2x torch's op's


def log(msg: str) -> None:
    print(f"[bench_launch {time.monotonic() - T0:6.1f}s] {msg}", file=sys.stderr, flush=True)


def _sizes(text: str) -> list[int]:
    return [int(float(t)) for t in text.split(",") if t.strip()]


def parse_args(argv=None):
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--out", help="write JSON here (and the markdown table beside it, .md)")
    p.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    p.add_argument("--dry-run", action="store_true", help="= --device cpu with tiny sizes and few calls")
    p.add_argument("--sizes", type=_sizes, default=None, help="float32 sizes (default 1e5,1e6,1e7,1e8)")
    p.add_argument("--bf16-sizes", type=_sizes, default=None, help="bfloat16 sizes (default 1e8)")
    p.add_argument("--host-calls", type=int, default=None, help="timed calls per variant (default 3000)")
    p.add_argument("--sync-every", type=int, default=None, help="calls between synchronizes (default 50)")
    p.add_argument("--warmup", type=int, default=None, help="untimed calls per variant first (default 20)")
    p.add_argument(
        "--gpu-time-s", type=float, default=None, help="most seconds of GPU sampling a variant (1.0)"
    )
    p.add_argument(
        "--no-breakdown", action="store_true", help="skip the per-step host cost of the plain call"
    )
    a = p.parse_args(argv)
    if a.dry_run:
        a.device = "cpu"
    cpu = a.device == "cpu"
    a.sizes = a.sizes or ([1000] if cpu else [10**5, 10**6, 10**7, 10**8])
    a.bf16_sizes = a.bf16_sizes if a.bf16_sizes is not None else ([300] if cpu else [10**8])
    a.host_calls = a.host_calls or (4 if cpu else 3000)
    a.sync_every = a.sync_every or (2 if cpu else 50)
    a.warmup = a.warmup if a.warmup is not None else (1 if cpu else 20)
    a.gpu_time_s = a.gpu_time_s if a.gpu_time_s is not None else 1.0
    if a.host_calls < 1 or a.sync_every < 1:
        p.error("--host-calls and --sync-every must be >= 1")
    return a


# ----------------------------------------------------------------------------- variants


def variants(torch):
    from workloads.kernels import triton_mean, triton_square

    # (op, name, fn, launch mode: None = leave as is, the op is torch's)
    return [
        ("mean", "torch.mean", torch.mean, None),
        ("mean", "fast_mean plain", triton_mean.fast_mean, "plain"),
        ("mean", "fast_mean triton-c", triton_mean.fast_mean, "triton-c"),
        ("mean", "fast_mean fast", triton_mean.fast_mean, "fast"),
        ("square", "torch.square", torch.square, None),
        ("square", "triton_square plain", triton_square.triton_square, "plain"),
        ("square", "triton_square triton-c", triton_square.triton_square, "triton-c"),
        ("square", "triton_square fast", triton_square.triton_square, "fast"),
    ] + _cuda_square_variants(torch)


def _cuda_square_variants(torch) -> list[tuple]:
    """The load_inline CUDA fast_square, plain and cached (float32 on a GPU only: it is built
    with nvcc here, before any timing)."""
    if not torch.cuda.is_available():
        return []
    from workloads.kernels import cuda_square

    cuda_square.build_extensions()
    fn = cuda_square.fast_square
    return [("square", "cuda_square plain", fn, "plain"), ("square", "cuda_square fast", fn, "fast")]


def launch_path(op: str, name: str, fn, x, mode: str | None) -> str:
    """How the variant launches in its mode, once warm: torch, plain, or fast (tier), or why not."""
    from workloads.kernels import _launch

    if mode is None:
        return "torch"
    if mode == "plain":
        return "plain"
    n, dtype = x.numel(), x.dtype
    with _launch.launch_mode(mode):
        fn(x), fn(x)  # each mode has its own cached launches: the first call may learn
        st = _launch.status()
        fc = _launch.fast_calls("fast_mean" if op == "mean" else "triton_square")
        hows = {fc.how.get(k) for k, v in fc.calls.items() if k[0] == n and k[1] == dtype}
    if name.startswith("cuda_square"):
        from workloads.kernels import cuda_square

        return (
            "fast (cached call)" if any(k[0] == n and k[1] == dtype for k in cuda_square._CALLS) else "plain"
        )
    hows.discard(None)
    if hows:
        return "fast (" + ", ".join(sorted(hows)) + ")"
    # the reason is in the table's header (launch path)
    return "plain: " + (
        "see launch path" if not st["path"].startswith("fast") else "no cached launch for this call"
    )


# ----------------------------------------------------------------------------- timing


def _with_mode(mode):
    from workloads.kernels import _launch

    return _launch.launch_mode(mode) if mode else _nullcontext()


class _nullcontext:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def host_times(
    torch, cases_variants, x, calls: int, sync_every: int, warmup: int, cuda: bool
) -> dict[str, list[int]]:
    """Per variant name, `calls` host times (ns) of one call each, variants interleaved."""
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    pc = time.perf_counter_ns
    out: dict[str, list[int]] = {name: [] for _, name, _, _ in cases_variants}
    for _, name, fn, mode in cases_variants:
        with _with_mode(mode):
            for _ in range(warmup):
                fn(x)
    sync()
    rounds = -(-calls // sync_every)
    order = list(cases_variants)
    for r in range(rounds):
        k = r % len(order)
        for _, name, fn, mode in order[k:] + order[:k]:
            with _with_mode(mode):
                # untimed: a mode switch re-resolves the launch path (and each mode keeps its
                # own cached launches: the first call of a case learns)
                fn(x), fn(x)
                sync()
                got = out[name]
                for _ in range(min(sync_every, calls - len(got))):
                    t0 = pc()
                    fn(x)
                    got.append(pc() - t0)
                sync()
    return out


def gpu_times(torch, fn, x, mode, flush, hold, max_time_s: float) -> list[float]:
    """GPU ns per call: L2 flush, hold, events around the call, release (workloads' own method)."""
    from workloads.stopping import StopRule, measure

    event = torch.cuda.Event
    samples: list[float] = []

    def take(k: int) -> list[float]:
        pairs = []
        for _ in range(k):
            flush()
            start, end = event(enable_timing=True), event(enable_timing=True)
            hold.hold()
            try:
                start.record()
                fn(x)
                end.record()
            finally:
                hold.release()
            pairs.append((start, end))
        torch.cuda.synchronize()
        got = [s.elapsed_time(e) * 1e6 for s, e in pairs]
        samples.extend(got)
        return got

    with _with_mode(mode):
        fn(x)
        torch.cuda.synchronize()
        measure(StopRule(max_noise_pct=1.0, min_samples=20, max_time_s=max_time_s), take, time.monotonic)
    if hold.timeouts():
        raise RuntimeError(f"the blocking timer timed out {hold.timeouts()} time(s)")
    return samples


def median(xs) -> float | None:
    from workloads.stopping import median_ci

    return median_ci(list(xs))[0] if xs else None


# ----------------------------------------------------------------------------- checks


def check(torch, kind: str, x, exact: bool = True) -> str:
    """'ok' or what is wrong with the fast and plain paths of `kind` (fast_mean, triton_square,
    cuda_square) on `x`."""
    from workloads.kernels import triton_mean, triton_square

    op = "mean" if kind == "fast_mean" else "square"
    fn = {"fast_mean": triton_mean.fast_mean, "triton_square": triton_square.triton_square}.get(kind)
    if fn is None:
        from workloads.kernels.cuda_square import fast_square as fn
    with _with_mode("plain"):
        plain = fn(x)
    for mode in ("triton-c", "fast"):  # the two cached launchers
        with _with_mode(mode):
            fast = [fn(x) for _ in range(3)][-1]  # learned on the first, cached on the later
        if not torch.equal(plain, fast):
            return f"{mode} path {fast} != plain path {plain}"
    if op == "mean":
        ref = x.double().mean().item()
        tol = 1e-5 if x.dtype == torch.float32 else 1e-2
        err = abs(fast.double().item() - ref) / max(abs(ref), 1e-30)
        if err > tol:
            return f"relative error {err:.2e} over {tol:g}"
        if not torch.equal(fast, fn(x)):
            return "not deterministic"
    elif exact or x.dtype not in (torch.float16, torch.bfloat16):
        if not torch.equal(fast, torch.square(x)):
            return "differs from torch.square"
    elif not torch.allclose(fast.float(), torch.square(x).float(), rtol=1e-2, atol=0):
        # the interpreter rounds float32 -> bfloat16 by truncation, the GPU to nearest
        return "differs from torch.square by more than the interpreter's rounding"
    return "ok"


# ----------------------------------------------------------------------------- breakdown


def breakdown(torch, calls: int = 2000, sync_every: int = 50) -> list[dict]:
    """Host us of each step of the plain fast_mean call at 1e6 float32, each timed alone (and
    the square's allocation, the part of its call that is not the launch)."""
    from workloads.kernels import _launch
    from workloads.kernels import triton_mean as tm
    from workloads.kernels import triton_square as ts

    dev = torch.cuda.current_device()
    device = torch.device("cuda", dev)
    x = torch.rand(10**6, device=device)
    n = x.numel()
    with _launch.launch_mode("plain"):
        tm.fast_mean(x)
    cfg = tm.choose_config(n)
    grid, p_block, _ = tm._plan(n, cfg, x.dtype, device)
    partials, counter = tm._workspace(device, p_block)
    out = torch.empty((), dtype=x.dtype, device=device)
    _, kernel = tm._kernels()
    kw = dict(BLOCK=cfg.block, P_BLOCK=p_block, ACC_FP64=False, STAGES=cfg.stages, num_warps=cfg.num_warps)
    args = (x, partials, counter, out, n)
    compiled = kernel[(grid,)](*args, **kw)
    stream = torch.cuda.current_stream(device).cuda_stream
    template = torch.empty((), dtype=x.dtype, device=device)
    steps: list[tuple[str, object]] = [
        ("torch.mean(x) (reference)", lambda: torch.mean(x)),
        # the plain path's own function: what fast_mean runs in plain mode or on a cache miss
        ("fast_mean(x), plain path, all", lambda: tm._fast_mean_plain(x, None, None)),
        ("kernel[grid](...) alone, arguments ready", lambda: kernel[(grid,)](*args, **kw)),
    ]
    try:
        from triton import knobs
        from triton.runtime.jit import compute_cache_key

        binder = kernel.device_caches[dev][4]
        key_cache = kernel.device_caches[dev][1]
        bound, spec, opts = binder(*args, **dict(kw, debug=False, instrumentation_mode=""))
        vals = tuple(bound.values())
        rt = knobs.runtime
        steps += [
            ("  binder: bind + specialise the arguments", lambda: binder(*args, **kw)),
            (
                "  compute_cache_key (str(options), dict lookup)",
                lambda: compute_cache_key(key_cache, spec, opts),
            ),
            (
                "  CompiledKernel.launch_metadata",
                lambda: compiled.launch_metadata((grid, 1, 1), stream, *vals),
            ),
            (
                "  CompiledKernel.run: tensors, Triton's hooks",
                lambda: compiled.run(
                    grid,
                    1,
                    1,
                    stream,
                    compiled.function,
                    compiled.packed_metadata,
                    compiled.launch_metadata((grid, 1, 1), stream, *vals),
                    rt.launch_enter_hook,
                    rt.launch_exit_hook,
                    *vals,
                ),
            ),
            (
                "  CompiledKernel.run: ints, no hooks",
                lambda: compiled.run(
                    grid,
                    1,
                    1,
                    stream,
                    compiled.function,
                    compiled.packed_metadata,
                    None,
                    None,
                    None,
                    x.data_ptr(),
                    partials.data_ptr(),
                    counter.data_ptr(),
                    out.data_ptr(),
                    n,
                    *vals[5:],
                ),
            ),
        ]
    except Exception as exc:
        steps.append((f"  Triton internals: n/a ({type(exc).__name__}: {exc})", None))
    st = _launch.STATE
    steps += [
        ("  our python: choose_config(n)", lambda: tm.choose_config(n)),
        ("  our python: x.reshape(-1)", lambda: x.reshape(-1)),
        ("  our python: _plan (SMs, occupancy, grid)", lambda: tm._plan(n, cfg, x.dtype, device)),
        ("  our python: _workspace (torch.cuda.current_stream)", lambda: tm._workspace(device, p_block)),
        (
            "  our python: torch.empty((), dtype, device)",
            lambda: torch.empty((), dtype=x.dtype, device=device),
        ),
        ("  our python: on_device(device)", lambda: tm.on_device(device)),
        ("  fast path: where(x) (device, stream, hooks)", lambda: st.where(x)),
        ("  fast path: torch.empty_like(template)", lambda: torch.empty_like(template)),
        ("torch.square(x) (reference)", lambda: torch.square(x)),
        ("triton_square(x), plain path, all", lambda: ts._triton_square_plain(x, None, None)),
        (
            "  torch.empty_like(x, memory_format=contiguous)",
            lambda: torch.empty_like(x, memory_format=torch.contiguous_format),
        ),
        ("  torch.empty_like(x)", lambda: torch.empty_like(x)),
    ]
    steps += _triton_launch_steps(torch, x)
    steps += _cuda_square_steps(torch, x, stream)
    rows = []
    pc = time.perf_counter_ns
    for name, fn, *mode in steps:
        if fn is None:
            rows.append({"step": name, "host_us": None})
            continue
        try:
            with _with_mode(mode[0] if mode else None):
                rows.append({"step": name, "host_us": _time_step(torch, fn, calls, sync_every, pc)})
        except Exception as exc:
            rows.append({"step": f"{name}: n/a ({type(exc).__name__}: {exc})", "host_us": None})
    return rows


def _time_step(torch, fn, calls: int, sync_every: int, pc) -> float:
    """Median host us of fn() alone, after two untimed calls (the first may learn a launch)."""
    fn()
    torch.cuda.synchronize()
    fn()
    samples = []
    while len(samples) < calls:
        for _ in range(sync_every):
            t0 = pc()
            fn()
            samples.append(pc() - t0)
        torch.cuda.synchronize()
    return median(samples) / 1e3


def _triton_launch_steps(torch, x) -> list[tuple]:
    """The Triton kernels' whole cached call in each cached mode, and the square's cached
    launch alone as each mode binds it (our cuLaunchKernel launcher, Triton's C launcher),
    side by side in one process."""
    from workloads.kernels import _launch
    from workloads.kernels import triton_mean as tm
    from workloads.kernels import triton_square as ts

    n = x.numel()
    y = torch.empty_like(x)
    xp, yp = x.data_ptr(), y.data_ptr()
    steps: list[tuple] = []
    for mode in ("fast", "triton-c"):
        steps.append((f"fast_mean(x), cached path, all ({mode})", lambda: tm.fast_mean(x), mode))
        steps.append((f"triton_square(x), cached path, all ({mode})", lambda: ts.triton_square(x), mode))
        with _launch.launch_mode(mode):
            ts.triton_square(x), ts.triton_square(x)
            sq = [
                (ts._fast.how.get(k), v)
                for k, v in ts._fast.calls.items()
                if v is not None and k[0] == n and k[1] == x.dtype
            ]
        if not sq:
            steps.append((f"  the square's cached launch alone ({mode}): n/a, none cached", None))
            continue
        how, (launch, _, _, block, upcast, hints) = sq[0]
        steps.append(
            (
                f"  the square's cached launch alone ({mode}: {how})",
                lambda launch=launch, block=block, upcast=upcast, hints=hints: launch(
                    xp, yp, n, block, upcast, hints
                ),
            )
        )
    return steps


def _cuda_square_steps(torch, x, stream) -> list[tuple[str, object]]:
    """The cached cuda_square call and its parts: the launch bound through pybind11 (the plain
    call's) and through the vectorcall binding the cached call uses, side by side."""
    try:
        from workloads.kernels import _launch
        from workloads.kernels import cuda_square as cs
        from workloads.kernels._common import num_sms

        ext = cs.build_extensions()
        cs.fast_square(x)
        cs.fast_square(x)
        n = x.numel()
        cfg = cs.choose_config(n)
        y = torch.empty_like(x)
        xp, yp = x.data_ptr(), y.data_ptr()
        args = (cfg.threads, cfg.blocks_per_sm, cfg.unroll, bool(cfg.streaming), num_sms(x.device), stream)
        return [
            ("cuda_square(x), fast path, all", lambda: cs.fast_square(x)),
            ("  the launch alone, pybind11 binding (fast_square)", lambda: ext.fast_square(xp, yp, n, *args)),
            (
                "  the launch alone, vectorcall binding (fast_square_call)",
                lambda: ext.fast_square_call(xp, yp, n, *args),
            ),
            (
                "  fast path: call_key(x), with Triton's checks",
                lambda: _launch.call_key(x, None, cs.CudaSquareConfig),
            ),
            (
                "  fast path: call_key(x, triton=False), as cuda_square's",
                lambda: _launch.call_key(x, None, cs.CudaSquareConfig, triton=False),
            ),
        ]
    except Exception as exc:
        return [(f"cuda_square: n/a ({type(exc).__name__}: {exc})", None)]


# ----------------------------------------------------------------------------- output


def _f(v, fmt: str) -> str:
    return "" if v is None else format(v, fmt)


def render(meta: dict, rows: list[dict], steps: list[dict], status: dict, cpu: bool) -> str:
    out = ["# Launch overhead: host time per call and GPU time, Triton kernels against torch", ""]
    for k in ("device", "date_utc", "git_commit", "torch", "triton", "python", "method"):
        if meta.get(k) is not None:
            out.append(f"- {k}: {meta[k]}")
    out.append(f"- launch path: {status['path']}")
    if cpu:
        out.append(
            "- CPU RUN: the Triton kernels ran in the interpreter; host times measure it, "
            "not a launch; no GPU times. Run on a CUDA GPU for real numbers."
        )
    out += [
        "",
        "| size | dtype | variant | host us | host vs torch | GPU us | GPU vs torch | launch | check |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        hv = r.get("host_vs_torch")
        flag = (
            f" (over {GOAL:.1f}x)"
            if not cpu and hv is not None and r["variant"].endswith(" fast") and hv > GOAL
            else ""
        )
        out.append(
            "| "
            + " | ".join(
                [
                    fmt_size(r["size"]),
                    r["dtype"],
                    r["variant"],
                    _f(r.get("host_us"), ".1f"),
                    (_f(hv, ".2f") + "x" + flag) if hv is not None else "",
                    _f(r.get("gpu_us"), ".1f"),
                    (_f(r.get("gpu_vs_torch"), ".3f") + "x") if r.get("gpu_vs_torch") is not None else "",
                    r["launch"],
                    r["check"],
                ]
            ).replace("\n", " ")
            + " |"
        )
    if steps:
        out += [
            "",
            "## Host cost, step by step (1e6 float32, each step timed alone, median us)",
            "",
            "| step | host us |",
            "|---|---|",
        ]
        out += [f"| {s['step']} | {_f(s['host_us'], '.2f')} |" for s in steps]
    return "\n".join(out)


# ----------------------------------------------------------------------------- main


def main(argv=None) -> int:
    args = parse_args(argv)
    cpu = args.device == "cpu"
    if cpu:
        # before triton is imported (the kernels import it on first call)
        os.environ.setdefault("TRITON_INTERPRET", "1")
    import warnings

    warnings.filterwarnings("ignore", message=".*TRITON_DEFAULT_FP_FUSION.*")
    import torch

    if not cpu and not torch.cuda.is_available():
        print("no CUDA GPU visible to torch: run on a GPU, or use --dry-run", file=sys.stderr)
        return 2
    from workloads.kernels import _launch

    device = torch.device("cuda", torch.cuda.current_device()) if not cpu else torch.device("cpu")
    meta = environment(torch, device)
    meta["git_commit"] = meta.get("git_commit") or git_commit()
    meta["method"] = (
        f"host: perf_counter_ns around one call, median of {args.host_calls} calls after "
        f"{args.warmup} warm-up, a synchronize every {args.sync_every} calls (outside the timing), "
        "variants interleaved; GPU: L2 flushed, stream held by the blocking kernel, CUDA events "
        "around one call, median to +-1% (workloads.timers, workloads.stopping)"
    )
    log(f"{meta.get('device')}; torch {meta['torch']}, triton {meta['triton']}")
    flush = hold = None
    if not cpu:
        from workloads import timed, timers

        flush = timed.l2_flusher(SimpleNamespace(flush_l2=True, device="cuda"))
        hold, why = timers.make("blocking", "cuda")
        if why:
            log(why)
    cases = [(n, torch.float32) for n in args.sizes] + [(n, torch.bfloat16) for n in args.bf16_sizes]
    rows: list[dict] = []
    failed = False
    for n, dtype in cases:
        dname = str(dtype).replace("torch.", "")
        log(f"case {fmt_size(n)} {dname}")
        g = torch.Generator(device="cpu").manual_seed(n)
        x = torch.rand(n, generator=g, dtype=torch.float32).to(device=device, dtype=dtype)
        vs = variants(torch)
        case_rows = {}
        checks: dict[str, str] = {}
        for op, name, fn, mode in vs:
            row = {"size": n, "dtype": dname, "op": op, "variant": name, "check": "ok"}
            kind = name.split()[0]  # fast_mean, triton_square, cuda_square: each checked once
            if kind == "cuda_square" and dtype != torch.float32:
                row["check"] = "n/a: float32 only"
            elif mode is not None:
                if kind not in checks:
                    try:
                        checks[kind] = check(torch, kind, x, exact=not cpu)
                    except Exception as exc:
                        checks[kind] = f"failed: {type(exc).__name__}: {exc}"
                        row["traceback"] = traceback.format_exc()
                    failed |= checks[kind] != "ok"
                row["check"] = checks[kind]
            case_rows[name] = row
        ok = [v for v in vs if not case_rows[v[1]]["check"].startswith(("failed", "n/a"))]
        hosts = host_times(torch, ok, x, args.host_calls, args.sync_every, args.warmup, not cpu)
        for op, name, fn, mode in ok:
            row = case_rows[name]
            row["host_us"] = median(hosts[name]) / 1e3
            row["host_calls"] = len(hosts[name])
            row["launch"] = launch_path(op, name, fn, x, mode)
            if not cpu:
                try:
                    row["gpu_us"] = median(gpu_times(torch, fn, x, mode, flush, hold, args.gpu_time_s)) / 1e3
                except Exception as exc:
                    row["gpu_note"] = f"{type(exc).__name__}: {exc}"
        for op, name, fn, mode in vs:
            row = case_rows[name]
            row.setdefault("launch", "")
            ref = case_rows["torch.mean" if op == "mean" else "torch.square"]
            for k in ("host", "gpu"):
                if row.get(f"{k}_us") is not None and ref.get(f"{k}_us"):
                    row[f"{k}_vs_torch"] = row[f"{k}_us"] / ref[f"{k}_us"]
            rows.append(row)
        del x
    steps = [] if cpu or args.no_breakdown else breakdown(torch)
    with _launch.launch_mode("fast"):
        status = _launch.status()
    md = render(meta, rows, steps, status, cpu)
    print(md)
    fast_rows = [r for r in rows if r["variant"].endswith(" fast") and r.get("host_vs_torch") is not None]
    worst = max((r["host_vs_torch"] for r in fast_rows), default=None)
    data = {
        "api_version": 1,
        "meta": meta,
        "cpu_run": cpu,
        "goal_host_vs_torch": GOAL,
        "worst_fast_host_vs_torch": worst,
        "launch_status": status,
        "rows": rows,
        "breakdown": steps,
        "wall_s": time.monotonic() - T0,
    }
    if args.out:
        out = Path(args.out)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(data, indent=1, default=str) + "\n")
        out.with_suffix(".md").write_text(md + "\n")
        log(f"wrote {out} and {out.with_suffix('.md')}")
    if worst is not None and not cpu:
        log(f"worst fast-path host time: {worst:.2f}x torch's op (goal <= {GOAL}x)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
