"""Headless, turn-based adapters for coding-agent clients.

Public API::

    from kernelwright.agents import AgentConfig, TurnRequest, make_backend

    backend = make_backend(AgentConfig(backend="claude-code", model="sonnet"))
    backend.check()                      # raises AgentUnavailable (one line)
    result = backend.run_turn(TurnRequest(workspace=wt, prompt="...", system_prompt=role))
    result.ok, result.text, result.session_id, result.usage

Backends: "claude-code", "codex", "gemini", "openai" (OpenAI-compatible chat
completions with a built-in tool loop) and "scripted" (deterministic replay).
This package depends on nothing else in kernelwright.
"""

from .base import (
    AgentBackend,
    AgentConfig,
    AgentConfigError,
    AgentError,
    AgentEvent,
    AgentUnavailable,
    TurnRequest,
    TurnResult,
    Usage,
)
from .claude_code import ClaudeCodeBackend, ClaudeStreamParser
from .codex import CodexBackend, CodexStreamParser
from .gemini import GeminiBackend, GeminiStreamParser
from .openai_compat import OpenAICompatBackend, WorkspaceTools
from .registry import backend_names, make_backend, register_backend
from .scripted import ScriptedBackend
from .workspace import WorkspaceEscape, resolve_in_workspace

__all__ = [
    "AgentBackend",
    "AgentConfig",
    "AgentConfigError",
    "AgentError",
    "AgentEvent",
    "AgentUnavailable",
    "TurnRequest",
    "TurnResult",
    "Usage",
    "ClaudeCodeBackend",
    "ClaudeStreamParser",
    "CodexBackend",
    "CodexStreamParser",
    "GeminiBackend",
    "GeminiStreamParser",
    "OpenAICompatBackend",
    "WorkspaceTools",
    "ScriptedBackend",
    "WorkspaceEscape",
    "resolve_in_workspace",
    "backend_names",
    "make_backend",
    "register_backend",
]
