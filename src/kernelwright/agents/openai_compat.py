"""OpenAI-compatible chat-completions backend with its own small tool loop.

Works with any server that implements ``POST {base_url}/chat/completions``
with function tools (OpenAI, vLLM, SGLang, llama.cpp server, Ollama,
OpenRouter, ...).  Uses only the standard library (``urllib``).

Tools offered to the model (JSON-schema function tools), all confined to the
workspace: ``read_file``, ``write_file``, ``list_files``, ``run_shell`` and,
when the request carries the argv templates, ``run_gate`` and
``run_profiler``.

Sessions: the conversation is stored as JSON in
``state_dir/openai/sessions/<session_id>.json`` and reloaded when a request
names that session.
"""

from __future__ import annotations

import json
import os
import re
import time
import urllib.error
import urllib.request
import uuid
from dataclasses import KW_ONLY, dataclass
from pathlib import Path
from typing import Any, Callable, ClassVar, Optional

from .base import (
    AgentBackend,
    AgentEvent,
    AgentUnavailable,
    AttemptFailure,
    ErrorKind,
    EventLog,
    TurnRequest,
    TurnResult,
    Usage,
)
from .workspace import WorkspaceEscape, resolve_in_workspace, run_command, tail, write_text_file

DEFAULT_BASE_URL = "https://api.openai.com/v1"
DEFAULT_SYSTEM_PROMPT = (
    "You are a coding agent working inside a project directory (the workspace). "
    "Use the tools to read, write and list files and to run commands there. "
    "All paths are relative to the workspace. When you are done, reply with a short summary."
)
_SESSION_RE = re.compile(r"^[A-Za-z0-9_.-]{1,128}$")


def tool_schemas(names: list[str]) -> list[dict[str, Any]]:
    """The JSON-schema function tools for ``names`` (unknown names are skipped)."""
    specs: dict[str, tuple[str, dict[str, Any], list[str]]] = {
        "read_file": (
            "Read a UTF-8 text file from the workspace.",
            {"path": {"type": "string", "description": "path relative to the workspace"},
             "offset": {"type": "integer", "description": "first character to return (default 0)"},
             "max_chars": {"type": "integer", "description": "at most this many characters (default 100000)"}},
            ["path"],
        ),
        "write_file": (
            "Create or overwrite a UTF-8 text file in the workspace (parent directories are created).",
            {"path": {"type": "string", "description": "path relative to the workspace"},
             "content": {"type": "string", "description": "the complete new file content"}},
            ["path", "content"],
        ),
        "list_files": (
            "List files under a directory of the workspace, recursively.",
            {"path": {"type": "string", "description": "directory relative to the workspace (default '.')"}},
            [],
        ),
        "run_shell": (
            "Run a bash command with the workspace as working directory; returns exit code and output tails.",
            {"command": {"type": "string"},
             "timeout_s": {"type": "number", "description": "time limit in seconds"}},
            ["command"],
        ),
        "run_gate": (
            "Run the trusted correctness/performance gate on the current workspace and return its report.",
            {}, [],
        ),
        "run_profiler": (
            "Run the profiler on the current workspace and return its report.",
            {"extra_args": {"type": "array", "items": {"type": "string"},
                            "description": "extra arguments appended to the profiler command"}},
            [],
        ),
    }
    out = []
    for name in names:
        if name in specs:
            desc, props, required = specs[name]
            out.append({"type": "function", "function": {
                "name": name, "description": desc,
                "parameters": {"type": "object", "properties": props, "required": required},
            }})
    return out


