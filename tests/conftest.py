import json
import os
import shutil
import signal
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
FIXTURES = Path(__file__).resolve().parent / "fixtures"


def _cuda() -> bool:
    try:
        import torch

        return torch.cuda.is_available()
    except ImportError:
        return False


HAS_CUDA = _cuda()
# Triton runs on the CPU only through its interpreter; it must be set before triton is imported
if not HAS_CUDA:
    os.environ.setdefault("TRITON_INTERPRET", "1")


def pytest_collection_modifyitems(config, items):
    skip_gpu = pytest.mark.skip(reason="needs a CUDA GPU")
    for item in items:
        if "gpu" in item.keywords and not HAS_CUDA:
            item.add_marker(skip_gpu)


@pytest.fixture
def fixtures() -> Path:
    return FIXTURES


@pytest.fixture
def cli():
    """Invoke the click CLI in-process; returns a function (args) -> Result."""
    from click.testing import CliRunner

    from orchestrator.cli import main

    runner = CliRunner()

    def invoke(*args: str, **kw):
        return runner.invoke(main, list(args), catch_exceptions=False, **kw)

    return invoke


def run_cli(*args: str, cwd: Path | None = None, timeout: float = 300, env: dict | None = None):
    """Run `python -m orchestrator ...` as a real process (for exit codes, signals, imports)."""
    import subprocess

    full_env = dict(os.environ)
    full_env.update(env or {})
    argv = [sys.executable, "-m", "orchestrator", *args]
    res = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=timeout, env=full_env)
    from orchestrator.backends.nsys import AGENT_LOST

    if AGENT_LOST in res.stderr:  # nsys's own transient failure (a loaded CI machine): once more, afresh
        for flag in ("--out", "-o"):
            if flag in args and args.index(flag) + 1 < len(args):
                shutil.rmtree(Path(cwd or ".") / args[args.index(flag) + 1], ignore_errors=True)
        res = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=timeout, env=full_env)
    return res


def report_rows(folder: Path) -> dict[str, dict]:
    """A run folder's report.json rows, by variant."""
    return {r["variant"]: r for r in json.loads((folder / "report.json").read_text())["variants"]}


@pytest.fixture
def h200_run(tmp_path):
    """Copy a committed H200 run folder (tests/fixtures/runs/h200/NAME; runs/h200-faults/NAME
    for the runs that went wrong on purpose) to a temporary place, unpacking its .xz files, so
    load_run can rebuild its report there."""
    import lzma

    def copy(name: str, group: str = "h200") -> Path:
        src = FIXTURES / "runs" / group / name
        dest = tmp_path / name
        shutil.copytree(src, dest)
        for xz in dest.rglob("*.xz"):
            xz.with_suffix("").write_bytes(lzma.decompress(xz.read_bytes()))
            xz.unlink()
        return dest

    return copy


def sigint_default() -> None:
    """A Popen preexec_fn: SIGINT back to its default in the child, so Python turns it into
    KeyboardInterrupt. A shell starts background jobs with SIGINT ignored (a CI script run with
    `&`), Python keeps an ignored SIGINT ignored, and a test that sends one would wait in vain."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def unpack_run(name: str, dest: Path, group: str = "h200") -> Path:
    """Copy the committed run folder tests/fixtures/runs/GROUP/NAME to dest/NAME, unpacking its
    .xz files (what the h200_run fixture does, for module-scoped fixtures that load a folder once)."""
    import lzma

    folder = Path(dest) / name
    shutil.copytree(FIXTURES / "runs" / group / name, folder)
    for xz in folder.rglob("*.xz"):
        xz.with_suffix("").write_bytes(lzma.decompress(xz.read_bytes()))
        xz.unlink()
    return folder
