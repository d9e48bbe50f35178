"""Loopback fake model servers that replay scripted conversations.

Each server binds 127.0.0.1 on a random free port, records every request it
receives, and answers through a Python callable, so a test can script what
the "model" says while a real agent client (Claude Code, Codex CLI, Gemini
CLI) or the OpenAI-compatible backend drives the conversation.

Only the parts of each wire protocol that the clients need are spoken:

* Anthropic Messages API (``POST /v1/messages``), streaming (SSE) and not.
* OpenAI Responses API (``POST /v1/responses``), SSE.
* OpenAI Chat Completions (``POST /v1/chat/completions``), non-streaming.
* Gemini ``generateContent`` / ``streamGenerateContent?alt=sse``.
"""

from __future__ import annotations

import itertools
import json
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable, Optional


@dataclass
class RecordedRequest:
    """One HTTP request as the fake server saw it."""

    method: str
    path: str
    headers: dict[str, str]
    body: bytes

    @property
    def json(self) -> Any:
        try:
            return json.loads(self.body.decode("utf-8")) if self.body else None
        except ValueError:
            return None


@dataclass
class Reply:
    """What the handler answers: a status, headers and a full body."""

    status: int = 200
    body: bytes = b""
    content_type: str = "application/json"
    headers: dict[str, str] = field(default_factory=dict)

    @classmethod
    def json_body(cls, obj: Any, status: int = 200) -> "Reply":
        return cls(status=status, body=json.dumps(obj).encode(), content_type="application/json")

    @classmethod
    def sse(cls, events: list[tuple[Optional[str], Any]]) -> "Reply":
        out = []
        for name, data in events:
            if name:
                out.append(f"event: {name}\n")
            payload = data if isinstance(data, str) else json.dumps(data)
            out.append(f"data: {payload}\n\n")
        return cls(status=200, body="".join(out).encode(), content_type="text/event-stream")


Handler = Callable[[RecordedRequest], Reply]


class FakeModelServer:
    """A threaded HTTP server on 127.0.0.1 that records requests.

    Use as a context manager; ``base_url`` is ``http://127.0.0.1:PORT``.
    """

    def __init__(self, handler: Handler) -> None:
        self.handler = handler
        self.requests: list[RecordedRequest] = []
        #: hosts/URLs that a client tried to reach through us as a proxy (refused)
        self.blocked: list[str] = []
        self._lock = threading.Lock()
        outer = self

        class _H(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:  # keep pytest output quiet
                pass

            def do_CONNECT(self) -> None:  # a client tried to tunnel to the internet
                with outer._lock:
                    outer.blocked.append(self.path)
                self.send_response(403)
                self.send_header("Content-Length", "0")
                self.send_header("Connection", "close")
                self.end_headers()
                self.close_connection = True

            def _serve(self) -> None:
                if self.path.startswith(("http://", "https://")) and not self.path.startswith(outer.base_url):
                    # plain-HTTP proxy request for a foreign host: refuse and record it
                    with outer._lock:
                        outer.blocked.append(self.path)
                    self.send_response(403)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
                    body = _read_chunked(self.rfile)
                req = RecordedRequest(
                    method=self.command,
                    path=self.path,
                    headers={k.lower(): v for k, v in self.headers.items()},
                    body=body,
                )
                with outer._lock:
                    outer.requests.append(req)
                try:
                    reply = outer.handler(req)
                except Exception as exc:  # a test bug: answer 500 so the client fails visibly
                    reply = Reply.json_body({"error": {"type": "fake_server_error", "message": repr(exc)}}, 500)
                self.send_response(reply.status)
                self.send_header("Content-Type", reply.content_type)
                self.send_header("Content-Length", str(len(reply.body)))
                for k, v in reply.headers.items():
                    self.send_header(k, v)
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(reply.body)
                    self.wfile.flush()

            do_GET = do_POST = do_HEAD = do_PUT = do_DELETE = do_OPTIONS = _serve

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _H)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def port(self) -> int:
        return self._server.server_address[1]

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> "FakeModelServer":
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._server.shutdown()
        self._server.server_close()

    def posts(self, path_part: str) -> list[RecordedRequest]:
        with self._lock:
            return [r for r in self.requests if r.method == "POST" and path_part in r.path]


