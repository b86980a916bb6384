"""Readable kernel names: CUDA's demangled names run to hundreds of characters."""
from __future__ import annotations

import re

# functors that name what an elementwise or reduction kernel computes
_DETAIL = re.compile(r"\b([A-Za-z_]\w*?(?:_impl|Functor|_functor|Ops))\b")
_GENERIC = {"BinaryFunctor", "AUnaryFunctor", "BUnaryFunctor", "UnaryFunctor", "ReduceOp"}


def _base_name(name: str) -> str:
    depth = 0
    for i, ch in enumerate(name):
        if ch in "<(" and depth == 0:
            return name[:i]
        if ch in "<(":
            depth += 1
        elif ch in ">)":
            depth -= 1
    return name


def short_kernel_name(name: str) -> str:
    """'void at::native::vectorized_elementwise_kernel<4, ...MulFunctor<float>...>(...)'
    -> 'vectorized_elementwise_kernel<MulFunctor>'; plain names pass through."""
    text = name.strip()
    if text.startswith("void "):
        text = text[5:]
    base = _base_name(text).split("::")[-1].strip() or text
    rest = text[len(_base_name(text)):]
    details = [d for d in _DETAIL.findall(rest) if d not in _GENERIC]
    return f"{base}<{details[-1]}>" if details else base
