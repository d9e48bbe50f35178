"""Stream parsers on recorded client output (tests/agents/data/*.jsonl).

The recordings are the stdout of Claude Code 2.1.332, Codex CLI 0.171.0 and
Gemini CLI 0.61.0 talking to the scripted fake server of test_real_clients.py
(turn 1: write a file, then answer; turn 2: resumed session).  Per request
the server reported, for turn 1: input 1100/1110, output 21/22, cache read 5/6,
cache write 3/4 tokens.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kernelwright.agents import ClaudeStreamParser, CodexStreamParser, GeminiStreamParser
from kernelwright.agents._cli import ProcOutcome
from kernelwright.agents.base import AttemptFailure

DATA = Path(__file__).parent / "data"
OK = ProcOutcome(returncode=0, timed_out=False, stderr_tail="", duration_s=1.0)


def lines(name: str) -> list[str]:
    return (DATA / name).read_text().splitlines()


def feed(parser, data: list[str]):
    for line in data:
        parser.feed(line)
    return parser


# ----------------------------------------------------------------------------- Claude Code


def test_claude_recorded_turn() -> None:
    p = feed(ClaudeStreamParser(), lines("claude_code_turn1.jsonl"))
    r = p.finish(OK)
    assert r.ok
    assert r.text == "Wrote solution/kernel.py."
    assert r.session_id == "a7c6cb4d-8533-4469-985c-e3f98ff04b7f"
    assert p.cwd and p.cwd.endswith("/worktree")
    u = r.usage
    assert (u.input_tokens, u.output_tokens, u.cache_read_tokens, u.cache_write_tokens) == (2210, 43, 11, 7)
    assert u.num_turns == 2
    assert u.cost_usd == pytest.approx(0.00730455)
    types = [e.type for e in r.events]
    assert types[0] == "init" and types[-1] == "result"
    writes = [e for e in r.events if e.type == "tool_use"]
    assert [w.tool_name for w in writes] == ["Write"]
    assert writes[0].tool_input["file_path"].endswith("solution/kernel.py")
    assert any(e.type == "tool_result" and "created successfully" in (e.text or "") for e in r.events)


def test_claude_recorded_resumed_turn_keeps_session() -> None:
    r1 = feed(ClaudeStreamParser(), lines("claude_code_turn1.jsonl")).finish(OK)
    r2 = feed(ClaudeStreamParser(), lines("claude_code_turn2.jsonl")).finish(OK)
    assert r2.ok and r2.session_id == r1.session_id
    assert [e.tool_name for e in r2.events if e.type == "tool_use"] == ["Bash", "Write"]
    # turn 2: three requests, input 1200+1210+1220
    assert r2.usage.input_tokens == 3630 and r2.usage.output_tokens == 22 + 23 + 24


def test_claude_truncated_stream_is_malformed() -> None:
    p = feed(ClaudeStreamParser(), lines("claude_code_turn1.jsonl")[:-1])
    with pytest.raises(AttemptFailure) as exc:
        p.finish(OK)
    assert exc.value.kind == "malformed" and exc.value.retryable
    assert "no final result" in str(exc.value)
    # what was seen is kept for the caller
    assert exc.value.partial.session_id == "a7c6cb4d-8533-4469-985c-e3f98ff04b7f"


def test_claude_broken_json_line_is_malformed_even_with_result() -> None:
    data = lines("claude_code_turn1.jsonl")
    data.insert(2, '{"type":"assistant","message":{"content":[{"type":"te')
    with pytest.raises(AttemptFailure) as exc:
        feed(ClaudeStreamParser(), data).finish(OK)
    assert exc.value.kind == "malformed" and "1 malformed" in str(exc.value)


def test_claude_non_json_noise_is_ignored() -> None:
    data = ["Warning: something on stdout"] + lines("claude_code_turn1.jsonl")
    r = feed(ClaudeStreamParser(), data).finish(OK)
    assert r.ok and r.events[0].type == "raw"


def _result_line(**over) -> str:
    base = json.loads(lines("claude_code_turn1.jsonl")[-1])
    base.update(over)
    return json.dumps(base)


def test_claude_error_result_retryable_or_final() -> None:
    head = lines("claude_code_turn1.jsonl")[:-1]
    err = feed(ClaudeStreamParser(), head + [_result_line(is_error=True, subtype="error_during_execution",
                                                          result="API Error: 529 overloaded")])
    with pytest.raises(AttemptFailure) as exc:
        err.finish(ProcOutcome(1, False, "", 1.0))
    assert exc.value.kind == "agent_error" and exc.value.retryable and "529" in str(exc.value)
    final = feed(ClaudeStreamParser(), head + [_result_line(is_error=True, subtype="error_max_turns", result=None)])
    with pytest.raises(AttemptFailure) as exc:
        final.finish(ProcOutcome(1, False, "", 1.0))
    assert not exc.value.retryable and "error_max_turns" in str(exc.value)


def test_claude_nonzero_exit_without_result() -> None:
    p = feed(ClaudeStreamParser(), lines("claude_code_turn1.jsonl")[:2])
    with pytest.raises(AttemptFailure) as exc:
        p.finish(ProcOutcome(returncode=1, timed_out=False, stderr_tail="Invalid API key", duration_s=0.5))
    assert exc.value.kind == "exit" and "Invalid API key" in str(exc.value)


def test_timeout_wins_over_missing_result() -> None:
    p = feed(ClaudeStreamParser(), lines("claude_code_turn1.jsonl")[:2])
    with pytest.raises(AttemptFailure) as exc:
        p.finish(ProcOutcome(returncode=-15, timed_out=True, stderr_tail="", duration_s=30.0))
    assert exc.value.kind == "timeout"


def test_events_are_bounded_newest_kept() -> None:
    full = feed(ClaudeStreamParser(), lines("claude_code_turn2.jsonl")).finish(OK)
    r = feed(ClaudeStreamParser(max_events=3), lines("claude_code_turn2.jsonl")).finish(OK)
    assert len(full.events) > 3
    assert len(r.events) == 3 and r.events_dropped == len(full.events) - 3
    assert r.events == full.events[-3:] and r.events[-1].type == "result"


# ----------------------------------------------------------------------------- Codex


def test_codex_recorded_turns() -> None:
    p1 = feed(CodexStreamParser(), lines("codex_turn1.jsonl"))
    r1 = p1.finish(OK)
    assert r1.ok and r1.text == "Wrote solution/kernel.py."
    assert r1.session_id == "01a2280d-cca7-7243-8064-fb716df61ef2"
    u = r1.usage  # input_tokens 2221 includes 11 cached
    assert (u.input_tokens, u.cache_read_tokens, u.output_tokens) == (2210, 11, 43)
    shell = [e for e in r1.events if e.type == "tool_use"]
    assert shell and shell[0].tool_name == "shell" and "solution/kernel.py" in shell[0].tool_input
    assert any(e.type == "error" and "Model metadata" in (e.text or "") for e in r1.events)  # non-fatal notice
    r2 = feed(CodexStreamParser(), lines("codex_turn2.jsonl")).finish(OK)
    assert r2.session_id == r1.session_id
    assert r2.usage.input_tokens == 4620  # cumulative over the thread; the backend subtracts turn 1


def test_codex_turn_failed_is_agent_error() -> None:
    data = lines("codex_turn1.jsonl")[:3] + [json.dumps({"type": "turn.failed",
                                                          "error": {"message": "stream disconnected"}})]
    with pytest.raises(AttemptFailure) as exc:
        feed(CodexStreamParser(), data).finish(ProcOutcome(1, False, "", 1.0))
    assert exc.value.kind == "agent_error" and "stream disconnected" in str(exc.value)


def test_codex_truncated_is_malformed() -> None:
    with pytest.raises(AttemptFailure) as exc:
        feed(CodexStreamParser(), lines("codex_turn1.jsonl")[:-1]).finish(OK)
    assert exc.value.kind == "malformed"


# ----------------------------------------------------------------------------- Gemini


def test_gemini_recorded_turn() -> None:
    p = feed(GeminiStreamParser(), lines("gemini_turn1.jsonl"))
    r = p.finish(OK)
    assert r.ok and r.text == "Wrote solution/kernel.py."
    assert r.session_id and p.model == "gemini-2.5-pro"
    u = r.usage
    assert (u.input_tokens, u.cache_read_tokens, u.output_tokens) == (2210, 11, 43)
    assert [e.tool_name for e in r.events if e.type == "tool_use"] == ["write_file"]


def test_gemini_error_result() -> None:
    data = lines("gemini_turn1.jsonl")[:2] + [json.dumps({
        "type": "result", "status": "error", "error": {"type": "FatalAuthenticationError", "message": "bad key"},
        "stats": {"total_tokens": 0, "input_tokens": 0, "output_tokens": 0, "cached": 0, "input": 0}})]
    with pytest.raises(AttemptFailure) as exc:
        feed(GeminiStreamParser(), data).finish(ProcOutcome(41, False, "", 1.0))
    assert exc.value.kind == "agent_error" and "bad key" in str(exc.value)


def test_gemini_deltas_are_joined() -> None:
    data = [json.dumps({"type": "init", "session_id": "s1", "model": "m"}),
            json.dumps({"type": "message", "role": "assistant", "content": "Hel", "delta": True}),
            json.dumps({"type": "message", "role": "assistant", "content": "lo", "delta": True}),
            json.dumps({"type": "result", "status": "success", "stats": {"input_tokens": 10, "cached": 4,
                                                                         "output_tokens": 2}})]
    r = feed(GeminiStreamParser(), data).finish(OK)
    assert r.text == "Hello"
    assert (r.usage.input_tokens, r.usage.cache_read_tokens) == (6, 4)
