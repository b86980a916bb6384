"""The house rules of issue 14, checked on the source: every import arrow points down (the
child side, workloads/, and reports/ import nothing from orchestrator/; the readers in
orchestrator/parsers import nothing from the rest of orchestrator/ but its errors, and from
workloads/ only the names of the runner's NVTX ranges), the import graph between packages has no
circle, and modules stay small (a ratchet: a module over 400 lines may not grow, and must be
listed here with its size until it is split), and no function is over 60 lines."""
import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("orchestrator", "workloads", "reports")
MAX_LINES = 400
MAX_FUNCTION_LINES = 60
# modules still over MAX_LINES, at most this many lines (lower a number when a module shrinks)
OVER = {}


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
        return (to == "reports" or target.startswith(("orchestrator.parsers", "orchestrator.errors",
                                                      "workloads.nvtx_ranges")) or target == "orchestrator")
    return True


def test_every_import_arrow_points_down():
    back = [f"{mod} -> {t}" for path, mod in _modules() for t in sorted(_imports(path)) if not _allowed(mod, t)]
    assert not back, "imports back up:\n" + "\n".join(back)


def test_the_packages_import_graph_has_no_circle():
    edges = {(mod.split(".")[0], t.split(".")[0]) for path, mod in _modules() for t in _imports(path)}
    edges = {(a, b) for a, b in edges if a != b}
    assert not any((b, a) in edges for a, b in edges), sorted(edges)


def test_modules_stay_small():
    sizes = {mod: len(path.read_text().splitlines()) for path, mod in _modules()}
    grown = {m: n for m, n in sizes.items() if n > OVER.get(m, MAX_LINES)}
    assert not grown, f"modules over their limit ({MAX_LINES} lines, or their entry in OVER): {grown}"
    stale = {m: n for m, n in OVER.items() if sizes.get(m, 0) <= MAX_LINES}
    assert not stale, f"now at most {MAX_LINES} lines: remove from OVER: {stale}"


def test_functions_stay_short():
    """No function (nor method, nor nested function) over MAX_FUNCTION_LINES lines, from its
    `def` line to its last line: a longer one is split into named helpers."""
    long = {}
    for path, mod in _modules():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                lines = node.end_lineno - node.lineno + 1
                if lines > MAX_FUNCTION_LINES:
                    long[f"{mod}.{node.name} (line {node.lineno})"] = lines
    assert not long, f"functions over {MAX_FUNCTION_LINES} lines: {long}"
