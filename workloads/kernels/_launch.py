"""Relaunch a compiled Triton kernel without Triton's per-call work: the fast launch path.

Where the host time of ``kernel[grid](*args, **kw)`` goes in Triton 3.6 (read from
python/triton/runtime/jit.py ``JITFunction.run``, compiler/compiler.py ``CompiledKernel``,
backends/nvidia/driver.py ``CudaLauncher`` and the C ``launch`` it generates), on every call,
for a kernel that is already compiled:

1. ``kernel[grid]`` builds a lambda; ``run`` puts ``knobs.runtime.debug`` and
   ``knobs.compilation.instrumentation_mode`` into the keyword arguments, asks the driver for
   the current device (``torch.cuda.current_device``) and stream, and runs the pre-run hooks;
2. the binder (a function generated per kernel by ``create_function_from_signature``) binds
   every argument into a dict and calls ``native_specialize_impl`` on each non-constexpr one:
   a tensor's dtype becomes ``"*fp32"``, its ``data_ptr() % 16`` the divisibility attribute, an
   int its width (i32/i64);
3. ``compute_cache_key``: ``tuple(specialization)`` and ``str(options)`` (the keyword dict
   formatted to a string) form the key of a dict lookup, then the kernel cache lookup;
4. a loop checking that no global the kernel read has changed; the grid is canonicalised;
5. ``CompiledKernel.launch_metadata(grid, stream, *args)``: in 3.6 ``launch_enter_hook`` is a
   ``HookChain``, never None, so every call runs ``_init_handles`` and builds a ``LazyDict``;
6. ``CompiledKernel.run`` (a property) -> ``CudaLauncher.__call__``: two scratch allocations
   considered, then the C ``launch``: ``PyArg_ParseTuple`` of 13 + n arguments, a call of the
   (empty) enter-hook chain, for each pointer argument a ``data_ptr()`` call and a
   ``cuPointerGetAttribute``, ``cuLaunchKernelEx``, the (empty) exit-hook chain.

Measured on the H200 (torch 2.11, Triton 3.6, 1e6 float32; benchmarks/bench_launch.py's
breakdown, each step timed alone): the plain fast_mean call costs 35-42 us, of which
``kernel[grid](...)`` is 13.6 (binder 2.1, cache key 1.0, launch_metadata 0.7, the launch with
tensors and hooks 6.8) and our own Python the rest: ``torch.empty((), dtype=, device=)`` 3.0,
``torch.cuda.current_stream`` for the workspace 3.6, the grid plan 2.5, ``reshape`` 1.3,
``on_device`` 0.9. torch.mean's whole call is 10 us.

Of the six steps only the last C launch is needed once the compiled kernel, its grid and its
constexprs are known. A caller keeps, per call shape (see ``FastCalls``), a ``functools.partial``
of the C launch with everything fixed bound in (grid, stream, CUfunction, packed metadata,
no hooks) and passes only what changes: pointers as ints (the C launcher takes an int as the
address as is: no ``data_ptr()`` call, no ``cuPointerGetAttribute``), ``n`` and the constexprs
(the C launcher parses, and ignores, a slot for each). A cached fast_mean call then costs
7-9 us on the H200 (0.73-0.96x torch.mean's host time), triton_square 7-10 us (1.07-1.15x
torch.square's, whose whole call is one C++ dispatch): the C launch itself is 3.8 us of it,
the output's ``torch.empty_like`` 1.9.

Where it cannot apply, the kernel's plain ``kernel[grid](...)`` path runs, and ``status()``
says why: TRITON_INTERPRET=1 (the interpreter has no compiled kernel), no CUDA, a torch
without the raw-stream functions, a Triton whose ``JITFunction.run`` no longer launches
through ``CompiledKernel.run`` with the argument order relied on here, launch hooks
registered (a profiler such as proton must see every launch as Triton reports it), Triton's
debug or instrumentation mode on, a tensor on a device other than the current one, a kernel
that needs scratch memory per launch.

Not repeated per call: JITFunction's pre-run hooks and its changed-globals check (steps 1
and 4). The kernels relaunched here are private to their modules (nobody adds hooks) and read
no globals but ``tl``.

The bound launch itself (see _launch_cuda.bind_compiled) is, best first: our own launcher
('own', _launch_own.py: a vectorcall object calling ``cuLaunchKernel`` with the params laid out
from the kernel's signature; 0.5 to 1.1 us a call less than Triton's C launch for the Triton
square on the H200, docs/launch-h200.md), Triton 3.6's C launch called directly ('direct'), or
``CompiledKernel.run`` ('run').

GPROF_ORCH_TRITON_LAUNCH=plain (or ``launch_mode("plain")``) forces the plain path, and
``triton-c`` the cached launches through Triton's C launcher, to compare.

Imports neither torch nor triton at import time.
"""

