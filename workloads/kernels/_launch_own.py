"""Our own launch of a compiled Triton kernel: a vectorcall object that calls ``cuLaunchKernel``.

Why: Triton 3.6's generated C launch, called directly with everything fixed bound in a
``functools.partial`` (the 'direct' tier of _launch_cuda.bind_compiled), still parses 13 + n
arguments with ``PyArg_ParseTuple`` and a format string on every call, unpacks the packed
metadata tuple, calls the (empty) enter and exit hook chains, and builds a ``CUlaunchConfig``
for ``cuLaunchKernelEx``. On the H200 that launch alone took 4.2 to 4.4 us a call for the
Triton square, against 4.05 us for the CUDA extension's vectorcall launch, and it kept the
Triton square's host side above the goal of 1.2x torch.square's on some runs.

What: a ``Launcher`` made once per learned launch holds the CUfunction, grid, block, shared
memory, stream and one type code per kernel argument, read from the compiled kernel's own
signature. A call converts only the non-constexpr arguments (pointers as ints, as the fast
paths pass them), points the params at them, appends Triton 3.6's two scratch pointers (NULL:
kernels that need scratch are not bound here), and calls ``cuLaunchKernel``. Its address comes
from libcuda through ctypes at bind time, so the module needs no CUDA header or library to
build, and the tests can hand it a fake to read the params back on a machine with no GPU.

The module is compiled once per source text with the C compiler Triton itself needs (``CC``,
else gcc or clang) and cached under ``$XDG_CACHE_HOME/gprof-orch`` (``~/.cache``). Where it
cannot be built, ``load()`` says why and the launches stay on the 'direct' tier.

Imports neither torch nor triton.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path

MODULE = "_gprof_triton_launch"
# Triton signature type -> the Launcher's code for it ('c': a constexpr, passed and ignored)
KINDS = {"i32": "i", "u32": "I", "i64": "l", "u64": "L", "constexpr": "c"}
# Triton 3.6 appends the global and the profile scratch pointers to every kernel's params
SCRATCH_PARAMS = 2
MAX_ARGS = 64

SOURCE = r"""
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define MAX_ARGS 64
#define MAX_SCRATCH 4

/* CUresult cuLaunchKernel(CUfunction, gridX, gridY, gridZ, blockX, blockY, blockZ,
   sharedMemBytes, CUstream, void **kernelParams, void **extra) */
typedef int (*launch_fn)(void *, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                         unsigned, void *, void **, void **);
typedef int (*error_name_fn)(int, const char **);

typedef union { int32_t i; uint32_t I; int64_t l; uint64_t L; void *p; } slot_t;

typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    launch_fn launch;
    error_name_fn error_name;
    void *function;
    void *stream;
    unsigned grid[3], block, shared;
    Py_ssize_t nargs;
    int nparams;
    char kinds[MAX_ARGS];
    slot_t slots[MAX_ARGS + MAX_SCRATCH];
    void *params[MAX_ARGS + MAX_SCRATCH];
} Launcher;

static PyObject *launcher_call(PyObject *obj, PyObject *const *args, size_t nargsf, PyObject *kw) {
    Launcher *self = (Launcher *)obj;
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    if (kw != NULL && PyTuple_GET_SIZE(kw) != 0) {
        PyErr_SetString(PyExc_TypeError, "a Triton launch takes no keyword arguments");
        return NULL;
    }
    if (nargs != self->nargs) {
        PyErr_Format(PyExc_TypeError, "this launch takes %zd arguments (%zd given)", self->nargs, nargs);
        return NULL;
    }
    int j = 0;
    for (Py_ssize_t i = 0; i < nargs; i++) {
        PyObject *a = args[i];
        switch (self->kinds[i]) {
        case 'c':
            continue;
        case 'p': self->slots[j].L = PyLong_AsUnsignedLongLong(a); break;
        case 'L': self->slots[j].L = PyLong_AsUnsignedLongLong(a); break;
        case 'l': self->slots[j].l = PyLong_AsLongLong(a); break;
        case 'i': {
            long long v = PyLong_AsLongLong(a);
            if (v < INT32_MIN || v > INT32_MAX) {
                if (!PyErr_Occurred()) PyErr_Format(PyExc_OverflowError, "argument %zd does not fit int32", i);
                return NULL;
            }
            self->slots[j].l = 0;
            self->slots[j].i = (int32_t)v;
            break;
        }
        case 'I': {
            unsigned long long v = PyLong_AsUnsignedLongLong(a);
            if (v > UINT32_MAX) {
                if (!PyErr_Occurred()) PyErr_Format(PyExc_OverflowError, "argument %zd does not fit uint32", i);
                return NULL;
            }
            self->slots[j].L = 0;
            self->slots[j].I = (uint32_t)v;
            break;
        }
        }
        if (PyErr_Occurred()) return NULL;
        j++;
    }
    if (self->grid[0] == 0 || self->grid[1] == 0 || self->grid[2] == 0) Py_RETURN_NONE; /* as Triton: no launch */
    int err = self->launch(self->function, self->grid[0], self->grid[1], self->grid[2], self->block, 1, 1,
                           self->shared, self->stream, self->params, NULL);
    if (err != 0) {
        const char *name = NULL;
        if (self->error_name == NULL || self->error_name(err, &name) != 0 || name == NULL) name = "unknown";
        PyErr_Format(PyExc_RuntimeError, "cuLaunchKernel of a Triton kernel failed: %s (%d)", name, err);
        return NULL;
    }
    Py_RETURN_NONE;
}

