"""The CUDA backend of the fast launch path (workloads/kernels/_launch.py): whether this torch
and Triton launch the way the path repeats (Triton 3.6's JITFunction.run and CudaLauncher), where
a tensor's launch would go, and a compiled kernel's launch bound with everything fixed.

Imports neither torch nor triton at import time.
"""

from __future__ import annotations

import functools
import inspect
import re
import types
from typing import Any, NamedTuple

from workloads.kernels import _launch_own


class Launch(NamedTuple):
    """One plain launch as it was made: kernel[grid](*args, **kwargs) returned `compiled`."""

    kernel: Any
    grid: tuple[int, int, int]
    args: tuple
    kwargs: dict
    compiled: Any


# JITFunction.run's own launch, whitespace removed: the contract the fast path relies on
# (the CompiledKernel.run argument order: grid, stream, CUfunction, packed metadata, launch
# metadata, the two hooks, then every kernel argument, constexprs included, in order).
_RUN_CONTRACT = (
    "kernel.run(grid_0,grid_1,grid_2,stream,kernel.function,kernel.packed_metadata,"
    "launch_metadata,knobs.runtime.launch_enter_hook,knobs.runtime.launch_exit_hook,"
    "*bound_args.values())"
)
# Triton 3.6's generated C launch: grid x3, stream, function, cooperative, pdl, global and
# profile scratch, kernel metadata, launch metadata, enter and exit hooks; then the arguments
_DIRECT_FORMAT = "iiiKKppOOOOOO"
_DIRECT_CALL_PARAMS = ["self", "gridX", "gridY", "gridZ", "stream", "function", "args"]


class Unsupported(Exception):
    """The fast path cannot apply here; the message says why."""


def run_contract_in(source: str) -> bool:
    """Does this source of JITFunction.run launch with the call the fast path repeats?"""
    return _RUN_CONTRACT in re.sub(r"\s+", "", source)


@functools.cache
def _run_contract_holds() -> tuple[bool, str]:
    try:
        from triton.runtime.jit import JITFunction

        src = inspect.getsource(JITFunction.run)
    except (ImportError, OSError, TypeError) as exc:
        return False, f"cannot read triton's JITFunction.run ({type(exc).__name__}: {exc})"
    if not run_contract_in(src):
        return False, (
            "this triton's JITFunction.run does not launch with kernel.run(grid_0, grid_1, "
            "grid_2, stream, kernel.function, kernel.packed_metadata, launch_metadata, hooks, "
            "*args): its CompiledKernel API differs from the one relaunched here"
        )
    return True, ""


@functools.cache
def _direct_launcher_class():
    """Triton 3.6's CudaLauncher class when its C launch has the layout called directly here
    (checked on the class and the module's format string), else None: then the launch goes
    through CompiledKernel.run, one Python call more."""
    try:
        from triton.backends.nvidia import driver as nv
    except ImportError:
        return None
    cls = getattr(nv, "CudaLauncher", None)
    if cls is None or getattr(nv, "_BASE_ARGS_FORMAT", None) != _DIRECT_FORMAT:
        return None
    try:
        params = list(inspect.signature(cls.__call__).parameters)
    except (TypeError, ValueError):
        return None
    return cls if params == _DIRECT_CALL_PARAMS else None


