"""CLI backends with a stand-in client (fake_client.py): command lines, cwd,
environment, retries, timeouts, exit codes, availability checks, limits."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import pytest

from kernelwright.agents import (
    AgentConfigError,
    AgentUnavailable,
    CodexBackend,
    TurnRequest,
    make_backend,
)

DATA = Path(__file__).parent / "data"
FAKE = Path(__file__).parent / "fake_client.py"


@pytest.fixture
def fake_bin(tmp_path: Path) -> Path:
    """An executable wrapper around fake_client.py."""
    path = tmp_path / "bin" / "fake-agent"
    path.parent.mkdir()
    path.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{FAKE}" "$@"\n')
    path.chmod(0o755)
    return path


def make(backend: str, fake_bin: Path, tmp_path: Path, stream: str, mode: str = "ok", **over):
    env = {
        "FAKE_STREAM": str(DATA / stream),
        "FAKE_MODE": mode,
        "FAKE_RECORD": str(tmp_path / "record.jsonl"),
        "FAKE_COUNTER": str(tmp_path / "counter"),
        "FAKE_PID": str(tmp_path / "pid"),
    }
    env.update(over.pop("env", {}))
    cfg = dict(backend=backend, binary=str(fake_bin), env=env, max_retries=over.pop("max_retries", 2),
               retry_backoff_s=0, timeout_s=over.pop("timeout_s", 30), log_dir=tmp_path / "logs",
               state_dir=tmp_path / "state")
    cfg.update(over)
    return make_backend(cfg)


def records(tmp_path: Path) -> list[dict]:
    path = tmp_path / "record.jsonl"
    return [json.loads(ln) for ln in path.read_text().splitlines()] if path.exists() else []


CREDS = {"claude-code": {"ANTHROPIC_API_KEY": "k"}, "codex": {"OPENAI_API_KEY": "k"}, "gemini": {"GEMINI_API_KEY": "k"}}
STREAMS = {"claude-code": "claude_code_turn1.jsonl", "codex": "codex_turn1.jsonl", "gemini": "gemini_turn1.jsonl"}


# ----------------------------------------------------------------------------- command lines


def test_claude_command_line_cwd_env_and_stdin(tmp_path, workspace, fake_bin) -> None:
    b = make("claude-code", fake_bin, tmp_path, STREAMS["claude-code"], model="opus", reasoning_effort="high",
             base_url="http://127.0.0.1:9/anthropic", max_cost_usd_per_turn=2.5, extra_args=["--max-turns", "7"],
             env={"ANTHROPIC_API_KEY": "k"})
    r = b.run_turn(TurnRequest(workspace=workspace, prompt="--looks like a flag", system_prompt="ROLE",
                               session_id="abc-123", allowed_tools=["Bash(make:*)", "Edit"]))
    assert r.ok, r.error
    rec = records(tmp_path)[0]
    argv = rec["argv"]
    assert argv[:7] == ["-p", "--output-format", "stream-json", "--verbose", "--permission-mode", "acceptEdits",
                        "--model"]
    assert argv[argv.index("--append-system-prompt") + 1] == "ROLE"
    assert argv[argv.index("--resume") + 1] == "abc-123"
    assert argv[argv.index("--allowedTools") + 1] == "Bash(make:*),Edit"
    assert argv[argv.index("--effort") + 1] == "high"
    assert argv[argv.index("--max-budget-usd") + 1] == "2.5"
    assert argv[-2:] == ["--max-turns", "7"]
    assert rec["stdin"] == "--looks like a flag"  # prompt on stdin, never parsed as an option
    assert Path(rec["cwd"]).resolve() == workspace.resolve()
    assert rec["env"]["ANTHROPIC_BASE_URL"] == "http://127.0.0.1:9/anthropic"
    assert rec["env"]["DISABLE_AUTOUPDATER"] == "1"
    assert rec["env"]["CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC"] == "1"
    assert r.raw_log_path and "tool_use" in r.raw_log_path.read_text()
    assert not any(p.name.endswith(".log") for p in workspace.rglob("*"))  # logs never land in the worktree


def test_claude_custom_credential_name_is_exported(tmp_path, workspace, fake_bin) -> None:
    b = make("claude-code", fake_bin, tmp_path, STREAMS["claude-code"], credential_env=["MY_PROXY_KEY"],
             env={"MY_PROXY_KEY": "sk-proxy"})
    b.check()
    assert b.run_turn(TurnRequest(workspace=workspace, prompt="p")).ok
    assert records(tmp_path)[0]["env"]["ANTHROPIC_API_KEY"] == "sk-proxy"


def test_codex_command_line_and_resume(tmp_path, workspace, fake_bin) -> None:
    b = make("codex", fake_bin, tmp_path, "codex_turn1.jsonl", model="gpt-5-codex", reasoning_effort="high",
             base_url="http://127.0.0.1:9/v1", credential_env=["LOCAL_KEY"],
             env={"LOCAL_KEY": "sk-local", "CODEX_HOME": str(tmp_path / "codex-home")})
    r = b.run_turn(TurnRequest(workspace=workspace, prompt="do it", system_prompt='say "hi"\nthen stop'))
    assert r.ok, r.error
    argv = records(tmp_path)[0]["argv"]
    assert argv[:2] == ["exec", "--json"]
    assert argv[argv.index("-C") + 1] == str(workspace)
    assert argv[argv.index("--sandbox") + 1] == "workspace-write"
    configs = [argv[i + 1] for i, a in enumerate(argv) if a == "-c"]
    assert 'approval_policy="never"' in configs
    assert 'model_reasoning_effort="high"' in configs
    assert 'developer_instructions="say \\"hi\\"\\nthen stop"' in configs  # a TOML basic string
    assert 'model_provider="kernelwright"' in configs
    assert 'model_providers.kernelwright.base_url="http://127.0.0.1:9/v1"' in configs
    assert 'model_providers.kernelwright.wire_api="responses"' in configs
    assert 'model_providers.kernelwright.env_key="LOCAL_KEY"' in configs
    assert "analytics.enabled=false" in configs and argv[argv.index("--disable") + 1] == "plugins"
    assert argv[-1] == "-" and "resume" not in argv
    assert records(tmp_path)[0]["stdin"] == "do it"
    assert (tmp_path / "codex-home").is_dir()  # codex refuses a missing CODEX_HOME

    r2 = b.run_turn(TurnRequest(workspace=workspace, prompt="again", session_id=r.session_id))
    argv2 = records(tmp_path)[1]["argv"]
    assert argv2[-3:] == ["resume", r.session_id, "-"]
    assert r2.ok


def test_relative_workspace_is_made_absolute(tmp_path, workspace, fake_bin, monkeypatch) -> None:
    monkeypatch.chdir(workspace.parent)
    b = make("codex", fake_bin, tmp_path, "codex_turn1.jsonl", env=CREDS["codex"])
    assert b.run_turn(TurnRequest(workspace=Path(workspace.name), prompt="x")).ok
    rec = records(tmp_path)[0]
    assert rec["argv"][rec["argv"].index("-C") + 1] == str(workspace.resolve())
    assert Path(rec["cwd"]) == workspace.resolve()


def test_codex_usage_is_per_turn_across_backend_instances(tmp_path, workspace, fake_bin) -> None:
    """turn.completed is cumulative per thread; the baseline survives a restart via state_dir."""
    b1 = make("codex", fake_bin, tmp_path, "codex_turn1.jsonl", env=CREDS["codex"])
    r1 = b1.run_turn(TurnRequest(workspace=workspace, prompt="one"))
    assert r1.usage.input_tokens == 2210
    b2 = make("codex", fake_bin, tmp_path, "codex_turn2.jsonl", env=CREDS["codex"])  # a fresh orchestrator
    r2 = b2.run_turn(TurnRequest(workspace=workspace, prompt="two", session_id=r1.session_id))
    assert isinstance(b2, CodexBackend)
    assert (r2.usage.input_tokens, r2.usage.cache_read_tokens, r2.usage.output_tokens) == (2410, 21, 45)


def test_codex_without_base_url_exports_codex_api_key(tmp_path, workspace, fake_bin) -> None:
    b = make("codex", fake_bin, tmp_path, "codex_turn1.jsonl", env={"OPENAI_API_KEY": "sk-o"})
    assert b.run_turn(TurnRequest(workspace=workspace, prompt="x")).ok
    rec = records(tmp_path)[0]
    assert rec["env"]["CODEX_API_KEY"] == "sk-o"
    assert not any(a.startswith("model_provider") for a in rec["argv"])


def test_gemini_command_line_and_settings(tmp_path, workspace, fake_bin) -> None:
    b = make("gemini", fake_bin, tmp_path, "gemini_turn1.jsonl", model="gemini-2.5-pro",
             base_url="http://127.0.0.1:9", env={"GEMINI_API_KEY": "g"})
    r = b.run_turn(TurnRequest(workspace=workspace, prompt="-x write it", system_prompt="ROLE",
                               session_id="1234-uuid"))
    assert r.ok, r.error
    rec = records(tmp_path)[0]
    argv = rec["argv"]
    assert argv[:6] == ["--output-format", "stream-json", "--approval-mode", "yolo", "--skip-trust", "-m"]
    assert argv[argv.index("--resume") + 1] == "1234-uuid"
    assert argv[-1] == "--prompt=<role>\nROLE\n</role>\n\n-x write it"
    assert rec["env"]["GOOGLE_GEMINI_BASE_URL"] == "http://127.0.0.1:9"
    home = Path(rec["env"]["GEMINI_CLI_HOME"])
    settings = json.loads((home / ".gemini" / "settings.json").read_text())
    assert settings["security"]["auth"]["selectedType"] == "gemini-api-key"
    assert settings["privacy"]["usageStatisticsEnabled"] is False


def test_gemini_long_prompt_goes_through_stdin(tmp_path, workspace, fake_bin) -> None:
    b = make("gemini", fake_bin, tmp_path, "gemini_turn1.jsonl", env=CREDS["gemini"])
    big = "x" * 200_000
    assert b.run_turn(TurnRequest(workspace=workspace, prompt=big)).ok
    rec = records(tmp_path)[0]
    assert rec["stdin"] == big and len(rec["argv"][-1]) < 1000


# ----------------------------------------------------------------------------- failures and retries


@pytest.mark.parametrize("backend", ["claude-code", "codex", "gemini"])
def test_truncated_output_is_retried_then_succeeds(tmp_path, workspace, fake_bin, backend) -> None:
    b = make(backend, fake_bin, tmp_path, STREAMS[backend], mode="truncate", env={"FAKE_FAIL_TIMES": "1",
                                                                                  **CREDS[backend]})
    r = b.run_turn(TurnRequest(workspace=workspace, prompt="p"))
    assert r.ok, r.error
    assert r.attempts == 2 and len(records(tmp_path)) == 2


@pytest.mark.parametrize("mode,kind", [("truncate", "malformed"), ("garbage", "malformed"), ("exit3", "exit")])
def test_failures_exhaust_retries_and_return_not_ok(tmp_path, workspace, fake_bin, mode, kind) -> None:
    b = make("claude-code", fake_bin, tmp_path, STREAMS["claude-code"], mode=mode, max_retries=2,
             env=CREDS["claude-code"])
    r = b.run_turn(TurnRequest(workspace=workspace, prompt="p"))
    assert not r.ok and r.error_kind == kind
    assert r.attempts == 3 and len(records(tmp_path)) == 3
    assert "\n" not in r.error
    if mode == "exit3":
        assert "status 3" in r.error and "model server went away" in r.error


def test_timeout_kills_the_client(tmp_path, workspace, fake_bin) -> None:
    b = make("claude-code", fake_bin, tmp_path, STREAMS["claude-code"], mode="sleep", timeout_s=1.5,
             max_retries=0, env=CREDS["claude-code"])
    start = time.monotonic()
    r = b.run_turn(TurnRequest(workspace=workspace, prompt="p"))
    elapsed = time.monotonic() - start
    assert not r.ok and r.error_kind == "timeout"
    assert elapsed < 15
    assert r.session_id  # the init line before the hang was parsed
    pid = int((tmp_path / "pid").read_text())
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


def test_request_timeout_overrides_config(tmp_path, workspace, fake_bin) -> None:
    b = make("codex", fake_bin, tmp_path, STREAMS["codex"], mode="sleep", timeout_s=600, max_retries=0,
             env=CREDS["codex"])
    start = time.monotonic()
    r = b.run_turn(TurnRequest(workspace=workspace, prompt="p", timeout_s=1.0))
    assert r.error_kind == "timeout" and time.monotonic() - start < 15


def test_limits_fail_the_turn_without_retry(tmp_path, workspace, fake_bin) -> None:
    b = make("claude-code", fake_bin, tmp_path, STREAMS["claude-code"], max_output_tokens_per_turn=10,
             env=CREDS["claude-code"])
    r = b.run_turn(TurnRequest(workspace=workspace, prompt="p"))
    assert not r.ok and r.error_kind == "limit" and r.attempts == 1
    assert "43 > 10" in r.error
    assert r.usage.output_tokens == 43  # the tokens were still spent and are reported
    b2 = make("claude-code", fake_bin, tmp_path, STREAMS["claude-code"], max_cost_usd_per_turn=0.001,
              env=CREDS["claude-code"])
    r2 = b2.run_turn(TurnRequest(workspace=workspace, prompt="p"))
    assert r2.error_kind == "limit" and "cost" in r2.error


# ----------------------------------------------------------------------------- availability


@pytest.mark.parametrize("backend", ["claude-code", "codex", "gemini"])
def test_check_missing_binary(tmp_path, backend) -> None:
    b = make_backend({"backend": backend, "binary": str(tmp_path / "nope" / "agent"), "env": CREDS[backend]})
    with pytest.raises(AgentUnavailable) as exc:
        b.check()
    msg = str(exc.value)
    assert "\n" not in msg and "not found" in msg and backend in msg


def test_check_missing_binary_on_path(monkeypatch, tmp_path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setenv("KW_AGENT_CLIENTS", str(tmp_path / "none"))
    with pytest.raises(AgentUnavailable, match=r"`claude` on PATH .*npm install"):
        make_backend({"backend": "claude-code"}).check()


@pytest.mark.parametrize("backend,names", [("claude-code", "ANTHROPIC_API_KEY, ANTHROPIC_AUTH_TOKEN"),
                                           ("codex", "OPENAI_API_KEY, CODEX_API_KEY"),
                                           ("gemini", "GEMINI_API_KEY")])
def test_check_missing_credential(tmp_path, fake_bin, backend, names) -> None:
    b = make(backend, fake_bin, tmp_path, STREAMS[backend])
    with pytest.raises(AgentUnavailable) as exc:
        b.check()
    assert str(exc.value) == f"{backend}: no credential: set one of {names}"


def test_check_broken_binary(tmp_path, fake_bin) -> None:
    b = make("codex", fake_bin, tmp_path, STREAMS["codex"], mode="version_fail", env=CREDS["codex"])
    with pytest.raises(AgentUnavailable) as exc:
        b.check()
    assert "exited 2" in str(exc.value) and "cannot load runtime" in str(exc.value) and "\n" not in str(exc.value)


def test_check_ok_and_finds_clients_dir(monkeypatch, tmp_path, fake_bin) -> None:
    clients = tmp_path / "clients" / "node_modules" / ".bin"
    clients.mkdir(parents=True)
    (clients / "gemini").symlink_to(fake_bin)
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    monkeypatch.setenv("KW_AGENT_CLIENTS", str(tmp_path / "clients"))
    b = make_backend({"backend": "gemini", "env": {"GEMINI_API_KEY": "k"}})
    b.check()
    assert b.client_version == "9.9.9 (fake client)"


def test_binary_vanishing_gives_not_ok(tmp_path, workspace) -> None:
    b = make_backend({"backend": "claude-code", "binary": str(tmp_path / "gone"), "env": CREDS["claude-code"]})
    r = b.run_turn(TurnRequest(workspace=workspace, prompt="p"))
    assert not r.ok and r.error_kind == "unavailable" and r.attempts == 1


def test_bad_requests_raise_config_error(tmp_path, fake_bin) -> None:
    b = make("claude-code", fake_bin, tmp_path, STREAMS["claude-code"], env=CREDS["claude-code"])
    with pytest.raises(AgentConfigError, match="workspace is not a directory"):
        b.run_turn(TurnRequest(workspace=tmp_path / "missing", prompt="p"))
    with pytest.raises(AgentConfigError, match="prompt is empty"):
        b.run_turn(TurnRequest(workspace=tmp_path, prompt="  "))


def test_finds_clients_in_dot_agent_clients_without_env(monkeypatch, tmp_path, fake_bin) -> None:
    """Without $KW_AGENT_CLIENTS the folder that tests/agents/install_clients.sh fills
    (./.agent-clients) is searched, so `kernelwright optimize` finds what the README installed."""
    from kernelwright.agents._cli import find_binary

    clients = tmp_path / ".agent-clients" / "node_modules" / ".bin"
    clients.mkdir(parents=True)
    (clients / "gemini").symlink_to(fake_bin)
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    monkeypatch.delenv("KW_AGENT_CLIENTS", raising=False)
    monkeypatch.chdir(tmp_path)
    assert find_binary("gemini") == str(fake_bin.resolve())
    monkeypatch.setenv("KW_AGENT_CLIENTS", str(tmp_path / "elsewhere"))
    assert find_binary("gemini") is None
