"""A run's life to its end, driven for real through the CLI on the CPU: the saved reports carry the
final status, a stopped `time` run keeps the samples it took, a timeout names the variant it
ended, a full disk still ends the manifest, and `report` reads a read-only folder.

The full disk and the read-only folder are real: a small tmpfs, and a read-only bind mount, each
in a private mount namespace of the test's own (`unshare --user --map-root-user --mount`), so
nothing is mounted on the machine and no root is needed."""

import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import REPO, run_cli, sigint_default

CPU = ["--device", "cpu", "--size", "1000"]

# a variant that takes 10 ms a call, then hangs from its HANG_AFTER-th call on (warm-up included);
# with IGNORE_TERM set it also ignores SIGTERM there, so only SIGKILL ends it
WORKLOADS = """
import os, signal, time
from workloads import Variant, Workload

calls = {"n": 0}

def hangs(a):
    calls["n"] += 1
    if calls["n"] >= int(os.environ.get("HANG_AFTER", "40")):
        if os.environ.get("IGNORE_TERM"):
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
        while True:
            time.sleep(1)
    time.sleep(0.01)
    return a * a

def fill_disk():
    with open(os.environ["FILL"], "wb", buffering=0) as fh:
        try:
            while True:
                fh.write(b"x" * 4096)
                fh.flush()
        except OSError:
            pass
        try:
            while True:
                fh.write(b"x")
                fh.flush()
        except OSError:
            pass

def slow(a):
    time.sleep(0.05)
    return a * a

sq = lambda x: x * x
both = lambda n, s: 2 * n * s
WORKLOADS = [
    Workload("hangs", "the second variant hangs", [Variant("fast", sq), Variant("stuck", hangs), Variant("after", sq)],
             reference=sq, bytes_moved=both, cpu_default_shape=(1000,)),
    Workload("fills", "the second variant fills the disk", [Variant("fast", sq), Variant("filler", sq, setup=fill_disk),
             Variant("after", sq)], reference=sq, bytes_moved=both, cpu_default_shape=(1000,)),
    Workload("slowsq", "a fast and a slow square", [Variant("fast", sq), Variant("slow", slow)],
             reference=sq, bytes_moved=both, cpu_default_shape=(1000,)),
]
"""


@pytest.fixture
def wfile(tmp_path):
    p = tmp_path / "lifecycle_workloads.py"
    p.write_text(WORKLOADS)
    return str(p)


def _json(path: Path):
    return json.loads(path.read_text())


def _rows(folder: Path) -> dict:
    return {r["variant"]: r for r in _json(folder / "report.json")["variants"]}


def _assert_reports_say(folder: Path, status: str) -> None:
    """report.md/.json/.html and manifest.json all carry `status`, and none says running."""
    assert _json(folder / "manifest.json")["status"] == status
    assert _json(folder / "report.json")["meta"]["status"] == status
    html = (folder / "report.html").read_text()
    assert f"<dt>status</dt><dd>{status}</dd>" in html and "<dd>running</dd>" not in html
    md = (folder / "report.md").read_text()
    assert "run running" not in md and "run running" not in html
    if status != "ok":
        assert f"run {status}" in md and f"run {status}" in html


def _private_mount(
    setup: str, argv: list[str], timeout: float = 120, env: dict | None = None
) -> subprocess.CompletedProcess:
    """Run `setup` (mount commands) then argv in a mount namespace of their own."""
    if (
        shutil.which("unshare") is None
        or subprocess.run(
            ["unshare", "--user", "--map-root-user", "--mount", "true"], capture_output=True
        ).returncode
        != 0
    ):
        pytest.skip("no private mount namespace here (unshare --user --mount)")
    script = f"set -e; {setup}; exec {shlex.join(argv)}"
    return subprocess.run(
        ["unshare", "--user", "--map-root-user", "--mount", "sh", "-c", script],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, "GPROF_NO_PROGRESS": "1", **(env or {})},
    )


def _run_clis(*argvs: list[str], timeout: float = 300) -> list[subprocess.CompletedProcess]:
    """run_cli for several independent runs (each its own -o folder) at once: real processes, as
    run_cli starts them, that need not wait for each other (most of a tiny run is its imports)."""
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "orchestrator", *argv],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for argv in argvs
    ]
    try:
        done = []
        for argv, p in zip(argvs, procs):
            out, err = p.communicate(timeout=timeout)
            done.append(subprocess.CompletedProcess(p.args, p.returncode, out, err))
        return done
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()


