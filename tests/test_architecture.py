"""The house rules, checked on the source: the import contracts in pyproject.toml
([tool.importlinter]: every import arrow points down, from the parent (orchestrator/) through
reports/ to the child (workloads/), and inside orchestrator/ from the CLI through the library
calls, a run's life, the backends and the run folder to the readers; no circle between sibling
modules) hold, as `lint-imports` checks them; no module of the three packages is part of an
import circle, counting the imports inside functions; an import left inside a function says why;
and modules and functions stay a readable size. Size is counted in statements (the lines a
statement starts on), so the formatter's line breaks do not count: a module holds one concept, and
MAX_STATEMENTS is a guide for one, not a reason to split it; a function over
MAX_FUNCTION_STATEMENTS is split into named helpers."""

import ast
import os
import shutil
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


def _lint_imports(cwd: Path) -> subprocess.CompletedProcess:
    """`lint-imports` (import-linter's entry point) on the tree at `cwd`, its packages imported from there."""
    code = "import sys; from importlinter.cli import lint_imports_command; sys.exit(lint_imports_command())"
    env = {**os.environ, "PYTHONPATH": str(cwd)}
    return subprocess.run([sys.executable, "-c", code], cwd=cwd, env=env, capture_output=True, text=True)


def test_the_import_contracts_hold():
    r = _lint_imports(ROOT)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "6 kept, 0 broken" in r.stdout


def test_an_import_back_up_breaks_a_contract(tmp_path):
    """The contracts can fail: in a copy of the tree, the child importing the parent's API."""
    for name in (*PACKAGES, "pyproject.toml"):
        src = ROOT / name
        if src.is_dir():
            shutil.copytree(src, tmp_path / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy(src, tmp_path / name)
    stopping = tmp_path / "workloads" / "stopping.py"
    stopping.write_text(stopping.read_text() + "\nfrom orchestrator import api  # noqa: E402, F401\n")
    r = _lint_imports(tmp_path)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "workloads.stopping -> orchestrator.api" in r.stdout
    assert "Every arrow points down" in r.stdout and "The child (workloads" in r.stdout
    assert "3 kept, 3 broken" in r.stdout


def _module_imports(path: Path, module: str) -> list[tuple[ast.stmt, list[str], bool]]:
    """Each import of a project module in `path`: (the statement, the modules it names, whether it
    sits inside a function). Those under `if TYPE_CHECKING:` (annotations only) are left out."""
    out = []

    def visit(node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
                continue
            inner = in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef))
            if isinstance(child, ast.Import):
                names = [a.name for a in child.names]
            elif isinstance(child, ast.ImportFrom) and child.module and child.level == 0:
                names = [f"{child.module}.{a.name}" for a in child.names]
            else:
                visit(child, inner)
                continue
            targets = {_resolve(n) for n in names} - {None, module}
            if targets:
                out.append((child, sorted(targets), inner))

    visit(ast.parse(path.read_text()), False)
    return out


MODULES = {mod: path for path, mod in _modules()}


def _resolve(name: str) -> str | None:
    """The project module an imported name lives in (`orchestrator.api.profile` -> `orchestrator.api`):
    `from orchestrator import api` names the module orchestrator.api, `from orchestrator.api import
    profile` names it too."""
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component: list[str] = []
            while not component or component[-1] != v:
                component.append(stack.pop())
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_no_module_is_part_of_an_import_circle():
    """Module by module, an import inside a function counting as one at the top."""
    graph = {mod: {t for _, ts, _ in _module_imports(p, mod) for t in ts} for mod, p in MODULES.items()}
    assert _circles(graph) == []
    assert _circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_an_import_inside_a_function_says_why():
    """A project import is made at the top of its module unless it is costly (it brings torch,
    pandas, matplotlib... where the importer must stay free of them) or would run too early: the
    comment above it says which."""
    silent = []
    for mod, path in MODULES.items():
        lines = path.read_text().splitlines()
        for stmt, _, in_function in _module_imports(path, mod):
            above = (x.strip() for x in reversed(lines[: stmt.lineno - 1]))
            comment = next((x for x in above if not x.startswith(("from ", "import "))), "")
            if in_function and not comment.startswith("#"):
                silent.append(f"{mod}:{stmt.lineno}")
    assert not silent, "imports inside a function with no comment above them saying why: " + ", ".join(silent)


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


def _calls(attr: str, owner: str | None = None) -> set[str]:
    """The modules that call `owner.attr` (or a bare `attr` when owner is None)."""
    found = set()
    for path, mod in _modules():
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.Call):
                continue
            f = node.func
            if owner is None and isinstance(f, ast.Name) and f.id == attr:
                found.add(mod)
            elif (
                owner
                and isinstance(f, ast.Attribute)
                and f.attr == attr
                and getattr(f.value, "id", None) == owner
            ):
                found.add(mod)
    return found


def test_every_run_is_created_and_run_by_execution():
    """One lifecycle: a run's folder, a workload's or a capture's (`exec`, `import`), is created
    and its step run by execution.execute, and concluded by execution.conclude, both through
    execution.run_request (every run's report is its backend's hook, Backend.report); api only
    creates the parents (all, a sweep, --each-gpu)."""
    assert _calls("create", "RunFolder") == {"orchestrator.execution", "orchestrator.api"}
    assert _calls("run_step") == {"orchestrator.execution"}
    assert _calls("execute") == {"orchestrator.execution"}
    assert _calls("conclude") == {"orchestrator.execution"}
    assert {"orchestrator.api", "orchestrator.capture", "orchestrator.capture_ncu"} <= _calls("run_request")


def test_one_request_family_and_the_report_a_backend_hook():
    """One pipeline for every run: a workload run's Request and a capture's ProgramRequest are
    both BaseRequests (the fields every run has, declared once); a run's report is its backend's
    hook (Backend.report, the workload run's by default, the capture report where the program
    backends override it), not a callable its Launch carries; and the program backends' hooks
    take the shared request, with no override the types would refuse."""
    from dataclasses import fields

    from orchestrator import backends
    from orchestrator.backends.base import Backend
    from orchestrator.base_request import BaseRequest
    from orchestrator.capture_request import ProgramRequest
    from orchestrator.execution import Launch
    from orchestrator.request import Request

    shared = ["backend", "iters", "timeout", "out", "root", "options"]
    assert [f.name for f in fields(BaseRequest)] == shared
    for cls in (Request, ProgramRequest):
        assert issubclass(cls, BaseRequest)
        assert [f.name for f in fields(cls)][: len(shared)] == shared
    assert [f.name for f in fields(Launch)] == ["backend", "workload", "tools", "step", "facts"]
    own = {n: backends.backend_class(n).report is not Backend.report for n in backends.BACKENDS}
    assert own == {n: n in ("program", "program-ncu") for n in backends.BACKENDS}
    ignored = [
        f"{p.name}:{i}"
        for p in sorted((ROOT / "orchestrator" / "backends").glob("*.py"))
        for i, line in enumerate(p.read_text().splitlines(), 1)
        if "type: ignore[override]" in line
    ]
    assert ignored == []
