#!/usr/bin/env python3
"""Drive each fault a profiling run can meet, for real, on this machine (CPU is enough), and
print what gprof-orch said: a Markdown table of fault, exit code, first line of the message.

    python scripts/fault_matrix.py [--only SUBSTRING]

The stand-in nsys/ncu executables fail the ways the real ones do (their words are the tools'
own, the AnalysisFailed one is nsys's stderr captured on the H200). tests/test_faults.py and
tests/test_hardening.py assert the same behaviour; this script is for reading it in one place.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
CPU = ["--device", "cpu", "--size", "1000", "--iters", "2"]

FAKE = """#!{python}
import subprocess, sys, time
args = sys.argv[1:]
if args[:1] == ["--version"]:
    print("NVIDIA (R) {tool} version 2025.3.1.0 (stand-in)"); sys.exit(0)
sys.stderr.write({text!r})
if {hang}:
    time.sleep(600)
if {run}:
    i = next(i for i, a in enumerate(args) if "python" in a.rsplit("/", 1)[-1])
    subprocess.run(args[i:])
sys.exit({code})
"""


def fake(tmp: Path, tool: str, text: str = "", code: int = 1, run: bool = False, hang: bool = False) -> str:
    d = tmp / f"bin-{abs(hash((tool, text, code, run, hang)))}"
    d.mkdir(exist_ok=True)
    exe = d / tool
    exe.write_text(FAKE.format(python=sys.executable, tool=tool, text=text, code=code, run=run, hang=hang))
    exe.chmod(0o755)
    return str(exe)


def cli(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "orchestrator", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        env={**os.environ, "GPROF_NO_PROGRESS": "1", **(env or {})},
        timeout=600,
    )


def interrupted(args: list[str], out: Path, sig: int) -> subprocess.CompletedProcess:
    """Start a run, send `sig` once its first variant is measured."""
    p = subprocess.Popen(
        [sys.executable, "-m", "orchestrator", *args, "-o", str(out)],
        cwd=REPO,
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    for _ in range(1800):
        try:
            if any(v["status"] == "ok" for v in json.loads((out / "workload.json").read_text())["variants"]):
                break
        except (OSError, ValueError, KeyError):
            pass
        time.sleep(0.1)
    time.sleep(0.5)
    p.send_signal(sig)
    stdout, stderr = p.communicate(timeout=300)
    return subprocess.CompletedProcess(p.args, p.returncode, stdout, stderr)


def file_size_limited(args: list[str], kib: int) -> subprocess.CompletedProcess:
    """A run whose files may not grow past `kib` KiB (`ulimit -f`; SIGXFSZ ignored, so a write
    past it fails with EFBIG as a write to a full disk fails with ENOSPC)."""
    import shlex

    argv = shlex.join([sys.executable, "-m", "orchestrator", *args])
    return subprocess.run(
        ["bash", "-c", f"ulimit -f {kib}; trap '' XFSZ; exec {argv}"],
        cwd=REPO,
        capture_output=True,
        text=True,
        env={**os.environ, "GPROF_NO_PROGRESS": "1"},
        timeout=600,
    )


def cases(tmp: Path):
    slow = REPO / "tests/fixtures/workloads/faults.py"
    wf = ["--workload-file", str(slow)]
    o = lambda name: ["-o", str(tmp / name)]  # noqa: E731
    h200 = REPO / "tests/fixtures/runs/h200"

    def copy(name: str) -> Path:
        import shutil

        dest = tmp / f"copy-{name}"
        shutil.copytree(h200 / name, dest)
        return dest

    yield "unknown workload", lambda: cli("time", "nosuch", *CPU)
    yield "unknown variant", lambda: cli("time", "square", "-v", "nope", *CPU)
    yield "bad size", lambda: cli("time", "square", "--device", "cpu", "--size", "12abc")
    yield (
        "size too large for the device",
        lambda: cli("time", "square", "--device", "cpu", "--size", "100000x100000x100000", *o("big")),
    )
    yield "nsys not found", lambda: cli("nsys", "square", *CPU, env={"GPROF_NSYS": str(tmp / "none")})
    yield "ncu not found", lambda: cli("ncu", "square", *CPU, "--ncu", str(tmp / "none"))
    yield (
        "ncu: counters restricted (ERR_NVGPUCTRPERM)",
        lambda: cli(
            "ncu",
            "square",
            *CPU,
            *o("perm"),
            "--ncu",
            fake(
                tmp,
                "ncu",
                "==ERROR== ERR_NVGPUCTRPERM - The user does not have permission to access NVIDIA GPU "
                "Performance Counters on the target device 0.\n",
            ),
        ),
    )
    yield (
        "ncu: unknown metric",
        lambda: cli(
            "ncu",
            "square",
            *CPU,
            *o("metric"),
            "--metrics",
            "dram__nope",
            "--ncu",
            fake(tmp, "ncu", "==ERROR== Failed to find metric regex:^dram__nope$\n"),
        ),
    )
    yield (
        "ncu: no kernel profiled",
        lambda: cli(
            "ncu",
            "mean",
            *CPU,
            *o("nokernel"),
            "--ncu",
            fake(tmp, "ncu", "==WARNING== No kernels were profiled.\n", code=0, run=True),
        ),
    )
    yield (
        "nsys exits non-zero, writes no report",
        lambda: cli(
            "nsys",
            "square",
            *CPU,
            *o("noreport"),
            "--nsys",
            fake(
                tmp,
                "nsys",
                "Importer error status: An unknown error occurred.\nNo reports were generated\n",
                code=0,
            ),
        ),
    )
    yield (
        "nsys: AnalysisFailed (H200 stderr)",
        lambda: cli(
            "nsys",
            "square",
            *CPU,
            *o("analysis"),
            "--nsys",
            fake(
                tmp,
                "nsys",
                (REPO / "tests/fixtures/nsys/h200-analysis-failed.stderr.log").read_text(),
                run=True,
            ),
        ),
    )
    yield (
        "nsys hangs (--timeout 3)",
        lambda: cli(
            "nsys", "square", *CPU, *o("hang"), "--timeout", "3", "--nsys", fake(tmp, "nsys", hang=True)
        ),
    )
    yield (
        "workload never finishes (--timeout 2)",
        lambda: cli(
            "time", "slowsq", *wf, "--device", "cpu", "--iters", "1000", "--timeout", "2", *o("slow")
        ),
    )
    yield (
        "a variant raises MemoryError",
        lambda: cli("time", "oom", *wf, "--device", "cpu", "--iters", "5", *o("oom")),
    )
    yield (
        "the runner crashes (input cannot be made)",
        lambda: cli("time", "badinput", *wf, "--device", "cpu", *o("crash")),
    )
    yield (
        "SIGINT mid-run (time)",
        lambda: interrupted(
            ["time", "slowsq", *wf, "--device", "cpu", "--iters", "2000"], tmp / "int", signal.SIGINT
        ),
    )
    yield (
        "SIGTERM mid-run (time)",
        lambda: interrupted(
            ["time", "slowsq", *wf, "--device", "cpu", "--iters", "2000"], tmp / "term", signal.SIGTERM
        ),
    )
    yield (
        "SIGINT mid-run (nsys, real)",
        lambda: interrupted(
            ["nsys", "slowsq", *wf, "--device", "cpu", "--iters", "2000"], tmp / "nsys-int", signal.SIGINT
        ),
    )
    yield (
        "full folder (ulimit -f 16): the runner cannot save workload.json",
        lambda: file_size_limited(
            ["time", "square", "--device", "cpu", "--size", "1000", "--iters", "5000", *o("fsize")], 16
        ),
    )
    yield "full folder (ulimit -f 16): report of that folder", lambda: cli("report", str(tmp / "fsize"))
    yield "unwritable --out", lambda: cli("time", "square", *CPU, "-o", "/proc/version/run")
    busy = tmp / "busy"
    busy.mkdir()
    (busy / "x").write_text("x")
    yield "--out not empty", lambda: cli("time", "square", *CPU, "-o", str(busy))
    yield "report: no such folder", lambda: cli("report", str(tmp / "missing"))
    yield (
        "report: empty manifest",
        lambda: (lambda p: ((p / "manifest.json").write_text(""), cli("report", str(p)))[1])(
            copy("time-mean")
        ),
    )
    yield (
        "report: newer schema",
        lambda: (
            lambda p: (
                (p / "manifest.json").write_text(
                    json.dumps({**json.loads((p / "manifest.json").read_text()), "schema_version": 99})
                ),
                cli("report", str(p)),
            )[1]
        )(copy("time-square")),
    )
    yield (
        "report: path outside the folder",
        lambda: (
            lambda p: (
                (p / "workload.json").write_text(
                    json.dumps(
                        {**json.loads((p / "workload.json").read_text()), "trace": "../../../../etc/passwd"}
                    )
                ),
                cli("report", str(p)),
            )[1]
        )(copy("torch-trace-mean")),
    )
    yield (
        "report: truncated nsys SQLite",
        lambda: (
            lambda p: (
                (p / "report.sqlite").write_bytes((p / "report.sqlite").read_bytes()[:200_000]),
                cli("report", str(p)),
            )[1]
        )(copy("nsys-mean")),
    )


def first_line(res: subprocess.CompletedProcess) -> str:
    lines = [ln for ln in res.stderr.splitlines() if ln.startswith("gprof-orch:")]
    line = lines[0] if lines else (res.stderr.strip().splitlines() or ["(no message)"])[0]
    if "Traceback" in res.stderr:
        line += " [TRACEBACK]"
    return line.replace("|", "\\|")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", default="", help="run the faults whose name contains this")
    args = ap.parse_args()
    print("| fault | exit | message |\n| --- | --- | --- |")
    with tempfile.TemporaryDirectory() as tmp:
        for name, run in cases(Path(tmp)):
            if args.only and args.only not in name:
                continue
            res = run()
            print(f"| {name} | {res.returncode} | {first_line(res)} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
