"""A new tool-driven backend is its own files and one registry line: this test writes a throwaway
backend (its options, its command, its parser) and the "tool" it drives (a Python script that runs
the workload runner, then writes a CSV of times), registers it through GPROF_ORCH_BACKENDS, with no
edit outside tests/, and runs it end to end through the real CLI."""

from __future__ import annotations

import json
import os
import sys
import textwrap
from pathlib import Path

from conftest import REPO, run_cli

# the tool: runs the command after `--` (the workload runner), then writes one CSV row per sample of
# each variant that ran: (i + 1) * 1000 and (i + 1) * 3000 ns, times --scale, i the variant's index
TOOL = """\
#!{python}
import csv, json, subprocess, sys
from pathlib import Path

args = sys.argv[1:]
cut = args.index("--")
opts, cmd = dict(zip(args[:cut:2], args[1:cut:2])), args[cut + 1 :]
rc = subprocess.call(cmd)
run = Path(cmd[cmd.index("--out") + 1])
wman = json.loads((run / "workload.json").read_text())
with open(opts["--csv"], "w", newline="") as fh:
    out = csv.writer(fh)
    out.writerow(["variant", "time_ns"])
    ran = [v["name"] for v in wman["variants"] if v.get("status") == "ok"]
    for i, name in enumerate(ran):
        for base in (1000, 3000):
            out.writerow([name, (i + 1) * base * float(opts["--scale"])])
sys.exit(rc)
"""

BACKEND = '''\
"""A throwaway tool backend: `faketool` runs the workload and writes fake.csv."""

import csv
from dataclasses import dataclass

from orchestrator.backends.base import Parsed, Step, ToolBackend
from orchestrator.backends.options import BackendOptions, option, tool_path


@dataclass(frozen=True)
class FakeOptions(BackendOptions):
    faketool: str | None = tool_path("faketool")
    scale: float = option(1.0, "--scale", type=float, show_default=True, help="Multiply every time.")


class FakeBackend(ToolBackend):
    name = "fake"
    tool = "faketool"
    Options = FakeOptions
    default_iters = 2
    default_warmup = 0
    help = "A fake tool that times every variant from a CSV."

    def commands(self, req, run_dir):
        argv = [self.exe(req), "--csv", str(run_dir / "fake.csv"), "--scale", str(self.opts(req).scale)]
        return [Step("faketool", [*argv, "--", *self.runner_argv(req, run_dir)], ok_codes=(0, 1))]

    def parse(self, rf):
        from reports.unify import RowMaker, variant_facts

        wman = rf.workload_manifest()
        rows = RowMaker(rf.path.name, self.name, wman["workload"])
        variant_facts(rows, wman)
        with open(rf.file("fake.csv"), newline="") as fh:
            for r in csv.DictReader(fh):
                rows.add(r["variant"], "time_ns", float(r["time_ns"]), "ns")
        return Parsed(rows.frame(), warnings=["faketool times are made up"])
'''


