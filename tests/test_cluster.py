"""Scale-out on Dask (--cluster), on real clusters, on the CPU: a LocalCluster of 2 worker
processes, and a `dask scheduler` with two `dask worker --resources GPU=1` processes started here.
Points are tiny `time` runs; most of each point's few seconds is the child's torch import.

Every process the tests start is found through the PIDs they started (their descendants, their
process groups), never by searching the machine's process list: other people run things here."""

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

pytest.importorskip("distributed")
psutil = pytest.importorskip("psutil")

from conftest import REPO, run_cli, sigint_default  # noqa: E402

POINT = dict(backend="time", device="cpu", variants=["mul"], iters=3, warmup=0)
CPU = ["--device", "cpu", "--variants", "mul", "--iters", "3", "--warmup", "0"]
ENV = {"GPROF_NO_PROGRESS": "1"}


def _json(path: Path):
    return json.loads(path.read_text())


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _gone(pids, timeout: float = 15) -> list[int]:
    """The PIDs of `pids` still alive (not a zombie) after at most `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        alive = []
        for p in pids:
            try:
                if p.is_running() and p.status() != psutil.STATUS_ZOMBIE:
                    alive.append(p.pid)
            except psutil.NoSuchProcess:
                pass
        if not alive or time.monotonic() > deadline:
            return alive
        time.sleep(0.2)


def _measuring(runner: "psutil.Process") -> bool:
    """Whether a workload runner is measuring a variant (its workload.json, in its --out, says so)."""
    try:
        argv = runner.cmdline()
        wman = _json(Path(argv[argv.index("--out") + 1]) / "workload.json")
    except (psutil.NoSuchProcess, ValueError, IndexError, OSError):
        return False
    return any(v.get("status") == "measuring" for v in wman.get("variants", []))


def _runners(proc: "psutil.Process") -> list:
    """The workload runners (`python -m workloads run`) below a process."""
    out = []
    for p in proc.children(recursive=True):
        try:
            if "workloads" in p.cmdline() and "run" in p.cmdline():
                out.append(p)
        except psutil.NoSuchProcess:
            pass
    return out


# -- a scheduler and two workers of our own, as a user would start them --------------------------


@pytest.fixture(scope="module")
def dask_cluster(tmp_path_factory):
    """`dask scheduler` and two `dask worker ... --resources GPU=1` (w0, w1), each in a process group
    of its own, ended in the finalizer. allowed-failures 0: a lost worker reaches the client at
    once, which resubmits the point (and counts it)."""
    from distributed import Client

    d = tmp_path_factory.mktemp("dask")
    port = _free_port()
    addr = f"tcp://127.0.0.1:{port}"
    env = {**os.environ, "DASK_DISTRIBUTED__SCHEDULER__ALLOWED_FAILURES": "0", **ENV}
    procs = []

    def start(*args: str, log: str) -> None:
        with open(d / log, "wb") as fh:
            procs.append(
                subprocess.Popen(
                    [sys.executable, "-m", "dask", *args],
                    stdout=fh,
                    stderr=fh,
                    env=env,
                    cwd=REPO,
                    start_new_session=True,
                )
            )

    start(
        "scheduler",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--no-dashboard",
        "--scheduler-file",
        str(d / "scheduler.json"),
        log="scheduler.log",
    )
    for name in ("w0", "w1"):
        start(
            "worker",
            addr,
            "--resources",
            "GPU=1",
            "--nworkers",
            "1",
            "--nthreads",
            "1",
            "--name",
            name,
            "--no-dashboard",
            "--local-directory",
            str(d / name),
            log=f"{name}.log",
        )
    try:
        with Client(addr, timeout=30) as client:
            client.wait_for_workers(2, timeout=60)
        yield {"address": addr, "scheduler_file": d / "scheduler.json", "dir": d}
    finally:
        for p in procs:
            os.killpg(p.pid, signal.SIGTERM)
        for p in procs:
            try:
                p.wait(timeout=15)
            except subprocess.TimeoutExpired:
                pass
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def _two_workers(addr: str):
    """A client on the test's scheduler, once both workers are there (one may be restarting)."""
    from distributed import Client

    client = Client(addr, timeout=30)
    client.wait_for_workers(2, timeout=60)
    return client


