"""Claude Code backend: ``claude -p --output-format stream-json --verbose``.

Tested against Claude Code 2.1.332 (``@anthropic-ai/claude-code`` on npm).
The prompt goes to the client on stdin; the role prompt is passed with
``--append-system-prompt``; a session is resumed with ``--resume SESSION_ID``.
"""

from __future__ import annotations

import json
from typing import Any, ClassVar, Optional

from ._cli import CliBackend, ProcOutcome, StreamParser, _int
from .base import AgentEvent, AttemptFailure, TurnRequest, TurnResult, Usage

#: result subtypes that a retry cannot fix
_FINAL_ERROR_SUBTYPES = {"error_max_turns", "error_max_budget_usd", "error_max_structured_output_retries"}


class ClaudeStreamParser(StreamParser):
    """Parser of Claude Code's ``--output-format stream-json`` lines.

    Events used: ``system``/``init`` (session_id, model, cwd), ``assistant``
    (text and ``tool_use`` blocks), ``user`` (``tool_result`` blocks) and the
    final ``result`` (``result`` text, ``usage``, ``total_cost_usd``,
    ``num_turns``, ``session_id``, ``is_error``, ``subtype``).
    """

    def __init__(self, max_events: int = 500) -> None:
        super().__init__(max_events)
        self.session_id: Optional[str] = None
        self.model: Optional[str] = None
        self.cwd: Optional[str] = None
        self.last_text: str = ""
        self.final: Optional[dict[str, Any]] = None

    def handle(self, obj: dict[str, Any]) -> Optional[str]:
        typ = obj.get("type")
        if obj.get("session_id") and not self.session_id:
            self.session_id = obj["session_id"]
        if typ == "system" and obj.get("subtype") == "init":
            self.session_id = obj.get("session_id") or self.session_id
            self.model = obj.get("model")
            self.cwd = obj.get("cwd")
            self.events.add(AgentEvent(type="init", text=self.session_id,
                                       raw={k: obj.get(k) for k in ("session_id", "model", "cwd", "permissionMode",
                                                                    "claude_code_version", "apiKeySource")}))
        elif typ == "assistant":
            for block in (obj.get("message") or {}).get("content") or []:
                btype = block.get("type")
                if btype == "text":
                    self.last_text = block.get("text") or ""
                    self.events.add(AgentEvent(type="text", text=self.last_text))
                elif btype == "tool_use":
                    self.events.add(AgentEvent(type="tool_use", tool_name=block.get("name"),
                                               tool_input=block.get("input"), raw={"id": block.get("id")}))
                else:
                    self.events.add(AgentEvent(type="other", text=btype))
        elif typ == "user":
            content = (obj.get("message") or {}).get("content")
            for block in content if isinstance(content, list) else []:
                if block.get("type") == "tool_result":
                    c = block.get("content")
                    text = c if isinstance(c, str) else json.dumps(c)[:4000]
                    self.events.add(AgentEvent(type="tool_result", text=(text or "")[:4000],
                                               raw={"tool_use_id": block.get("tool_use_id"),
                                                    "is_error": block.get("is_error", False)}))
        elif typ == "result":
            self.final = obj
            self.session_id = obj.get("session_id") or self.session_id
            self.events.add(AgentEvent(type="result", text=obj.get("result"),
                                       raw={k: obj.get(k) for k in ("subtype", "is_error", "num_turns",
                                                                    "total_cost_usd", "usage", "session_id",
                                                                    "stop_reason", "duration_ms")}))
        else:
            self.events.add(AgentEvent(type="other", text=str(typ), raw={"subtype": obj.get("subtype")}))
        return None

    def usage(self) -> Usage:
        """Usage from the final ``result`` event (zero if there was none)."""
        if not self.final:
            return Usage()
        u = self.final.get("usage") or {}
        cost = self.final.get("total_cost_usd")
        details = u.get("output_tokens_details") or {}
        return Usage(
            input_tokens=_int(u.get("input_tokens")),
            output_tokens=_int(u.get("output_tokens")),
            cache_read_tokens=_int(u.get("cache_read_input_tokens")),
            cache_write_tokens=_int(u.get("cache_creation_input_tokens")),
            reasoning_tokens=_int(details.get("thinking_tokens")),
            cost_usd=float(cost) if isinstance(cost, (int, float)) else None,
            num_turns=_int(self.final.get("num_turns")),
        )

    def finish(self, outcome: ProcOutcome) -> TurnResult:
        final = self.final
        text = (final.get("result") if final else None) or self.last_text
        partial = self.base_result(ok=False, text=text or "", session_id=self.session_id, usage=self.usage())
        self.fail_common(outcome, partial, have_final=final is not None)
        assert final is not None
        if final.get("is_error") or (final.get("subtype") not in (None, "success")):
            subtype = final.get("subtype") or "error"
            detail = final.get("result") or "; ".join(str(e) for e in final.get("errors") or []) or subtype
            raise AttemptFailure("agent_error", f"claude reported {subtype}: {detail}",
                                 retryable=subtype not in _FINAL_ERROR_SUBTYPES, partial=partial)
        if outcome.returncode not in (0, None):
            raise AttemptFailure("exit", f"client exited with status {outcome.returncode}", partial=partial)
        partial.ok = True
        return partial