@pytest.fixture(scope="module")
def cli_runs(tmp_path_factory) -> dict:
    """Three runs through the CLI (real processes), started together and made once for this module:
    "ok" and "bad" (one variant fails), and "sweep" (two points). The tests that take them only read
    them (the read-only test proves `report` writes nothing). name -> (folder, CompletedProcess)."""
    root = tmp_path_factory.mktemp("lifecycle")
    argvs = {
        "ok": ["time", "square", *CPU, "--iters", "3", "--variants", "mul,pow"],
        "bad": ["time", "square", *CPU, "--iters", "3", "--variants", "mul,pow", "--fail-variant", "pow"],
        "sweep": [
            "time",
            "square",
            "--device",
            "cpu",
            "--size",
            "1000,2000",
            "--iters",
            "3",
            "--variants",
            "mul",
        ],
    }
    done = _run_clis(*([*argv, "-o", str(root / name)] for name, argv in argvs.items()))
    return {name: (root / name, res) for name, res in zip(argvs, done)}


@pytest.fixture
def cli_sweep(cli_runs) -> Path:
    sweep, res = cli_runs["sweep"]
    assert res.returncode == 0, res.stderr
    return sweep


# -- 1. the saved reports carry the final status --------------------------------------------------


def test_reports_of_an_ok_and_a_failed_run_carry_their_final_status(cli_runs):
    (ok, res), (bad, res_bad) = cli_runs["ok"], cli_runs["bad"]
    assert res.returncode == 0, res.stderr
    _assert_reports_say(ok, "ok")
    res = res_bad
    assert res.returncode == 1, res.stderr
    _assert_reports_say(bad, "failed")
    assert (
        "run failed: 1 variant(s) failed: pow: RuntimeError: injected failure"
        in (bad / "report.md").read_text()
    )
    assert _rows(bad)["mul"]["status"] == "ok" and _rows(bad)["pow"]["status"] == "failed"


def test_reports_of_sweep_and_all_parents_carry_their_final_status(tmp_path, cli_sweep):
    from orchestrator import profile_all
    from orchestrator.errors import RunFailedError

    sweep = cli_sweep
    _assert_reports_say(sweep, "ok")
    for child in ("1000-float32", "2000-float32"):
        _assert_reports_say(sweep / child, "ok")
    # `all` whose second backend fails: the parent says failed, each child its own status
    both = tmp_path / "all"
    with pytest.raises(RunFailedError):
        profile_all(
            "square",
            backends_=["time"],
            device="cpu",
            size="1000",
            iters=3,
            variants=["mul", "pow"],
            fail_variant="pow",
            out=both,
        )
    _assert_reports_say(both, "failed")
    assert "run failed: time: 1 variant(s) failed" in (both / "report.md").read_text()
    _assert_reports_say(both / "time", "failed")


# -- 2. a stopped `time` run keeps the samples of the variant it was timing -----------------------


def _measuring_slow(out: Path) -> bool:
    try:
        return any(
            v["name"] == "slow" and v["status"] == "measuring"
            for v in _json(out / "workload.json")["variants"]
        )
    except (OSError, ValueError):
        return False


@pytest.fixture(scope="module")
def stopped_runs(tmp_path_factory) -> dict:
    """The slowsq run started twice at once through the CLI, each stopped by its own signal 0.6 s
    after its slow variant started measuring (about a dozen 50 ms samples): the two runs need not
    wait for each other. signal -> (folder, exit code, stderr)."""
    root = tmp_path_factory.mktemp("stopped")
    wfile = root / "lifecycle_workloads.py"
    wfile.write_text(WORKLOADS)
    runs = {
        sig: (
            root / sig.name,
            subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "orchestrator",
                    "time",
                    "slowsq",
                    "--workload-file",
                    str(wfile),
                    "--device",
                    "cpu",
                    "--iters",
                    "2000",
                    "--warmup",
                    "1",
                    "-o",
                    str(root / sig.name),
                ],
                cwd=REPO,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                preexec_fn=sigint_default,
            ),
        )
        for sig in (signal.SIGINT, signal.SIGTERM)
    }
    try:
        t0, since, sent = time.monotonic(), {}, set()
        while len(sent) < len(runs):
            for sig, (out, p) in runs.items():
                now = time.monotonic()
                if sig not in since and _measuring_slow(out):
                    since[sig] = now
                assert sig in since or now - t0 < 60, f"{sig.name}: the slow variant never started"
                if sig not in sent and sig in since and now - since[sig] >= 0.6:
                    p.send_signal(sig)
                    sent.add(sig)
            time.sleep(0.05)
        stderr = {sig: p.communicate(timeout=60)[1] for sig, (_, p) in runs.items()}
        return {sig: (out, p.returncode, stderr[sig]) for sig, (out, p) in runs.items()}
    finally:
        for _, p in runs.values():
            if p.poll() is None:
                p.kill()
                p.wait()


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_stopped_time_run_keeps_the_samples_it_took(sig, stopped_runs):
    out, returncode, stderr = stopped_runs[sig]
    assert returncode == 130, stderr
    slow = next(v for v in _json(out / "workload.json")["variants"] if v["name"] == "slow")
    assert slow["status"] == "interrupted"
    n = len(slow["time_samples_ns"])
    assert 3 <= n < 2000 and len(slow["cpu_samples_ns"]) == n
    assert all(45e6 < s < 500e6 for s in slow["time_samples_ns"])  # each one a 50 ms sleep
    row = _rows(out)["slow"]
    assert row["status"] == "interrupted" and 45_000 < row["time_median_us"] < 500_000
    assert f"interrupted part-way: {n} of 2000 samples taken" in row["note"]
    # what the variant's own entry says of its time reaches the folder (it was set after the
    # last save), and its median its GB/s (2 x 1000 floats in 50 ms)
    assert slow["measure_s"] >= 0.5
    assert row["achieved_gb_s"] == pytest.approx(8000 / row["time_median_us"] / 1e3, rel=1e-3)
    assert _rows(out)["fast"]["status"] == "ok"
    _assert_reports_say(out, "interrupted")


