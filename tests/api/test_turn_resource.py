"""A turn as a resource on a real `clotho serve`, the model slow on loopback: rejoined
mid-turn (from the start, after Last-Event-ID), found while it runs, stopped with DELETE
while its reply streams, before its reply, or while it waits for the session's turn
before it, and played on by ``detach`` when its client leaves. Each test acts on the
event named, never after a wait."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from orchestrator.loopback import ModelServer, Reply

from ._server import Event, Server, events, running_with_model

WORDS = 150


def gm(request: dict[str, Any]) -> Reply | str:
    """A reply of WORDS words, 20 ms apart; "wait" makes the model think 3 s before its
    first word; no state change."""
    if "response_format" in request:
        return json.dumps({"operations": []})
    words = " ".join(f"w{i}" for i in range(WORDS))
    if "wait" in request["messages"][-1]["content"]:
        return Reply(words, delay=3.0, chunk_delay=0.02)
    return Reply(words, chunk_delay=0.02)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    with running_with_model(ModelServer(gm), tmp_path_factory.mktemp("turns")) as up:
        yield up


@pytest.fixture
def api(server: Server) -> Iterator[httpx.Client]:
    with server.client() as client:
        yield client


def new_session(api: httpx.Client) -> str:
    return str(api.post("/api/sessions", json={"title": "turns"}).json()["session"]["id"])


def until(stream: Iterator[Event], kind: str, count: int = 1) -> list[Event]:
    """The events read up to the ``count``-th of ``kind``."""
    seen: list[Event] = []
    for event in stream:
        seen.append(event)
        if sum(1 for e in seen if e.event == kind) >= count:
            return seen
    raise AssertionError(f"the stream ended before {count} {kind} event(s): {seen}")


def text(seen: list[Event]) -> str:
    return "".join(event.data["text"] for event in seen if event.event == "token")


def test_a_turn_rejoined_mid_reply_sends_the_same_events_from_the_start_or_after_an_id(
    api: httpx.Client, server: Server
) -> None:
    sid = new_session(api)
    body = {"kind": "say", "text": "Tell me the tale."}
    with api.stream("POST", f"/api/sessions/{sid}/turns", json=body) as response:
        assert response.status_code == 201
        stream = events(response)
        first = until(stream, "token", 5)
        turn = first[0].data
        running = api.get(f"/api/sessions/{sid}/turns", params={"status": "running"}).json()
        assert [t["turn_id"] for t in running["turns"]] == [turn["turn_id"]]
        assert api.get(response.headers["location"]).json()["status"] == "running"
        with (
            server.client() as other,
            other.stream("GET", turn["events"], headers={"Last-Event-ID": "3"}) as after,
        ):
            later = events(after)
            resumed = [next(later)]  # while the turn runs
            rejoined = list(events(api.get(turn["events"])))  # from the start, to the end
            resumed += list(later)
        rest = list(stream)
    original = first + rest
    same = [(e.event, e.data) for e in original]
    assert [(e.event, e.data) for e in rejoined] == same
    assert [(e.event, e.data) for e in resumed] == same[4:]
    assert original[-1].event == "node"
    assert text(original) == " ".join(f"w{i}" for i in range(WORDS))
    status = api.get(f"/api/sessions/{sid}/turns/{turn['turn_id']}").json()
    assert status["status"] == "done" and status["incomplete"] is False
    assert api.get(f"/api/sessions/{sid}").headers["etag"] == f'"{status["version"]}"'


def test_delete_while_the_reply_streams_keeps_the_text_so_far_marked_incomplete(
    api: httpx.Client,
) -> None:
    sid = new_session(api)
    body = {"kind": "say", "text": "Tell me another."}
    with api.stream("POST", f"/api/sessions/{sid}/turns", json=body) as response:
        stream = events(response)
        seen = until(stream, "token", 5)
        stopped = api.delete(response.headers["location"])
        assert stopped.status_code == 202 and stopped.json()["status"] == "running"
        seen += list(stream)
    assert seen[-1].event == "node", seen[-1]
    committed = seen[-1].data
    assert committed["incomplete"] is True
    assert committed["node"]["content"] == text(seen)  # what was shown, all of it kept
    assert len(committed["node"]["content"].split()) < WORDS
    assert committed["node"]["metadata"]["incomplete"] is True
    assert api.get(f"/api/sessions/{sid}").json()["head_id"] == committed["node"]["id"]
    status = api.get(f"/api/sessions/{sid}/turns/{seen[0].data['turn_id']}").json()
    assert status["status"] == "done" and status["incomplete"] is True


def test_delete_before_the_reply_keeps_the_players_message_alone(api: httpx.Client) -> None:
    sid = new_session(api)
    body = {"kind": "say", "text": "I wait for an answer."}
    with api.stream("POST", f"/api/sessions/{sid}/turns", json=body) as response:
        stream = events(response)
        seen = until(stream, "status", 4)
        assert seen[-1].data["text"] == "waiting for the model"
        started = time.monotonic()
        assert api.delete(response.headers["location"]).status_code == 202
        seen += list(stream)
    assert time.monotonic() - started < 2.5  # not after the model's 3 s
    last = seen[-1]
    assert last.event == "cancelled" and last.data["status"] == "cancelled"
    nodes = api.get(f"/api/sessions/{sid}/tree").json()["nodes"]
    assert [(n["role"], n["content"]) for n in nodes] == [("user", "I wait for an answer.")]
    assert last.data["user_node_id"] == nodes[0]["id"] == last.data["head_id"]
    assert api.get(f"/api/sessions/{sid}").headers["etag"] == f'"{last.data["version"]}"'


def test_delete_of_a_turn_waiting_for_the_one_before_it_stores_nothing(
    api: httpx.Client, server: Server
) -> None:
    sid = new_session(api)
    first = {"kind": "say", "text": "First."}
    with api.stream("POST", f"/api/sessions/{sid}/turns", json=first) as playing:
        played = events(playing)
        until(played, "token")
        with server.client() as other:
            second = {"kind": "say", "text": "Second."}
            with other.stream("POST", f"/api/sessions/{sid}/turns", json=second) as waiting:
                assert waiting.status_code == 201, waiting.read()
                stream = events(waiting)
                seen = until(stream, "status")
                assert seen[-1].data["text"].startswith("waiting for the turn being played")
                assert other.delete(waiting.headers["location"]).status_code == 202
                seen += list(stream)
        assert seen[-1].event == "cancelled"
        assert api.delete(playing.headers["location"]).status_code == 202
        rest = list(played)
    assert rest[-1].event == "node"
    nodes = api.get(f"/api/sessions/{sid}/tree").json()["nodes"]
    assert [n["role"] for n in nodes] == ["user", "assistant"]  # the first turn alone


def test_a_detached_turn_plays_on_when_its_client_leaves(api: httpx.Client) -> None:
    sid = new_session(api)
    body = {"kind": "say", "text": "Go on without me."}
    path = f"/api/sessions/{sid}/turns"
    with api.stream("POST", path, json=body, params={"detach": "true"}) as response:
        seen = until(events(response), "token", 3)
    turn = seen[0].data
    assert turn["detach"] is True
    last_seen = str(len(seen) - 1)  # events are numbered from 0
    with api.stream("GET", turn["events"], headers={"Last-Event-ID": last_seen}) as again:
        rest = list(events(again))
    assert rest[-1].event == "node"
    assert text(seen + rest) == " ".join(f"w{i}" for i in range(WORDS))
    assert rest[-1].data["incomplete"] is False


def test_a_client_that_reads_no_events_waits_for_the_result(api: httpx.Client) -> None:
    sid = new_session(api)
    body = {"kind": "say", "text": "Just the result."}
    path = f"/api/sessions/{sid}/turns"
    with api.stream("POST", path, json=body, params={"detach": "true"}) as response:
        location = response.headers["location"]  # leaves before any event is read
    running = api.get(location, params={"wait": "0.1"}).json()
    assert running["status"] == "running" and running["result"] is None
    done = api.get(location, params={"wait": "30"}).json()
    assert done["status"] == "done" and done["incomplete"] is False
    assert done["result"]["node"]["content"] == " ".join(f"w{i}" for i in range(WORDS))
    assert done["result"]["session"]["version"] == done["version"]
    too_long = api.get(location, params={"wait": "3600"})
    assert too_long.status_code == 422 and too_long.json()["code"] == "invalid_request"
