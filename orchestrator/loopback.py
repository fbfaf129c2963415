"""A scripted OpenAI-compatible model server on 127.0.0.1, for tests, the demo and benchmarks.

``ModelServer`` is a real HTTP server (standard library only) that speaks the OpenAI
chat-completions protocol, streamed (server-sent events) and not, so the code that uses it
calls it exactly as it would call a real model, through litellm or any OpenAI client::

    with ModelServer(["Hello there.", Reply(status=429, error="slow down")]) as server:
        await litellm.acompletion(model="openai/gm", api_base=server.url, api_key="x", ...)
        server.requests[0].messages  # what the client sent

What it answers is a *script*: a sequence of replies consumed one per request (a request
beyond its end gets a 500 "script exhausted"), or a function of the parsed request JSON,
called one request at a time. A reply is text, or a ``Reply`` that can also carry reasoning,
an HTTP error, a delay or a stream cut mid-reply. Every chat request is recorded, raw body
included, in ``server.requests``.

Streams split the content into words with their following whitespace (joining the chunks
gives the content back exactly) and use chunked transfer encoding on keep-alive HTTP/1.1
connections. A cut stream (``Reply.cut_after``) ends the connection without the rest of the
body, as when a real connection drops: the client's read fails (httpx ``RemoteProtocolError``
"incomplete chunked read", aiohttp ``ClientPayloadError``; through litellm the ``async for``
over the stream raises ``litellm.MidStreamFallbackError`` after the chunks that did arrive).

Errors carry OpenAI-style bodies whose defaults make litellm raise the matching exception
(see ``error_body``). Note that the OpenAI SDK under litellm retries 408/409/429/5xx and
timeouts twice by default (pass ``max_retries=0`` to litellm to get one request per call);
each retry is a request, so it takes the next item of a sequence script.

Nothing sleeps unless a reply asks for it, and nothing is logged.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import re
import socket
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any

__all__ = ["ModelServer", "Received", "Reply", "Script", "error_body", "split_chunks"]

CHAT_PATHS = frozenset({"/v1/chat/completions", "/chat/completions"})
MODELS_PATHS = frozenset({"/v1/models", "/models"})


@dataclass(frozen=True)
class Reply:
    """One scripted answer. A plain ``str`` in a script means ``Reply(content=str)``."""

    content: str = ""
    # Streamed as delta["reasoning_content"] chunks before the content; non-streamed as
    # message["reasoning_content"].
    reasoning: str | None = None
    # Not 200: answer with this status and the error body ``error_body(status, error, ...)``.
    status: int = 200
    error: str = ""
    error_type: str | None = None  # overrides the body's "type" (default: by status)
    error_code: str | None = None  # overrides the body's "code" (default: by status)
    # Streaming only: after this many content chunks, end the connection without the rest
    # (no finish_reason, no usage, no [DONE], no terminating HTTP chunk).
    cut_after: int | None = None
    delay: float = 0.0  # seconds to sleep before answering (to provoke client timeouts)
    chunk_delay: float = 0.0  # streaming: seconds between events (0: all written at once)
    finish_reason: str = "stop"
    # Usage; defaults: characters of the request's messages // 4 (at least 1), and the
    # number of content chunks.
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    # Extra response headers, e.g. {"retry-after-ms": "1"} to make SDK retries immediate.
    headers: Mapping[str, str] = field(default_factory=dict)


Script = Callable[[dict[str, Any]], Reply | str]


@dataclass(frozen=True)
class Received:
    """A chat-completions request as the server received it."""

    path: str
    body: bytes  # byte for byte
    json: dict[str, Any]  # parsed ({} if the body is not a JSON object; the reply was then a 400)
    headers: dict[str, str]  # names lower-cased

    @property
    def messages(self) -> list[dict[str, Any]]:
        messages: list[dict[str, Any]] = self.json.get("messages", [])
        return messages


_WORD = re.compile(r"\S+\s*")
_LEADING_SPACE = re.compile(r"\s*")


def split_chunks(text: str) -> list[str]:
    """Split text into words with their following whitespace; ``"".join`` gives it back."""
    chunks: list[str] = _WORD.findall(text)
    lead = _LEADING_SPACE.match(text)
    if lead is not None and lead.end():
        if chunks:
            chunks[0] = text[: lead.end()] + chunks[0]
        else:
            chunks = [text]
    return chunks


def prompt_size(request: dict[str, Any]) -> int:
    """A rough token count of a request's messages: their characters // 4, at least 1."""
    total = 0
    for message in request.get("messages") or []:
        content = message.get("content") if isinstance(message, dict) else message
        if isinstance(content, str):
            total += len(content)
        elif isinstance(content, list):
            for part in content:
                text = part.get("text") if isinstance(part, dict) else None
                total += len(text) if isinstance(text, str) else len(json.dumps(part))
        elif content is not None:
            total += len(json.dumps(content))
    return max(1, total // 4)


_ERROR_DEFAULTS: dict[int, tuple[str, str | None]] = {
    400: ("invalid_request_error", None),
    401: ("authentication_error", "invalid_api_key"),
    403: ("permission_error", None),
    404: ("invalid_request_error", "model_not_found"),
    429: ("rate_limit_exceeded", "rate_limit_exceeded"),
}


def error_body(
    status: int, message: str, kind: str | None = None, code: str | None = None
) -> dict[str, Any]:
    """An OpenAI-style error body; ``kind`` (its "type") and ``code`` default by status.

    litellm picks its exception from this text before it looks at the status, so the
    defaults are chosen to land on the status's own exception: 400 -> BadRequestError, or
    ContextWindowExceededError if the message contains "This model's maximum context length
    is"; 401 -> AuthenticationError (its type is not "invalid_request_error", which litellm
    would make a BadRequestError unless the message contains "Incorrect API key provided");
    404 -> NotFoundError (code "model_not_found"); 429 -> RateLimitError; 500 ->
    InternalServerError; 503 -> ServiceUnavailableError.
    """
    default_kind, default_code = _ERROR_DEFAULTS.get(status, ("server_error", None))
    if status == 400 and "maximum context length" in message.lower():
        default_code = "context_length_exceeded"
    return {
        "error": {
            "message": message,
            "type": kind or default_kind,
            "param": None,
            "code": code or default_code,
        }
    }


class ModelServer:
    """A scripted chat-completions server on a free loopback port (see the module doc)."""

    def __init__(self, script: Script | Sequence[Reply | str], *, model: str = "gm") -> None:
        self.model = model
        self.port = 0  # once started: a free port, chosen by binding to 0
        self.url = ""  # once started: "http://127.0.0.1:<port>/v1"
        self.requests: list[Received] = []
        self.errors: list[BaseException] = []  # the server's own failures (none, one hopes)
        self._script = script
        self._position = 0
        self._ids = itertools.count(1)
        self._lock = threading.Lock()
        self._connections: set[socket.socket] = set()
        self._httpd: _HTTPServer | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> ModelServer:
        httpd = _HTTPServer(("127.0.0.1", 0), _Handler)
        httpd.owner = self
        self._httpd = httpd
        self.port = httpd.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}/v1"
        self._thread = threading.Thread(
            target=httpd.serve_forever,
            kwargs={"poll_interval": 0.02},  # how long stop() may wait for the loop
            name=f"ModelServer {self.url}",
            daemon=True,
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving; close the listening socket and every open connection."""
        httpd, thread = self._httpd, self._thread
        if httpd is None or thread is None:
            return
        httpd.shutdown()
        httpd.server_close()
        thread.join()
        with self._lock:
            connections = list(self._connections)
        for connection in connections:  # wakes handlers waiting on idle keep-alive reads
            with contextlib.suppress(OSError):
                connection.shutdown(socket.SHUT_RDWR)
        self._httpd = self._thread = None

    def __enter__(self) -> ModelServer:
        return self.start()

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()

    def _answer(self, received: Received, valid: bool) -> tuple[Reply, int]:
        """Record a request and take its reply from the script (one call at a time)."""
        with self._lock:
            self.requests.append(received)
            number = next(self._ids)
            script = self._script
            item: Reply | str
            if not valid:
                item = Reply(status=400, error="the request body is not a JSON object")
            elif callable(script):
                try:
                    item = script(received.json)
                except Exception as error:  # noqa: BLE001 - a script's bug is a 500, not a hang
                    item = Reply(status=500, error=f"the script raised {error!r}")
            elif self._position < len(script):
                item = script[self._position]
                self._position += 1
            else:
                item = Reply(status=500, error="script exhausted")
        return (Reply(content=item) if isinstance(item, str) else item), number


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    owner: ModelServer

    def handle_error(self, request: Any, client_address: Any) -> None:
        """Print nothing; keep what is not a client going away in ``owner.errors``."""
        error = sys.exc_info()[1]
        if error is not None and not isinstance(error, OSError):
            with self.owner._lock:
                self.owner.errors.append(error)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive
    wbufsize = -1  # buffered: headers and body leave in one write, at flush()
    server: _HTTPServer

    def setup(self) -> None:
        super().setup()
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        owner = self.server.owner
        with owner._lock:
            owner._connections.add(self.connection)

    def finish(self) -> None:
        owner = self.server.owner
        with owner._lock:
            owner._connections.discard(self.connection)
        with contextlib.suppress(OSError):  # flushing to a client that went away
            super().finish()

    def log_message(self, format: str, *args: Any) -> None:
        """Log nothing."""

    def do_GET(self) -> None:
        if self.path.split("?")[0] in MODELS_PATHS:
            model = self.server.owner.model
            self._send_json(200, {"object": "list", "data": [{"id": model, "object": "model"}]})
        else:
            self._send_json(404, error_body(404, f"no such path: {self.path}", code="not_found"))

    def do_POST(self) -> None:
        path = self.path.split("?")[0]
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if path not in CHAT_PATHS:
            self._send_json(404, error_body(404, f"no such path: {self.path}", code="not_found"))
            return
        try:
            parsed = json.loads(body)
        except ValueError:
            parsed = None
        request = parsed if isinstance(parsed, dict) else {}
        headers = {name.lower(): value for name, value in self.headers.items()}
        received = Received(path, body, request, headers)
        reply, number = self.server.owner._answer(received, isinstance(parsed, dict))
        if reply.delay:
            time.sleep(reply.delay)
        if reply.status != 200:
            self._send_error(reply)
        elif request.get("stream"):
            self._send_stream(reply, request, number)
        else:
            self._send_completion(reply, request, number)

    def _send_error(self, reply: Reply) -> None:
        body = error_body(reply.status, reply.error, reply.error_type, reply.error_code)
        headers = {"Retry-After": "0"} if reply.status == 429 else {}
        self._send_json(reply.status, body, {**headers, **reply.headers})

    def _send_completion(self, reply: Reply, request: dict[str, Any], number: int) -> None:
        message: dict[str, Any] = {"role": "assistant", "content": reply.content}
        if reply.reasoning is not None:
            message["reasoning_content"] = reply.reasoning
        completion = _header(request, number, self.server.owner.model, "chat.completion")
        completion["choices"] = [
            {"index": 0, "message": message, "finish_reason": reply.finish_reason}
        ]
        completion["usage"] = _usage(reply, request, len(split_chunks(reply.content)))
        self._send_json(200, completion, reply.headers)

    def _send_stream(self, reply: Reply, request: dict[str, Any], number: int) -> None:
        events = _stream_events(reply, request, number, self.server.owner.model)
        try:
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Cache-Control", "no-cache")
            self.send_header("Transfer-Encoding", "chunked")
            for name, value in reply.headers.items():
                self.send_header(name, value)
            self.end_headers()
            if reply.chunk_delay:
                for event in events:
                    self.wfile.write(event)
                    self.wfile.flush()
                    time.sleep(reply.chunk_delay)
            else:
                self.wfile.write(b"".join(events))
            self.wfile.flush()
        except OSError:  # the client went away (BrokenPipeError, ConnectionResetError)
            self.close_connection = True
            return
        if reply.cut_after is not None:
            self.close_connection = True  # the connection ends mid-body: no terminating chunk

    def _send_json(
        self, status: int, payload: dict[str, Any], headers: Mapping[str, str] = {}
    ) -> None:
        data = json.dumps(payload).encode()
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for name, value in headers.items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(data)
            self.wfile.flush()
        except OSError:
            self.close_connection = True


def _header(request: dict[str, Any], number: int, model: str, kind: str) -> dict[str, Any]:
    return {
        "id": f"chatcmpl-{number}",
        "object": kind,
        "created": int(time.time()),
        "model": request.get("model") or model,
    }


def _usage(reply: Reply, request: dict[str, Any], chunks: int) -> dict[str, int]:
    prompt = reply.prompt_tokens if reply.prompt_tokens is not None else prompt_size(request)
    completion = reply.completion_tokens if reply.completion_tokens is not None else chunks
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    }


def _sse(data: bytes) -> bytes:
    """One server-sent event, as one HTTP chunk."""
    event = b"data: " + data + b"\n\n"
    return b"%x\r\n%s\r\n" % (len(event), event)


def _stream_events(
    reply: Reply, request: dict[str, Any], number: int, model: str
) -> Iterator[bytes]:
    """The stream's HTTP chunks, one per event (cut short if the reply says so)."""
    header = json.dumps(_header(request, number, model, "chat.completion.chunk"))[:-1]
    prefix = header.encode() + b', "choices": [{"index": 0, "delta": '

    def event(delta: dict[str, Any], finish: str | None = None) -> bytes:
        return _sse(
            prefix
            + json.dumps(delta).encode()
            + b', "finish_reason": %s}]}' % (json.dumps(finish).encode())
        )

    content = split_chunks(reply.content)
    sent = content if reply.cut_after is None else content[: reply.cut_after]
    deltas: list[dict[str, Any]] = [
        {"reasoning_content": piece} for piece in split_chunks(reply.reasoning or "")
    ]
    deltas += [{"content": piece} for piece in sent]
    if not deltas:
        deltas = [{"content": ""}]
    deltas[0] = {"role": "assistant", **deltas[0]}
    yield from (event(delta) for delta in deltas)
    if reply.cut_after is not None:
        return
    yield event({}, reply.finish_reason)
    if (request.get("stream_options") or {}).get("include_usage"):
        usage = json.dumps(_usage(reply, request, len(content))).encode()
        yield _sse(header.encode() + b', "choices": [], "usage": ' + usage + b"}")
    yield _sse(b"[DONE]") + b"0\r\n\r\n"
