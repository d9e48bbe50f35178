"""The deterministic scripted backend (used by the orchestrator's end-to-end tests)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kernelwright.agents import (
    AgentConfig,
    AgentConfigError,
    ScriptedBackend,
    TurnRequest,
    Usage,
    make_backend,
)


def req(ws: Path, prompt: str = "go", **kw) -> TurnRequest:
    return TurnRequest(workspace=ws, prompt=prompt, **kw)


def test_steps_write_files_and_report_usage(workspace) -> None:
    (workspace / "old.txt").write_text("bye")
    b = ScriptedBackend([
        {"files": {"solution/kernel.py": "A = 1\n", "old.txt": None}, "text": "v1",
         "usage": {"input_tokens": 100, "output_tokens": 7, "cost_usd": 0.01}},
        {"files": {"solution/kernel.py": "A = 2\n"}, "text": "v2", "usage": Usage(input_tokens=5)},
    ])
    r1 = b.run_turn(req(workspace))
    assert r1.ok and r1.text == "v1" and r1.backend == "scripted"
    assert (workspace / "solution" / "kernel.py").read_text() == "A = 1\n"
    assert not (workspace / "old.txt").exists()
    assert (r1.usage.input_tokens, r1.usage.output_tokens, r1.usage.cost_usd) == (100, 7, 0.01)
    assert [e.tool_name for e in r1.events if e.type == "tool_use"] == ["write_file", "delete_file"]
    r2 = b.run_turn(req(workspace, session_id=r1.session_id))
    assert r2.session_id == r1.session_id and r2.usage.input_tokens == 5
    assert (workspace / "solution" / "kernel.py").read_text() == "A = 2\n"
    r3 = b.run_turn(req(workspace))
    assert not r3.ok and r3.error_kind == "script" and "exhausted" in r3.error
    assert [c.prompt for c in b.calls] == ["go", "go", "go"]


def test_steps_by_role_and_callables(workspace) -> None:
    def reviewer(r: TurnRequest) -> dict:
        kernel = (r.workspace / "k.py").read_text()
        return {"text": f"reviewed {len(kernel)} chars for {r.role}", "files": {"REVIEW.md": "LGTM\n"}}

    b = ScriptedBackend({"writer": [{"files": {"k.py": "x = 1\n"}, "text": "wrote"}], "reviewer": [reviewer]})
    assert b.run_turn(req(workspace, role="writer")).text == "wrote"
    r = b.run_turn(req(workspace, role="reviewer"))
    assert r.text == "reviewed 6 chars for reviewer"
    assert (workspace / "REVIEW.md").read_text() == "LGTM\n"
    assert b.remaining == {"writer": 0, "reviewer": 0}
    other = b.run_turn(req(workspace, role="profiler"))
    assert not other.ok and "'profiler'" in other.error


def test_single_callable_script(workspace) -> None:
    n = {"i": 0}

    def step(r: TurnRequest) -> dict:
        n["i"] += 1
        return {"files": {f"f{n['i']}.txt": r.prompt}, "text": str(n["i"])}

    b = ScriptedBackend(step)
    assert [b.run_turn(req(workspace, prompt=p)).text for p in ("a", "b")] == ["1", "2"]
    assert (workspace / "f2.txt").read_text() == "b"


def test_failures_are_retried_one_step_per_attempt(workspace) -> None:
    cfg = AgentConfig(backend="scripted", max_retries=2, retry_backoff_s=0)
    b = ScriptedBackend([{"fail": "malformed stream", "error_kind": "malformed", "usage": {"output_tokens": 3}},
                         {"timeout": True},
                         {"text": "finally", "usage": {"output_tokens": 4}}], cfg)
    r = b.run_turn(req(workspace))
    assert r.ok and r.text == "finally" and r.attempts == 3
    assert r.usage.output_tokens == 7  # spent tokens of failed attempts are counted too


def test_failure_after_retries(workspace) -> None:
    b = ScriptedBackend([{"fail": "boom"}, {"fail": "boom again"}],
                        AgentConfig(backend="scripted", max_retries=1, retry_backoff_s=0))
    r = b.run_turn(req(workspace))
    assert not r.ok and r.error == "boom again" and r.error_kind == "agent_error" and r.attempts == 2


def test_escaping_edit_is_rejected(workspace) -> None:
    b = ScriptedBackend([{"files": {"../evil.txt": "x"}}])
    r = b.run_turn(req(workspace))
    assert not r.ok and r.error_kind == "script" and "'..'" in r.error
    assert not (workspace.parent / "evil.txt").exists()


def test_limits_apply(workspace) -> None:
    cfg = AgentConfig(backend="scripted", max_input_tokens_per_turn=50)
    r = ScriptedBackend([{"usage": {"input_tokens": 40, "cache_read_tokens": 20}}], cfg).run_turn(req(workspace))
    assert not r.ok and r.error_kind == "limit" and "60 > 50" in r.error


def test_from_config_and_validation(tmp_path, workspace) -> None:
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"*": [{"text": "from file", "files": {"a.txt": "1"}}]}))
    b = make_backend({"backend": "scripted", "options": {"script": str(script)}})
    b.check()
    assert b.run_turn(req(workspace)).text == "from file"
    with pytest.raises(AgentConfigError, match="options.script is required"):
        make_backend({"backend": "scripted"})
    with pytest.raises(AgentConfigError, match="cannot read script"):
        make_backend({"backend": "scripted", "options": {"script": str(tmp_path / "missing.json")}})
    with pytest.raises(AgentConfigError, match=r"unknown key\(s\): \['txt'\]"):
        ScriptedBackend([{"txt": "typo"}])
    with pytest.raises(AgentConfigError, match="must be a list"):
        ScriptedBackend("not a script")  # type: ignore[arg-type]
