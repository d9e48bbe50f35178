"""`kernelwright bench` / `eval` / `profile` input checks (CPU, no evaluation runs)."""

import shutil
from pathlib import Path

from typer.testing import CliRunner

from kernelwright.cli.app import app

SHIPPED_DEMO = Path(__file__).resolve().parents[2] / "src/kernelwright/solutions/demo_rmsnorm_triton"


def test_a_solution_named_like_a_shipped_one_is_refused(tmp_path):
    """A copy of a shipped solution keeps its name: its traces would be merged with the shipped
    one's under one label (found by the 2026-11-29 newcomer walk-through)."""
    copy = tmp_path / "my_rmsnorm"
    shutil.copytree(SHIPPED_DEMO, copy, ignore=shutil.ignore_patterns("__pycache__"))
    res = CliRunner().invoke(app, ["bench", "--device", "cpu", "--quick", "-d", "demo", "-s", str(copy),
                                   "--out", str(tmp_path / "out")])
    assert res.exit_code == 2
    assert "already taken" in res.output and "manifest.json" in res.output
    assert "Traceback" not in res.output
    assert not (tmp_path / "out" / "traces").exists()        # refused before anything ran


def test_iteration_counts_must_be_positive():
    for flag, value in (("--warmup", "-1"), ("--iterations", "0"), ("--trials", "0")):
        res = CliRunner().invoke(app, ["eval", str(SHIPPED_DEMO), "--device", "cpu", "--quick", flag, value])
        assert res.exit_code == 2 and flag in res.output, (flag, res.output)


def test_profile_reports_bad_requests_in_one_line(tmp_path):
    from kernelwright.workflow import profiler

    assert profiler.main([str(SHIPPED_DEMO), "-d", "moe", "--device", "cpu"]) == 2      # written for another definition
    broken = tmp_path / "broken"
    shutil.copytree(SHIPPED_DEMO, broken, ignore=shutil.ignore_patterns("__pycache__"))
    with open(broken / "kernel.py", "a") as fh:
        fh.write("\ndef (\n")
    assert profiler.main([str(broken), "-d", "demo", "--quick", "--device", "cpu"]) == 1   # fails to build


def test_bench_baseline_filter(tmp_path):
    from kernelwright.cli.app import _baseline_candidates

    res = CliRunner().invoke(app, ["bench", "--device", "cpu", "--quick", "-d", "moe", "--baseline", "nope",
                                   "--out", str(tmp_path / "out")])
    assert res.exit_code == 2 and "unknown baseline 'nope'" in res.output and "moe_vllm_triton" in res.output
    cands = _baseline_candidates("moe", "cpu", ["moe_vllm_triton"])
    assert [c.label for c in cands] == ["vLLM 0.20 Triton fused_moe (H200 tuned config, fused_experts path)"]
    assert cands[0].trusted and cands[0].skip_reason == "baselines need a CUDA device"
    assert len(_baseline_candidates("moe", "cpu")) == 3
