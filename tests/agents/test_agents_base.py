"""Config validation, usage arithmetic, registry and event bounding."""

from __future__ import annotations

import pytest

import kernelwright.agents as agents
from kernelwright.agents import AgentConfig, AgentConfigError, Usage, backend_names, make_backend, register_backend
from kernelwright.agents.base import AgentEvent, EventLog


def test_config_errors_are_one_line() -> None:
    with pytest.raises(AgentConfigError) as exc:
        AgentConfig.parse({"backend": "claude-code", "timeout_s": 0, "max_retries": -1, "colour": "red"})
    msg = str(exc.value)
    assert "\n" not in msg and msg.startswith("invalid agent config: ") and "3 error(s)" in msg
    with pytest.raises(AgentConfigError, match="unknown agent backend 'llama'"):
        make_backend(AgentConfig.model_construct(backend="llama"))
    with pytest.raises(AgentConfigError, match="must be a mapping"):
        make_backend(["claude-code"])  # type: ignore[arg-type]


def test_direct_construction_errors_are_one_line(tmp_path) -> None:
    from kernelwright.agents import TurnRequest

    with pytest.raises(AgentConfigError) as exc:
        AgentConfig(backend="codex", sandbox="yolo")
    assert str(exc.value).startswith("invalid agent config: sandbox: ") and "\n" not in str(exc.value)
    with pytest.raises(AgentConfigError, match="invalid turn request: timeout_s"):
        TurnRequest(workspace=tmp_path, prompt="p", timeout_s=0)
    with pytest.raises(ValueError):  # AgentConfigError is a ValueError too
        TurnRequest(workspace=tmp_path, prompt="p", colour="red")


def test_registry_builds_each_backend() -> None:
    assert {"claude-code", "codex", "gemini", "openai", "scripted"} <= set(backend_names())
    assert isinstance(make_backend({"backend": "claude-code"}), agents.ClaudeCodeBackend)
    assert isinstance(make_backend({"backend": "codex"}), agents.CodexBackend)
    assert isinstance(make_backend({"backend": "gemini"}), agents.GeminiBackend)
    assert isinstance(make_backend({"backend": "openai"}), agents.OpenAICompatBackend)


def test_register_backend_replaces_factory() -> None:
    from kernelwright.agents import registry

    original = registry._REGISTRY["scripted"]
    try:
        register_backend("scripted", lambda cfg: agents.ScriptedBackend([{"text": "custom"}], cfg))
        assert make_backend({"backend": "scripted"}).remaining == {"*": 1}
    finally:
        register_backend("scripted", original)
    with pytest.raises(AgentConfigError):
        make_backend({"backend": "scripted"})  # the built-in needs options.script again


def test_usage_arithmetic() -> None:
    a = Usage(input_tokens=10, output_tokens=5, cache_read_tokens=100, cache_write_tokens=7, num_turns=1)
    b = Usage(input_tokens=1, output_tokens=2, cost_usd=0.5, num_turns=2)
    s = a + b
    got = (s.input_tokens, s.output_tokens, s.cache_read_tokens, s.cache_write_tokens, s.num_turns)
    assert got == (11, 7, 100, 7, 3)
    assert s.cost_usd == 0.5 and (a + a).cost_usd is None
    assert a.total_input_tokens == 117 and a.total_tokens == 122


def test_event_log_keeps_newest() -> None:
    log = EventLog(2)
    for i in range(5):
        log.add(AgentEvent(type="text", text=str(i)))
    assert [e.text for e in log] == ["3", "4"] and log.dropped == 3 and len(log) == 2


def test_agents_package_is_self_contained() -> None:
    import pathlib
    import re

    src = pathlib.Path(agents.__file__).parent
    for f in src.glob("*.py"):
        text = f.read_text()
        assert not re.search(r"^\s*(from|import)\s+kernelwright\.(?!agents)", text, re.M), f.name
