"""Typed API shared by every agent backend.

An *agent backend* drives one coding-agent client (Claude Code, Codex CLI,
Gemini CLI, an OpenAI-compatible model, or a deterministic script) for one
bounded *turn*: the orchestrator hands it a :class:`TurnRequest` (a worktree,
a prompt, an optional role/system prompt and an optional session to resume)
and gets back a :class:`TurnResult` (final text, session id, token usage,
parsed events).  The orchestrator diffs the worktree itself afterwards.

Failures on the agent side (a crash, a timeout, truncated or malformed
output, an API error reported by the client) never raise: they are retried up
to :attr:`AgentConfig.max_retries` times and then returned as
``TurnResult(ok=False, error=...)``.  Only caller mistakes raise
(:class:`AgentConfigError`), and :meth:`AgentBackend.check` raises
:class:`AgentUnavailable` when the client binary or a credential is missing.
"""

from __future__ import annotations

import collections
import os
import tempfile
import time
import uuid
from abc import ABC, abstractmethod
from pathlib import Path
from typing import Any, ClassVar, Deque, Literal, Optional

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

BackendName = Literal["claude-code", "codex", "gemini", "openai", "scripted"]

ErrorKind = Literal[
    "timeout",  # the turn ran past its time limit and was killed
    "malformed",  # output was not the expected JSON stream / had no final result
    "exit",  # the client exited with a non-zero status
    "agent_error",  # the client reported an error result (API error, max turns, ...)
    "limit",  # a per-turn token / cost limit was exceeded
    "unavailable",  # binary vanished or could not be started
    "transport",  # HTTP / network error talking to the model (openai backend)
    "script",  # scripted backend: scripted failure or script exhausted
]


class AgentError(Exception):
    """Base class of the exceptions this package raises."""


class AgentUnavailable(AgentError):
    """A backend cannot run: its binary, a runtime, or a credential is missing.

    ``str(exc)`` is always a single line, suitable for printing to a user.
    """

    def __init__(self, message: str) -> None:
        super().__init__(_one_line(message))


class AgentConfigError(AgentError, ValueError):
    """The configuration or a request is invalid (a caller mistake).

    ``str(exc)`` is always a single line.
    """

    def __init__(self, message: str) -> None:
        super().__init__(_one_line(message))


