"""A kernel's bare function name from its demangled C++ signature: the name ncu's CSV reader
gives a kernel, and the one reports/why.py matches ncu's findings by. Plain string work, so
both the parsers and the reports import it from here."""

from __future__ import annotations


def function_name(demangled: str) -> str:
    """The bare function name of a demangled kernel signature.

    Example:
        >>> function_name("void at::native::vectorized_elementwise_kernel<4, F>(int, T2)")
        'vectorized_elementwise_kernel'
    """
    s = demangled.strip()

    def strip_group(s: str, open_ch: str, close_ch: str) -> str:
        depth = 0
        for i in range(len(s) - 1, -1, -1):
            if s[i] == close_ch:
                depth += 1
            elif s[i] == open_ch:
                depth -= 1
                if depth == 0:
                    return s[:i].rstrip()
        return s

    if s.endswith(")"):
        s = strip_group(s, "(", ")")
    while s.endswith(">"):
        stripped = strip_group(s, "<", ">")
        if stripped == s:
            break
        s = stripped
    s = s.split()[-1] if s.split() else s
    return s.rsplit("::", 1)[-1]