from __future__ import annotations

import contextlib
import os

from workloads.kernels._common import interpreting
from workloads.kernels._launch_cuda import CudaBackend, Launch, Unsupported

MODE_ENV = "GPROF_ORCH_TRITON_LAUNCH"
# fast: cached launches, through our own cuLaunchKernel launcher where the kernel allows
# (_launch_own.py); triton-c: cached launches through Triton's own C launcher (the fast path
# before that launcher, kept to compare side by side); plain: Triton's whole launch every call
MODES = ("fast", "triton-c", "plain")
# cached call shapes per kernel; a caller cycling through more sizes than this starts over
MAX_CALLS = 1024


class _State:
    """What every fast path reads per call: `enabled` and `where(x)`. Resolved on first use
    (imports torch and triton then), so that importing the kernels stays free."""

    def __init__(self) -> None:
        self.injected = None  # a backend put in by use_backend (tests)
        self.reset()

    def _resolve_then_where(self, x):
        _resolve(self)
        return self.where(x)

    def _resolve_then_place(self, x):
        _resolve(self)
        return self.place(x)

    def reset(self) -> None:
        """Back to unresolved: the next call resolves the path for the current mode."""
        self.enabled, self.where, self.bind = True, self._resolve_then_where, None
        self.place = self._resolve_then_place
        self.why, self.backend = "not resolved yet (no call so far)", None


STATE = _State()


def call_key(x, config, config_cls, triton: bool = True) -> tuple | None:
    """The cached-launch key of a call on `x`: (numel, dtype, whether x's pointer is 16-byte
    aligned (Triton compiles a kernel per alignment: x[1:] is not), device and stream, config);
    None where the fast path cannot apply (disabled, a config not given as `config_cls` or None,
    a tensor elsewhere than this backend's device, non-contiguous input). triton=False (a kernel
    that is not Triton's: the CUDA extension) leaves out the checks of Triton's launch hooks and
    debug modes, which cannot see or change its launch, and which cost a third of the key."""
    st = STATE
    if not st.enabled or not (config is None or type(config) is config_cls):
        return None
    where = st.where(x) if triton else st.place(x)
    if where is None or not x.is_contiguous():
        return None
    return (x.numel(), x.dtype, x.data_ptr() & 15 == 0, where, config)


_MODE = os.environ.get(MODE_ENV, "fast").strip().lower() or "fast"


def _never(x):
    return None


def _disable(state: _State, why: str) -> None:
    state.enabled, state.where, state.bind, state.why, state.backend = False, _never, None, why, None
    state.place = _never


def _install(state: _State, backend) -> None:
    state.enabled, state.where, state.bind = True, backend.where, backend.bind
    state.place = getattr(backend, "place", backend.where)  # a test's backend may have where only
    state.why, state.backend = backend.describe(), backend


def _resolve(state: _State) -> None:
    """Choose the backend: the CUDA one when everything it relies on is there, else none
    (every call takes the plain path) with the reason kept in `state.why`."""
    if _MODE not in MODES:
        _disable(state, f"{MODE_ENV}={_MODE!r} is none of {', '.join(MODES)}: plain launches")
        return
    if _MODE == "plain":
        _disable(state, f"plain launches asked for ({MODE_ENV}=plain or launch_mode('plain'))")
        return
    if state.injected is not None:
        _install(state, state.injected)
        return
    if interpreting():
        _disable(
            state,
            "TRITON_INTERPRET=1: the kernels run in Triton's interpreter, which has "
            "no compiled kernel to relaunch",
        )
        return
    try:
        backend = CudaBackend(own=_MODE == "fast")
    except Unsupported as exc:
        _disable(state, str(exc))
        return
    _install(state, backend)


def launch_plain(kernel, grid: tuple[int, ...], args: tuple, kwargs: dict) -> Launch:
    """Triton's own launch, kernel[grid](*args, **kwargs), and its record (the CompiledKernel
    on a GPU; whatever the interpreter returns under TRITON_INTERPRET=1)."""
    compiled = kernel[grid](*args, **kwargs)
    return Launch(kernel, (tuple(grid) + (1, 1))[:3], args, kwargs, compiled)


