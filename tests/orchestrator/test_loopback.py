"""The loopback model server, called for real: through litellm and over raw HTTP.

litellm caches its OpenAI clients per event loop (keyed by the loop's id, which a later
loop can reuse); ``run`` closes them and empties the cache before its loop ends, so no
connection outlives its loop (that would be a ResourceWarning, an error here).
"""

from __future__ import annotations

import asyncio
import http.client
import json
import os
import re
import socket
import struct
import time
from collections.abc import Coroutine
from contextlib import closing
from typing import Any, TypeVar

import pytest
from hypothesis import given
from hypothesis import strategies as st

from orchestrator.loopback import ModelServer, Reply, split_chunks

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # no fetch on import
import litellm
from litellm.exceptions import MidStreamFallbackError

litellm.suppress_debug_info = True  # no "Give Feedback / Get Help" prints on errors

# Two warnings of pydantic's about litellm 1.106.2's own code, not errors of ours: a schema
# litellm builds lazily on its first response (a TypedDict with ReadOnly items), and litellm
# reading every attribute of a stream chunk (include_usage) on the instance.
pytestmark = [
    pytest.mark.filterwarnings(
        "ignore:Item 'summary' on TypedDict class 'ChatCompletionReasoningItem':UserWarning"
    ),
    pytest.mark.filterwarnings(
        "ignore:Accessing the 'model_(computed_)?fields' attribute on the instance"
        ":pydantic.warnings.PydanticDeprecatedSince211"
        ":litellm.litellm_core_utils.model_response_utils"
    ),
]

MESSAGES = [
    {"role": "system", "content": "You are the narrator."},
    {"role": "user", "content": "I draw my sword and step into the cave."},
]
STORY = "A goblin leaps\nfrom the  shadows, knife raised. "


T = TypeVar("T")


