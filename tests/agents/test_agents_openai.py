"""OpenAI-compatible backend: tool loop against a loopback chat-completions
server, sessions, usage, HTTP retries, and workspace confinement of the tools."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from agents_fake_servers import Reply, ScriptedModel, chat_handler
from kernelwright.agents import (
    AgentUnavailable,
    OpenAICompatBackend,
    TurnRequest,
    WorkspaceEscape,
    WorkspaceTools,
    make_backend,
    resolve_in_workspace,
)


def backend(srv, tmp_path: Path, **over) -> OpenAICompatBackend:
    cfg = dict(backend="openai", model="local-model", base_url=f"{srv.base_url}/v1",
               credential_env=["LOCAL_LLM_KEY"], env={"LOCAL_LLM_KEY": "sk-local"},
               state_dir=tmp_path / "state", log_dir=tmp_path / "logs", retry_backoff_s=0, timeout_s=60)
    cfg.update(over)
    b = make_backend(cfg)
    assert isinstance(b, OpenAICompatBackend)
    return b


def chat_requests(srv) -> list[dict]:
    return [r.json for r in srv.posts("/chat/completions")]


def test_tool_loop_edits_workspace_and_counts_tokens(tmp_path, workspace, serve) -> None:
    (workspace / "spec.txt").write_text("make it fast\n")
    gate = [sys.executable, "-c", "import sys, os; print('GATE-OK', sys.argv[1], os.getcwd())", "{workspace}/solution"]
    model = ScriptedModel({
        1: [{"tool": "list_files", "args": {}},
            {"tool": "read_file", "args": {"path": "spec.txt"}},
            {"tool": "write_file", "args": {"path": "solution/kernel.py", "content": "X = 1\n"}},
            {"tool": "run_shell", "args": {"command": "cat solution/kernel.py; pwd"}},
            {"tool": "run_gate", "args": {}},
            {"text": "Kernel written and gated."}],
        2: [{"tool": "write_file", "args": {"path": "solution/kernel.py", "content": "X = 2\n"}},
            {"text": "Second version."}],
    })
    srv = serve(chat_handler(model))
    b = backend(srv, tmp_path)
    b.check()
    r1 = b.run_turn(TurnRequest(workspace=workspace, prompt="KW-TURN-1 write the kernel", system_prompt="ROLE-X",
                                gate_argv=gate))
    assert r1.ok, r1.error
    assert r1.text == "Kernel written and gated."
    assert (workspace / "solution" / "kernel.py").read_text() == "X = 1\n"
    reqs = chat_requests(srv)
    assert len(reqs) == 6
    assert reqs[0]["messages"][0] == {"role": "system", "content": "ROLE-X"}
    assert {t["function"]["name"] for t in reqs[0]["tools"]} == {"read_file", "write_file", "list_files",
                                                                 "run_shell", "run_gate"}
    tool_msgs = [m for m in reqs[-1]["messages"] if m["role"] == "tool"]
    listing, spec, written, shell, gate_out = (json.loads(m["content"]) for m in tool_msgs)
    assert "spec.txt" in listing["files"]
    assert spec["content"] == "make it fast\n"
    assert written == {"path": "solution/kernel.py", "written_chars": 6}
    assert shell["exit_code"] == 0 and shell["stdout"] == f"X = 1\n{workspace.resolve()}\n"
    assert gate_out["stdout"].strip() == f"GATE-OK {workspace.resolve()}/solution {workspace.resolve()}"
    t = model.totals(1)
    assert (r1.usage.input_tokens, r1.usage.output_tokens, r1.usage.cache_read_tokens) == (
        t["input"], t["output"], t["cache_read"])
    assert r1.usage.num_turns == 6
    assert srv.requests[0].headers["authorization"] == "Bearer sk-local"
    assert [e.tool_name for e in r1.events if e.type == "tool_use"] == [
        "list_files", "read_file", "write_file", "run_shell", "run_gate"]

    r2 = b.run_turn(TurnRequest(workspace=workspace, prompt="KW-TURN-2 again", session_id=r1.session_id))
    assert r2.ok and r2.session_id == r1.session_id
    assert (workspace / "solution" / "kernel.py").read_text() == "X = 2\n"
    first2 = chat_requests(srv)[6]
    history = json.dumps(first2["messages"])
    assert "KW-TURN-1" in history and "Kernel written and gated." in history
    assert first2["messages"][0]["content"] == "ROLE-X"  # kept from the stored session
    t2 = model.totals(2)
    assert r2.usage.input_tokens == t2["input"] and r2.usage.num_turns == 2
    # a fresh backend object (orchestrator restart) resumes from state_dir
    b2 = backend(srv, tmp_path)
    r3 = b2.run_turn(TurnRequest(workspace=workspace, prompt="KW-TURN-3 more", session_id=r1.session_id))
    assert r3.ok and "Second version." in json.dumps(chat_requests(srv)[-1]["messages"])


def test_allowed_tools_and_gate_absent(tmp_path, workspace, serve) -> None:
    model = ScriptedModel({1: [{"tool": "run_shell", "args": {"command": "touch pwned"}}, {"text": "done"}]})
    srv = serve(chat_handler(model))
    r = backend(srv, tmp_path).run_turn(TurnRequest(workspace=workspace, prompt="KW-TURN-1",
                                                    allowed_tools=["read_file", "list_files"]))
    assert r.ok
    first = chat_requests(srv)[0]
    assert {t["function"]["name"] for t in first["tools"]} == {"read_file", "list_files"}
    assert not (workspace / "pwned").exists()
    reply = json.loads([m for m in chat_requests(srv)[1]["messages"] if m["role"] == "tool"][0]["content"])
    assert reply == {"error": "tool not allowed: run_shell"}


def test_bad_tool_arguments_are_reported_to_the_model(tmp_path, workspace, serve) -> None:
    model = ScriptedModel({1: [{"tool": "write_file", "args": {}, "raw_args": "{not json"},
                               {"tool": "write_file", "args": {"path": "../escape.txt", "content": "x"}},
                               {"tool": "write_file", "args": {"path": "a.txt"}},
                               {"text": "gave up"}]})
    srv = serve(chat_handler(model))
    r = backend(srv, tmp_path).run_turn(TurnRequest(workspace=workspace, prompt="KW-TURN-1"))
    assert r.ok and r.text == "gave up"
    tool_replies = [json.loads(m["content"]) for m in chat_requests(srv)[-1]["messages"] if m["role"] == "tool"]
    assert "not valid JSON" in tool_replies[0]["error"]
    assert "'..' is not allowed" in tool_replies[1]["error"]
    assert "bad arguments" in tool_replies[2]["error"]
    assert not (workspace.parent / "escape.txt").exists()


def test_tool_round_limit(tmp_path, workspace, serve) -> None:
    model = ScriptedModel({1: [{"tool": "list_files", "args": {}}] * 10})
    srv = serve(chat_handler(model))
    r = backend(srv, tmp_path, max_tool_rounds=3).run_turn(TurnRequest(workspace=workspace, prompt="KW-TURN-1"))
    assert not r.ok and r.error_kind == "limit" and "3 rounds" in r.error
    assert len(chat_requests(srv)) == 3 and r.usage.num_turns == 3
    assert r.session_id and r.attempts == 1


def test_output_token_limit_stops_the_loop(tmp_path, workspace, serve) -> None:
    model = ScriptedModel({1: [{"tool": "list_files", "args": {}}] * 10})
    srv = serve(chat_handler(model))
    r = backend(srv, tmp_path, max_output_tokens_per_turn=40).run_turn(TurnRequest(workspace=workspace,
                                                                                   prompt="KW-TURN-1"))
    assert r.error_kind == "limit" and len(chat_requests(srv)) == 2  # 22 + 23 > 40


def test_http_errors_are_retried_per_request(tmp_path, workspace, serve) -> None:
    model = ScriptedModel({1: [{"text": "fine"}]})
    inner = chat_handler(model)
    calls = {"n": 0}

    def flaky(req):
        calls["n"] += 1
        if calls["n"] == 1:
            return Reply.json_body({"error": {"message": "overloaded"}}, 503)
        if calls["n"] == 2:
            return Reply(body=b'{"choices": [', content_type="application/json")
        return inner(req)

    srv = serve(flaky)
    r = backend(srv, tmp_path, max_retries=2).run_turn(TurnRequest(workspace=workspace, prompt="KW-TURN-1"))
    assert r.ok and r.text == "fine" and calls["n"] == 3


def test_http_errors_exhaust_retries(tmp_path, workspace, serve) -> None:
    srv = serve(lambda req: Reply(body=b"<html>bad gateway</html>", status=502, content_type="text/html"))
    r = backend(srv, tmp_path, max_retries=1).run_turn(TurnRequest(workspace=workspace, prompt="x"))
    assert not r.ok and r.error_kind == "transport" and "HTTP 502" in r.error and "2 tries" in r.error
    assert len(srv.requests) == 2


def test_auth_error_is_not_retried(tmp_path, workspace, serve) -> None:
    srv = serve(lambda req: Reply.json_body({"error": {"message": "invalid api key"}}, 401))
    r = backend(srv, tmp_path, max_retries=3).run_turn(TurnRequest(workspace=workspace, prompt="x"))
    assert not r.ok and r.error_kind == "transport" and "HTTP 401" in r.error
    assert len(srv.requests) == 1


def test_unreachable_server(tmp_path, workspace) -> None:
    b = make_backend(dict(backend="openai", model="m", base_url="http://127.0.0.1:9/v1", max_retries=0,
                          options={"api_key_optional": True}, state_dir=tmp_path / "s", log_dir=tmp_path / "l"))
    r = b.run_turn(TurnRequest(workspace=workspace, prompt="x"))
    assert not r.ok and r.error_kind == "transport"


def test_unknown_session(tmp_path, workspace, serve) -> None:
    srv = serve(chat_handler(ScriptedModel({})))
    r = backend(srv, tmp_path).run_turn(TurnRequest(workspace=workspace, prompt="x", session_id="nope"))
    assert not r.ok and "unknown or unreadable session" in r.error
    r2 = backend(srv, tmp_path).run_turn(TurnRequest(workspace=workspace, prompt="x", session_id="../../etc"))
    assert not r2.ok and "invalid session id" in r2.error


def test_check_messages(tmp_path) -> None:
    with pytest.raises(AgentUnavailable, match="no model configured"):
        make_backend({"backend": "openai"}).check()
    with pytest.raises(AgentUnavailable, match="no credential: set one of OPENAI_API_KEY"):
        make_backend({"backend": "openai", "model": "m"}).check()
    with pytest.raises(AgentUnavailable, match="must start with http"):
        make_backend({"backend": "openai", "model": "m", "base_url": "ftp://x"}).check()
    make_backend({"backend": "openai", "model": "m", "options": {"api_key_optional": True}}).check()
    make_backend({"backend": "openai", "model": "m", "env": {"OPENAI_API_KEY": "k"}}).check()


# ----------------------------------------------------------------------------- confinement


@pytest.fixture
def tools(workspace: Path, tmp_path: Path) -> WorkspaceTools:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("TOPSECRET")
    (workspace / "ok.txt").write_text("fine")
    (workspace / "link_out").symlink_to(outside / "secret.txt")
    (workspace / "dir_out").symlink_to(outside)
    (workspace / "link_in").symlink_to(workspace / "ok.txt")
    return WorkspaceTools(workspace, shell_timeout_s=5, output_limit=200)


@pytest.mark.parametrize("path", ["/etc/passwd", "../outside/secret.txt", "sub/../../outside/secret.txt",
                                  "link_out", "dir_out/secret.txt", "~/x", "", "a\x00b"])
def test_read_rejects_escapes(tools, path) -> None:
    out = tools.call("read_file", {"path": path})
    assert "error" in out and "TOPSECRET" not in json.dumps(out)


@pytest.mark.parametrize("path", ["/tmp/x.txt", "../x.txt", "dir_out/new.txt", "link_out"])
def test_write_rejects_escapes(tools, tmp_path, path) -> None:
    out = tools.call("write_file", {"path": path, "content": "pwned"})
    assert "error" in out
    assert (tmp_path / "outside" / "secret.txt").read_text() == "TOPSECRET"
    assert not (tmp_path / "outside" / "new.txt").exists()


def test_symlink_inside_workspace_is_fine(tools) -> None:
    assert tools.call("read_file", {"path": "link_in"})["content"] == "fine"
    assert tools.call("read_file", {"path": "./ok.txt"})["content"] == "fine"


def test_list_files_does_not_follow_links_out(tools) -> None:
    files = tools.call("list_files", {})["files"]
    assert "ok.txt" in files and not any("secret" in f for f in files)
    assert "error" in tools.call("list_files", {"path": "dir_out"})


def test_shell_timeout_and_truncation(tools) -> None:
    out = tools.call("run_shell", {"command": "sleep 30", "timeout_s": 0.5})
    assert out["timed_out"] is True and out["exit_code"] is None and out["duration_s"] < 10
    big = tools.call("run_shell", {"command": "python3 -c \"print('y' * 5000)\"; echo END; exit 4"})
    assert big["exit_code"] == 4 and len(big["stdout"]) < 300 and big["stdout"].endswith("END\n")
    assert "chars cut" in big["stdout"]


def test_resolve_in_workspace(workspace) -> None:
    assert resolve_in_workspace(workspace, "a/b.txt") == workspace.resolve() / "a" / "b.txt"
    with pytest.raises(WorkspaceEscape):
        resolve_in_workspace(workspace, os.path.abspath("x"))
