"""Config files and the command line: examples parse, bad input is one line and a non-zero exit."""

from __future__ import annotations


import pytest
from typer.testing import CliRunner

from kernelwright.cli.app import app
from kernelwright.workflow.config import ConfigError, load_config_file, parse_config
from kernelwright.workflow.demo import EXAMPLES
from kernelwright.workflow.runs import create_run

from workflow_helpers import demo_config

runner = CliRunner()


@pytest.mark.parametrize("name", ["scripted-demo.toml", "claude-code.toml", "codex.toml", "mixed.toml"])
def test_examples_parse(name):
    cfg = parse_config(load_config_file(EXAMPLES / name), {"definition": "demo"})
    for agent in cfg.agent_names():
        assert cfg.agent_settings(agent)["backend"]
    if name == "mixed.toml":
        assert cfg.agent_settings("coder-1")["backend"] == "codex"
        assert cfg.agent_settings("coder-3")["backend"] == "claude-code"
        assert cfg.agent_settings("researcher")["backend"] == "gemini"


def test_config_errors(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text('[run]\ndefinition = "demo"\ncoderz = 2\n[agents.default]\nbackend = "scripted"\n')
    with pytest.raises(ConfigError, match="coderz"):
        parse_config(load_config_file(bad))
    bad.write_text('[run]\ndefinition = "demo"\n[agents.default]\nbackend = "nope"\n')
    with pytest.raises(ConfigError, match="agents for planner"):
        parse_config(load_config_file(bad))
    bad.write_text('[run]\ndefinition = "demo"\n[agents.default]\nbackend = "scripted"\n[agents.tester]\nmodel = "x"\n')
    with pytest.raises(ConfigError, match="agents.tester"):
        parse_config(load_config_file(bad))
    bad.write_text('[run]\ndefinition = "demo"\n')
    with pytest.raises(ConfigError, match="no agent backend"):
        parse_config(load_config_file(bad))
    bad.write_text("not = [toml")
    with pytest.raises(ConfigError, match="invalid TOML"):
        load_config_file(bad)
    cfg = parse_config(load_config_file(EXAMPLES / "scripted-demo.toml"), {"max_cost_usd": 1.5, "coders": 3})
    assert cfg.budget.max_cost_usd == 1.5 and cfg.coders == 3
    assert cfg.device_names() == ["cpu:0", "cpu:1"] and cfg.quiet == "host"


@pytest.mark.parametrize("args,needle", [
    (["optimize"], "--agents"),
    (["optimize", "--agents", "/nonexistent.toml", "-d", "demo"], "no such config file"),
    (["optimize", "--demo", "-d", "nonexistent"], "unknown definition"),
    # the definition is checked before the agents' clients (claude-code has no credential here)
    (["optimize", "--agents", str(EXAMPLES / "claude-code.toml"), "-d", "nonexistent"], "unknown definition"),
    (["run", "status", "/"], "not a run folder"),
    (["profile", "/", "-d", "demo"], "not a solution folder"),
])
def test_cli_one_line_errors(args, needle):
    res = runner.invoke(app, args)
    assert res.exit_code == 2
    assert needle in res.output
    assert "Traceback" not in res.output


def test_cli_missing_client_creates_nothing(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")
    monkeypatch.setenv("KW_AGENT_CLIENTS", str(tmp_path / "none"))
    res = runner.invoke(app, ["optimize", "--agents", str(EXAMPLES / "claude-code.toml"), "-d", "demo", "--device",
                              "cpu", "--quick", "--run-dir", str(tmp_path / "run")])
    assert res.exit_code == 2 and "unavailable" in res.output
    assert not (tmp_path / "run").exists()


def test_cli_console_on_a_run(tmp_path):
    run = tmp_path / "run"
    create_run(run, demo_config())
    for args in (["status"], ["pause"], ["resume"], ["note", "look at T=1"], ["redirect", "try persistent", "--name",
                                                                            "persistent"], ["stop"], ["report"]):
        res = runner.invoke(app, ["run", args[0], str(run), *args[1:]])
        assert res.exit_code == 0, res.output
    res = runner.invoke(app, ["run", "invalidate", str(run), "c42"])
    assert res.exit_code == 2 and "no candidate c42" in res.output
    assert (run / "report.html").is_file()
    res = runner.invoke(app, ["optimize", "--demo", "--run-dir", str(run)])
    assert res.exit_code == 2 and "already holds a run" in res.output


@pytest.mark.slow
def test_profile_reads_the_manifests_definition_and_drops_the_profilers_trace_lines():
    """``profile`` without -d profiles the definition the manifest names; Kineto's ``USDT:`` lines
    (written to file descriptor 2 by the profiler's C++ side) do not reach the user."""
    import subprocess
    import sys
    from pathlib import Path

    import kernelwright

    demo = Path(kernelwright.__file__).parent / "solutions" / "demo_rmsnorm_triton"
    res = subprocess.run([sys.executable, "-m", "kernelwright", "profile", str(demo), "--quick", "--device", "cpu"],
                         capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr[-2000:]
    assert "# Profile (torch.profiler, cpu)" in res.stdout and "demo-rmsnorm" in res.stdout
    assert "USDT:" not in res.stdout + res.stderr