# -- 1. a LocalCluster of 2 worker processes, in the serial run's format --------------------------


def test_a_local_cluster_sweep_uses_both_workers_in_the_serial_format(tmp_path, h200_run, cli):
    from orchestrator import load_run, sweep

    # two points a worker: each worker holds one GPU=1 task at a time, so both take points
    sizes = ["1000", "2000", "3000", "4000"]
    out = tmp_path / "sweep"
    multi = sweep(
        "square",
        "time",
        sizes,
        [],
        cluster="local:2",
        out=out,
        **{k: v for k, v in POINT.items() if k != "backend"},
    )
    names = [f"{s}-float32" for s in sizes]
    assert multi.status == "ok" and list(multi.runs) == names
    man = _json(out / "manifest.json")
    assert list(man["children"]) == names and man["kind"] == "sweep" and man["cluster"]["spec"] == "local:2"
    used = {c["placement"]["worker"] for c in man["children"].values()}
    assert used == set(man["cluster"]["workers"]) and len(used) == 2
    for name in names:
        child = _json(out / name / "manifest.json")
        assert child["status"] == "ok" and child["placement"]["worker"] in used
        assert child["placement"]["attempts"] == 1 and child["placement"]["gpu_uuid"] is None
        assert child["placement"]["pid"] != os.getpid()
        # the child's reports were rebuilt here: their titles name this folder, not the worker's
        assert str(out / name) in (out / name / "report.md").read_text()
    # the serial run's format: a committed serial sweep, rebuilt by this code, has the same columns
    # and its children the same files
    serial = load_run(h200_run("sweep-triton-mean"), write=True)
    again = load_run(out, write=True)
    assert list(again.table.columns) == list(serial.table.columns)
    assert sorted(again.table["numel"].unique()) == [int(s) for s in sizes]
    for kept in ("report.csv", "report.json", "report.md", "report.html", "frame.csv"):
        assert (out / kept).is_file()
    serial_child = {p.name for p in (serial.path / "1000000-float32").iterdir()}
    # spec.json: the runner's resolved spec, which runs write since the runner resolves it (the committed one predates it)
    assert {p.name for p in (out / "1000-float32").iterdir()} == serial_child | {"spec.json"}
    res = cli("report", str(out), "--json")
    assert res.exit_code == 0, res.output
    assert {r["numel"] for r in json.loads(res.output)["variants"]} == {int(s) for s in sizes}


def test_a_worker_leaves_the_reports_to_the_client(tmp_path, monkeypatch):
    """A point run as a worker runs it (execution.execute_point) ends with its status and every raw
    file, and no report: the client builds it where the folder lands (it was built on the worker
    too, then written twice, the worker's titles naming its temporary folder)."""
    from orchestrator import api, execution, load_run
    from orchestrator.cluster import Point

    opts = {k: v for k, v in POINT.items() if k != "backend"}
    point = Point("1000-float32", "square", "time", {**opts, "size": "1000"})

    def no_report(*a, **k):
        raise AssertionError("the worker built a report: the client builds it again where the folder lands")

    with monkeypatch.context() as m:
        m.setattr("orchestrator.results.build_report", no_report)
        rf = execution.execute_point(point, tmp_path / "p")
    files = {p.name for p in (tmp_path / "p").iterdir()}
    assert rf.manifest["status"] == "ok" and _json(tmp_path / "p" / "manifest.json")["status"] == "ok"
    assert {"manifest.json", "workload.json"} <= files and not {f for f in files if f.startswith("report.")}
    again = load_run(tmp_path / "p", write=True)
    serial = api.run_point(point, tmp_path / "s")
    assert (tmp_path / "p" / "report.md").is_file() and list(again.table["variant"]) == list(
        serial.table["variant"]
    )