def _one_line(message: str, limit: int = 400) -> str:
    text = " ".join(str(message).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _summarize(what: str, exc: ValidationError) -> str:
    first = exc.errors()[0]
    where = ".".join(str(p) for p in first.get("loc", ())) or what
    return f"invalid {what}: {where}: {first.get('msg')} ({exc.error_count()} error(s))"


class _OneLineModel(BaseModel):
    """Constructing with bad values raises :class:`AgentConfigError` (one line), not a ValidationError."""

    _what: ClassVar[str] = "value"

    def __init__(self, **data: Any) -> None:
        try:
            super().__init__(**data)
        except ValidationError as exc:
            raise AgentConfigError(_summarize(self._what, exc)) from None


class AgentConfig(_OneLineModel):
    """How to run one backend.  Unknown keys are rejected.

    Times are in seconds, money in US dollars, token counts in tokens.
    Invalid values raise :class:`AgentConfigError` with a one-line message.
    """

    model_config = ConfigDict(extra="forbid", frozen=False)
    _what: ClassVar[str] = "agent config"

    backend: BackendName
    #: model name passed to the client (``--model`` / ``-m``); ``None`` = client default
    model: Optional[str] = None
    #: reasoning effort ("low" | "medium" | "high" | ...); passed where the client supports it
    reasoning_effort: Optional[str] = None
    #: extra CLI arguments appended to the client's command line (CLI backends)
    extra_args: list[str] = Field(default_factory=list)
    #: names of environment variables holding a credential; any one set is enough.
    #: Empty = the backend's defaults (e.g. ANTHROPIC_API_KEY / ANTHROPIC_AUTH_TOKEN).
    credential_env: list[str] = Field(default_factory=list)
    #: extra environment for the client process (base URLs, HOME, proxies, ...);
    #: also consulted by :meth:`AgentBackend.check` for credentials
    env: dict[str, str] = Field(default_factory=dict)
    #: model server base URL (Anthropic / OpenAI-compatible / Gemini endpoint); ``None`` = client default
    base_url: Optional[str] = None
    #: path or name of the client executable; ``None`` = search PATH and $KW_AGENT_CLIENTS
    binary: Optional[str] = None
    #: wall-clock limit of one turn attempt, seconds
    timeout_s: float = Field(default=1800.0, gt=0)
    #: how many times a failed turn attempt is retried (0 = no retry)
    max_retries: int = Field(default=2, ge=0, le=20)
    #: pause between retries, seconds
    retry_backoff_s: float = Field(default=2.0, ge=0)
    #: per-turn limit on output tokens (tokens); exceeding it fails the turn with error_kind "limit"
    max_output_tokens_per_turn: Optional[int] = Field(default=None, gt=0)
    #: per-turn limit on total input tokens incl. cache (tokens)
    max_input_tokens_per_turn: Optional[int] = Field(default=None, gt=0)
    #: per-turn cost limit, USD (Claude Code also gets ``--max-budget-usd``)
    max_cost_usd_per_turn: Optional[float] = Field(default=None, gt=0)
    #: Claude Code ``--permission-mode``
    permission_mode: str = "acceptEdits"
    #: Codex ``--sandbox`` mode
    sandbox: Literal["read-only", "workspace-write", "danger-full-access"] = "workspace-write"
    #: directory for raw logs of each turn; ``None`` = <tmp>/kernelwright-agents/logs
    log_dir: Optional[Path] = None
    #: directory for backend state (OpenAI sessions, Codex usage baselines); ``None`` = <tmp>/kernelwright-agents/state
    state_dir: Optional[Path] = None
    #: at most this many parsed events are kept in :attr:`TurnResult.events` (the newest ones)
    max_events: int = Field(default=500, ge=1)
    #: OpenAI backend: maximum model round trips (tool rounds) per turn
    max_tool_rounds: int = Field(default=40, ge=1)
    #: backend-specific options (documented per backend in docs/agents.md)
    options: dict[str, Any] = Field(default_factory=dict)

    @field_validator("extra_args", "credential_env")
    @classmethod
    def _strings(cls, v: list[str]) -> list[str]:
        if any(not isinstance(x, str) for x in v):
            raise ValueError("must be a list of strings")
        return v

    @classmethod
    def parse(cls, data: dict[str, Any]) -> "AgentConfig":
        """Validate ``data``; raises :class:`AgentConfigError` with a one-line message."""
        try:
            return cls.model_validate(data)
        except ValidationError as exc:
            raise AgentConfigError(_summarize("agent config", exc)) from None


class TurnRequest(_OneLineModel):
    """One bounded agent turn.

    ``workspace`` must be an existing directory (the agent's worktree); the
    client process runs with it as its working directory.  Invalid values
    raise :class:`AgentConfigError` with a one-line message.
    """

    model_config = ConfigDict(extra="forbid")
    _what: ClassVar[str] = "turn request"

    workspace: Path
    prompt: str
    #: role / system prompt text, appended to the client's own system prompt where possible
    system_prompt: Optional[str] = None
    #: session to resume (from a previous :attr:`TurnResult.session_id`); ``None`` = new session
    session_id: Optional[str] = None
    #: tool names the agent may use without asking (client-specific names); ``None`` = backend default
    allowed_tools: Optional[list[str]] = None
    #: overrides :attr:`AgentConfig.timeout_s` for this turn, seconds
    timeout_s: Optional[float] = Field(default=None, gt=0)
    #: free-form role label (e.g. "writer", "reviewer"); used by the scripted backend and in log names
    role: Optional[str] = None
    #: OpenAI backend: argv template of the gate command ("{workspace}" is substituted)
    gate_argv: Optional[list[str]] = None
    #: OpenAI backend: argv template of the profiler command ("{workspace}" is substituted)
    profiler_argv: Optional[list[str]] = None
    #: extra environment for this turn only
    env: dict[str, str] = Field(default_factory=dict)
    metadata: dict[str, Any] = Field(default_factory=dict)


class Usage(BaseModel):
    """Token and cost accounting of one turn (all attempts that reached the model).

    Convention (normalised across backends): ``input_tokens`` counts *uncached*
    input tokens only; ``cache_read_tokens`` / ``cache_write_tokens`` are the
    input tokens read from / written to the prompt cache.  Backends whose
    provider reports cached tokens inside the input count (OpenAI, Codex,
    Gemini) subtract them.  ``reasoning_tokens`` are included in
    ``output_tokens``.  ``cost_usd`` is ``None`` unless the client reports it.
    """

    model_config = ConfigDict(extra="forbid")

    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    reasoning_tokens: int = 0
    cost_usd: Optional[float] = None
    #: model requests / agentic turns as reported by the client
    num_turns: int = 0

    @property
    def total_input_tokens(self) -> int:
        """All prompt tokens: uncached + cache reads + cache writes (tokens)."""
        return self.input_tokens + self.cache_read_tokens + self.cache_write_tokens

    @property
    def total_tokens(self) -> int:
        """All prompt and output tokens (tokens)."""
        return self.total_input_tokens + self.output_tokens

    def __add__(self, other: "Usage") -> "Usage":
        cost: Optional[float]
        if self.cost_usd is None and other.cost_usd is None:
            cost = None
        else:
            cost = (self.cost_usd or 0.0) + (other.cost_usd or 0.0)
        return Usage(
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            cache_read_tokens=self.cache_read_tokens + other.cache_read_tokens,
            cache_write_tokens=self.cache_write_tokens + other.cache_write_tokens,
            reasoning_tokens=self.reasoning_tokens + other.reasoning_tokens,
            cost_usd=cost,
            num_turns=self.num_turns + other.num_turns,
        )


class AgentEvent(BaseModel):
    """One parsed stream event, normalised across clients.

    ``type`` is one of: "init", "text", "tool_use", "tool_result", "usage",
    "result", "error", "raw" (a non-JSON line), "malformed" (a broken JSON line),
    "other".
    """

    model_config = ConfigDict(extra="forbid")

    type: str
    text: Optional[str] = None
    tool_name: Optional[str] = None
    tool_input: Optional[Any] = None
    raw: Optional[Any] = None


class TurnResult(BaseModel):
    """What one turn produced.  ``ok`` is False for agent-side failures, with ``error`` set."""

    model_config = ConfigDict(extra="forbid")

    ok: bool
    #: final assistant message
    text: str = ""
    #: session / thread id to pass as :attr:`TurnRequest.session_id` to resume
    session_id: Optional[str] = None
    usage: Usage = Field(default_factory=Usage)
    #: newest parsed events of the last attempt (at most :attr:`AgentConfig.max_events`)
    events: list[AgentEvent] = Field(default_factory=list)
    #: how many older events were dropped from ``events``
    events_dropped: int = 0
    error: Optional[str] = None
    error_kind: Optional[ErrorKind] = None
    #: number of attempts made (1 + retries used)
    attempts: int = 1
    #: raw stdout/stderr (CLI) or request/response log (HTTP) of the turn
    raw_log_path: Optional[Path] = None
    #: wall-clock time of the whole turn incl. retries, seconds
    duration_s: float = 0.0
    backend: Optional[str] = None


class EventLog:
    """A bounded list of events that keeps the newest ``limit`` ones."""

    def __init__(self, limit: int) -> None:
        self._events: Deque[AgentEvent] = collections.deque(maxlen=limit)
        self.dropped = 0

    def add(self, event: AgentEvent) -> None:
        if len(self._events) == self._events.maxlen:
            self.dropped += 1
        self._events.append(event)

    def __iter__(self):  # type: ignore[no-untyped-def]
        return iter(self._events)

    def __len__(self) -> int:
        return len(self._events)

    def to_list(self) -> list[AgentEvent]:
        return list(self._events)


class AttemptFailure(Exception):
    """Raised inside a backend to end one attempt; carries what was learned so far."""

    def __init__(
        self,
        kind: ErrorKind,
        message: str,
        *,
        retryable: bool = True,
        partial: Optional[TurnResult] = None,
    ) -> None:
        super().__init__(_one_line(message, 2000))
        self.kind = kind
        self.retryable = retryable
        self.partial = partial


class AgentBackend(ABC):
    """One agent client, driven one turn at a time.

    Subclasses implement :meth:`check` and :meth:`_attempt`; :meth:`run_turn`
    adds validation, retries, timing and the usage limits.
    """

    name: ClassVar[str] = "base"

    def __init__(self, config: AgentConfig) -> None:
        self.config = config

    # ----------------------------------------------------------------- public API

    @abstractmethod
    def check(self) -> None:
        """Verify the backend can run (binary present and working, credential set).

        Raises :class:`AgentUnavailable` with a one-line message otherwise.
        Cheap enough to call once at orchestrator start.
        """

    def run_turn(self, req: TurnRequest) -> TurnResult:
        """Run one turn in ``req.workspace``; retries agent-side failures.

        Returns a :class:`TurnResult`; ``ok=False`` (with ``error`` and
        ``error_kind``) after ``max_retries`` failed retries or a non-retryable
        failure.  Raises :class:`AgentConfigError` only when the request itself
        is invalid (workspace missing or not a directory, empty prompt).
        """
        self._validate_request(req)
        req = req.model_copy(update={"workspace": Path(req.workspace).resolve()})
        start = time.monotonic()
        attempts = 0
        total_usage = Usage()
        last: Optional[TurnResult] = None
        while True:
            attempts += 1
            try:
                result = self._attempt(req, attempts)
            except AttemptFailure as fail:
                result = fail.partial or TurnResult(ok=False)
                result.ok = False
                result.error = str(fail)
                result.error_kind = fail.kind
                retryable = fail.retryable
            except Exception as exc:  # noqa: BLE001 - a backend bug must not kill the orchestrator
                result = TurnResult(ok=False, error=f"internal error in {self.name} backend: {exc!r}",
                                    error_kind="agent_error")
                retryable = False
            else:
                retryable = False
                if result.ok:
                    limit_msg = self._limit_exceeded(total_usage + result.usage)
                    if limit_msg:
                        result.ok = False
                        result.error = limit_msg
                        result.error_kind = "limit"
            total_usage = total_usage + result.usage
            last = result
            if result.ok or not retryable or attempts > self.config.max_retries:
                break
            if self.config.retry_backoff_s:
                time.sleep(min(self.config.retry_backoff_s * attempts, 30.0))
        last.usage = total_usage
        last.attempts = attempts
        last.duration_s = time.monotonic() - start
        last.backend = self.name
        return last

    # ----------------------------------------------------------------- for subclasses

    @abstractmethod
    def _attempt(self, req: TurnRequest, attempt: int) -> TurnResult:
        """Run one attempt.  Raise :class:`AttemptFailure` for agent-side failures."""

    def turn_timeout(self, req: TurnRequest) -> float:
        """Time limit of one attempt of ``req``, seconds."""
        return float(req.timeout_s or self.config.timeout_s)

    def _validate_request(self, req: TurnRequest) -> None:
        ws = Path(req.workspace)
        if not ws.is_dir():
            raise AgentConfigError(f"workspace is not a directory: {ws}")
        if not req.prompt or not req.prompt.strip():
            raise AgentConfigError("prompt is empty")

    def _limit_exceeded(self, usage: Usage) -> Optional[str]:
        c = self.config
        if c.max_output_tokens_per_turn is not None and usage.output_tokens > c.max_output_tokens_per_turn:
            return f"per-turn output token limit exceeded: {usage.output_tokens} > {c.max_output_tokens_per_turn}"
        if c.max_input_tokens_per_turn is not None and usage.total_input_tokens > c.max_input_tokens_per_turn:
            return f"per-turn input token limit exceeded: {usage.total_input_tokens} > {c.max_input_tokens_per_turn}"
        cost_cap = c.max_cost_usd_per_turn
        if cost_cap is not None and usage.cost_usd is not None and usage.cost_usd > cost_cap:
            return f"per-turn cost limit exceeded: ${usage.cost_usd:.4f} > ${c.max_cost_usd_per_turn:.4f}"
        return None

    def log_path(self, req: TurnRequest, attempt: int, suffix: str = ".log") -> Path:
        """A fresh path for the raw log of one attempt (never inside the workspace)."""
        base = self.config.log_dir or Path(tempfile.gettempdir()) / "kernelwright-agents" / "logs"
        base.mkdir(parents=True, exist_ok=True)
        role = (req.role or "turn").replace(os.sep, "_")
        stamp = time.strftime("%Y%m%d-%H%M%S")
        return base / f"{stamp}-{self.name}-{role}-{uuid.uuid4().hex[:8]}-a{attempt}{suffix}"

    def state_path(self) -> Path:
        """Directory for this backend's persistent state (created on demand)."""
        base = self.config.state_dir or Path(tempfile.gettempdir()) / "kernelwright-agents" / "state"
        path = base / self.name
        path.mkdir(parents=True, exist_ok=True)
        return path

    def env_value(self, name: str) -> Optional[str]:
        """``name`` from :attr:`AgentConfig.env`, else from the process environment."""
        if name in self.config.env:
            return self.config.env[name]
        return os.environ.get(name)

    def require_credential(self, defaults: list[str]) -> str:
        """Return the name of the first credential env var that is set.

        Raises :class:`AgentUnavailable` if none of them is set (non-empty).
        """
        names = self.config.credential_env or defaults
        for name in names:
            if self.env_value(name):
                return name
        raise AgentUnavailable(f"{self.name}: no credential: set one of {', '.join(names)}")
