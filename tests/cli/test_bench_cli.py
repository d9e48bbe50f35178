"""`kernelwright bench` input checks (CPU, no evaluation runs)."""

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