WORKER_IMPORTS = """
import sys
from pathlib import Path
from orchestrator import backends, execution
from orchestrator.cluster import Point
for name in ("time", "nsys", "torch-trace", "proton"):
    backends.get(name)
rf = execution.execute_point(Point("p", "square", "time", {"device": "cpu", "size": "1000", "variants": ["mul"],
                                                           "iters": 3, "warmup": 0}), Path(sys.argv[1]))
print(rf.manifest["status"], sorted(m for m in ("pandas", "numpy", "matplotlib") if m in sys.modules))
"""


def test_a_worker_runs_a_point_without_pandas(tmp_path):
    """A worker imports the backend and runs the point; the report, and so pandas (0.35 s of CPU
    per worker, on the critical path of a 2-core cluster), are the client's. The ncu backend's
    module still brings pandas through its report reader."""
    res = subprocess.run(
        [sys.executable, "-c", WORKER_IMPORTS, str(tmp_path / "p")],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=120,
    )
    assert res.returncode == 0, res.stderr
    assert res.stdout.split() == ["ok", "[]"], res.stdout


DRAWN_AHEAD = """
import sys
from pathlib import Path
if __name__ == "__main__":
    from reports import html
    draws = []
    draw = html._section_html
    html._section_html = lambda *a, **k: draws.append(a[0]) or draw(*a, **k)
    from orchestrator import api, load_run
    finish, at_finish = api._finish_children, []
    api._finish_children = lambda *a, **k: at_finish.append(len(draws)) or finish(*a, **k)
    out = Path(sys.argv[1])
    api.sweep("square", "time", ["1000", "1001", "1002"], ["float32"], device="cpu", variants=["mul", "pow"], iters=3,
              warmup=0, out=str(out), cluster="local:2")
    page, n = (out / "report.html").read_text(), len(draws)
    load_run(out, write=True)  # the page drawn again from scratch, as `gprof-orch report` does
    print(at_finish[0], n, (out / "report.html").read_text() == page)
"""


def test_the_client_draws_each_points_section_as_it_lands(tmp_path):
    """The parent page's charts are drawn while the other points run, not all after the last one:
    3 points, 6 sections drawn before the parent's page is written (each point's own page, and its
    section of the parent's); that page then draws none, and is the very page `report` draws from
    scratch."""
    res = subprocess.run(
        [sys.executable, "-c", DRAWN_AHEAD, str(tmp_path / "s")],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=300,
        env={**os.environ, **ENV},
    )
    assert res.returncode == 0, res.stderr[-3000:]
    assert res.stdout.split() == ["6", "6", "True"], res.stdout


# -- 2. a scheduler of the user's: its address, its scheduler file ---------------------------------


def test_the_tcp_address_runs_the_point_on_each_gpu_worker(dask_cluster, tmp_path):
    out = tmp_path / "each"
    res = run_cli(
        "time",
        "square",
        *CPU,
        "--size",
        "1000",
        "--cluster",
        dask_cluster["address"],
        "--each-gpu",
        "-o",
        str(out),
        env=ENV,
    )
    assert res.returncode == 0, res.stderr
    man = _json(out / "manifest.json")
    assert man["kind"] == "each-gpu" and man["status"] == "ok"
    assert set(man["children"]) == {"w0", "w1"}
    for name in ("w0", "w1"):
        place = _json(out / name / "manifest.json")["placement"]
        assert man["cluster"]["workers"][place["worker"]]["name"] == name
    # one block of rows per worker's GPU, each median against the median of the GPUs' medians
    rows = _json(out / "report.json")["variants"]
    assert [(r["run"], r["variant"]) for r in rows] == [
        ("w0", "torch_square"),
        ("w0", "mul"),
        ("w1", "torch_square"),
        ("w1", "mul"),
    ]
    for r in rows:
        pair = [o["time_median_us"] for o in rows if o["variant"] == r["variant"]]
        assert r["change_pct"] == pytest.approx((r["time_median_us"] / (sum(pair) / 2) - 1) * 100)
        assert r["slow"] == (r["change_pct"] > 3) and r["verdict"] == ("slow" if r["slow"] else "")
        assert r["gpu"] == "cpu" and r["gpu_uuid"] is None
        assert (f"slow: {r['run']} (cpu) {r['variant']} {r['change_pct']:+.1f}%" in res.stdout) == r["slow"]
    assert "GPUs: w0 = cpu, w1 = cpu" in res.stdout
    if not any(r["slow"] for r in rows):
        assert "no GPU more than 3% slower than the median of the 2 GPUs' medians" in res.stdout


