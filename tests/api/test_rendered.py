"""Rendered reads answered before routing (clotho.api.rendered), on each backend: the same
answer as the route's, never a stale one (a write here, a write by another process),
the token and If-None-Match still honoured, and the middleware answering on its own."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest
from fastapi.testclient import TestClient

from clotho.api.rendered import EarlyAnswers, Rendered
from mnemosyne import Store

from .conftest import TOKEN
from .test_api import add, new_session, problem


def _get(app: Any, path: str, query: bytes = b"", **headers: str) -> tuple[list[Any], bool]:
    """``GET path`` through ``EarlyAnswers`` in front of an app that only records that it
    was reached: the messages sent, and whether the routes were reached."""
    reached: list[bool] = []

    async def routes(scope: Any, receive: Any, send: Any) -> None:
        reached.append(True)

    sent: list[Any] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: Any) -> None:
        sent.append(message)

    scope = {
        "type": "http",
        "method": "GET",
        "path": path,
        "query_string": query,
        "headers": [(k.lower().encode(), v.encode()) for k, v in headers.items()],
        "app": app,
    }
    asyncio.run(EarlyAnswers(routes)(scope, receive, send))
    return sent, bool(reached)


def test_a_read_answered_once_is_answered_again_before_the_routes(client: TestClient) -> None:
    sid = new_session(client)["id"]
    add(client, sid, "user", "I light the torch.")
    path = f"/api/sessions/{sid}/projection"
    auth = {"Authorization": f"Bearer {TOKEN}"}

    sent, reached = _get(client.app, path, **auth)
    assert reached and not sent  # never answered yet: the routes answer

    first = client.get(path)
    assert first.status_code == 200
    sent, reached = _get(client.app, path, **auth)
    assert not reached
    assert sent[0]["status"] == 200
    assert dict(sent[0]["headers"])[b"etag"] == first.headers["etag"].encode()
    assert dict(sent[0]["headers"])[b"content-type"] == b"application/json"
    assert sent[1]["body"] == first.content

    # Another query, another token, a conditional request: the routes decide.
    for query, headers in (
        (b"tail=1", auth),
        (b"", {"Authorization": "Bearer not-the-token"}),
        (b"", {}),
        (b"", {**auth, "If-None-Match": first.headers["etag"]}),
    ):
        sent, reached = _get(client.app, path, query, **headers)
        assert reached and not sent, (query, headers)


def test_answers_follow_every_write_here_and_elsewhere(
    client: TestClient, database_url: str
) -> None:
    sid = new_session(client)["id"]
    add(client, sid, "user", "I open the door.")
    path = f"/api/sessions/{sid}/projection"
    tree = f"/api/sessions/{sid}/tree"
    for _ in range(2):  # the second of each is an early answer
        assert [n["content"] for n in client.get(path).json()["nodes"]] == ["I open the door."]
        assert len(client.get(tree).json()["nodes"]) == 1

    add(client, sid, "assistant", "It creaks.")  # through this server
    assert [n["content"] for n in client.get(path).json()["nodes"]][-1] == "It creaks."
    assert len(client.get(tree).json()["nodes"]) == 2

    with Store.open(database_url) as elsewhere:  # another process's store, say
        session = elsewhere.session(sid)
        elsewhere.append(sid, "user", "I step in.", expected_version=session.version)
    answered = client.get(path)
    assert [n["content"] for n in answered.json()["nodes"]][-1] == "I step in."
    assert answered.headers["etag"] == f'"{session.version + 1}"'
    assert len(client.get(tree).json()["nodes"]) == 3

    # The token is checked on early answers too, and a trashed session's reads are the
    # routes' to answer.
    unauthorised = client.get(path, headers={"Authorization": "Bearer nope"})
    problem(unauthorised, 401, "unauthorized")
    same = client.get(path)
    assert client.delete(f"/api/sessions/{sid}").status_code in (200, 204)
    assert client.get(path).headers.get("etag") != same.headers["etag"]


def test_an_id_prefix_is_answered_for_the_session_it_names(client: TestClient) -> None:
    sid = new_session(client)["id"]
    add(client, sid, "user", "Hello.")
    full = client.get(f"/api/sessions/{sid}/projection")
    for _ in range(2):
        short = client.get(f"/api/sessions/{sid[:8]}/projection")
        assert short.status_code == 200 and short.content == full.content
    add(client, sid, "assistant", "Well met.")
    short = client.get(f"/api/sessions/{sid[:8]}/projection")
    assert short.json()["nodes"][-1]["content"] == "Well met."


def test_rendered_keeps_answers_only_for_bytes_it_still_has(store: Store) -> None:
    session = store.create_session(title="lru")
    rendered = Rendered(2)
    made: list[int] = []

    def make(n: int) -> Callable[[], bytes]:
        def render() -> bytes:
            made.append(n)
            return b"%d" % n

        return render

    for n in range(3):
        assert rendered.get(("k", n), make(n)) == b"%d" % n
        rendered.answered((f"/p{n}", b""), session, ("k", n))
    assert rendered.get(("k", 2), make(2)) == b"2" and made == [0, 1, 2]  # kept: not made
    for target in (("/p0", b""), ("/unknown", b"")):  # its bytes gone; never answered
        with pytest.raises(LookupError):
            rendered.answer(target, store.session)
    assert rendered.answer(("/p2", b""), store.session) == (store.session(session.id), b"2")
    store.append(session.id, "user", "a write", expected_version=session.version)
    with pytest.raises(LookupError):  # rendered at the version before
        rendered.answer(("/p2", b""), store.session)
