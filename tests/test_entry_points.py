"""Explicit entry points: `profile` runs one backend at one size and dtype; a sweep
and every backend are `sweep` and `profile_all`, which the CLI calls when it means them."""

import pytest
from conftest import run_cli

from orchestrator import profile
from orchestrator.errors import UsageError


@pytest.mark.parametrize(
    "kw, says",
    [
        ({"backend": "all"}, "profile_all"),
        ({"size": "1000,2000"}, "sweep"),
        ({"dtype": "float32,bfloat16"}, "sweep"),
    ],
)
def test_profile_runs_one_point_and_names_the_entry_point_for_more(kw, says, tmp_path):
    with pytest.raises(UsageError) as info:
        profile("square", **{"backend": "time", "device": "cpu", "out": tmp_path / "r", **kw})
    assert says in info.value.message
    assert not (tmp_path / "r").exists()  # refused before a run folder exists


def test_the_cli_calls_sweep_for_a_list_of_sizes(tmp_path):
    out = tmp_path / "s"
    res = run_cli(
        "time",
        "square",
        "--device",
        "cpu",
        "--size",
        "1000,2000",
        "-v",
        "mul",
        "--iters",
        "3",
        "--warmup",
        "0",
        "-o",
        str(out),
    )
    assert res.returncode == 0, res.stderr
    assert {"1000-float32", "2000-float32"} <= {p.name for p in out.iterdir() if p.is_dir()}
    assert '"kind": "sweep"' in (out / "manifest.json").read_text()