def test_the_scheduler_file_runs_one_point_into_a_plain_run_folder(dask_cluster, tmp_path, cli, monkeypatch):
    monkeypatch.setenv("GPROF_NO_PROGRESS", "1")
    out = tmp_path / "one"
    res = cli(
        "time",
        "square",
        *CPU,
        "--size",
        "1000",
        "--scheduler-file",
        str(dask_cluster["scheduler_file"]),
        "--json",
        "-o",
        str(out),
    )
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert doc["status"] == "ok" and [r["variant"] for r in doc["variants"]] == ["torch_square", "mul"]
    man = _json(out / "manifest.json")
    assert man["placement"]["worker"].startswith("tcp://127.0.0.1:") and man["placement"]["attempts"] == 1
    assert man["request"]["scheduler_file"] == str(dask_cluster["scheduler_file"])
    assert (out / "workload.json").is_file() and not (out / ".lock").exists()


def test_all_on_a_cluster_keeps_a_failed_point_failed_and_skips_what_the_worker_lacks(dask_cluster, tmp_path):
    """A point that fails on its own comes back failed (never retried); ncu, which the worker cannot
    run (no GPU), is skipped with the worker's reason, as the serial `all` does."""
    from orchestrator import profile_all
    from orchestrator.errors import RunFailedError

    out = tmp_path / "all"
    with pytest.raises(RunFailedError) as info:
        profile_all(
            "square",
            backends_=["time", "ncu"],
            cluster=dask_cluster["address"],
            out=out,
            fail_variant="mul",
            **{k: v for k, v in POINT.items() if k != "backend"},
        )
    assert "time: 1 variant(s) failed: mul: RuntimeError: injected failure" in info.value.message
    man = _json(out / "manifest.json")
    assert man["status"] == "failed" and man["kind"] == "all"
    time_, ncu = man["children"]["time"], man["children"]["ncu"]
    assert time_["status"] == "failed" and time_["placement"]["attempts"] == 1
    assert ncu["status"] == "skipped" and ncu["reason"]
    rows = {r["variant"]: r["status"] for r in _json(out / "time" / "report.json")["variants"]}
    assert rows == {"torch_square": "ok", "mul": "failed"}
    assert info.value.run.runs["time"].status == "failed"


# -- 3. a worker killed mid-point -----------------------------------------------------------------


def test_a_killed_worker_point_is_run_again_and_its_runner_dies_too(dask_cluster, tmp_path):
    from orchestrator import sweep

    client = _two_workers(dask_cluster["address"])
    out = tmp_path / "sweep"
    done: dict = {}

    def go():
        try:
            done["run"] = sweep(
                "square",
                "time",
                ["1000", "2000"],
                [],
                cluster=dask_cluster["address"],
                out=out,
                **{k: v for k, v in POINT.items() if k != "backend"},
            )
        except BaseException as exc:
            done["error"] = exc

    t = threading.Thread(target=go)
    t.start()
    try:
        victim, runners = None, []
        deadline = time.monotonic() + 90
        while not runners:  # a point that has started its workload runner
            assert time.monotonic() < deadline and t.is_alive(), done
            for topic, events in client.get_events().items():
                for _, msg in events if topic.startswith("gprof-orch-") else ():
                    try:  # a worker of an earlier test may have been restarted since
                        worker = psutil.Process(msg["pid"])
                        runners = _runners(worker)
                    except psutil.NoSuchProcess:
                        continue
                    if runners:
                        victim = worker
                        break
                if victim:
                    break
            time.sleep(0.1)
        victim.kill()
        t.join(timeout=120)
    finally:
        client.close()
    assert not t.is_alive() and "error" not in done, done.get("error")
    assert _gone(runners) == []  # the runner was told when its worker died (PR_SET_PDEATHSIG)
    man = _json(out / "manifest.json")
    assert man["status"] == "ok" and all(c["status"] == "ok" for c in man["children"].values())
    attempts = {n: c["placement"]["attempts"] for n, c in man["children"].items()}
    assert sorted(attempts.values()) == [1, 2], attempts
    again = next(n for n, a in attempts.items() if a == 2)
    assert _json(out / again / "manifest.json")["placement"]["attempts"] == 2


