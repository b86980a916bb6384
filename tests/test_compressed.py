"""Compressed raw files (.xz, .gz) are read where they lie, and rebuilding a committed fixture
in place leaves nothing untracked behind."""

import gzip
import lzma
import shutil
import subprocess
from pathlib import Path

import pytest

from orchestrator import load_run
from orchestrator.errors import ParseError
from orchestrator.parsers import compressed

REPO = Path(__file__).resolve().parent.parent
RUNS = REPO / "tests" / "fixtures" / "runs"


def _git_status() -> list[str]:
    res = subprocess.run(
        ["git", "status", "--porcelain", "--untracked-files=all", "--", str(RUNS)],
        cwd=REPO,
        capture_output=True,
        text=True,
    )
    if res.returncode != 0:
        pytest.skip(f"not a git checkout: {res.stderr.strip()}")
    return sorted(res.stdout.splitlines())


def test_report_on_every_committed_fixture_leaves_nothing_untracked(cli):
    """`gprof-orch report` on each committed run folder, in place: .xz raw files are read as
    they are (decompressed outside the folder) and what it writes is ignored by git."""
    folders = sorted({p.parent for p in RUNS.glob("*/*/manifest.json")})
    assert len(folders) >= 15
    from orchestrator.runfolder import REPORT_FILES

    before = _git_status()
    had = {p for n in REPORT_FILES for p in RUNS.rglob(n)}
    try:
        _report_each(cli, folders)
    finally:  # ignored by git, but later tests copy these folders (children's too)
        for p in {p for n in REPORT_FILES for p in RUNS.rglob(n)} - had:
            p.unlink()
    assert _git_status() == before
    assert not list(RUNS.rglob("report.ncu-rep")) and not [
        p for p in RUNS.rglob("report.sqlite") if p.with_name("report.sqlite.xz").exists()
    ]


def _report_each(cli, folders) -> None:
    for folder in folders:
        res = cli("report", str(folder))
        status = __import__("json").loads((folder / "manifest.json").read_text())["status"]
        # as the run did; a capture whose nsys said it lost events is incomplete whatever its status
        lost = folder.relative_to(RUNS).as_posix() == "h200-programs/exec-train"
        assert res.exit_code == (6 if lost else {"ok": 0, "interrupted": 130}[status]), (folder, res.output)


@pytest.mark.parametrize("suffix, pack", [(".xz", lzma.compress), (".gz", gzip.compress)])
def test_trace_json_compressed_gives_the_same_table(suffix, pack, h200_run):
    plain = h200_run("torch-trace-mean")
    packed = plain.parent / "packed"
    shutil.copytree(plain, packed)
    trace = packed / "trace.json"
    trace.with_name("trace.json" + suffix).write_bytes(pack(trace.read_bytes()))
    trace.unlink()
    assert load_run(packed).table.equals(load_run(plain).table)


def test_sqlite_gz_is_read(h200_run, tmp_path):
    from orchestrator.parsers import nsys as ns

    plain = h200_run("nsys-mean") / "report.sqlite"
    gz = tmp_path / "report.sqlite.gz"
    gz.write_bytes(gzip.compress(plain.read_bytes()))
    ex = ns.read_export(gz)
    assert ex.path == gz and ex.kernels.equals(ns.read_export(plain).kernels)


def test_a_cut_xz_is_a_parse_error_naming_it(tmp_path):
    src = RUNS / "h200" / "ncu-triton-mean" / "report.ncu-rep.xz"
    cut = tmp_path / "report.ncu-rep.xz"
    cut.write_bytes(src.read_bytes()[:5000])
    with pytest.raises(ParseError) as e:
        with compressed.plain_file(cut):
            pass
    assert str(cut) in e.value.message and "cut short" in e.value.reason


def test_an_error_about_the_temporary_copy_names_the_archive(tmp_path):
    xz = tmp_path / "report.sqlite.xz"
    xz.write_bytes(lzma.compress(b"not sqlite at all" * 10))
    from orchestrator.parsers import nsys as ns

    with pytest.raises(ParseError) as e:
        ns.read_export(xz)
    assert e.value.path == xz and "not an SQLite file" in e.value.message
    assert not list(Path(tmp_path).glob("report.sqlite"))
