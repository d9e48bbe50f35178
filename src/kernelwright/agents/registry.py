"""Backend registry: ``make_backend(config)`` picks the class for ``config.backend``."""

from __future__ import annotations

from typing import Any, Callable, Mapping, Union

from .base import AgentBackend, AgentConfig, AgentConfigError

BackendFactory = Callable[[AgentConfig], AgentBackend]

_REGISTRY: dict[str, BackendFactory] = {}


def register_backend(name: str, factory: BackendFactory) -> None:
    """Register (or replace) the factory used for ``AgentConfig.backend == name``."""
    _REGISTRY[name] = factory


def backend_names() -> list[str]:
    """Names accepted by :func:`make_backend`, sorted."""
    return sorted(_REGISTRY)


def make_backend(config: Union[AgentConfig, Mapping[str, Any]]) -> AgentBackend:
    """Build the backend for ``config`` (an :class:`AgentConfig` or a plain dict).

    Does not call :meth:`AgentBackend.check`.  Raises :class:`AgentConfigError`
    (one line) for an invalid config or an unknown backend name.
    """
    if not isinstance(config, AgentConfig):
        if not isinstance(config, Mapping):
            raise AgentConfigError(f"agent config must be a mapping, got {type(config).__name__}")
        config = AgentConfig.parse(dict(config))
    factory = _REGISTRY.get(config.backend)
    if factory is None:
        raise AgentConfigError(f"unknown agent backend {config.backend!r}; known: {', '.join(backend_names())}")
    return factory(config)


def _register_builtin() -> None:
    from .claude_code import ClaudeCodeBackend
    from .codex import CodexBackend
    from .gemini import GeminiBackend
    from .openai_compat import OpenAICompatBackend
    from .scripted import ScriptedBackend

    register_backend("claude-code", ClaudeCodeBackend)
    register_backend("codex", CodexBackend)
    register_backend("gemini", GeminiBackend)
    register_backend("openai", OpenAICompatBackend)
    register_backend("scripted", ScriptedBackend.from_config)


_register_builtin()