def test_sigterm_stops_a_run_started_with_sigint_ignored(wfile, tmp_path):
    """A shell's background job (`gprof-orch time ... &`) starts with SIGINT ignored, and the
    runner inherited that: the parent's SIGINT to it did nothing, and a SIGTERM'd run went on
    to its last sample before exiting 130. The runner now takes SIGINT whatever it inherits."""
    out = tmp_path / "run"
    p = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "orchestrator",
            "time",
            "slowsq",
            "--workload-file",
            str(wfile),
            "--device",
            "cpu",
            "--iters",
            "2000",
            "--warmup",
            "1",
            "-o",
            str(out),
        ],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN),
    )
    try:
        t0 = time.monotonic()
        while not _measuring_slow(out):
            assert time.monotonic() - t0 < 60, "the slow variant never started"
            time.sleep(0.05)
        time.sleep(0.5)
        p.send_signal(signal.SIGTERM)
        _, stderr = p.communicate(timeout=30)  # 2000 samples of 50 ms would take 100 s
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert p.returncode == 130, stderr
    slow = next(v for v in _json(out / "workload.json")["variants"] if v["name"] == "slow")
    assert slow["status"] == "interrupted" and 3 <= len(slow["time_samples_ns"]) < 2000


# -- 3. a timeout names the variant it ended ------------------------------------------------------


def test_a_timeout_names_the_variant_and_keeps_its_samples(wfile, tmp_path):
    """The runner takes --timeout's SIGTERM: it keeps what it took and the variant is `timed out`."""
    out = tmp_path / "run"
    res = run_cli(
        "time",
        "hangs",
        "--workload-file",
        wfile,
        "--device",
        "cpu",
        "--iters",
        "100",
        "--warmup",
        "1",
        "--timeout",
        "8",
        "-o",
        str(out),
        env={"HANG_AFTER": "30"},
    )
    assert res.returncode == 124, res.stderr
    assert (
        "ran past the timeout of 8 s; its process group was ended; the workload was measuring variant "
        "stuck, marked timed out"
    ) in res.stderr
    wman = _json(out / "workload.json")
    status = {v["name"]: v["status"] for v in wman["variants"]}
    assert (
        status == {"fast": "ok", "stuck": "timed out", "after": "skipped"} and wman["status"] == "timed out"
    )
    stuck = next(v for v in wman["variants"] if v["name"] == "stuck")
    # calls 3..29: call 1 is the warm-up, call 2 the one whose memory is measured, 30 hangs
    assert len(stuck["time_samples_ns"]) == 27
    rows = _rows(out)
    assert rows["stuck"]["status"] == "timed out" and 9_000 < rows["stuck"]["time_median_us"] < 200_000
    assert rows["stuck"]["achieved_gb_s"] == pytest.approx(
        8000 / rows["stuck"]["time_median_us"] / 1e3, rel=1e-3
    )
    assert "timed out part-way: 27 of 100 samples taken" in rows["stuck"]["note"]
    assert (
        rows["after"]["status"] == "skipped"
        and rows["after"]["note"] == "not run: the run timed out before it"
    )
    _assert_reports_say(out, "failed")


