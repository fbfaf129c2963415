"""The connection profiles over HTTP: a key goes in and never comes out (not in an answer,
not in the database), a Test says in words what one tiny call found (a refused key asked
once, not a 500), a session's profile plays its turns and a change plays on the next."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from clotho.api import create_app
from mnemosyne import Store
from orchestrator.loopback import ModelServer, Reply

from .conftest import TOKEN, api_settings
from .test_turns_api import events, play, session

KEY = "sk-profile-secret-7d41e9b2"


def _profile(server: ModelServer | str, **given: Any) -> dict[str, Any]:
    base = server if isinstance(server, str) else server.url
    return {"model": "openai/gm", "api_base": base, **given}


def _use(client: TestClient, sid: str, profile: str | None) -> None:
    answer = client.patch(f"/api/sessions/{sid}", json={"settings": {"profile": profile}})
    assert answer.status_code == 200, answer.text


def test_a_key_goes_in_and_never_comes_out(
    tmp_path: Path, serve: Callable[..., ModelServer]
) -> None:
    """Every answer scanned for the key, and the database file after a turn played with it."""
    server = serve(lambda request: "The gate creaks open.")
    database = tmp_path / "clotho.db"
    bodies: list[str] = []
    with Store.open(f"sqlite:///{database}", migrate=True) as store:
        settings = api_settings(tmp_path, config_dir=tmp_path / "config")
        app = create_app(settings, store=store, token=TOKEN)
        with TestClient(app, headers={"Authorization": f"Bearer {TOKEN}"}) as client:
            made = client.put("/api/profiles/Local", json={**_profile(server), "key": KEY})
            assert made.status_code == 201, made.text
            assert made.json()["key"] == "set" and "etag" in made.headers
            listed = client.get("/api/profiles")
            assert [p["name"] for p in listed.json()["profiles"]] == ["Local"]
            assert listed.json()["profiles"][0]["key"] == "set"
            tested = client.post("/api/profiles/Local/test")
            assert tested.json()["ok"] is True
            sid = session(client)
            _use(client, sid, "Local")
            turn = play(client, sid, {"kind": "say", "text": "I knock."})
            assert events(turn)[-1][0] == "node"
            node = events(turn)[-1][1]["node"]["id"]
            trace = client.get(f"/api/sessions/{sid}/nodes/{node}/trace")
            tree = client.get(f"/api/sessions/{sid}/exports/tree")
            for answer in (
                made,
                listed,
                tested,
                turn,
                trace,
                tree,
                client.get(f"/api/sessions/{sid}"),
            ):
                bodies.append(answer.text + json.dumps(dict(answer.headers)))
            openapi = client.get("/openapi.json").json()
    # the server was sent the key, as a bearer token, by the Test and by the turn
    assert server.requests and all(
        r.headers["authorization"] == f"Bearer {KEY}" for r in server.requests
    )
    assert tested.json()["model"] == "openai/gm" and tested.json()["latency_ms"] >= 0
    assert server.requests[0].json["max_tokens"] == 1
    assert trace.status_code == 200 and tree.status_code == 200
    for body in bodies:
        assert KEY not in body
    for stored in tmp_path.glob("clotho.db*"):
        assert KEY.encode() not in stored.read_bytes(), stored
    assert KEY not in (tmp_path / "config" / "profiles.toml").read_text()
    assert KEY in (tmp_path / "config" / "secrets.toml").read_text()
    assert "key" not in openapi["components"]["schemas"]["ProfileOut"]["properties"] or (
        openapi["components"]["schemas"]["ProfileOut"]["properties"]["key"]["enum"]
        == ["set", "not set", "from the environment"]
    )


@pytest.mark.parametrize(
    ("reply", "outcome", "words"),
    [
        (Reply(status=401, error="Incorrect API key provided"), "auth", "refused the key"),
        (Reply(status=404, error="The model `gm` does not exist"), "not_found", "does not know"),
    ],
)
def test_a_test_says_in_words_what_went_wrong_and_asks_once(
    make_client: Callable[..., TestClient],
    serve: Callable[..., ModelServer],
    reply: Reply,
    outcome: str,
    words: str,
) -> None:
    server = serve([reply, reply, reply])
    client = make_client()
    client.put("/api/profiles/Remote", json={**_profile(server), "key": KEY})
    answer = client.post("/api/profiles/Remote/test")
    assert answer.status_code == 200, answer.text
    found = answer.json()
    assert (found["ok"], found["outcome"], found["status"]) == (False, outcome, reply.status)
    assert words in found["message"] and server.url in found["message"]
    assert reply.error in found["message"]  # the server's own words
    assert "CLOTHO_API_KEY" not in found["message"]  # the key is the profile's
    assert KEY not in answer.text
    assert len(server.requests) == 1  # not retried


def test_a_test_of_a_server_that_is_not_there_or_too_slow(
    make_client: Callable[..., TestClient], serve: Callable[..., ModelServer]
) -> None:
    client = make_client()
    gone = serve(["never"])
    address = gone.url
    gone.stop()
    client.put("/api/profiles/Gone", json=_profile(address))
    found = client.post("/api/profiles/Gone/test").json()
    assert (found["ok"], found["outcome"]) == (False, "connection")
    assert found["message"].startswith(f"cannot reach {address}")
    slow = serve([Reply("late", delay=3.0)])
    client.put("/api/profiles/Slow", json=_profile(slow, timeout=0.5))
    found = client.post("/api/profiles/Slow/test").json()
    assert (found["ok"], found["outcome"]) == (False, "timeout")
    assert found["message"] == f"{slow.url} did not answer within 0.5 s"


def test_a_profile_is_checked_and_a_stale_write_changes_nothing(
    make_client: Callable[..., TestClient], tmp_path: Path
) -> None:
    client = make_client()
    first = client.put("/api/profiles/A", json=_profile("http://127.0.0.1:9/v1"))
    assert first.status_code == 201
    tag = first.headers["etag"]
    assert client.get("/api/profiles").headers["etag"] == tag
    again = client.put("/api/profiles/A", json=_profile("http://127.0.0.1:9/v1", preset="warm"))
    assert again.status_code == 200 and again.headers["etag"] != tag
    written = (tmp_path / "config" / "profiles.toml").read_bytes()
    stale = client.put(
        "/api/profiles/A", json=_profile("http://127.0.0.1:9/v1"), headers={"if-match": tag}
    )
    assert stale.status_code == 412 and stale.json()["code"] == "profiles_changed"
    gone = client.delete("/api/profiles/A", headers={"if-match": tag})
    assert gone.status_code == 412
    bad = client.put(
        "/api/profiles/A",
        json={"model": "openai/gm", "params": {"temperature": 9}, "colour": "red"},
    )
    assert bad.status_code == 422
    assert {e["field"] for e in bad.json()["errors"]} == {
        "body.params.temperature",
        "body.colour",
    }
    blank = client.put("/api/profiles/A", json={**_profile("http://127.0.0.1:9/v1"), "key": "  "})
    assert blank.status_code == 422 and blank.json()["errors"][0]["field"] == "body.key"
    assert (tmp_path / "config" / "profiles.toml").read_bytes() == written
    assert client.post("/api/profiles/Nobody/test").json()["code"] == "unknown_profile"
    assert client.delete("/api/profiles/Nobody").status_code == 404
    current = client.get("/api/profiles").headers["etag"]
    assert client.delete("/api/profiles/A", headers={"if-match": current}).status_code == 204
    assert client.get("/api/profiles").json()["profiles"] == []


def test_a_bad_file_is_said_and_never_overwritten(
    make_client: Callable[..., TestClient], tmp_path: Path
) -> None:
    folder = tmp_path / "config"
    folder.mkdir()
    (folder / "profiles.toml").write_text('[profiles.A]\nmodel = "a/b"\ncontext_window = 0\n')
    client = make_client()
    listed = client.get("/api/profiles").json()
    assert listed["profiles"] == [] and "profiles.A.context_window" in listed["problem"]
    refused = client.put("/api/profiles/B", json=_profile("http://127.0.0.1:9/v1"))
    assert refused.status_code == 422 and refused.json()["code"] == "bad_config_file"
    assert "context_window = 0" in (folder / "profiles.toml").read_text()


def test_the_sessions_profile_plays_and_a_change_plays_on_the_next_turn(
    make_client: Callable[..., TestClient], serve: Callable[..., ModelServer]
) -> None:
    first = serve(lambda request: "From the first server.")
    second = serve(lambda request: "From the second server.")
    client = make_client()
    client.put("/api/profiles/Table", json=_profile(first, params={"temperature": 0.25}))
    sid = session(client)
    refused = client.post(f"/api/sessions/{sid}/turns", json={"kind": "say", "text": "Hi"})
    assert refused.status_code == 503 and refused.json()["code"] == "no_model"
    _use(client, sid, "Table")
    play(client, sid, {"kind": "say", "text": "Hello?"})
    assert first.requests and first.requests[0].json["temperature"] == 0.25
    client.put("/api/profiles/Table", json=_profile(second))
    reached = len(first.requests)
    last = events(play(client, sid, {"kind": "say", "text": "Again?"}))[-1]
    assert last[0] == "node", last
    assert len(first.requests) == reached and second.requests
    # a profile gone: the turn says which, and that another can be picked
    client.delete("/api/profiles/Table")
    gone = client.post(f"/api/sessions/{sid}/turns", json={"kind": "say", "text": "Hi"})
    assert gone.status_code == 404 and "'Table'" in gone.json()["detail"]


def test_a_turn_whose_profile_key_is_refused_says_which_key(
    make_client: Callable[..., TestClient], serve: Callable[..., ModelServer], tmp_path: Path
) -> None:
    refused = Reply(status=401, error="Incorrect API key provided")
    server = serve([refused, refused, refused])
    client = make_client()
    client.put("/api/profiles/Remote", json={**_profile(server), "key": KEY})
    sid = session(client)
    _use(client, sid, "Remote")
    kind, problem, _ = events(play(client, sid, {"kind": "say", "text": "Hello?"}))[-1]
    assert (kind, problem["kind"]) == ("error", "auth")
    secrets = tmp_path / "config" / "secrets.toml"
    assert f"refused the API key in {secrets} (profile 'Remote')" in problem["detail"]
    assert KEY not in problem["detail"] and len(server.requests) == 1