class FastCalls:
    """One kernel's cached launches: call key -> the tuple its fast path unpacks.

    A key holds everything the plain path's launch depends on: numel (the grid, the int
    width Triton gives n, the config chosen), dtype, the input's 16-byte alignment (Triton
    compiles a separate kernel for aligned and unaligned pointers; outputs and workspaces come
    from torch's allocator, aligned, and are checked), (device, stream) and the config asked
    for. A key is learned from a plain call that just ran with it, so the fast path repeats
    exactly that launch. Triton never unloads a compiled module, so a bound launch stays valid."""

    def __init__(self, name: str) -> None:
        self.name = name
        # one table per launch mode: a launch learned in 'fast' (our launcher) is not served in
        # 'triton-c' (Triton's), so the two can be timed side by side; switch() picks the table,
        # and the kernels' cached path reads `calls` as is
        self._tables: dict[str, tuple] = {}
        self.switch(_MODE)

    def switch(self, mode: str) -> None:
        """Serve the cached launches learned in `mode`."""
        table = self._tables.get(mode)
        if table is None:
            # calls: key -> bound launch; how: key -> "own" / "direct" / "run" (how its launch
            # is made), or why refused; tiers and refused: counts of each
            table = self._tables[mode] = ({}, {}, {}, {})
        self.calls, self.how, self.tiers, self.refused = table

    def clear(self) -> None:
        for table in self._tables.values():
            for part in table:
                part.clear()

    def learn(self, key, record: Launch, stream: int, make) -> None:
        """Bind the plain launch `record` for `key` and store make(launch) (the tuple the
        caller's fast path unpacks)."""
        bind = STATE.bind
        if bind is None or key in self.calls:
            return
        launch, how = bind(record, stream)
        if launch is None:
            self.refused[how] = self.refused.get(how, 0) + 1
            # remembered as refused, so that each miss does not try to bind again
            value = None
        else:
            self.tiers[how] = self.tiers.get(how, 0) + 1
            value = make(launch)
        if len(self.calls) >= MAX_CALLS:
            self.calls.clear()
            self.how.clear()
        self.calls[key] = value
        self.how[key] = how

    def describe(self) -> dict:
        return {
            "cached_calls": sum(v is not None for v in self.calls.values()),
            "tiers": dict(self.tiers),
            "refused": dict(self.refused),
        }


_REGISTRY: dict[str, FastCalls] = {}


def fast_calls(name: str) -> FastCalls:
    """The FastCalls of kernel `name` (one per kernel, shared by its callers)."""
    fc = _REGISTRY.get(name)
    if fc is None:
        fc = _REGISTRY[name] = FastCalls(name)
    return fc


def clear() -> None:
    """Forget every cached launch (they are learned again from the next plain calls)."""
    for fc in _REGISTRY.values():
        fc.clear()


def set_mode(mode: str) -> None:
    """'fast' (cached launches where they apply), 'triton-c' (cached, through Triton's C
    launcher) or 'plain' (Triton's own launch every call)."""
    global _MODE
    if mode not in MODES:
        raise ValueError(f"launch mode must be one of {', '.join(MODES)}; got {mode!r}")
    _MODE = mode
    for fc in _REGISTRY.values():
        fc.switch(mode)
    STATE.reset()


def mode() -> str:
    return _MODE


@contextlib.contextmanager
def launch_mode(new: str):
    """Run the block with launches in `new` mode ('fast' or 'plain'), then restore."""
    old = _MODE
    set_mode(new)
    try:
        yield
    finally:
        set_mode(old)


@contextlib.contextmanager
def use_backend(backend):
    """Serve the fast path with `backend` (its where(x), bind(record, stream) and describe())
    in place of the CUDA one, in 'fast' mode: how the tests run the fast path on a CPU."""
    STATE.injected = backend
    STATE.reset()
    clear()
    try:
        yield backend
    finally:
        STATE.injected = None
        STATE.reset()
        clear()


def status() -> dict:
    """The launch path in use and why, and per kernel the launches cached and how they launch."""
    if STATE.where == STATE._resolve_then_where:
        _resolve(STATE)
    return {"mode": _MODE, "path": STATE.why, "kernels": {k: v.describe() for k, v in _REGISTRY.items()}}
