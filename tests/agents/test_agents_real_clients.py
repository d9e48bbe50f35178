"""The adapters drive the REAL agent clients against a loopback fake model server.

Each test: starts a scripted fake model server on 127.0.0.1, runs the real
client through the backend in a fresh worktree, and checks that the client
ran there, edited the file, that the stream was parsed (text, tool use,
session id), that the token counts equal what the server reported, and that
a second turn resumes the session (the server receives the earlier
conversation, the session id is unchanged).  Proxy variables point at the fake
server, which refuses and records any attempt to reach another host;
``server.blocked`` must stay empty.
"""

from __future__ import annotations

import json
from pathlib import Path


from agents_helpers import client_env, require_client
from agents_fake_servers import ScriptedModel, anthropic_handler, gemini_handler, responses_handler
from kernelwright.agents import AgentConfig, TurnRequest, Usage, make_backend

ROLE = "ROLE-PROMPT-7f3a: you write Triton kernels."


def _assert_usage(usage: Usage, totals: dict[str, int], *, cache_write: bool = True) -> None:
    assert totals["requests"] >= 1
    assert usage.input_tokens == totals["input"]
    assert usage.output_tokens == totals["output"]
    assert usage.cache_read_tokens == totals["cache_read"]
    if cache_write:
        assert usage.cache_write_tokens == totals["cache_write"]


def _main_requests(srv, marker: str) -> list:
    return [r for r in srv.requests if r.method == "POST" and marker in r.body.decode("utf-8", "replace")]


# ----------------------------------------------------------------------------- Claude Code


def test_claude_code_real_client(tmp_path: Path, workspace: Path, serve) -> None:
    claude = require_client("claude")
    kernel = workspace / "solution" / "kernel.py"
    model = ScriptedModel({
        1: [{"tool": "Write", "args": {"file_path": str(kernel), "content": "def kernel():\n    return 1\n"}},
            {"text": "Wrote solution/kernel.py."}],
        2: [{"tool": "Bash", "args": {"command": "pwd > where.txt", "description": "record cwd"}},
            {"tool": "Write", "args": {"file_path": str(kernel), "content": "def kernel():\n    return 2\n"}},
            {"text": "Updated the kernel."}],
    })
    srv = serve(anthropic_handler(model))
    cfg = AgentConfig(
        backend="claude-code", binary=claude, model="claude-sonnet-4-5", base_url=srv.base_url,
        env={**client_env(tmp_path / "home", srv), "ANTHROPIC_API_KEY": "sk-ant-fake"},
        timeout_s=120, max_retries=0, log_dir=tmp_path / "logs",
    )
    backend = make_backend(cfg)
    backend.check()
    assert backend.client_version and "2.1.332" in backend.client_version

    r1 = backend.run_turn(TurnRequest(workspace=workspace, prompt="KW-TURN-1: write solution/kernel.py",
                                      system_prompt=ROLE))
    assert r1.ok, (r1.error, r1.raw_log_path)
    assert kernel.read_text() == "def kernel():\n    return 1\n"
    assert r1.text == "Wrote solution/kernel.py."
    assert r1.session_id
    init = next(e for e in r1.events if e.type == "init")
    assert Path(init.raw["cwd"]).resolve() == workspace.resolve()
    assert any(e.type == "tool_use" and e.tool_name == "Write" for e in r1.events)
    assert any(e.type == "tool_result" for e in r1.events)
    _assert_usage(r1.usage, model.totals(1))
    assert model.totals(1)["requests"] == 2
    assert r1.usage.cost_usd is not None and r1.usage.cost_usd > 0
    assert r1.raw_log_path and r1.raw_log_path.is_file()
    first = _main_requests(srv, "KW-TURN-1")[0].json
    assert ROLE in json.dumps(first["system"])
    assert first["model"] == "claude-sonnet-4-5"

    r2 = backend.run_turn(TurnRequest(workspace=workspace, prompt="KW-TURN-2: run pwd, then update the kernel",
                                      session_id=r1.session_id, allowed_tools=["Bash", "Write"]))
    assert r2.ok, (r2.error, r2.raw_log_path)
    assert r2.session_id == r1.session_id
    assert kernel.read_text() == "def kernel():\n    return 2\n"
    assert Path((workspace / "where.txt").read_text().strip()).resolve() == workspace.resolve()
    turn2 = _main_requests(srv, "KW-TURN-2")
    history = json.dumps(turn2[0].json["messages"])
    assert "KW-TURN-1" in history and "Wrote solution/kernel.py." in history
    assert turn2[0].headers.get("x-claude-code-session-id") == r1.session_id
    _assert_usage(r2.usage, model.totals(2))
    assert srv.blocked == [], f"client tried to reach: {srv.blocked}"


# ----------------------------------------------------------------------------- Codex


