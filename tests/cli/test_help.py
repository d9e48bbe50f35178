"""`--help` reads like a normal command line's (issue 21): no typer type placeholders, capitalised
arguments in the usage line, and `bench --help` lists the baselines by key and label."""

import re

import pytest
import typer
from typer.testing import CliRunner

from kernelwright.cli.app import app
from kernelwright.cli.helpstyle import conventional

PLACEHOLDER = re.compile(r"<(bool|str|int|float|path|Path|list\[[^\]]*\]|int range|float range)>")


def _commands(group, prefix=()):
    """Every command path of the click tree behind the typer app."""
    yield prefix
    for name, sub in getattr(group, "commands", {}).items():
        yield from _commands(sub, prefix + (name,))


COMMANDS = list(_commands(typer.main.get_command(app)))


@pytest.mark.parametrize("path", COMMANDS, ids=lambda p: " ".join(p) or "kernelwright")
def test_help_has_no_type_placeholders(path):
    res = CliRunner().invoke(app, list(path) + ["--help"], env={"COLUMNS": "160"})
    assert res.exit_code == 0, res.output
    assert not PLACEHOLDER.search(res.output), PLACEHOLDER.search(res.output).group(0)
    usage = next(line for line in res.output.splitlines() if "Usage:" in line)
    assert "{" not in usage and "}" not in usage, usage


def test_the_commands_the_issue_names_render_conventionally():
    runner = CliRunner()
    out = runner.invoke(app, ["eval", "--help"], env={"COLUMNS": "160"}).output
    assert "eval [OPTIONS] SOLUTION" in out
    assert re.search(r"--limit\s+INTEGER RANGE", out) and re.search(r"--out\s+-o\s+PATH", out)
    assert re.search(r"--quick\s+Reduced", out)               # a flag shows no value
    assert "run status [OPTIONS] RUN" in runner.invoke(app, ["run", "status", "--help"]).output
    for cmd in (["bench"], ["redteam"], ["run"]):
        assert runner.invoke(app, cmd + ["--help"]).exit_code == 0


def test_conventional_metavars():
    assert conventional("<bool>", is_flag=True) is None
    assert conventional("<list[str]>") == "TEXT"
    assert conventional("<list[Path]>") == "PATH"
    assert conventional("<int range>") == "INTEGER RANGE"
    assert conventional("<a|b>") == "[a|b]"


def test_bench_help_lists_every_baseline_by_key_and_label():
    from kernelwright.baselines import catalogue

    out = CliRunner().invoke(app, ["bench", "--help"], env={"COLUMNS": "250"}).output
    flat = " ".join(out.split())
    entries = catalogue()
    assert len(entries) >= 5
    for key, label, _ in entries:
        assert key in flat, key
        assert " ".join(label.split())[:40] in flat, label


def test_the_count_options_state_the_gates_defaults():
    """bench/eval --help give the gate's iteration defaults as literals (the CLI does not import the
    gate, and torch, to print help): they must be GateConfig's."""
    import inspect

    from kernelwright.cli import app as cli_app
    from kernelwright.gate.evaluate import GateConfig

    cfg = GateConfig()
    for command in (cli_app.bench_cmd, cli_app.eval_cmd):
        params = inspect.signature(command).parameters
        for name in ("warmup", "iterations", "trials"):
            assert f"(default {getattr(cfg, name)})" in params[name].default.help, (command.__name__, name)