# -- 4. an address where nothing answers ----------------------------------------------------------


def test_an_unreachable_scheduler_exits_3_within_the_timeout(tmp_path):
    addr = f"tcp://127.0.0.1:{_free_port()}"  # closed: nothing listens there
    t0 = time.monotonic()
    res = run_cli(
        "time",
        "square",
        *CPU,
        "--size",
        "1000,2000",
        "--cluster",
        addr,
        "--connect-timeout",
        "1",
        "-o",
        str(tmp_path / "run"),
        env=ENV,
    )
    assert res.returncode == 3, res.stderr
    assert time.monotonic() - t0 < 20  # the 1 s, an interpreter start and the imports
    assert f"no Dask scheduler answered at {addr} within --connect-timeout 1 s" in res.stderr
    assert "Traceback" not in res.stderr and not (tmp_path / "run").exists()


# -- 5. Ctrl-C of the client ----------------------------------------------------------------------

# a point of size > 1500 sleeps 50 ms a call: 200 calls take 10 s, so it is still running at Ctrl-C
# while the small one, on the other worker, has ended
NAPS = """
import time
from workloads import Variant, Workload

def nap(a):
    if a.numel() > 1500:
        time.sleep(0.05)
    return a * a

sq = lambda x: x * x
WORKLOADS = [Workload("naps", "big points nap", [Variant("nap", nap)], reference=sq,
                      bytes_moved=lambda n, s: 2 * n * s, cpu_default_shape=(1000,))]
"""


def test_ctrl_c_keeps_finished_points_and_leaves_no_process(tmp_path):
    wfile = tmp_path / "naps.py"
    wfile.write_text(NAPS)
    out = tmp_path / "sweep"
    # its own session, as a shell's job: Ctrl-C is SIGINT to the whole group (client and workers)
    p = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "orchestrator",
            "time",
            "naps",
            "--workload-file",
            str(wfile),
            "--device",
            "cpu",
            "--size",
            "1000,2000",
            "--iters",
            "200",
            "--warmup",
            "0",
            "--cluster",
            "local:2",
            "-o",
            str(out),
        ],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        env={**os.environ, **ENV},
        preexec_fn=sigint_default,
    )
    client = psutil.Process(p.pid)
    try:
        deadline = time.monotonic() + 90
        while True:  # the small point is done, the big one is measuring
            assert p.poll() is None, p.communicate()
            assert time.monotonic() < deadline, "the points never got there"
            try:
                children = _json(out / "manifest.json").get("children", {})
            except (OSError, ValueError):
                children = {}
            runners = _runners(client)
            if "1000-float32" in children and len(runners) == 1 and _measuring(runners[0]):
                break
            time.sleep(0.2)
        time.sleep(0.5)  # some samples into the big points
        everyone = client.children(recursive=True)
        os.killpg(p.pid, signal.SIGINT)
        _, stderr = p.communicate(timeout=90)
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
    assert p.returncode == 130, stderr
    assert "Traceback" not in stderr, stderr
    assert "interrupted: stopping 1 running point(s), keeping what they took" in stderr
    assert _gone(everyone) == [], [x.cmdline() for x in everyone if x.is_running()]
    man = _json(out / "manifest.json")
    assert man["status"] == "interrupted"
    assert man["children"]["1000-float32"]["status"] == "ok"
    assert (out / "1000-float32" / "report.json").is_file()
    # the big point was stopped as Ctrl-C stops a serial run: the samples it took are kept
    assert man["children"]["2000-float32"]["status"] == "interrupted"
    nap = _json(out / "2000-float32" / "workload.json")["variants"][0]
    assert nap["status"] == "interrupted" and 1 <= len(nap["time_samples_ns"]) < 200
    assert _json(out / "report.json")["meta"]["status"] == "interrupted"


