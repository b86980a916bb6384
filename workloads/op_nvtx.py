"""The operators' NVTX ranges on a PyTorch built without CUDA, whose emit_nvtx refuses ("compiled
without CUDA"): a RecordFunction observer that pushes a range per aten operator and per
record_function, named as PyTorch's own NVTX observer names them ("aten::pow, seq = 3"), built
once with torch.utils.cpp_extension (a C++ compiler and nsys's NVTX headers; cached by torch
under ~/.cache/torch_extensions).

The headers are nsys's own: nsys tells the program it profiles where its NVTX injection library
is (NVTX_INJECTION64_PATH), and its `nvtx/include` lies beside it. Imports torch only when used."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

_SOURCE = r"""
#include <torch/extension.h>
#include <ATen/record_function.h>
#include <nvtx3/nvToolsExt.h>
#include <string>
static at::CallbackHandle handle = 0;
static std::unique_ptr<at::ObserverContext> on_enter(const at::RecordFunction& fn) {
  std::string s = fn.name();
  if (fn.seqNr() >= 0) s += ", seq = " + std::to_string(fn.seqNr());
  nvtxRangePushA(s.c_str());
  return nullptr;
}
static void on_exit(const at::RecordFunction&, at::ObserverContext*) { nvtxRangePop(); }
void start() {
  if (handle) return;
  handle = at::addGlobalCallback(at::RecordFunctionCallback(on_enter, on_exit)
      .scopes({at::RecordScope::FUNCTION, at::RecordScope::USER_SCOPE}));
}
void stop() { if (handle) { at::removeCallback(handle); handle = 0; } }
"""
_module = None


def headers() -> Path:
    """nsys's NVTX headers, from the injection library nsys named; raises RuntimeError where the
    program does not run under nsys or its folder has no headers."""
    lib = os.environ.get("NVTX_INJECTION64_PATH")
    inc = Path(lib).parent / "nvtx" / "include" if lib else None
    if inc is None or not (inc / "nvtx3" / "nvToolsExt.h").is_file():
        raise RuntimeError(f"no NVTX headers beside NVTX_INJECTION64_PATH ({lib!r}): not under nsys")
    return inc


def _build():
    global _module
    if _module is None:
        from torch.utils.cpp_extension import load_inline

        try:
            _module = load_inline(
                "gprof_op_nvtx",
                cpp_sources=[_SOURCE],
                functions=["start", "stop"],
                extra_include_paths=[str(headers())],
            )
        except (OSError, ImportError) as exc:  # no compiler, a failed build: said, the run goes on
            raise RuntimeError(f"the operator observer did not build: {exc}") from exc
    return _module


@contextlib.contextmanager
def ranges():
    """An NVTX range per operator and record_function while inside (built on first use)."""
    m = _build()
    m.start()
    try:
        yield
    finally:
        m.stop()