def run(coro: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine in a new loop, closing litellm's clients of that loop at its end."""

    async def main() -> T:
        try:
            return await coro
        finally:
            await litellm.close_litellm_async_clients()
            litellm.in_memory_llm_clients_cache.flush_cache()

    return asyncio.run(main())


async def complete(server: ModelServer, **kwargs: Any) -> Any:
    kwargs = {"messages": MESSAGES, "max_retries": 0, **kwargs}
    return await litellm.acompletion(
        model="openai/gm", api_base=server.url, api_key="anything", **kwargs
    )


async def stream(server: ModelServer, into: list[Any], **kwargs: Any) -> list[Any]:
    """Stream a completion, collecting its chunks in ``into`` (kept if the stream fails)."""
    response = await complete(server, stream=True, **kwargs)
    async for chunk in response:
        into.append(chunk)
    return into


def deltas(chunks: list[Any], field: str) -> str:
    return "".join(getattr(c.choices[0].delta, field, None) or "" for c in chunks if c.choices)


def raw(server: ModelServer) -> http.client.HTTPConnection:
    return http.client.HTTPConnection("127.0.0.1", server.port)


def post(connection: http.client.HTTPConnection, payload: Any) -> http.client.HTTPResponse:
    body = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
    connection.request("POST", "/v1/chat/completions", body, {"Content-Type": "application/json"})
    return connection.getresponse()


def events(body: bytes) -> list[Any]:
    """The data of a server-sent-event stream, parsed ("[DONE]" stays a string)."""
    assert body.endswith(b"\n\n")
    parts = [part.removeprefix(b"data: ") for part in body.split(b"\n\n")[:-1]]
    return [part.decode() if part == b"[DONE]" else json.loads(part) for part in parts]


@given(st.text(alphabet=st.sampled_from("ab \n\t\x1f\u00a0\u2028\u3000é")) | st.text())
def test_chunks_join_to_the_text_and_each_is_a_word_with_its_whitespace(text: str) -> None:
    chunks = split_chunks(text)
    assert "".join(chunks) == text
    words = len(text.split())
    assert len(chunks) == (max(1, words) if text else 0)  # all-whitespace text: one chunk
    for chunk in chunks[1:]:
        assert not chunk[0].isspace()
        assert len(chunk.split()) == 1


def test_a_stream_through_litellm_carries_the_content_exactly_and_the_usage() -> None:
    with ModelServer([Reply(STORY, prompt_tokens=30)]) as server:
        chunks = run(stream(server, [], stream_options={"include_usage": True}))

    assert deltas(chunks, "content") == STORY
    content_chunks = [c for c in chunks if c.choices and c.choices[0].delta.content]
    assert len(content_chunks) == len(split_chunks(STORY)) == 8
    assert chunks[0].choices[0].delta.role == "assistant"
    finishes = [c.choices[0].finish_reason for c in chunks if c.choices]
    assert [finish for finish in finishes if finish] == ["stop"]
    usage = chunks[-1].usage
    assert (usage.prompt_tokens, usage.completion_tokens, usage.total_tokens) == (30, 8, 38)
    assert {c.id for c in chunks} == {"chatcmpl-1"} and chunks[0].model == "gm"

    (request,) = server.requests
    assert request.path == "/v1/chat/completions"
    assert request.messages == MESSAGES
    assert request.json == {
        "messages": MESSAGES,
        "model": "gm",
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    assert request.body == json.dumps(request.json, separators=(",", ":")).encode()
    assert request.headers["authorization"] == "Bearer anything"


def test_reasoning_comes_through_litellm_streamed_and_not() -> None:
    reply = Reply("The door opens.", reasoning="The player rolled well.\n")
    with ModelServer([reply, reply]) as server:
        chunks = run(stream(server, []))
        response = run(complete(server))

    assert deltas(chunks, "reasoning_content") == "The player rolled well.\n"
    assert deltas(chunks, "content") == "The door opens."
    first_content = next(i for i, c in enumerate(chunks) if c.choices[0].delta.content)
    assert not any(deltas(chunks[first_content:], "reasoning_content"))
    assert response.choices[0].message.reasoning_content == "The player rolled well.\n"
    assert response.choices[0].message.content == "The door opens."


def test_a_plain_completion_with_a_json_schema_and_the_default_usage() -> None:
    schema = {"type": "object", "properties": {"hp": {"type": "integer"}}, "required": ["hp"]}
    response_format = {"type": "json_schema", "json_schema": {"name": "delta", "schema": schema}}

    def script(request: dict) -> str:
        assert request["response_format"] == response_format
        return json.dumps({"hp": -10})

    with ModelServer(script) as server:
        response = run(complete(server, response_format=response_format))

    assert json.loads(response.choices[0].message.content) == {"hp": -10}
    assert response.choices[0].finish_reason == "stop"
    characters = sum(len(m["content"]) for m in MESSAGES)
    assert response.usage.prompt_tokens == characters // 4
    assert response.usage.completion_tokens == 2  # '{"hp": ' and '-10}'
    assert server.requests[0].json["response_format"] == response_format
    assert "stream" not in server.requests[0].json


def test_a_sequence_is_consumed_in_order_then_every_request_is_a_500() -> None:
    with ModelServer(["one", Reply("two")]) as server:
        assert run(complete(server)).choices[0].message.content == "one"
        assert deltas(run(stream(server, [])), "content") == "two"
        for _ in range(2):
            with pytest.raises(litellm.InternalServerError, match="script exhausted"):
                run(complete(server))
    assert [r.json.get("stream", False) for r in server.requests] == [False, True, False, False]


CONTEXT = "This model's maximum context length is 8192 tokens. However, you requested 9000."
ERRORS = [
    (Reply(status=400, error=CONTEXT), litellm.ContextWindowExceededError),
    (Reply(status=400, error="context length exceeded"), litellm.BadRequestError),
    (Reply(status=400, error="messages must not be empty"), litellm.BadRequestError),
    (Reply(status=401, error="bad key"), litellm.AuthenticationError),
    # OpenAI's own 401 body: its type alone would make a BadRequestError, its message saves it
    (
        Reply(
            status=401, error="Incorrect API key provided: sk-x", error_type="invalid_request_error"
        ),
        litellm.AuthenticationError,
    ),
    (
        Reply(status=401, error="bad key", error_type="invalid_request_error"),
        litellm.BadRequestError,
    ),
    (Reply(status=404, error="The model `gm` does not exist"), litellm.NotFoundError),
    (Reply(status=404, error="gone", error_type="not_found_error"), litellm.NotFoundError),
    (Reply(status=404, error="gone", error_code="other"), litellm.BadRequestError),
    (Reply(status=429, error="slow down"), litellm.RateLimitError),
    (Reply(status=500, error="boom"), litellm.InternalServerError),
    (Reply(status=503, error="overloaded"), litellm.ServiceUnavailableError),
]


@pytest.mark.parametrize("streamed", [False, True], ids=["plain", "streamed"])
def test_each_error_becomes_its_litellm_exception(streamed: bool) -> None:
    with ModelServer([reply for reply, _ in ERRORS]) as server:
        for reply, expected in ERRORS:
            with pytest.raises(expected, match=re.escape(reply.error[:20])) as caught:
                run(stream(server, []) if streamed else complete(server))
            if expected is litellm.BadRequestError:  # not one of its subclasses
                assert type(caught.value) is litellm.BadRequestError, reply
            assert caught.value.status_code == reply.status, reply
    assert len(server.requests) == len(ERRORS)


def test_the_sdk_retries_429_and_5xx_twice_each_retry_a_request() -> None:
    fast = {"retry-after-ms": "1"}  # or the SDK backs off 0.5 s, then 1 s
    script = [Reply(status=429, error="slow", headers=fast), Reply(status=503, headers=fast), "ok"]
    with ModelServer(script) as server:
        response = run(complete(server, max_retries=None))
    assert response.choices[0].message.content == "ok"
    retries = [r.headers["x-stainless-retry-count"] for r in server.requests]
    assert retries == ["0", "1", "2"]


def test_a_cut_stream_fails_in_the_clients_loop_after_the_chunks_that_arrived() -> None:
    cut = Reply("abc def ghi", reasoning="hmm", cut_after=1)
    with ModelServer([cut, "after"]) as server:
        chunks: list[Any] = []
        with pytest.raises(MidStreamFallbackError, match="not completed") as caught:
            run(stream(server, chunks, stream_options={"include_usage": True}))
        assert deltas(chunks, "reasoning_content") == "hmm"
        assert deltas(chunks, "content") == "abc "
        assert not any(c.choices[0].finish_reason for c in chunks if c.choices)
        assert isinstance(caught.value, litellm.ServiceUnavailableError)
        assert isinstance(caught.value.original_exception, litellm.APIConnectionError)
        assert caught.value.generated_content == "abc "
        assert run(complete(server)).choices[0].message.content == "after"


def test_a_cut_stream_over_raw_http_is_an_incomplete_chunked_body() -> None:
    with ModelServer([Reply("abc def ghi", cut_after=2)]) as server, closing(raw(server)) as conn:
        response = post(conn, {"model": "gm", "messages": MESSAGES, "stream": True})
        assert response.status == 200
        assert response.getheader("Transfer-Encoding") == "chunked"
        with pytest.raises(http.client.IncompleteRead) as caught:
            response.read()
        received = events(caught.value.partial)
        assert [e["choices"][0]["delta"].get("content") for e in received] == ["abc ", "def "]
        assert all(e["choices"][0]["finish_reason"] is None for e in received)


def test_a_delay_provokes_a_client_timeout() -> None:
    with ModelServer([Reply("late", delay=2.0)]) as server:
        started = time.monotonic()
        with pytest.raises(litellm.Timeout):
            run(complete(server, timeout=0.1))
        assert time.monotonic() - started < 1.5  # the client gave up; the server still sleeps


def test_raw_http_keeps_the_connection_alive_and_speaks_the_protocol() -> None:
    script = [Reply("Hi there.", reasoning="Greet.", finish_reason="length"), "plain", "x"]
    with ModelServer(script, model="narrator") as server, closing(raw(server)) as conn:
        streamed = {"model": "narrator", "messages": MESSAGES, "stream": True}
        streamed["stream_options"] = {"include_usage": True}
        response = post(conn, streamed)
        sock = conn.sock
        assert response.getheader("Content-Type") == "text/event-stream"
        received = events(response.read())
        assert received[-1] == "[DONE]"
        *chunks, usage = received[:-1]
        assert all(c["object"] == "chat.completion.chunk" for c in received[:-1])
        assert chunks[0]["choices"][0]["delta"] == {
            "role": "assistant",
            "reasoning_content": "Greet.",
        }
        assert [c["choices"][0]["delta"].get("content") for c in chunks[1:-1]] == ["Hi ", "there."]
        assert chunks[-1]["choices"] == [{"index": 0, "delta": {}, "finish_reason": "length"}]
        assert usage["choices"] == []
        prompt = sum(len(m["content"]) for m in MESSAGES) // 4
        expected = {"prompt_tokens": prompt, "completion_tokens": 2, "total_tokens": prompt + 2}
        assert usage["usage"] == expected

        response = post(conn, {"model": "narrator", "messages": []})
        completion = json.loads(response.read())
        assert completion["object"] == "chat.completion" and completion["id"] == "chatcmpl-2"
        assert completion["choices"] == [
            {
                "index": 0,
                "message": {"role": "assistant", "content": "plain"},
                "finish_reason": "stop",
            }
        ]
        assert completion["usage"] == {
            "prompt_tokens": 1,
            "completion_tokens": 1,
            "total_tokens": 2,
        }

        conn.request("GET", "/v1/models")
        listing = json.loads(conn.getresponse().read())
        assert listing == {"object": "list", "data": [{"id": "narrator", "object": "model"}]}

        conn.request("GET", "/v1/nothing")
        response = conn.getresponse()
        assert response.status == 404
        assert json.loads(response.read())["error"]["type"] == "invalid_request_error"

        response = post(conn, b"{not json")
        assert response.status == 400
        assert json.loads(response.read())["error"]["message"].endswith("not a JSON object")

        response = post(conn, {"model": "narrator", "messages": [], "stream": False})
        assert json.loads(response.read())["choices"][0]["message"]["content"] == "x"
        assert conn.sock is sock  # one connection for everything

        response = post(conn, {"messages": []})
        assert response.status == 500
        assert response.getheader("Retry-After") is None
        assert json.loads(response.read()) == {
            "error": {
                "message": "script exhausted",
                "type": "server_error",
                "param": None,
                "code": None,
            }
        }
    assert server.errors == []
    assert [r.body for r in server.requests][2] == b"{not json"  # recorded, no script item used
    assert server.requests[2].json == {}
    assert len(server.requests) == 5  # GETs are not recorded


def test_a_429_says_retry_after_zero() -> None:
    with (
        ModelServer([Reply(status=429, error="slow down")]) as server,
        closing(raw(server)) as conn,
    ):
        response = post(conn, {"messages": []})
        assert (response.status, response.getheader("Retry-After")) == (429, "0")
        assert json.loads(response.read())["error"] == {
            "message": "slow down",
            "type": "rate_limit_exceeded",
            "param": None,
            "code": "rate_limit_exceeded",
        }


def test_a_script_function_gets_the_request_and_its_exceptions_are_500s() -> None:
    def script(request: dict) -> Reply | str:
        if request["messages"][-1]["content"] == "fail":
            raise ValueError("no such scene")
        return Reply(request["messages"][-1]["content"].upper())

    with ModelServer(script) as server:
        echoed = run(complete(server, messages=[{"role": "user", "content": "echo"}]))
        assert echoed.choices[0].message.content == "ECHO"
        with pytest.raises(litellm.InternalServerError, match="no such scene"):
            run(complete(server, messages=[{"role": "user", "content": "fail"}]))


def test_a_client_leaving_mid_stream_neither_crashes_the_server_nor_prints(
    capfd: pytest.CaptureFixture[str],
) -> None:
    long = Reply("word " * 200, chunk_delay=0.001)
    with ModelServer([long, "still here"]) as server:
        assert server.url == f"http://127.0.0.1:{server.port}/v1"
        with socket.create_connection(("127.0.0.1", server.port)) as client:
            body = json.dumps({"messages": [], "stream": True}).encode()
            client.sendall(
                b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s"
                % (len(body), body)
            )
            assert client.recv(100).startswith(b"HTTP/1.1 200 OK")
            linger_zero = struct.pack("ii", 1, 0)  # close() resets the connection
            client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, linger_zero)
        time.sleep(0.05)  # the server writes into the reset connection
        with closing(raw(server)) as conn:
            response = post(conn, {"messages": []})
            assert json.loads(response.read())["choices"][0]["message"]["content"] == "still here"
    assert capfd.readouterr() == ("", "")
    assert server.errors == []


def test_stop_closes_idle_keep_alive_connections() -> None:
    server = ModelServer(["one"]).start()
    with closing(raw(server)) as conn:
        post(conn, {"messages": []}).read()
        assert conn.sock is not None
        server.stop()
        conn.sock.settimeout(5)
        assert conn.sock.recv(1) == b""  # the server's side is closed, not left hanging
    with pytest.raises(ConnectionRefusedError), closing(raw(server)) as again:
        again.request("GET", "/v1/models")