def test_a_timeout_that_must_kill_keeps_the_samples_flushed_each_second(wfile, tmp_path, cli, monkeypatch):
    """The variant ignores SIGTERM, so the runner is SIGKILLed: the samples it wrote to
    workload.json during the variant (each second) are still there."""
    from orchestrator import proc

    monkeypatch.setattr(proc, "TERM_GRACE_S", 1.0)
    monkeypatch.setenv("HANG_AFTER", "150")  # 1.5 s of 10 ms samples before it hangs
    monkeypatch.setenv("IGNORE_TERM", "1")
    out = tmp_path / "run"
    res = cli(
        "time",
        "hangs",
        "--workload-file",
        wfile,
        "--device",
        "cpu",
        "--iters",
        "1000",
        "--warmup",
        "1",
        "--timeout",
        "9",
        "-o",
        str(out),
    )
    assert res.exit_code == 124, res.output
    assert "the workload was measuring variant stuck, marked timed out" in res.output
    stuck = next(v for v in _json(out / "workload.json")["variants"] if v["name"] == "stuck")
    n = len(stuck["time_samples_ns"])
    assert stuck["status"] == "timed out" and 40 <= n <= 148
    assert _rows(out)["stuck"]["status"] == "timed out"
    assert f"timed out part-way: {n} of 1000 samples taken" in _rows(out)["stuck"]["note"]


# -- 4. a full disk ends the manifest `failed`, with the reason -----------------------------------

FINISH_ON_A_FULL_DISK = """
import json, sys
from pathlib import Path
from orchestrator.errors import GprofError
from orchestrator.runfolder import RunFolder
root = Path(sys.argv[1])
rf = RunFolder.create("time", "square", out=root / "run", request={"size": "1000"}, argv=["gprof-orch"] * 20)
with open(root / "filler", "wb", buffering=0) as fh:   # fill the disk to the last byte
    for chunk in (4096, 1):
        try:
            while True:
                fh.write(b"x" * chunk); fh.flush()
        except OSError:
            pass
try:
    rf.update(wall_s=1.0)
    print("update wrote")
except GprofError as exc:
    print("update:", exc.message)
rf.finish("failed", "the run folder could not be written")
print("manifest:", json.loads((root / "run" / "manifest.json").read_text())["status"])
"""


def test_finish_ends_the_manifest_on_a_full_disk(tmp_path):
    mnt = tmp_path / "disk"
    mnt.mkdir()
    res = _private_mount(
        f"mount -t tmpfs -o size=64k tmpfs {mnt}", [sys.executable, "-c", FINISH_ON_A_FULL_DISK, str(mnt)]
    )
    assert res.returncode == 0, res.stderr
    assert f"update: cannot write the run folder {mnt}/run: No space left on device" in res.stdout
    assert "manifest: failed" in res.stdout


def test_a_full_disk_mid_run_ends_failed_with_the_reason(wfile, tmp_path):
    """A variant's set-up fills the disk: the runner cannot write workload.json, the parent
    cannot write the reports; the manifest still ends failed, with the reason, and exit 1."""
    mnt = tmp_path / "disk"
    mnt.mkdir()
    out, keep = mnt / "run", tmp_path / "seen"
    run = [
        sys.executable,
        "-m",
        "orchestrator",
        "time",
        "fills",
        "--workload-file",
        wfile,
        "--device",
        "cpu",
        "--iters",
        "5",
        "-o",
        str(out),
    ]
    # the tmpfs goes with the namespace: copy what the test reads out of it first
    res = _private_mount(
        f"mount -t tmpfs -o size=1m tmpfs {mnt}",
        ["sh", "-c", f"{shlex.join(run)}; rc=$?; mkdir {keep}; cp -r {out}/. {keep}/; exit $rc"],
        env={"FILL": str(mnt / "filler")},
    )
    assert res.returncode == 1, res.stderr
    assert f"cannot write the run folder {out}: No space left on device" in res.stderr
    assert "Traceback" not in res.stderr
    man = _json(keep / "manifest.json")
    assert man["status"] == "failed" and "No space left on device" in man["error"]
    # no half-written report left behind to mislead
    assert not any((keep / n).exists() for n in ("report.md", "report.json", "report.html", "frame.csv"))


# -- 6. `report` on a read-only folder -----------------------------------------------------------


def test_report_on_a_read_only_folder_writes_nothing(cli_sweep):
    sweep = cli_sweep
    before = {p: (p.stat().st_mtime_ns, p.read_bytes()) for p in sweep.rglob("*") if p.is_file()}
    for folder in (sweep / "1000-float32", sweep):
        res = _private_mount(
            f"mount --bind {sweep} {sweep}; mount -o remount,bind,ro {sweep}",
            [sys.executable, "-m", "orchestrator", "report", str(folder)],
        )
        assert res.returncode == 0, res.stderr
        assert "Traceback" not in res.stderr and "mul" in res.stdout
        assert f"gprof-orch: {folder} is read-only: its saved reports were not rewritten" in res.stderr
        assert "saved:" not in res.stderr
    after = {p: (p.stat().st_mtime_ns, p.read_bytes()) for p in sweep.rglob("*") if p.is_file()}
    assert after == before