@dataclass(eq=False)
class WorkspaceTools:
    """Executes the tool calls of one turn inside ``workspace``.

    Sizes are in characters, times in seconds.  Every method returns a
    JSON-serialisable dict; confinement violations and bad arguments come
    back as ``{"error": ...}`` rather than raising.
    """

    workspace: Path
    _: KW_ONLY
    gate_argv: Optional[list[str]] = None
    profiler_argv: Optional[list[str]] = None
    shell_timeout_s: float = 600.0
    gate_timeout_s: float = 1800.0
    output_limit: int = 16_000
    read_limit: int = 100_000
    list_limit: int = 1000
    env: Optional[dict[str, str]] = None
    deadline: Optional[float] = None

    def __post_init__(self) -> None:
        self.workspace = Path(self.workspace).resolve()

    @property
    def names(self) -> list[str]:
        names = ["read_file", "write_file", "list_files", "run_shell"]
        if self.gate_argv:
            names.append("run_gate")
        if self.profiler_argv:
            names.append("run_profiler")
        return names

    def _remaining(self, wanted: float) -> float:
        if self.deadline is None:
            return wanted
        return max(min(wanted, self.deadline - time.monotonic()), 1.0)

    def call(self, name: str, args: dict[str, Any]) -> dict[str, Any]:
        fn: Optional[Callable[..., dict[str, Any]]] = getattr(self, f"tool_{name}", None)
        if fn is None or name not in self.names:
            return {"error": f"unknown tool: {name}"}
        try:
            return fn(**args)
        except WorkspaceEscape as exc:
            return {"error": str(exc)}
        except TypeError as exc:
            return {"error": f"bad arguments for {name}: {exc}"}
        except (OSError, UnicodeDecodeError) as exc:
            return {"error": f"{type(exc).__name__}: {exc}"}

    def tool_read_file(self, path: str, offset: int = 0, max_chars: Optional[int] = None) -> dict[str, Any]:
        p = resolve_in_workspace(self.workspace, path)
        if not p.is_file():
            return {"error": f"not a file: {path}"}
        text = p.read_text(encoding="utf-8", errors="replace")
        limit = min(int(max_chars or self.read_limit), self.read_limit)
        start = max(int(offset or 0), 0)
        chunk = text[start:start + limit]
        return {"path": path, "content": chunk, "total_chars": len(text),
                "truncated": start + limit < len(text)}

    def tool_write_file(self, path: str, content: str) -> dict[str, Any]:
        if not isinstance(content, str):
            return {"error": "content must be a string"}
        write_text_file(self.workspace, path, content)
        return {"path": path, "written_chars": len(content)}

    def tool_list_files(self, path: str = ".") -> dict[str, Any]:
        root = resolve_in_workspace(self.workspace, path) if path not in ("", ".") else self.workspace
        if not root.is_dir():
            return {"error": f"not a directory: {path}"}
        files: list[str] = []
        truncated = False
        for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
            dirnames[:] = sorted(d for d in dirnames if d != ".git")
            for fn in sorted(filenames):
                rel = os.path.relpath(os.path.join(dirpath, fn), self.workspace)
                files.append(rel)
                if len(files) >= self.list_limit:
                    truncated = True
                    break
            if truncated:
                break
        return {"files": files, "truncated": truncated}

    def tool_run_shell(self, command: str, timeout_s: Optional[float] = None) -> dict[str, Any]:
        limit = min(float(timeout_s or self.shell_timeout_s), self.shell_timeout_s)
        return run_command(str(command), cwd=self.workspace, timeout_s=self._remaining(limit),
                           env=self.env, output_limit=self.output_limit)

    def _template(self, argv: list[str]) -> list[str]:
        return [a.replace("{workspace}", str(self.workspace)) for a in argv]

    def tool_run_gate(self) -> dict[str, Any]:
        assert self.gate_argv
        return run_command(self._template(self.gate_argv), cwd=self.workspace,
                           timeout_s=self._remaining(self.gate_timeout_s), env=self.env,
                           output_limit=self.output_limit)

    def tool_run_profiler(self, extra_args: Optional[list[str]] = None) -> dict[str, Any]:
        assert self.profiler_argv
        extra = [str(a) for a in (extra_args or [])]
        return run_command(self._template(self.profiler_argv) + extra, cwd=self.workspace,
                           timeout_s=self._remaining(self.gate_timeout_s), env=self.env,
                           output_limit=self.output_limit)


def usage_from_openai(u: Optional[dict[str, Any]]) -> Usage:
    """Normalise a chat-completions ``usage`` object (see :class:`Usage`)."""
    u = u or {}
    prompt = int(u.get("prompt_tokens") or 0)
    cached = int(((u.get("prompt_tokens_details") or {}).get("cached_tokens")) or 0)
    reasoning = int(((u.get("completion_tokens_details") or {}).get("reasoning_tokens")) or 0)
    cost = u.get("cost")
    return Usage(
        input_tokens=max(prompt - cached, 0),
        output_tokens=int(u.get("completion_tokens") or 0),
        cache_read_tokens=cached,
        reasoning_tokens=reasoning,
        cost_usd=float(cost) if isinstance(cost, (int, float)) else None,
        num_turns=1,
    )