static void launcher_dealloc(PyObject *self) { PyObject_Del(self); }

static PyTypeObject LauncherType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "_gprof_triton_launch.Launcher",
    .tp_basicsize = sizeof(Launcher),
    .tp_dealloc = launcher_dealloc,
    .tp_vectorcall_offset = offsetof(Launcher, vectorcall),
    .tp_call = PyVectorcall_Call,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_doc = "one bound launch of a compiled Triton kernel; call it with the kernel's arguments",
};

/* make(launch_addr, error_name_addr, function, gx, gy, gz, block, shared, stream, kinds, scratch) */
static PyObject *make(PyObject *mod, PyObject *args) {
    unsigned long long launch, error_name, function, stream;
    unsigned gx, gy, gz, block, shared;
    const char *kinds;
    Py_ssize_t nkinds;
    int scratch;
    if (!PyArg_ParseTuple(args, "KKKIIIIIKs#i", &launch, &error_name, &function, &gx, &gy, &gz, &block,
                          &shared, &stream, &kinds, &nkinds, &scratch))
        return NULL;
    if (nkinds > MAX_ARGS || scratch < 0 || scratch > MAX_SCRATCH || launch == 0) {
        PyErr_SetString(PyExc_ValueError, "make: too many arguments, a bad scratch count or no launch function");
        return NULL;
    }
    Launcher *self = PyObject_New(Launcher, &LauncherType);
    if (self == NULL) return NULL;
    self->vectorcall = launcher_call;
    self->launch = (launch_fn)(uintptr_t)launch;
    self->error_name = (error_name_fn)(uintptr_t)error_name;
    self->function = (void *)(uintptr_t)function;
    self->stream = (void *)(uintptr_t)stream;
    self->grid[0] = gx; self->grid[1] = gy; self->grid[2] = gz;
    self->block = block; self->shared = shared;
    self->nargs = nkinds;
    memset(self->kinds, 0, sizeof(self->kinds));
    memset(self->slots, 0, sizeof(self->slots));
    int j = 0;
    for (Py_ssize_t i = 0; i < nkinds; i++) {
        char k = kinds[i];
        if (!strchr("cpiIlL", k)) {
            Py_DECREF(self);
            PyErr_Format(PyExc_ValueError, "make: unknown argument kind %c", k);
            return NULL;
        }
        self->kinds[i] = k;
        if (k != 'c') { self->params[j] = &self->slots[j]; j++; }
    }
    for (int s = 0; s < scratch; s++, j++) { self->slots[j].p = NULL; self->params[j] = &self->slots[j]; }
    self->nparams = j;
    return (PyObject *)self;
}

