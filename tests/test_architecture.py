"""The house rules, checked on the source: every import arrow points down (the child side,
workloads/, and reports/ import nothing from orchestrator/; the readers in orchestrator/parsers
import nothing from the rest of orchestrator/ but its errors, and from workloads/ only the names of
the runner's NVTX ranges), the import graph between packages has no circle, and modules and
functions stay a readable size. Size is counted in statements (the lines a statement starts on),
so the formatter's line breaks do not count: a module holds one concept, and MAX_STATEMENTS is a
guide for one, not a reason to split it; a function over MAX_FUNCTION_STATEMENTS is split into
named helpers."""

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("orchestrator", "workloads", "reports")
MAX_STATEMENTS = 300
MAX_FUNCTION_STATEMENTS = 50
# a module whose one concept is larger than the guide, with its statements (lower it as it shrinks)
OVER: dict[str, int] = {}


def _modules():
    for pkg in PACKAGES:
        for path in sorted((ROOT / pkg).rglob("*.py")):
            yield path, ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")


def _imports(path: Path) -> set[str]:
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.add(node.module)
            out |= {f"{node.module}.{a.name}" for a in node.names}
    return {m for m in out if m.split(".")[0] in PACKAGES}


def _allowed(module: str, target: str) -> bool:
    top, to = module.split(".")[0], target.split(".")[0]
    if top == "workloads":
        return to == "workloads"
    if top == "reports":
        # the one rule of when a median is known well enough, shared with the child's sampling
        return to == "reports" or target.startswith("workloads.stopping")
    if module.startswith("orchestrator.parsers"):
        # and the names of the NVTX ranges the runner writes, which the readers look for by default
        return (
            to == "reports"
            or target.startswith(("orchestrator.parsers", "orchestrator.errors", "workloads.nvtx_ranges"))
            or target == "orchestrator"
        )
    return True


def test_every_import_arrow_points_down():
    back = [
        f"{mod} -> {t}" for path, mod in _modules() for t in sorted(_imports(path)) if not _allowed(mod, t)
    ]
    assert not back, "imports back up:\n" + "\n".join(back)


def test_the_packages_import_graph_has_no_circle():
    edges = {(mod.split(".")[0], t.split(".")[0]) for path, mod in _modules() for t in _imports(path)}
    edges = {(a, b) for a, b in edges if a != b}
    assert not any((b, a) in edges for a, b in edges), sorted(edges)


def _statements(node: ast.AST) -> int:
    return len({n.lineno for n in ast.walk(node) if isinstance(n, ast.stmt)})


def test_modules_stay_small():
    sizes = {mod: _statements(ast.parse(path.read_text())) for path, mod in _modules()}
    grown = {m: n for m, n in sizes.items() if n > OVER.get(m, MAX_STATEMENTS)}
    assert not grown, f"modules over {MAX_STATEMENTS} statements, or their entry in OVER: {grown}"
    stale = {m: n for m, n in OVER.items() if sizes.get(m, 0) <= MAX_STATEMENTS}
    assert not stale, f"now at most {MAX_STATEMENTS} statements: remove from OVER: {stale}"


def test_functions_stay_short():
    """No function (nor method, nor nested function) over MAX_FUNCTION_STATEMENTS statements."""
    long = {}
    for path, mod in _modules():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                n = _statements(node)
                if n > MAX_FUNCTION_STATEMENTS:
                    long[f"{mod}.{node.name} (line {node.lineno})"] = n
    assert not long, f"functions over {MAX_FUNCTION_STATEMENTS} statements: {long}"


def test_the_tree_passes_ruff():
    """Lint and format as pyproject.toml declares them (line length 110)."""
    for args in (["check", "--no-cache", "."], ["format", "--check", "--no-cache", "."]):
        r = subprocess.run([sys.executable, "-m", "ruff", *args], cwd=ROOT, capture_output=True, text=True)
        assert r.returncode == 0, f"ruff {' '.join(args)}:\n{r.stdout}{r.stderr}"