class CudaBackend:
    """The fast path on CUDA: where a tensor's launch would go, and how to bind a launch."""

    def __init__(self, own: bool = True) -> None:
        try:
            import torch
        except ImportError as exc:
            raise Unsupported(f"no torch: {exc}") from exc
        if not torch.cuda.is_available():
            raise Unsupported("no CUDA device: the Triton kernels cannot run compiled here")
        get_device = getattr(torch._C, "_cuda_getDevice", None)
        raw_stream = getattr(torch._C, "_cuda_getCurrentRawStream", None)
        if get_device is None or raw_stream is None:
            raise Unsupported("this torch has no torch._C._cuda_getDevice/_cuda_getCurrentRawStream")
        ok, why = _run_contract_holds()
        if not ok:
            raise Unsupported(why)
        try:
            from triton import knobs
        except ImportError:
            # before triton.knobs (3.4) the hooks lived on CompiledKernel: not looked at here
            raise Unsupported("this triton has no triton.knobs (older than 3.4): plain launches") from None
        self._tensor = torch.Tensor
        self._get_device = get_device
        self._raw_stream = raw_stream
        self._runtime = knobs.runtime
        self._compilation = knobs.compilation
        # 3.6: the hooks are HookChains, empty unless a hook was added; 3.4-3.5: None or a function
        self._hook_chain = getattr(knobs, "HookChain", None)
        self._direct_cls = _direct_launcher_class()
        self._own, self._own_why = False, "Triton's C launcher asked for"
        if own and self._direct_cls is None:
            self._own_why = "this Triton's C launch is not 3.6's layout (the params our launcher appends)"
        elif own:
            mod, why = _launch_own.load()
            self._own, self._own_why = mod is not None, why

    def describe(self) -> str:
        if self._own:
            how = (
                "our cuLaunchKernel launcher where the kernel allows, else Triton's C launch called directly"
            )
        elif self._direct_cls is not None:
            how = f"Triton's C launch called directly; {self._own_why}"
        else:
            how = "through CompiledKernel.run"
        return f"fast: cached launches ({how})"

    def where(self, x):
        """(device index, raw stream) the plain path would launch `x`'s kernel on, or None
        when the fast path must not serve this call."""
        if not isinstance(x, self._tensor) or not x.is_cuda:
            return None  # anything else meets the plain path's own checks and errors
        dev = x.get_device()
        # the plain path makes x's device current first (on_device); keep that one path
        if dev != self._get_device():
            return None
        rt = self._runtime
        chain = self._hook_chain
        # a registered launch hook (proton, a user's) sees launches only through Triton's path;
        # debug and instrumentation change which kernel Triton compiles. Inline: per call.
        hook = rt.launch_enter_hook
        if hook is not None and (type(hook) is not chain or hook.calls):
            return None
        hook = rt.launch_exit_hook
        if hook is not None and (type(hook) is not chain or hook.calls):
            return None
        if rt.debug or self._compilation.instrumentation_mode:
            return None
        return dev, self._raw_stream(dev)

    def place(self, x):
        """(device index, raw stream) of `x`'s launch, or None: where() without the checks of
        Triton's hooks and modes, for a launch that is not Triton's (the CUDA extension's).
        where() repeats these lines rather than calling this: one Python call less on the Triton
        kernels' cached path, the one still short of the host-side goal (1.2x torch's op)."""
        if not isinstance(x, self._tensor) or not x.is_cuda:
            return None
        dev = x.get_device()
        if dev != self._get_device():
            return None
        return dev, self._raw_stream(dev)

    def bind(self, record: Launch, stream: int):
        return bind_compiled(record, stream, self._direct_cls, own=self._own)


def bind_compiled(record: Launch, stream: int, direct_cls=None, own: bool = False, entry_points=None):
    """(launch, how) where launch(*kernel_args) repeats `record`'s launch on `stream`, or
    (None, why not). kernel_args: every parameter in order, constexprs included, pointers as
    ints. how: 'own' (our cuLaunchKernel launcher, workloads/kernels/_launch_own.py: `own` asked
    for, the launcher is Triton 3.6's and the kernel needs nothing it does not do), 'direct'
    (Triton 3.6's C launch called as CudaLauncher.__call__ calls it, when `direct_cls` is that
    launcher's class) or 'run' (through CompiledKernel.run, as JITFunction.run launches).
    entry_points: the own launcher's (cuLaunchKernel, cuGetErrorName), libcuda's by default."""
    compiled = record.compiled
    try:
        run = compiled.run  # the property loads the module (done by the plain launch already)
        function = compiled.function
        packed = compiled.packed_metadata
    except Exception as exc:
        return None, f"not a relaunchable CompiledKernel ({type(exc).__name__}: {exc})"
    if function is None:
        return None, "the compiled kernel has no loaded CUfunction"
    gx, gy, gz = record.grid
    own_why = ""
    if own and direct_cls is not None and type(run) is direct_cls:
        # where the kernel needs what our launcher does not do, Triton's own C launch below,
        # and its tier says why (status(), bench_launch's launch column)
        launch, why = _launch_own.bind(compiled, record.grid, stream, entry_points)
        if launch is not None:
            return launch, "own"
        own_why = f" (not ours: {why})"
    if direct_cls is not None and type(run) is direct_cls:
        launch = getattr(run, "launch", None)
        # scratch memory is allocated per launch by CudaLauncher.__call__; a Python function
        # here is wrap_handle_tensordesc's wrapper: both need the full call
        if (
            launch is not None
            and not isinstance(launch, types.FunctionType)
            and not getattr(run, "global_scratch_size", 1)
            and not getattr(run, "profile_scratch_size", 1)
        ):
            return functools.partial(
                launch,
                gx,
                gy,
                gz,
                stream,
                function,
                run.launch_cooperative_grid,
                run.launch_pdl,
                None,
                None,
                packed,
                None,
                None,
                None,
            ), "direct" + own_why
    if not callable(run):
        return None, "CompiledKernel.run is not callable"
    return functools.partial(run, gx, gy, gz, stream, function, packed, None, None, None), "run"
