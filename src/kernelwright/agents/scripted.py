"""A deterministic backend that replays a script (tests, CPU demos).

A *step* is a dict (or a callable ``(TurnRequest) -> dict``) with keys:

* ``files``: ``{relative_path: content}`` written into the workspace
  (``None`` as content deletes the file);
* ``text``: the final assistant message;
* ``usage``: token counts, a dict of :class:`Usage` fields or a ``Usage``;
* ``fail``: an error message - the attempt fails (``error_kind`` taken from
  ``error_kind``, default "agent_error"; retried like any agent failure);
* ``timeout``: ``True`` - the attempt fails as a timeout;
* ``delay_s``: sleep this long first (seconds);
* ``session_id``: the session id to report (default: kept from the request,
  or ``scripted-<role>-<n>``).

Each *attempt* consumes one step, so ``[{"fail": "boom"}, {"text": "ok"}]``
with ``max_retries >= 1`` gives one successful turn after a retry.
"""

from __future__ import annotations

import itertools
import json
import threading
import time
from pathlib import Path
from typing import Any, Callable, ClassVar, Mapping, Optional, Sequence, Union

from .base import AgentConfig, AgentConfigError, AgentEvent, AttemptFailure, TurnRequest, TurnResult, Usage
from .base import AgentBackend
from .workspace import WorkspaceEscape, delete_file, write_text_file

Step = Union[Mapping[str, Any], Callable[[TurnRequest], Mapping[str, Any]]]
Script = Union[Sequence[Step], Mapping[str, Sequence[Step]], Callable[[TurnRequest], Mapping[str, Any]]]

_STEP_KEYS = {"files", "text", "usage", "fail", "error_kind", "timeout", "delay_s", "session_id"}


class ScriptedBackend(AgentBackend):
    """Replays ``script``.

    ``script`` is one of: a list of steps (used in order by every turn), a
    mapping ``role -> list of steps`` (a turn uses the list of
    ``TurnRequest.role``; the key ``"*"`` is the fallback), or a single
    callable used for every attempt.  When a list runs out the attempt fails
    with ``error_kind="script"`` (not retried).  ``calls`` records every
    request received.  Raises :class:`AgentConfigError` for a malformed script.
    """

    name: ClassVar[str] = "scripted"

    def __init__(self, script: Script, config: Optional[AgentConfig] = None) -> None:
        super().__init__(config or AgentConfig(backend="scripted", max_retries=0, retry_backoff_s=0))
        self._callable: Optional[Callable[[TurnRequest], Mapping[str, Any]]] = None
        self._queues: dict[str, list[Step]] = {}
        if callable(script):
            self._callable = script
        elif isinstance(script, Mapping):
            for role, steps in script.items():
                self._queues[str(role)] = self._checked_list(steps, f"script[{role!r}]")
        elif isinstance(script, Sequence) and not isinstance(script, (str, bytes)):
            self._queues["*"] = self._checked_list(script, "script")
        else:
            raise AgentConfigError("scripted backend: script must be a list of steps, a dict role -> steps, "
                                   "or a callable")
        self.calls: list[TurnRequest] = []
        self._lock = threading.Lock()
        self._counter = itertools.count(1)

    @staticmethod
    def _checked_list(steps: Any, where: str) -> list[Step]:
        if not isinstance(steps, Sequence) or isinstance(steps, (str, bytes)):
            raise AgentConfigError(f"scripted backend: {where} must be a list of steps")
        for i, step in enumerate(steps):
            if callable(step):
                continue
            if not isinstance(step, Mapping):
                raise AgentConfigError(f"scripted backend: {where}[{i}] must be a dict or a callable")
            unknown = set(step) - _STEP_KEYS
            if unknown:
                raise AgentConfigError(f"scripted backend: {where}[{i}] has unknown key(s): {sorted(unknown)}")
        return list(steps)

    @classmethod
    def from_config(cls, config: AgentConfig) -> "ScriptedBackend":
        """Build from ``config.options["script"]``: a script object or a path to a JSON file holding one.

        Raises :class:`AgentConfigError` when the option is missing or unreadable.
        """
        script = config.options.get("script")
        if script is None:
            raise AgentConfigError("scripted backend: options.script is required (a list/dict of steps or a JSON path)")
        if isinstance(script, (str, Path)):
            try:
                script = json.loads(Path(script).read_text())
            except (OSError, ValueError) as exc:
                raise AgentConfigError(f"scripted backend: cannot read script {script}: {exc}") from None
        return cls(script, config)

    def check(self) -> None:
        """Always succeeds: a script needs no binary or credential."""

    @property
    def remaining(self) -> dict[str, int]:
        """How many steps are left per role key."""
        return {k: len(v) for k, v in self._queues.items()}

    def _next_step(self, req: TurnRequest) -> Mapping[str, Any]:
        with self._lock:
            if self._callable is not None:
                step: Step = self._callable
            else:
                key = req.role if req.role in self._queues else "*"
                queue = self._queues.get(key)
                if not queue:
                    raise AttemptFailure("script", f"script exhausted for role {req.role or '*'!r}", retryable=False)
                step = queue.pop(0)
        out = step(req) if callable(step) else step
        if not isinstance(out, Mapping):
            raise AttemptFailure("script", f"script step returned {type(out).__name__}, expected a dict",
                                 retryable=False)
        return out

    def _attempt(self, req: TurnRequest, attempt: int) -> TurnResult:
        with self._lock:
            self.calls.append(req)
        step = self._next_step(req)
        sid = step.get("session_id") or req.session_id or f"scripted-{req.role or 'agent'}-{next(self._counter)}"
        usage_v = step.get("usage") or {}
        usage = usage_v if isinstance(usage_v, Usage) else Usage(**dict(usage_v))
        events = [AgentEvent(type="init", text=sid)]
        if step.get("delay_s"):
            time.sleep(float(step["delay_s"]))
        partial = TurnResult(ok=False, session_id=sid, usage=usage, events=events)
        if step.get("timeout"):
            raise AttemptFailure("timeout", "scripted timeout", partial=partial)
        for rel, content in (step.get("files") or {}).items():
            try:
                if content is None:
                    delete_file(req.workspace, rel)
                    events.append(AgentEvent(type="tool_use", tool_name="delete_file", tool_input={"path": rel}))
                else:
                    write_text_file(req.workspace, rel, str(content))
                    events.append(AgentEvent(type="tool_use", tool_name="write_file",
                                             tool_input={"path": rel, "chars": len(str(content))}))
            except WorkspaceEscape as exc:
                raise AttemptFailure("script", f"scripted edit rejected: {exc}", retryable=False,
                                     partial=partial) from None
        if step.get("fail"):
            raise AttemptFailure(step.get("error_kind", "agent_error"), str(step["fail"]), partial=partial)
        text = str(step.get("text", ""))
        events.append(AgentEvent(type="text", text=text))
        events.append(AgentEvent(type="result", text=text))
        return TurnResult(ok=True, text=text, session_id=sid, usage=usage,
                          events=events[-self.config.max_events:])
