"""GET /api/sessions/{sid}/trace-diff on SQLite and PostgreSQL, over turns played
against the loopback model: the comparison, its schema, the ETag, and the refusals."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from fastapi.testclient import TestClient

from clotho.api.tracediff import TraceDiffOut
from mnemosyne import Store, nodenames, refs
from orchestrator.loopback import ModelServer
from tests.orchestrator.test_tracediff import Moments, played_story


@pytest.fixture
def moments(store: Store, serve: Callable[..., ModelServer]) -> Moments:
    return played_story(store, serve)


def test_the_comparison_of_an_edit_and_its_original(client: TestClient, moments: Moments) -> None:
    url = f"/api/sessions/{moments.session_id}/trace-diff"
    answer = client.get(url, params={"a": moments.first[:8], "b": moments.fork})
    assert answer.status_code == 200, answer.text
    body = TraceDiffOut.model_validate(answer.json())
    assert (body.a.node_id, body.b.node_id) == (moments.first, moments.fork)
    assert (body.a.kind, body.b.kind) == ("say", "edit")
    [changed] = [m for m in body.messages if m.status == "changed"]
    assert (changed.role, changed.a, changed.b) == (
        "user",
        "A goblin attacks!",
        "A dragon attacks!",
    )
    assert [(w.op, w.text) for w in changed.words][1:3] == [
        ("removed", "goblin"),
        ("added", "dragon"),
    ]
    lore = {entry.id: entry.status for entry in body.lore}
    assert lore == {"valley:1": "only_a", "valley:0": "both", "valley:2": "only_b"}
    assert body.counts.lore_added == body.counts.lore_removed == 1
    assert body.summary.startswith("1 message changed, 1 message added, 1 message removed")
    assert body.tokens.difference.prompt == (body.tokens.b.prompt or 0) - (
        body.tokens.a.prompt or 0
    )
    # a read of the session: its version is the ETag, and a client that has it gets a 304
    etag = answer.headers["etag"]
    again = client.get(
        url, params={"a": moments.first, "b": moments.fork}, headers={"if-none-match": etag}
    )
    assert again.status_code == 304


def test_rerolls_and_turns_far_apart(client: TestClient, moments: Moments) -> None:
    url = f"/api/sessions/{moments.session_id}/trace-diff"
    rerolls = client.get(url, params={"a": moments.first, "b": moments.reroll}).json()
    assert rerolls["settings"] == [{"name": "params.temperature", "a": 0.7, "b": 1.0}]
    assert rerolls["state"] == []
    apart = client.get(url, params={"a": moments.first, "b": moments.later}).json()
    assert {"path": "hp", "a": 100, "b": 90} in apart["state"]
    assert apart["counts"]["messages_added"] == 3


def test_refusals_name_what_was_wrong(client: TestClient, moments: Moments) -> None:
    url = f"/api/sessions/{moments.session_id}/trace-diff"
    user = client.get(url, params={"a": moments.user, "b": moments.first})
    assert user.status_code == 404 and user.json()["code"] == "no_trace"
    assert moments.user in user.json()["detail"] and "player's message" in user.json()["detail"]
    unknown = client.get(url, params={"a": moments.first, "b": "ffffffff"})
    assert unknown.status_code == 404 and unknown.json()["code"] == "unknown_node"
    missing = client.get(url, params={"a": moments.first})
    assert missing.status_code == 422 and missing.json()["errors"][0]["field"] == "query.b"
    extra = client.get(url, params={"a": moments.first, "b": moments.fork, "c": "x"})
    assert extra.status_code == 422
    nowhere = client.get("/api/sessions/ffffffffffff/trace-diff", params={"a": "x", "b": "y"})
    assert nowhere.status_code == 404 and nowhere.json()["code"] == "unknown_session"
    documented = client.get("/openapi.json").json()["paths"]
    operation = documented["/api/sessions/{session_id}/trace-diff"]["get"]
    assert {"200", "304", "404", "422"} <= set(operation["responses"])


def test_the_nodes_are_named_as_everywhere_a_tag_too(
    client: TestClient, store: Store, moments: Moments
) -> None:
    refs.name_node(store, moments.session_id, "the-dragon", "tag", moments.fork)
    url = f"/api/sessions/{moments.session_id}/trace-diff"
    answer = client.get(url, params={"a": moments.first, "b": "the-dragon"})
    assert answer.status_code == 200, answer.text
    assert answer.json()["b"]["node_id"] == moments.fork
    # the parameters are the project's NodeRef: its length, its pattern, its description
    operation = client.get("/openapi.json").json()["paths"][
        "/api/sessions/{session_id}/trace-diff"
    ]["get"]
    declared = {p["name"]: p["schema"] for p in operation["parameters"] if p["in"] == "query"}
    assert declared["a"]["maxLength"] == declared["b"]["maxLength"] == nodenames.MAX_NAME_LENGTH
    assert declared["a"]["pattern"] == nodenames.NODE_NAME_PATTERN
    too_long = client.get(url, params={"a": moments.first, "b": "x" * 81})
    assert too_long.status_code == 422