def test_codex_real_client(tmp_path: Path, workspace: Path, serve) -> None:
    codex = require_client("codex")
    model = ScriptedModel({
        1: [{"tool": "exec_command", "args": {"cmd": "mkdir -p solution && printf 'def kernel():\\n    return 1\\n' "
                                                     "> solution/kernel.py && pwd > where.txt"}},
            {"text": "Wrote solution/kernel.py."}],
        2: [{"tool": "exec_command", "args": {"cmd": "printf 'def kernel():\\n    return 2\\n' > solution/kernel.py"}},
            {"text": "Updated the kernel."}],
    })
    srv = serve(responses_handler(model))
    cfg = AgentConfig(
        backend="codex", binary=codex, model="gpt-5-codex", reasoning_effort="low", base_url=f"{srv.base_url}/v1",
        credential_env=["KW_FAKE_OPENAI_KEY"],
        env={**client_env(tmp_path / "home", srv), "KW_FAKE_OPENAI_KEY": "sk-fake"},
        timeout_s=120, max_retries=0, log_dir=tmp_path / "logs", state_dir=tmp_path / "state",
    )
    backend = make_backend(cfg)
    backend.check()
    assert backend.client_version and "0.171.0" in backend.client_version

    r1 = backend.run_turn(TurnRequest(workspace=workspace, prompt="KW-TURN-1: write solution/kernel.py",
                                      system_prompt=ROLE))
    assert r1.ok, (r1.error, r1.raw_log_path)
    kernel = workspace / "solution" / "kernel.py"
    assert kernel.read_text() == "def kernel():\n    return 1\n"
    assert Path((workspace / "where.txt").read_text().strip()).resolve() == workspace.resolve()
    assert r1.text == "Wrote solution/kernel.py."
    assert r1.session_id
    assert any(e.type == "tool_use" and e.tool_name == "shell" for e in r1.events)
    _assert_usage(r1.usage, model.totals(1), cache_write=False)
    first = _main_requests(srv, "KW-TURN-1")[0]
    assert first.path == "/v1/responses"
    assert first.headers.get("authorization") == "Bearer sk-fake"
    assert ROLE in json.dumps(first.json["input"])
    assert first.json["model"] == "gpt-5-codex"
    assert first.json["reasoning"].get("effort") == "low"

    r2 = backend.run_turn(TurnRequest(workspace=workspace, prompt="KW-TURN-2: update the kernel",
                                      session_id=r1.session_id))
    assert r2.ok, (r2.error, r2.raw_log_path)
    assert r2.session_id == r1.session_id
    assert kernel.read_text() == "def kernel():\n    return 2\n"
    turn2 = _main_requests(srv, "KW-TURN-2")
    history = json.dumps(turn2[0].json["input"])
    assert "KW-TURN-1" in history and "Wrote solution/kernel.py." in history
    assert turn2[0].headers.get("thread-id") == r1.session_id
    # codex reports the thread's cumulative usage; the backend reports this turn's share
    _assert_usage(r2.usage, model.totals(2), cache_write=False)
    assert srv.blocked == [], f"client tried to reach: {srv.blocked}"


# ----------------------------------------------------------------------------- Gemini


def test_gemini_real_client(tmp_path: Path, workspace: Path, serve) -> None:
    gemini = require_client("gemini")
    kernel = workspace / "solution" / "kernel.py"
    model = ScriptedModel({
        1: [{"tool": "write_file", "args": {"file_path": str(kernel), "content": "def kernel():\n    return 1\n"}},
            {"text": "Wrote solution/kernel.py."}],
        2: [{"tool": "write_file", "args": {"file_path": str(kernel), "content": "def kernel():\n    return 2\n"}},
            {"text": "Updated the kernel."}],
    })
    srv = serve(gemini_handler(model))
    home = tmp_path / "home"
    cfg = AgentConfig(
        backend="gemini", binary=gemini, model="gemini-2.5-pro", base_url=srv.base_url,
        env={**client_env(home, srv), "GEMINI_API_KEY": "fake-gemini-key"},
        timeout_s=120, max_retries=0, log_dir=tmp_path / "logs", state_dir=tmp_path / "state",
    )
    backend = make_backend(cfg)
    backend.check()
    assert backend.client_version and "0.61.0" in backend.client_version

    r1 = backend.run_turn(TurnRequest(workspace=workspace, prompt="KW-TURN-1: write solution/kernel.py",
                                      system_prompt=ROLE))
    assert r1.ok, (r1.error, r1.raw_log_path)
    assert kernel.read_text() == "def kernel():\n    return 1\n"
    assert r1.text == "Wrote solution/kernel.py."
    assert r1.session_id
    assert any(e.type == "tool_use" and e.tool_name == "write_file" for e in r1.events)
    _assert_usage(r1.usage, model.totals(1), cache_write=False)
    first = _main_requests(srv, "KW-TURN-1")[0]
    assert first.headers.get("x-goog-api-key") == "fake-gemini-key"
    assert "gemini-2.5-pro" in first.path
    assert ROLE in json.dumps(first.json["contents"])

    r2 = backend.run_turn(TurnRequest(workspace=workspace, prompt="KW-TURN-2: update the kernel",
                                      session_id=r1.session_id))
    assert r2.ok, (r2.error, r2.raw_log_path)
    assert r2.session_id == r1.session_id
    assert kernel.read_text() == "def kernel():\n    return 2\n"
    history = json.dumps(_main_requests(srv, "KW-TURN-2")[0].json["contents"])
    assert "KW-TURN-1" in history and "Wrote solution/kernel.py." in history
    _assert_usage(r2.usage, model.totals(2), cache_write=False)
    assert srv.blocked == [], f"client tried to reach: {srv.blocked}"