# -- 6. the clusters gprof-orch builds --------------------------------------------------------------


def test_slurm_job_script_asks_one_gpu_and_offers_it_to_dask():
    pytest.importorskip("dask_jobqueue")
    from orchestrator.cluster.builders import slurm_cluster

    cluster = slurm_cluster(
        cores=8,
        memory="64GB",
        gres="gpu:1",
        queue="gpu",
        walltime="02:00:00",
        scheduler_options={"host": "127.0.0.1", "dashboard_address": ":0", "dashboard": False},
    )
    try:
        script = cluster.job_script()
    finally:
        cluster.close()
    lines = script.splitlines()
    for directive in (
        "#SBATCH -p gpu",
        "#SBATCH --cpus-per-task=8",
        "#SBATCH --mem=60G",
        "#SBATCH -t 02:00:00",
        "#SBATCH --gres=gpu:1",
    ):
        assert directive in lines, script
    worker = next(ln for ln in lines if "distributed.cli.dask_worker" in ln)
    assert worker.startswith(sys.executable) and worker.endswith("--resources GPU=1")
    assert "--nthreads 8" in worker and "--nanny" in worker


def test_local_cuda_pins_one_device_per_worker():
    """Our LocalCUDACluster stand-in on made-up device names: the pinning needs no GPU to check."""
    from distributed import Client

    from orchestrator.cluster.builders import local_cuda_cluster

    with local_cuda_cluster(["GPU-aaaa", "GPU-bbbb"], silence_logs=40) as cluster, Client(cluster) as client:
        seen = client.run(lambda: os.environ.get("CUDA_VISIBLE_DEVICES"))
        info = client.scheduler_info()["workers"]
    assert sorted(seen.values()) == ["GPU-aaaa", "GPU-bbbb"]
    assert sorted(w["name"] for w in info.values()) == ["gpu0", "gpu1"]
    assert all(w["resources"] == {"GPU": 1} and w["nthreads"] == 1 for w in info.values())


def test_local_cuda_without_a_gpu_and_bad_specs_are_usage_errors(cli, monkeypatch):
    from orchestrator.cluster import gpus

    monkeypatch.setattr(gpus, "_all_gpus", lambda: [])
    res = cli("time", "square", "--size", "1000", "--cluster", "local-cuda", "--dry-run")
    assert res.exit_code == 2 and "no NVIDIA GPU visible here" in res.output
    res = cli("time", "square", "--size", "1000", "--cluster", "local:2", "--dry-run")
    assert res.exit_code == 0 and res.output.startswith(
        "# would run each point a task (resource GPU=1) on a LocalCluster of 2 worker process(es)"
    )
    for bad, message in (
        (["--cluster", "local:0"], "must be at least 1"),
        (["--cluster", "yarn"], "unknown; valid"),
        (["--retries", "-1"], "--retries must be"),
        (["--cluster", "local:2", "--scheduler-file", "x.json"], "not both"),
    ):
        res = cli("time", "square", "--size", "1000", *bad, "--dry-run")
        assert res.exit_code == 2 and message in res.output, res.output


def test_help_and_the_cluster_module_import_no_dask():
    code = (
        "import sys\nfrom orchestrator.cli import main\nimport orchestrator.cluster, orchestrator.api\n"
        "try:\n    main(['time', '--help'], prog_name='gprof-orch')\nexcept SystemExit:\n    pass\n"
        "print('DASK', sorted(m for m in sys.modules if m.split('.')[0] in ('dask', 'distributed', "
        "'dask_jobqueue')), file=sys.stderr)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=REPO)
    assert "--cluster SPEC" in out.stdout and "DASK []" in out.stderr, out.stderr