def _plugin(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """The tool and the backend module written under tmp_path; the environment that registers it."""
    tool = tmp_path / "bin" / "faketool"
    tool.parent.mkdir()
    tool.write_text(TOOL.format(python=sys.executable))
    tool.chmod(0o755)
    (tmp_path / "fakebackend.py").write_text(textwrap.dedent(BACKEND))
    env = {
        "PYTHONPATH": os.pathsep.join([str(tmp_path), str(REPO), os.environ.get("PYTHONPATH", "")]),
        "GPROF_ORCH_BACKENDS": "fake=fakebackend:FakeBackend:A fake tool backend, registered by a test.",
    }
    return tool, env


def test_a_backend_registered_from_outside_runs_end_to_end(tmp_path):
    tool, env = _plugin(tmp_path)
    listed = run_cli("--help", env=env)
    assert listed.returncode == 0 and "A fake tool backend, registered by a test." in listed.stdout
    helped = run_cli("fake", "--help", env=env)
    # its command's options, built from its Options declaration, beside every backend's
    assert "--faketool TEXT" in helped.stdout and "--scale FLOAT" in helped.stdout, helped.stdout
    assert "Multiply every time.  [default: 1.0]" in helped.stdout and "--variants" in helped.stdout

    out = tmp_path / "run"
    args = ["fake", "square", "--device", "cpu", "--size", "64x64", "--variants", "mul"]
    res = run_cli(*args, "--faketool", str(tool), "--scale", "1.5", "--out", str(out), "--json", env=env)
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)
    medians = {v["variant"]: v["time_median_us"] for v in doc["variants"]}
    # torch_square (the baseline, index 0): 1.5 and 4.5 us; mul (index 1): 3.0 and 9.0 us
    assert medians == {"torch_square": 3.0, "mul": 6.0}
    speedup = {v["variant"]: v["speedup_vs_baseline"] for v in doc["variants"]}
    assert speedup == {"torch_square": 1.0, "mul": 0.5}
    man = json.loads((out / "manifest.json").read_text())
    # the request record keeps the backend's own options apart; the tool found by --faketool
    assert man["request"]["options"] == {"faketool": str(tool), "scale": 1.5}
    assert man["tools"]["faketool"] == str(tool) and man["tools"]["faketool_found_via"] == "--faketool"
    assert "warning: faketool times are made up" in (out / "report.md").read_text()

    # the folder is read back by the same registration: the same table
    again = run_cli("report", str(out), "--json", env=env)
    assert again.returncode == 0, again.stderr
    assert {v["variant"]: v["time_median_us"] for v in json.loads(again.stdout)["variants"]} == medians


def test_its_tool_is_found_by_its_own_variable_and_an_unknown_option_is_refused(tmp_path):
    tool, env = _plugin(tmp_path)
    out = tmp_path / "run"
    args = ["fake", "square", "--device", "cpu", "--size", "64x64", "--variants", "mul", "--out", str(out)]
    res = run_cli(*args, env={**env, "GPROF_FAKETOOL": str(tool)})
    assert res.returncode == 0, res.stderr
    man = json.loads((out / "manifest.json").read_text())
    assert man["tools"]["faketool_found_via"] == "$GPROF_FAKETOOL"
    missing = run_cli(*args[:-1], str(tmp_path / "other"), env={**env, "PATH": "/usr/bin:/bin"})
    assert missing.returncode == 3 and "faketool not found (looked at --faketool, $GPROF_FAKETOOL, PATH)" in (
        missing.stderr
    ), missing.stderr
    # another backend's option is not this one's
    wrong = run_cli(*args, "--nsys-arg", "x", env=env)
    assert wrong.returncode == 2 and "No such option '--nsys-arg'" in wrong.stderr


def test_a_bad_registry_line_is_a_usage_error(tmp_path):
    res = run_cli("--help", env={"GPROF_ORCH_BACKENDS": "fake=nomodule"})
    assert res.returncode == 2, (res.returncode, res.stderr)
    assert "$GPROF_ORCH_BACKENDS: 'fake=nomodule' is not name=module:Class[:summary]" in res.stderr
    assert "Traceback" not in res.stderr


def test_no_backend_is_named_in_a_test_outside_its_package():
    """What only one backend does is a hook it declares (Backend.footer, once_note,
    compares_medians, self_test, doctor_items): the rest of the tree never tests a backend's name
    nor probes a backend for a hook, so a new backend needs no edit there."""
    import re

    found = []
    for pkg in ("orchestrator", "reports"):
        for path in sorted((REPO / pkg).rglob("*.py")):
            if path.parent.name == "backends":
                continue
            for n, line in enumerate(path.read_text().splitlines(), 1):
                if re.search(r"backend ==|backend !=|backend in \(|hasattr\(cls", line):
                    found.append(f"{path.relative_to(REPO)}:{n}: {line.strip()}")
    assert found == []