def _read_chunked(rfile: Any) -> bytes:
    data = b""
    while True:
        size_line = rfile.readline().strip()
        size = int(size_line.split(b";")[0], 16)
        if size == 0:
            rfile.readline()
            return data
        data += rfile.read(size)
        rfile.readline()


_ids = itertools.count(1)


# --------------------------------------------------------------------------- Anthropic


def anthropic_message(
    blocks: list[dict[str, Any]],
    *,
    model: str,
    input_tokens: int,
    output_tokens: int,
    cache_read: int = 0,
    cache_write: int = 0,
    stop_reason: Optional[str] = None,
) -> dict[str, Any]:
    """A complete (non-streamed) Anthropic Messages API response."""
    if stop_reason is None:
        stop_reason = "tool_use" if any(b["type"] == "tool_use" for b in blocks) else "end_turn"
    return {
        "id": f"msg_fake{next(_ids):04d}",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": blocks,
        "stop_reason": stop_reason,
        "stop_sequence": None,
        "usage": {
            "input_tokens": input_tokens,
            "output_tokens": output_tokens,
            "cache_creation_input_tokens": cache_write,
            "cache_read_input_tokens": cache_read,
        },
    }


def anthropic_sse(message: dict[str, Any]) -> Reply:
    """Stream ``message`` the way the Messages API does with ``stream: true``."""
    usage = message["usage"]
    start = dict(message, content=[], stop_reason=None, usage=dict(usage, output_tokens=1))
    events: list[tuple[Optional[str], Any]] = [("message_start", {"type": "message_start", "message": start})]
    for i, block in enumerate(message["content"]):
        if block["type"] == "text":
            events.append(("content_block_start", {"type": "content_block_start", "index": i,
                                                   "content_block": {"type": "text", "text": ""}}))
            text = block["text"]
            for part in (text[: len(text) // 2], text[len(text) // 2:]):
                events.append(("content_block_delta", {"type": "content_block_delta", "index": i,
                                                       "delta": {"type": "text_delta", "text": part}}))
        elif block["type"] == "tool_use":
            events.append(("content_block_start", {"type": "content_block_start", "index": i,
                                                   "content_block": {"type": "tool_use", "id": block["id"],
                                                                     "name": block["name"], "input": {}}}))
            raw = json.dumps(block["input"])
            for part in (raw[: len(raw) // 2], raw[len(raw) // 2:]):
                events.append(("content_block_delta", {"type": "content_block_delta", "index": i,
                                                       "delta": {"type": "input_json_delta", "partial_json": part}}))
        events.append(("content_block_stop", {"type": "content_block_stop", "index": i}))
    events.append(("message_delta", {"type": "message_delta",
                                     "delta": {"stop_reason": message["stop_reason"], "stop_sequence": None},
                                     "usage": {"output_tokens": usage["output_tokens"]}}))
    events.append(("message_stop", {"type": "message_stop"}))
    return Reply.sse(events)


# --------------------------------------------------------------------------- OpenAI Responses


def responses_sse(items: list[dict[str, Any]], usage: dict[str, Any], *, response_id: Optional[str] = None) -> Reply:
    """Stream a Responses API reply the way ``POST /v1/responses`` with ``stream: true`` does."""
    rid = response_id or f"resp_fake{next(_ids):04d}"
    events: list[tuple[Optional[str], Any]] = [
        ("response.created", {"type": "response.created",
                              "response": {"id": rid, "object": "response", "status": "in_progress", "output": []}}),
    ]
    for i, item in enumerate(items):
        events.append(("response.output_item.added", {"type": "response.output_item.added", "output_index": i,
                                                      "item": dict(item, status="in_progress")}))
        if item["type"] == "message":
            text = item["content"][0]["text"]
            events.append(("response.output_text.delta", {"type": "response.output_text.delta", "item_id": item["id"],
                                                          "output_index": i, "content_index": 0, "delta": text}))
        elif item["type"] == "function_call":
            events.append(("response.function_call_arguments.delta",
                           {"type": "response.function_call_arguments.delta", "item_id": item["id"],
                            "output_index": i, "delta": item["arguments"]}))
        events.append(("response.output_item.done", {"type": "response.output_item.done", "output_index": i,
                                                     "item": item}))
    events.append(("response.completed", {"type": "response.completed",
                                          "response": {"id": rid, "object": "response", "status": "completed",
                                                       "output": items, "usage": usage}}))
    return Reply.sse(events)


# --------------------------------------------------------------------------- scripted conversations

TURN_MARK = "KW-TURN-"


class ScriptedModel:
    """A scripted "model" shared by the protocol handlers below.

    ``turns[n]`` is the list of assistant steps of the turn whose user prompt
    contains ``KW-TURN-n``.  A step is ``{"tool": NAME, "args": {...}}`` or
    ``{"text": "..."}``; the step index is the number of assistant replies
    already given after that prompt, so the script follows the conversation
    the client sends back (which is what proves resume works).  Past the end
    of a turn's list it answers a final text, so a confused client cannot loop
    for long.  Every main-conversation reply's usage is recorded in
    ``served`` as ``(turn, step, usage)``.
    """

    def __init__(self, turns: dict[int, list[dict[str, Any]]], *, base_tokens: int = 1000) -> None:
        self.turns = turns
        self.base_tokens = base_tokens
        self.served: list[tuple[int, int, dict[str, int]]] = []
        self.side_requests: list[RecordedRequest] = []
        self._lock = threading.Lock()
        self._tool_ids = itertools.count(1)

    def step(self, turn: int, index: int) -> dict[str, Any]:
        steps = self.turns.get(turn, [])
        return steps[index] if index < len(steps) else {"text": f"turn {turn} finished"}

    def usage(self, turn: int, index: int) -> dict[str, int]:
        """Token counts reported for one reply: distinct per (turn, step) so sums are checkable."""
        return {
            "input": self.base_tokens + 100 * turn + 10 * index,
            "output": 20 + index + turn,
            "cache_read": 5 * turn + index,
            "cache_write": 3 + index,
        }

    def record(self, turn: int, index: int) -> dict[str, int]:
        u = self.usage(turn, index)
        with self._lock:
            self.served.append((turn, index, u))
        return u

    def totals(self, turn: int) -> dict[str, int]:
        """Sum of the usage served for ``turn``."""
        out = {"input": 0, "output": 0, "cache_read": 0, "cache_write": 0, "requests": 0}
        for t, _i, u in self.served:
            if t == turn:
                for k in ("input", "output", "cache_read", "cache_write"):
                    out[k] += u[k]
                out["requests"] += 1
        return out

    def tool_id(self, prefix: str) -> str:
        return f"{prefix}{next(self._tool_ids):04d}"


def _find_turn(texts_by_index: list[tuple[int, str]]) -> Optional[tuple[int, int]]:
    """(turn number, position) of the last user text containing TURN_MARK."""
    for pos, text in reversed(texts_by_index):
        idx = text.rfind(TURN_MARK)
        if idx >= 0:
            digits = ""
            for ch in text[idx + len(TURN_MARK):]:
                if not ch.isdigit():
                    break
                digits += ch
            if digits:
                return int(digits), pos
    return None


def anthropic_handler(model: ScriptedModel) -> Handler:
    """Messages API handler (streaming and not), incl. side requests such as count_tokens."""

    def handle(req: RecordedRequest) -> Reply:
        body = req.json
        if req.method != "POST" or not isinstance(body, dict):
            return Reply.json_body({})
        if "count_tokens" in req.path:
            model.side_requests.append(req)
            return Reply.json_body({"input_tokens": 42})
        msgs = body.get("messages") or []
        texts: list[tuple[int, str]] = []
        for pos, m in enumerate(msgs):
            if m.get("role") != "user":
                continue
            c = m.get("content")
            if isinstance(c, str):
                texts.append((pos, c))
            else:
                texts.extend((pos, b.get("text", "")) for b in c if b.get("type") == "text")
        found = _find_turn(texts) if body.get("tools") else None
        name = body.get("model", "claude-fake")
        if found is None:  # a side request (title, summary, quota probe, ...): answer briefly
            model.side_requests.append(req)
            msg = anthropic_message([{"type": "text", "text": "OK"}], model=name, input_tokens=1, output_tokens=1)
            return anthropic_sse(msg) if body.get("stream") else Reply.json_body(msg)
        turn, pos = found
        index = sum(1 for m in msgs[pos + 1:] if m.get("role") == "assistant")
        step = model.step(turn, index)
        u = model.record(turn, index)
        if "tool" in step:
            blocks = [{"type": "text", "text": step.get("say", "Working on it.")},
                      {"type": "tool_use", "id": model.tool_id("toolu_fake"), "name": step["tool"],
                       "input": step["args"]}]
        else:
            blocks = [{"type": "text", "text": step["text"]}]
        msg = anthropic_message(blocks, model=name, input_tokens=u["input"], output_tokens=u["output"],
                                cache_read=u["cache_read"], cache_write=u["cache_write"])
        return anthropic_sse(msg) if body.get("stream") else Reply.json_body(msg)

    return handle


def responses_handler(model: ScriptedModel) -> Handler:
    """OpenAI Responses API handler (what Codex CLI 0.171.0 speaks)."""

    def handle(req: RecordedRequest) -> Reply:
        body = req.json
        if req.method != "POST" or not isinstance(body, dict) or not req.path.rstrip("/").endswith("/responses"):
            model.side_requests.append(req)
            return Reply.json_body({"object": "list", "data": []}) if req.method == "GET" else Reply.json_body({}, 404)
        items = body.get("input") or []
        texts: list[tuple[int, str]] = []
        for pos, it in enumerate(items):
            if it.get("type") == "message" and it.get("role") == "user":
                for c in it.get("content") or []:
                    if isinstance(c, dict) and c.get("type") == "input_text":
                        texts.append((pos, c.get("text", "")))
        found = _find_turn(texts)
        if found is None:
            model.side_requests.append(req)
            item = {"type": "message", "id": f"msg_side{next(_ids)}", "role": "assistant", "status": "completed",
                    "content": [{"type": "output_text", "text": "OK", "annotations": []}]}
            return responses_sse([item], {"input_tokens": 1, "output_tokens": 1, "total_tokens": 2})
        turn, pos = found
        index = sum(1 for it in items[pos + 1:] if it.get("type") in ("function_call", "custom_tool_call")
                    or (it.get("type") == "message" and it.get("role") == "assistant"))
        step = model.step(turn, index)
        u = model.record(turn, index)
        if "tool" in step:
            out = [{"type": "function_call", "id": model.tool_id("fc_fake"), "call_id": model.tool_id("call_fake"),
                    "name": step["tool"], "arguments": json.dumps(step["args"]), "status": "completed"}]
        else:
            out = [{"type": "message", "id": model.tool_id("msg_fake"), "role": "assistant", "status": "completed",
                    "content": [{"type": "output_text", "text": step["text"], "annotations": []}]}]
        # Responses API convention: input_tokens includes cached tokens
        usage = {"input_tokens": u["input"] + u["cache_read"],
                 "input_tokens_details": {"cached_tokens": u["cache_read"]},
                 "output_tokens": u["output"], "output_tokens_details": {"reasoning_tokens": 0},
                 "total_tokens": u["input"] + u["cache_read"] + u["output"]}
        return responses_sse(out, usage)

    return handle


def gemini_handler(model: ScriptedModel) -> Handler:
    """Gemini ``generateContent`` / ``streamGenerateContent?alt=sse`` handler."""

    def handle(req: RecordedRequest) -> Reply:
        body = req.json
        if req.method != "POST" or not isinstance(body, dict):
            model.side_requests.append(req)
            return Reply.json_body({})
        contents = body.get("contents") or []
        texts: list[tuple[int, str]] = []
        for pos, c in enumerate(contents):
            if c.get("role") == "user":
                texts.extend((pos, p.get("text", "")) for p in c.get("parts") or [] if "text" in p)
        found = _find_turn(texts) if body.get("tools") else None
        if found is None:
            model.side_requests.append(req)
            parts: list[dict[str, Any]] = [{"text": "OK"}]
            meta = {"promptTokenCount": 1, "candidatesTokenCount": 1, "totalTokenCount": 2}
        else:
            turn, pos = found
            index = sum(1 for c in contents[pos + 1:] if c.get("role") == "model")
            step = model.step(turn, index)
            u = model.record(turn, index)
            if "tool" in step:
                parts = [{"text": step.get("say", "Working on it.")},
                         {"functionCall": {"name": step["tool"], "args": step["args"]}}]
            else:
                parts = [{"text": step["text"]}]
            # Gemini convention: promptTokenCount includes cached tokens
            meta = {"promptTokenCount": u["input"] + u["cache_read"], "candidatesTokenCount": u["output"],
                    "cachedContentTokenCount": u["cache_read"],
                    "totalTokenCount": u["input"] + u["cache_read"] + u["output"]}
        resp = {"candidates": [{"content": {"role": "model", "parts": parts}, "finishReason": "STOP", "index": 0}],
                "usageMetadata": meta, "modelVersion": "gemini-fake"}
        return Reply.sse([(None, resp)]) if "alt=sse" in req.path else Reply.json_body(resp)

    return handle


def chat_handler(model: ScriptedModel) -> Handler:
    """OpenAI chat-completions handler (non-streaming), for the openai backend."""

    def handle(req: RecordedRequest) -> Reply:
        body = req.json
        if req.method != "POST" or not isinstance(body, dict) or "chat/completions" not in req.path:
            return Reply.json_body({"error": {"message": "not found"}}, 404)
        msgs = body.get("messages") or []
        texts = [(pos, m.get("content") or "") for pos, m in enumerate(msgs)
                 if m.get("role") == "user" and isinstance(m.get("content"), str)]
        found = _find_turn(texts)
        turn, pos = found if found else (0, len(msgs))
        index = sum(1 for m in msgs[pos + 1:] if m.get("role") == "assistant")
        step = model.step(turn, index)
        u = model.record(turn, index)
        message: dict[str, Any] = {"role": "assistant", "content": None}
        if "tool" in step:
            message["content"] = step.get("say")
            message["tool_calls"] = [{"id": model.tool_id("call_"), "type": "function",
                                      "function": {"name": step["tool"], "arguments": step.get("raw_args")
                                                   or json.dumps(step["args"])}}]
            finish = "tool_calls"
        else:
            message["content"] = step["text"]
            finish = "stop"
        return Reply.json_body({
            "id": f"chatcmpl-{next(_ids)}", "object": "chat.completion", "model": body.get("model"),
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": {"prompt_tokens": u["input"] + u["cache_read"], "completion_tokens": u["output"],
                      "total_tokens": u["input"] + u["cache_read"] + u["output"],
                      "prompt_tokens_details": {"cached_tokens": u["cache_read"]}},
        })

    return handle