class ClaudeCodeBackend(CliBackend):
    """Claude Code in headless print mode.

    Command: ``claude -p --output-format stream-json --verbose
    --permission-mode MODE [--model M] [--effort E] [--append-system-prompt ROLE]
    [--allowedTools A,B] [--resume SID] [--max-budget-usd X] EXTRA...`` with
    the prompt on stdin, cwd = the workspace.

    Credentials: ``ANTHROPIC_API_KEY`` or ``ANTHROPIC_AUTH_TOKEN`` (or the names
    in ``credential_env``; a custom name is exported to the client as
    ``ANTHROPIC_API_KEY``).  ``base_url`` is exported as ``ANTHROPIC_BASE_URL``.
    ``options["system_prompt_mode"] = "replace"`` uses ``--system-prompt``
    instead of appending.
    """

    name: ClassVar[str] = "claude-code"
    binary_name: ClassVar[str] = "claude"
    default_credentials: ClassVar[list[str]] = ["ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN"]
    install_hint: ClassVar[str] = "install with: npm install -g @anthropic-ai/claude-code"
    default_env: ClassVar[dict[str, str]] = {
        "DISABLE_AUTOUPDATER": "1",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "DISABLE_TELEMETRY": "1",
        "DISABLE_ERROR_REPORTING": "1",
        "CLAUDE_CODE_DISABLE_TERMINAL_TITLE": "1",
    }

    def build_command(self, req: TurnRequest, binary: str, env: dict[str, str]) -> tuple[list[str], Optional[str]]:
        c = self.config
        argv = [binary, "-p", "--output-format", "stream-json", "--verbose", "--permission-mode", c.permission_mode]
        if c.model:
            argv += ["--model", c.model]
        if c.reasoning_effort:
            argv += ["--effort", c.reasoning_effort]
        if req.system_prompt:
            flag = "--system-prompt" if c.options.get("system_prompt_mode") == "replace" else "--append-system-prompt"
            argv += [flag, req.system_prompt]
        if req.allowed_tools:
            argv += ["--allowedTools", ",".join(req.allowed_tools)]
        if req.session_id:
            argv += ["--resume", req.session_id]
        if c.max_cost_usd_per_turn is not None:
            argv += ["--max-budget-usd", f"{c.max_cost_usd_per_turn:g}"]
        argv += list(c.extra_args)
        if c.base_url:
            env["ANTHROPIC_BASE_URL"] = c.base_url
        for name in c.credential_env:
            value = self.env_value(name)
            if value and name not in self.default_credentials:
                env["ANTHROPIC_API_KEY"] = value
                break
        return argv, req.prompt

    def new_parser(self, req: TurnRequest) -> StreamParser:
        return ClaudeStreamParser(self.config.max_events)
