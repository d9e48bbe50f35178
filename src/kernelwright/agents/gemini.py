"""Gemini CLI backend: ``gemini -p PROMPT --output-format stream-json``.

Tested against Gemini CLI 0.61.0 (``@google/gemini-cli`` on npm).  Gemini
CLI has no flag to append to its system prompt, so the role prompt is put in
front of the user prompt inside ``<role>...</role>`` tags.  A session is
resumed with ``--resume SESSION_UUID`` (sessions are stored per project
directory, so resume works only from the same workspace path).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, ClassVar, Optional

from ._cli import CliBackend, ProcOutcome, StreamParser, _int
from .base import AgentEvent, AttemptFailure, TurnRequest, TurnResult, Usage

#: prompts longer than this (characters) go through stdin instead of argv
_ARGV_PROMPT_LIMIT = 100_000


class GeminiStreamParser(StreamParser):
    """Parser of Gemini CLI's ``--output-format stream-json`` JSONL events.

    Events: ``init`` (session_id, model), ``message`` (role user/assistant,
    ``content``, ``delta``), ``tool_use`` (tool_name, tool_id, parameters),
    ``tool_result`` (tool_id, status, output/error), ``error`` (severity,
    message) and the final ``result`` (status, error, stats with
    ``input_tokens`` (incl. cache), ``input`` (uncached), ``cached``,
    ``output_tokens``, ``tool_calls``).
    """

    def __init__(self, max_events: int = 500) -> None:
        super().__init__(max_events)
        self.session_id: Optional[str] = None
        self.model: Optional[str] = None
        self._current: list[str] = []
        self.last_text = ""
        self.final: Optional[dict[str, Any]] = None
        self.errors: list[str] = []

    def handle(self, obj: dict[str, Any]) -> Optional[str]:
        typ = obj.get("type")
        if typ == "init":
            self.session_id = obj.get("session_id")
            self.model = obj.get("model")
            self.events.add(AgentEvent(type="init", text=self.session_id, raw=obj))
        elif typ == "message":
            if obj.get("role") == "assistant":
                content = obj.get("content") or ""
                if obj.get("delta"):
                    self._current.append(content)
                else:
                    self._current = [content]
                self.last_text = "".join(self._current)
                self.events.add(AgentEvent(type="text", text=content))
        elif typ == "tool_use":
            self._current = []
            self.events.add(AgentEvent(type="tool_use", tool_name=obj.get("tool_name"),
                                       tool_input=obj.get("parameters"), raw={"tool_id": obj.get("tool_id")}))
        elif typ == "tool_result":
            out = obj.get("output")
            if out is None and obj.get("error") is not None:
                out = json.dumps(obj.get("error"))
            self.events.add(AgentEvent(type="tool_result", text=(str(out) if out is not None else None),
                                       raw={"tool_id": obj.get("tool_id"), "status": obj.get("status")}))
        elif typ == "error":
            msg = obj.get("message") or ""
            if obj.get("severity") == "error":
                self.errors.append(msg)
            self.events.add(AgentEvent(type="error", text=msg, raw={"severity": obj.get("severity")}))
        elif typ == "result":
            self.final = obj
            self.events.add(AgentEvent(type="result", text=self.last_text, raw=obj))
        else:
            self.events.add(AgentEvent(type="other", text=str(typ)))
        return None

    def usage(self) -> Usage:
        """Usage from the final ``result`` stats (zero without one)."""
        stats = (self.final or {}).get("stats") or {}
        cached = _int(stats.get("cached"))
        uncached = stats.get("input")
        return Usage(
            input_tokens=_int(uncached) if uncached is not None else max(_int(stats.get("input_tokens")) - cached, 0),
            output_tokens=_int(stats.get("output_tokens")),
            cache_read_tokens=cached,
            num_turns=1 if self.final is not None else 0,
        )

    def finish(self, outcome: ProcOutcome) -> TurnResult:
        partial = self.base_result(ok=False, text=self.last_text, session_id=self.session_id, usage=self.usage())
        if self.final is None and self.errors and not outcome.timed_out and not outcome.stopped_early:
            raise AttemptFailure("agent_error", f"gemini error: {self.errors[-1]}", partial=partial)
        self.fail_common(outcome, partial, have_final=self.final is not None)
        assert self.final is not None
        if self.final.get("status") != "success":
            err = self.final.get("error") or {}
            msg = err.get("message") if isinstance(err, dict) else str(err)
            raise AttemptFailure("agent_error", f"gemini reported {self.final.get('status')}: {msg}", partial=partial)
        if outcome.returncode not in (0, None):
            raise AttemptFailure("exit", f"client exited with status {outcome.returncode}", partial=partial)
        partial.ok = True
        return partial


class GeminiBackend(CliBackend):
    """Gemini CLI in headless mode.

    Command: ``gemini --output-format stream-json --approval-mode MODE
    --skip-trust [-m M] [--resume SID] EXTRA... --prompt=PROMPT`` (cwd = workspace).

    Credentials: ``GEMINI_API_KEY`` (or ``credential_env``; exported to the
    client as ``GEMINI_API_KEY``).  ``base_url`` is exported as
    ``GOOGLE_GEMINI_BASE_URL``; Gemini CLI 0.61.0 then picks an auth type
    ("gateway") that its own validation rejects ("Invalid auth method
    selected."), so the backend also selects ``gemini-api-key`` auth in a
    settings file under a Gemini home it manages (``options["gemini_home"]``,
    default ``state_dir/gemini/home``, exported as ``GEMINI_CLI_HOME``).

    Options: ``approval_mode`` (default "yolo": tools, shell included, run
    without asking; Gemini CLI has no built-in sandbox without Docker),
    ``gemini_home``.
    """

    name: ClassVar[str] = "gemini"
    binary_name: ClassVar[str] = "gemini"
    default_credentials: ClassVar[list[str]] = ["GEMINI_API_KEY"]
    install_hint: ClassVar[str] = "install with: npm install -g @google/gemini-cli"
    default_env: ClassVar[dict[str, str]] = {"NO_COLOR": "1", "GEMINI_CLI_NO_RELAUNCH": "true"}

    def _gemini_home(self) -> Optional[Path]:
        opt = self.config.options.get("gemini_home")
        if opt:
            return Path(opt)
        if self.config.base_url:
            return self.state_path() / "home"
        return None

    def _write_settings(self, home: Path) -> None:
        path = home / ".gemini" / "settings.json"
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError):
            data = {}
        if self.config.base_url:
            data.setdefault("security", {}).setdefault("auth", {})["selectedType"] = "gemini-api-key"
        data.setdefault("privacy", {}).setdefault("usageStatisticsEnabled", False)
        data.setdefault("telemetry", {}).setdefault("enabled", False)
        general = data.setdefault("general", {})
        general.setdefault("enableAutoUpdate", False)
        general.setdefault("enableAutoUpdateNotification", False)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(data, indent=2))

    def build_command(self, req: TurnRequest, binary: str, env: dict[str, str]) -> tuple[list[str], Optional[str]]:
        c = self.config
        argv = [binary, "--output-format", "stream-json",
                "--approval-mode", str(c.options.get("approval_mode", "yolo")), "--skip-trust"]
        if c.model:
            argv += ["-m", c.model]
        if req.session_id:
            argv += ["--resume", req.session_id]
        argv += list(c.extra_args)
        prompt = req.prompt
        if req.system_prompt:
            prompt = f"<role>\n{req.system_prompt}\n</role>\n\n{req.prompt}"
        if c.base_url:
            env["GOOGLE_GEMINI_BASE_URL"] = c.base_url
        for name in c.credential_env:
            value = self.env_value(name)
            if value and name != "GEMINI_API_KEY":
                env["GEMINI_API_KEY"] = value
                break
        home = self._gemini_home()
        if home is not None:
            self._write_settings(home)
            env["GEMINI_CLI_HOME"] = str(home)
        if len(prompt) > _ARGV_PROMPT_LIMIT:
            return argv + ["--prompt=Follow the instructions given on standard input."], prompt
        # "--prompt=..." keeps a prompt that starts with "-" from being read as a flag
        return argv + [f"--prompt={prompt}"], None

    def new_parser(self, req: TurnRequest) -> StreamParser:
        return GeminiStreamParser(self.config.max_events)
