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
