"""Readable kernel names: CUDA's demangled names run to hundreds of characters.

The short name is the kernel's own name, plus what its first telling template argument says it
computes: a functor (`vectorized_elementwise_kernel<MulFunctor>`) or, for a lambda, the function
that encloses it (`vectorized_elementwise_kernel<launch_clamp_scalar>`). Without that, torch's
relu, clamp_min and where's compare kernel would all read `vectorized_elementwise_kernel`.
The full name stays in the frame (`kernel`) and the tables' `kernels_full`.
"""

from __future__ import annotations

import re

MAX_LEN = 80

# functors that name what an elementwise or reduction kernel computes
_DETAIL = re.compile(r"\b([A-Za-z_]\w*?(?:_impl|Functor|_functor|Ops))\b")
_GENERIC = {"BinaryFunctor", "AUnaryFunctor", "BUnaryFunctor", "UnaryFunctor", "ReduceOp"}
# namespaces without a name, in both demanglers' spellings (c++filt, and nsys / torch.profiler)
_ANON = re.compile(r"(?:\(anonymous namespace\)|<unnamed>)::")
# numba's ABI tags: `_square_kernel_py[abi:v1][abi:cw51c...]` (or `[abi:v1,cw51c...]`)
_ABI = re.compile(r"\[abi:[^\]]*\]")
_LAMBDA = re.compile(r"::(?:\{lambda|\[lambda)")
# template arguments that tell nothing apart: numbers, booleans, element types
_LITERAL = re.compile(r"^(?:\([\w ]+\))?-?\d+\w*$|^(?:true|false)$")
_TYPES = {
    "float",
    "double",
    "int",
    "long",
    "short",
    "char",
    "bool",
    "unsigned",
    "signed",
    "Half",
    "BFloat16",
    "half",
    "bfloat16",
    "complex",
    "float4",
    "float2",
    "uint8_t",
    "int64_t",
    "int32_t",
}
_OPEN, _CLOSE = "<([{", ">)]}"


def _head(text: str) -> tuple[str, int]:
    """The qualified name at the start of `text` and where it ends (at its `<` or `(`)."""
    depth = 0
    for i, ch in enumerate(text):
        if ch in _OPEN:
            if depth == 0 and ch in "<(":
                return text[:i], i
            depth += 1
        elif ch in _CLOSE:
            depth -= 1
    return text, len(text)


def _closing(text: str, start: int) -> int:
    """Index of the bracket closing the one at `start` (or len(text) when unbalanced)."""
    depth = 0
    for i in range(start, len(text)):
        if text[i] in _OPEN:
            depth += 1
        elif text[i] in _CLOSE:
            depth -= 1
            if depth == 0:
                return i
    return len(text)


def _split_args(text: str) -> list[str]:
    """Top-level comma-separated arguments of a template argument list."""
    out, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch in _OPEN:
            depth += 1
        elif ch in _CLOSE:
            depth -= 1
        elif ch == "," and depth == 0:
            out.append(text[start:i].strip())
            start = i + 1
    out.append(text[start:].strip())
    return [a for a in out if a]


def _last_part(qualified: str) -> str:
    return qualified.strip().split("::")[-1].strip()


def _tells(arg: str) -> str | None:
    """What a template argument says the kernel computes, or None when it says nothing."""
    if _LITERAL.match(arg):
        return None
    details = [d for d in _DETAIL.findall(arg) if d not in _GENERIC]
    if details:
        return details[-1]
    text = arg[5:] if arg.startswith("void ") else arg
    head, end = _head(text)
    name = _last_part(head)
    if _LAMBDA.search(text[end:]):
        return name or None  # a lambda: the function that encloses it names it
    if "::" in head and name not in _TYPES and not name.endswith("*"):
        return name
    return None


def short_kernel_name(name: str) -> str:
    """'void at::native::vectorized_elementwise_kernel<4, ...MulFunctor<float>...>(...)'
    -> 'vectorized_elementwise_kernel<MulFunctor>'; a lambda's enclosing function stands for it
    ('...<launch_clamp_scalar>'); plain names pass through; at most MAX_LEN characters."""
    text = _ABI.sub("", _ANON.sub("", name.strip()))
    if text.startswith("void "):
        text = text[5:]
    head, end = _head(text)
    base = _last_part(head) or text
    detail = None
    if end < len(text) and text[end] == "<":
        for arg in _split_args(text[end + 1 : _closing(text, end)]):
            detail = _tells(arg)
            if detail:
                break
    short = f"{base}<{detail}>" if detail else base
    return short if len(short) <= MAX_LEN else short[: MAX_LEN - 3] + "..."