class OpenAICompatBackend(AgentBackend):
    """Chat-completions tool loop.

    Config: ``base_url`` (default ``https://api.openai.com/v1``), ``model``
    (required), ``credential_env`` (default ``OPENAI_API_KEY``; set
    ``options["api_key_optional"] = True`` for local servers without auth),
    ``reasoning_effort`` (sent as ``reasoning_effort``), ``max_tool_rounds``,
    ``max_retries`` (per HTTP request: transport errors, HTTP 408/409/429/5xx
    and malformed replies are retried; whole turns are not, because tools
    already ran).  Options: ``shell_timeout_s`` (600), ``gate_timeout_s``
    (1800), ``request_timeout_s`` (600), ``output_limit`` (16000 chars),
    ``max_tokens`` (per response), ``temperature``, ``extra_body`` (dict merged
    into each request).
    """

    name: ClassVar[str] = "openai"
    default_credentials: ClassVar[list[str]] = ["OPENAI_API_KEY"]

    @property
    def base_url(self) -> str:
        return (self.config.base_url or DEFAULT_BASE_URL).rstrip("/")

    def check(self) -> None:
        """Raise :class:`AgentUnavailable` if no model is configured or no API key is set."""
        if not self.config.model:
            raise AgentUnavailable("openai: no model configured (set `model`)")
        if not re.match(r"^https?://", self.base_url):
            raise AgentUnavailable(f"openai: base_url must start with http:// or https://: {self.base_url}")
        if not self.config.options.get("api_key_optional"):
            self.require_credential(self.default_credentials)

    def _api_key(self) -> Optional[str]:
        for name in self.config.credential_env or self.default_credentials:
            value = self.env_value(name)
            if value:
                return value
        return None

    # ------------------------------------------------------------------ sessions

    def _session_file(self, sid: str) -> Path:
        if not _SESSION_RE.match(sid):
            raise AttemptFailure("agent_error", f"invalid session id: {sid!r}", retryable=False)
        return self.state_path() / "sessions" / f"{sid}.json"

    def load_session(self, sid: str) -> list[dict[str, Any]]:
        """The stored messages of session ``sid``; raises AttemptFailure if unknown."""
        path = self._session_file(sid)
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError):
            raise AttemptFailure("agent_error", f"unknown or unreadable session: {sid}", retryable=False) from None
        return list(data.get("messages") or [])

    def save_session(self, sid: str, messages: list[dict[str, Any]]) -> None:
        path = self._session_file(sid)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps({"session_id": sid, "model": self.config.model, "messages": messages}))
        tmp.replace(path)

    # ------------------------------------------------------------------ HTTP

    def _post(self, payload: dict[str, Any], deadline: float, log: Any) -> dict[str, Any]:
        url = f"{self.base_url}/chat/completions"
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        key = self._api_key()
        if key:
            headers["Authorization"] = f"Bearer {key}"
        body = json.dumps(payload).encode()
        per_request = float(self.config.options.get("request_timeout_s", 600))
        last_err = "no attempt"
        for attempt in range(self.config.max_retries + 1):
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise AttemptFailure("timeout", f"turn timed out ({last_err})", retryable=False)
            req = urllib.request.Request(url, data=body, headers=headers, method="POST")
            try:
                with urllib.request.urlopen(req, timeout=min(per_request, remaining)) as resp:
                    raw = resp.read()
                data = json.loads(raw.decode("utf-8"))
                if not isinstance(data, dict) or not data.get("choices"):
                    raise ValueError(f"no choices in reply: {raw[:200]!r}")
                log.write(json.dumps({"response": data})[:200_000] + "\n")
                return data
            except urllib.error.HTTPError as exc:
                detail = exc.read()[:300].decode("utf-8", errors="replace")
                last_err = f"HTTP {exc.code}: {detail}"
                log.write(json.dumps({"error": last_err}) + "\n")
                if exc.code not in (408, 409, 429) and exc.code < 500:
                    raise AttemptFailure("transport", last_err, retryable=False) from None
            except (urllib.error.URLError, TimeoutError, ConnectionError, OSError) as exc:
                last_err = f"{type(exc).__name__}: {getattr(exc, 'reason', exc)}"
                log.write(json.dumps({"error": last_err}) + "\n")
            except ValueError as exc:
                last_err = f"malformed reply: {exc}"
                log.write(json.dumps({"error": last_err}) + "\n")
            if attempt < self.config.max_retries:
                time.sleep(min(self.config.retry_backoff_s * (attempt + 1), max(deadline - time.monotonic(), 0), 30))
        kind: ErrorKind = "malformed" if last_err.startswith("malformed") else "transport"
        raise AttemptFailure(kind, f"model request failed after {self.config.max_retries + 1} tries: {last_err}",
                             retryable=False)

    # ------------------------------------------------------------------ the loop

    def _attempt(self, req: TurnRequest, attempt: int) -> TurnResult:
        c = self.config
        if not c.model:
            raise AttemptFailure("unavailable", "openai: no model configured", retryable=False)
        deadline = time.monotonic() + self.turn_timeout(req)
        sid = req.session_id or uuid.uuid4().hex
        messages = self.load_session(sid) if req.session_id else []
        system = req.system_prompt or (None if messages else DEFAULT_SYSTEM_PROMPT)
        if system:
            if messages and messages[0].get("role") == "system":
                messages[0] = {"role": "system", "content": system}
            else:
                messages.insert(0, {"role": "system", "content": system})
        messages.append({"role": "user", "content": req.prompt})

        opts = c.options
        env = dict(os.environ)
        env.update(c.env)
        env.update(req.env)
        tools = WorkspaceTools(
            req.workspace, gate_argv=req.gate_argv, profiler_argv=req.profiler_argv,
            shell_timeout_s=float(opts.get("shell_timeout_s", 600)),
            gate_timeout_s=float(opts.get("gate_timeout_s", 1800)),
            output_limit=int(opts.get("output_limit", 16_000)), env=env, deadline=deadline,
        )
        names = tools.names
        if req.allowed_tools is not None:
            names = [n for n in names if n in req.allowed_tools]
        schemas = tool_schemas(names)

        events = EventLog(c.max_events)
        usage = Usage()
        log_path = self.log_path(req, attempt, ".jsonl")
        final_text = ""

        def result(ok: bool) -> TurnResult:
            return TurnResult(ok=ok, text=final_text, session_id=sid, usage=usage, events=events.to_list(),
                              events_dropped=events.dropped, raw_log_path=log_path)

        events.add(AgentEvent(type="init", text=sid, raw={"model": c.model, "tools": names}))
        with open(log_path, "w", encoding="utf-8") as log:
            try:
                for _round in range(c.max_tool_rounds):
                    payload: dict[str, Any] = {"model": c.model, "messages": messages}
                    if schemas:
                        payload["tools"] = schemas
                        payload["tool_choice"] = "auto"
                    if c.reasoning_effort:
                        payload["reasoning_effort"] = c.reasoning_effort
                    if "max_tokens" in opts:
                        payload["max_tokens"] = int(opts["max_tokens"])
                    if "temperature" in opts:
                        payload["temperature"] = float(opts["temperature"])
                    payload.update(opts.get("extra_body") or {})
                    log.write(json.dumps({"request_round": _round, "n_messages": len(messages)}) + "\n")
                    data = self._post(payload, deadline, log)
                    round_usage = usage_from_openai(data.get("usage"))
                    usage = usage + round_usage
                    events.add(AgentEvent(type="usage", raw=data.get("usage")))
                    msg = (data["choices"][0] or {}).get("message") or {}
                    content = msg.get("content")
                    if isinstance(content, list):  # some servers return content parts
                        content = "".join(p.get("text", "") for p in content if isinstance(p, dict))
                    tool_calls = msg.get("tool_calls") or []
                    assistant: dict[str, Any] = {"role": "assistant", "content": content or ""}
                    if tool_calls:
                        assistant["tool_calls"] = tool_calls
                    if content:
                        final_text = content
                        events.add(AgentEvent(type="text", text=content))
                    replies = []
                    for call in tool_calls:
                        fn = call.get("function") or {}
                        tname = fn.get("name") or ""
                        try:
                            args = json.loads(fn.get("arguments") or "{}")
                            if not isinstance(args, dict):
                                raise ValueError("arguments are not a JSON object")
                        except ValueError as exc:
                            out: dict[str, Any] = {"error": f"arguments are not valid JSON: {exc}"}
                            args = None
                        else:
                            events.add(AgentEvent(type="tool_use", tool_name=tname, tool_input=args))
                            out = tools.call(tname, args) if tname in names else {"error": f"tool not allowed: {tname}"}
                        text = json.dumps(out)
                        events.add(AgentEvent(type="tool_result", tool_name=tname, text=tail(text, 4000)))
                        replies.append({"role": "tool", "tool_call_id": call.get("id") or "", "content": text})
                    messages.append(assistant)
                    messages.extend(replies)
                    limit_msg = self._limit_exceeded(usage)
                    if limit_msg:
                        raise AttemptFailure("limit", limit_msg, retryable=False)
                    if not tool_calls:
                        events.add(AgentEvent(type="result", text=final_text))
                        return result(True)
                    if time.monotonic() > deadline:
                        raise AttemptFailure("timeout", "turn timed out between tool rounds", retryable=False)
                raise AttemptFailure("limit", f"tool round limit reached ({c.max_tool_rounds} rounds)",
                                     retryable=False)
            except AttemptFailure as fail:
                fail.partial = result(False)
                raise
            finally:
                self.save_session(sid, messages)
