"""Codex CLI backend: ``codex exec --json``.

Tested against Codex CLI 0.171.0 (``@openai/codex`` on npm).  The prompt
goes on stdin (``-``), the role prompt through ``-c developer_instructions=``,
and a session is resumed with ``codex exec ... resume THREAD_ID -``.

Codex 0.171.0 only speaks the OpenAI *Responses* API to model providers
(``wire_api = "chat"`` is rejected), so a custom ``base_url`` is configured as
a model provider with ``wire_api = "responses"``.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any, ClassVar, Optional

from ._cli import CliBackend, ProcOutcome, StreamParser, _int
from .base import AgentEvent, AttemptFailure, TurnRequest, TurnResult, Usage


class CodexStreamParser(StreamParser):
    """Parser of ``codex exec --json`` JSONL events.

    Events used: ``thread.started`` (thread_id), ``item.completed`` with items
    of type ``agent_message``, ``command_execution``, ``file_change``,
    ``mcp_tool_call``, ``reasoning``, ``error``; ``turn.completed`` (usage)
    and ``turn.failed`` / ``error``.

    Codex reports the *thread's* cumulative usage in ``turn.completed``; the
    backend turns it into per-turn usage (see :class:`CodexBackend`).
    """

    def __init__(self, max_events: int = 500) -> None:
        super().__init__(max_events)
        self.thread_id: Optional[str] = None
        self.last_text: str = ""
        self.completed: Optional[dict[str, Any]] = None
        self.failed: Optional[str] = None
        self.errors: list[str] = []

    def handle(self, obj: dict[str, Any]) -> Optional[str]:
        typ = obj.get("type")
        if typ == "thread.started":
            self.thread_id = obj.get("thread_id")
            self.events.add(AgentEvent(type="init", text=self.thread_id, raw=obj))
        elif typ == "item.completed":
            self._item(obj.get("item") or {})
        elif typ in ("item.started", "item.updated", "turn.started"):
            pass  # progress only; the completed item carries everything
        elif typ == "turn.completed":
            self.completed = obj.get("usage") or {}
            self.events.add(AgentEvent(type="usage", raw=self.completed))
        elif typ == "turn.failed":
            err = obj.get("error") or {}
            self.failed = err.get("message") if isinstance(err, dict) else str(err)
            self.events.add(AgentEvent(type="error", text=self.failed, raw=obj))
        elif typ == "error":
            msg = obj.get("message") or json.dumps(obj)[:500]
            self.errors.append(msg)
            self.events.add(AgentEvent(type="error", text=msg, raw=obj))
        else:
            self.events.add(AgentEvent(type="other", text=str(typ)))
        return None

    def _item(self, item: dict[str, Any]) -> None:
        itype = item.get("type")
        if itype == "agent_message":
            self.last_text = item.get("text") or ""
            self.events.add(AgentEvent(type="text", text=self.last_text))
        elif itype == "command_execution":
            self.events.add(AgentEvent(type="tool_use", tool_name="shell", tool_input=item.get("command")))
            self.events.add(AgentEvent(type="tool_result", tool_name="shell",
                                       text=(item.get("aggregated_output") or "")[-4000:],
                                       raw={"exit_code": item.get("exit_code"), "status": item.get("status")}))
        elif itype == "file_change":
            self.events.add(AgentEvent(type="tool_use", tool_name="file_change", tool_input=item.get("changes"),
                                       raw={"status": item.get("status")}))
        elif itype == "mcp_tool_call":
            self.events.add(AgentEvent(type="tool_use", tool_name=f"{item.get('server')}/{item.get('tool')}",
                                       tool_input=item.get("arguments"), raw={"status": item.get("status")}))
        elif itype == "error":
            # non-fatal notices, e.g. "Model metadata for `x` not found"
            self.events.add(AgentEvent(type="error", text=item.get("message"), raw=item))
        else:
            self.events.add(AgentEvent(type="other", text=str(itype),
                                       raw={"text": item.get("text")} if item.get("text") else None))

    def cumulative_usage(self) -> Usage:
        """The usage reported by ``turn.completed``, normalised (see :class:`Usage`)."""
        u = self.completed or {}
        cached = _int(u.get("cached_input_tokens"))
        return Usage(
            input_tokens=max(_int(u.get("input_tokens")) - cached, 0),
            output_tokens=_int(u.get("output_tokens")),
            cache_read_tokens=cached,
            cache_write_tokens=_int(u.get("cache_write_input_tokens")),
            reasoning_tokens=_int(u.get("reasoning_output_tokens")),
            num_turns=1 if self.completed is not None else 0,
        )

    def finish(self, outcome: ProcOutcome) -> TurnResult:
        partial = self.base_result(ok=False, text=self.last_text, session_id=self.thread_id,
                                   usage=self.cumulative_usage())
        if self.failed is not None and not outcome.timed_out:
            raise AttemptFailure("agent_error", f"codex turn failed: {self.failed}", partial=partial)
        if self.completed is None and self.errors and not outcome.timed_out and not outcome.stopped_early:
            raise AttemptFailure("agent_error", f"codex error: {self.errors[-1]}", partial=partial)
        self.fail_common(outcome, partial, have_final=self.completed is not None)
        if outcome.returncode not in (0, None):
            raise AttemptFailure("exit", f"client exited with status {outcome.returncode}", partial=partial)
        partial.ok = True
        return partial


def _toml_str(value: str) -> str:
    """A TOML basic string for ``value`` (JSON string escapes are valid TOML)."""
    return json.dumps(value)


class CodexBackend(CliBackend):
    """Codex CLI in ``exec`` mode.

    Command: ``codex exec --json --skip-git-repo-check --sandbox SANDBOX -C WS
    -c approval_policy="never" [-m M] [-c model_reasoning_effort=E]
    [-c developer_instructions=ROLE] [provider -c ...] [quiet flags] EXTRA...
    [resume THREAD_ID] -`` with the prompt on stdin.

    Credentials: ``OPENAI_API_KEY`` or ``CODEX_API_KEY`` (or ``credential_env``).
    With ``base_url`` set, a model provider ``options["provider_id"]``
    (default "kernelwright") is defined on the command line with that base
    URL, ``env_key`` = the credential's variable name and
    ``wire_api = "responses"``.  Without it, the key is also exported as
    ``CODEX_API_KEY``, which ``codex exec`` reads.

    Options: ``quiet`` (default True) adds ``-c analytics.enabled=false
    --disable plugins`` - without them Codex 0.171.0 contacts chatgpt.com,
    ab.chatgpt.com, github.com and api.github.com at start-up.  ``codex_home``
    sets ``CODEX_HOME``.

    Usage: ``turn.completed`` carries the thread's cumulative token counts; the
    backend remembers the last cumulative count per thread (in memory and in
    ``state_dir/codex/usage-baselines.json``) and reports the difference.
    """

    name: ClassVar[str] = "codex"
    binary_name: ClassVar[str] = "codex"
    default_credentials: ClassVar[list[str]] = ["OPENAI_API_KEY", "CODEX_API_KEY"]
    install_hint: ClassVar[str] = "install with: npm install -g @openai/codex"
    default_env: ClassVar[dict[str, str]] = {"NO_COLOR": "1"}

    _lock = threading.Lock()

    def __init__(self, config: Any) -> None:
        super().__init__(config)
        self._baselines: dict[str, dict[str, int]] = {}

    def build_command(self, req: TurnRequest, binary: str, env: dict[str, str]) -> tuple[list[str], Optional[str]]:
        c = self.config
        argv = [binary, "exec", "--json", "--skip-git-repo-check", "--sandbox", c.sandbox,
                "-C", str(req.workspace), "-c", 'approval_policy="never"']
        if c.model:
            argv += ["-m", c.model]
        if c.reasoning_effort:
            argv += ["-c", f"model_reasoning_effort={_toml_str(c.reasoning_effort)}"]
        if req.system_prompt:
            argv += ["-c", f"developer_instructions={_toml_str(req.system_prompt)}"]
        cred = None
        for name in (c.credential_env or self.default_credentials):
            if self.env_value(name):
                cred = name
                break
        if c.base_url:
            pid = str(c.options.get("provider_id", "kernelwright"))
            argv += [
                "-c", f"model_provider={_toml_str(pid)}",
                "-c", f"model_providers.{pid}.name={_toml_str(pid)}",
                "-c", f"model_providers.{pid}.base_url={_toml_str(c.base_url)}",
                "-c", f'model_providers.{pid}.wire_api="responses"',
            ]
            if cred:
                argv += ["-c", f"model_providers.{pid}.env_key={_toml_str(cred)}"]
        elif cred and cred != "CODEX_API_KEY":
            env["CODEX_API_KEY"] = self.env_value(cred) or ""
        if c.options.get("quiet", True):
            argv += ["-c", "analytics.enabled=false", "--disable", "plugins"]
        if c.options.get("codex_home"):
            env["CODEX_HOME"] = str(c.options["codex_home"])
        if env.get("CODEX_HOME"):
            # codex 0.171.0 exits 1 when CODEX_HOME names a missing directory
            Path(env["CODEX_HOME"]).expanduser().mkdir(parents=True, exist_ok=True)
        argv += list(c.extra_args)
        if req.session_id:
            argv += ["resume", req.session_id]
        argv.append("-")
        return argv, req.prompt

    def new_parser(self, req: TurnRequest) -> StreamParser:
        return CodexStreamParser(self.config.max_events)

    # ------------------------------------------------------------ per-turn usage

    def _baseline_file(self) -> Path:
        return self.state_path() / "usage-baselines.json"

    def _load_baseline(self, thread_id: str) -> Optional[dict[str, int]]:
        if thread_id in self._baselines:
            return self._baselines[thread_id]
        try:
            data = json.loads(self._baseline_file().read_text())
            return data.get(thread_id)
        except (OSError, ValueError):
            return None

    def _store_baseline(self, thread_id: str, cumulative: Usage) -> None:
        snap = cumulative.model_dump(exclude={"cost_usd", "num_turns"})
        self._baselines[thread_id] = snap
        with self._lock:
            path = self._baseline_file()
            try:
                data = json.loads(path.read_text())
            except (OSError, ValueError):
                data = {}
            data[thread_id] = snap
            tmp = path.with_suffix(".tmp")
            tmp.write_text(json.dumps(data))
            tmp.replace(path)

    def _attempt(self, req: TurnRequest, attempt: int) -> TurnResult:
        try:
            return super()._attempt(req, attempt)
        except AttemptFailure as fail:
            # a failed attempt that still completed a turn advanced the thread's totals
            if fail.partial is not None and fail.partial.usage.num_turns:
                self._per_turn_usage(req, fail.partial)
            raise

    def after_success(self, req: TurnRequest, result: TurnResult) -> TurnResult:
        return self._per_turn_usage(req, result)

    def _per_turn_usage(self, req: TurnRequest, result: TurnResult) -> TurnResult:
        """Turn the cumulative thread usage in ``result`` into this turn's share; remember the total."""
        cumulative = result.usage
        if result.session_id:
            base = self._load_baseline(result.session_id) if req.session_id else None
            if base:
                result.usage = Usage(
                    input_tokens=max(cumulative.input_tokens - base.get("input_tokens", 0), 0),
                    output_tokens=max(cumulative.output_tokens - base.get("output_tokens", 0), 0),
                    cache_read_tokens=max(cumulative.cache_read_tokens - base.get("cache_read_tokens", 0), 0),
                    cache_write_tokens=max(cumulative.cache_write_tokens - base.get("cache_write_tokens", 0), 0),
                    reasoning_tokens=max(cumulative.reasoning_tokens - base.get("reasoning_tokens", 0), 0),
                    num_turns=cumulative.num_turns,
                )
            self._store_baseline(result.session_id, cumulative)
        return result