static PyMethodDef methods[] = {
    {"make", make, METH_VARARGS, "make(launch_addr, error_name_addr, function, gx, gy, gz, block, shared, "
                                 "stream, kinds, scratch) -> Launcher"},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_gprof_triton_launch", NULL, -1, methods};

PyMODINIT_FUNC PyInit__gprof_triton_launch(void) {
    if (PyType_Ready(&LauncherType) < 0) return NULL;
    return PyModule_Create(&module);
}
"""


def _cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    tag = hashlib.sha256((SOURCE + sys.version + sysconfig.get_platform()).encode()).hexdigest()[:16]
    return Path(base) / "gprof-orch" / "triton-launch" / tag


def _compiler() -> str | None:
    return os.environ.get("CC") or shutil.which("gcc") or shutil.which("clang") or shutil.which("cc")


def _build(so: Path) -> None:
    cc = _compiler()
    if cc is None:
        raise OSError("no C compiler (CC, gcc, clang)")
    include = sysconfig.get_paths()["include"]
    so.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=so.parent) as tmp:
        src = Path(tmp) / f"{MODULE}.c"
        src.write_text(SOURCE)
        out = Path(tmp) / so.name
        res = subprocess.run(
            [cc, str(src), "-O2", "-shared", "-fPIC", f"-I{include}", "-o", str(out)],
            capture_output=True,
            text=True,
            timeout=120,
        )
        if res.returncode != 0:
            raise OSError(f"{cc} failed: {res.stderr.strip()[-400:]}")
        os.replace(out, so)  # atomic: a concurrent build leaves one whole module


@functools.cache
def load():
    """(module, "") or (None, why not): the launch module, built on first use."""
    so = _cache_dir() / f"{MODULE}{sysconfig.get_config_var('EXT_SUFFIX')}"
    try:
        if not so.exists():
            _build(so)
        spec = importlib.util.spec_from_file_location(MODULE, so)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
    except (OSError, ImportError, subprocess.SubprocessError) as exc:
        return None, f"own launcher not built: {exc}"
    return mod, ""


@functools.cache
def cuda_entry_points() -> tuple[int, int]:
    """Addresses of libcuda's cuLaunchKernel and cuGetErrorName (OSError where there is none)."""
    import ctypes

    lib = ctypes.CDLL("libcuda.so.1")
    return (
        ctypes.cast(lib.cuLaunchKernel, ctypes.c_void_p).value,
        ctypes.cast(lib.cuGetErrorName, ctypes.c_void_p).value,
    )


def kinds_of(signature) -> str | None:
    """The Launcher's kind codes for a compiled kernel's signature (its values in argument
    order), or None when an argument is of a type not launched here (floats, tuples,
    tensor descriptors): then the launch stays on Triton's own C launcher."""
    out = []
    for ty in signature:
        if isinstance(ty, str) and ty.startswith("*"):
            out.append("p")
        elif isinstance(ty, str) and ty in KINDS:
            out.append(KINDS[ty])
        else:
            return None
    return "".join(out) if len(out) <= MAX_ARGS else None


def bind(compiled, grid: tuple[int, int, int], stream: int, entry_points=None):
    """(launcher, "") where launcher(*kernel_args) repeats the launch of `compiled` on `grid`
    and `stream`, or (None, why not). kernel_args as the fast paths pass them: every parameter
    in order, constexprs included, pointers as ints. `entry_points`: (cuLaunchKernel,
    cuGetErrorName) addresses; libcuda's by default."""
    mod, why = load()
    if mod is None:
        return None, why
    try:
        meta = compiled.metadata
        signature = list(compiled.src.signature.values())
        num_warps, num_ctas, shared = compiled.packed_metadata
        function = compiled.function
    except Exception as exc:
        return None, f"compiled kernel not read ({type(exc).__name__}: {exc})"
    if (
        num_ctas != 1
        or getattr(meta, "launch_cooperative_grid", True)
        or getattr(meta, "launch_pdl", True)
        or getattr(meta, "global_scratch_size", 1)
        or getattr(meta, "profile_scratch_size", 1)
        or getattr(meta, "tensordesc_meta", None)
    ):
        return None, "the kernel needs clusters, a cooperative or PDL launch, scratch memory or descriptors"
    kinds = kinds_of(signature)
    if kinds is None:
        return None, f"an argument type not launched here ({signature})"
    if not function:
        return None, "the compiled kernel has no loaded CUfunction"
    try:
        launch, error_name = entry_points or cuda_entry_points()
    except (OSError, AttributeError) as exc:
        return None, f"no libcuda entry points ({exc})"
    gx, gy, gz = grid
    return mod.make(
        launch, error_name, function, gx, gy, gz, 32 * num_warps, shared, stream, kinds, SCRATCH_PARAMS
    ), ""
