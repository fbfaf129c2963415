"""The context meter's route: the next turn's prompt measured before it is sent (no
model call, nothing written), following the story, the draft, the author's note, the
persona and the system prompt."""

from __future__ import annotations

from collections.abc import Callable

from fastapi.testclient import TestClient

from mnemosyne import Store
from orchestrator.loopback import ModelServer


def _preview(client: TestClient, sid: str, text: str = "") -> dict:
    response = client.post(f"/api/sessions/{sid}/prompt/preview", json={"text": text})
    assert response.status_code == 200, response.text
    return response.json()


def test_the_meter_follows_the_story_and_the_draft_and_writes_nothing(
    client: TestClient, store: Store
) -> None:
    sid = client.post("/api/sessions", json={"title": "Eldoria"}).json()["session"]["id"]
    client.post(f"/api/sessions/{sid}/messages", json={"role": "assistant", "content": "Hello."})
    version = store.session(sid).version
    empty = _preview(client, sid)
    assert empty["messages"] == 1 and empty["sent"] == 1 and empty["trimmed"] == 0
    assert empty["window"] > empty["used"] > 0 and empty["reply_tokens"] > 0
    assert empty["summary"] == "none" and empty["author_note"] is None
    drafted = _preview(client, sid, "I draw my sword and step into the dark hall.")
    assert drafted["messages"] == 2 and drafted["used"] > empty["used"]

    added = client.post(
        f"/api/sessions/{sid}/messages",
        json={"role": "user", "content": "I draw my sword and step into the dark hall."},
    )
    assert added.status_code == 201
    after = _preview(client, sid)
    assert after["messages"] == 2 and after["used"] == drafted["used"]
    assert store.session(sid).version == version + 1  # the message; the previews wrote nothing
    assert len(store.tree(sid).nodes) == 2


def test_the_meter_shows_the_note_persona_and_system_prompt(
    client: TestClient, store: Store
) -> None:
    sid = client.post("/api/sessions", json={}).json()["session"]["id"]
    client.post(f"/api/sessions/{sid}/messages", json={"role": "assistant", "content": "Hi."})
    plain = _preview(client, sid, "Hello.")
    assert plain["system_prompt"] == "template" and plain["persona"] is False
    note = {"text": "{{user}} is wounded.", "interval": 2, "depth": 0}
    set_note = client.post(
        f"/api/sessions/{sid}/edits", json={"operations": [{"op": "note", "note": note}]}
    )
    assert set_note.status_code == 200, set_note.text
    patched = client.patch(
        f"/api/sessions/{sid}",
        json={
            "settings": {
                "persona": {"name": "Aria", "description": "A bard with a lute."},
                "system_prompt": "Narrate tersely.",
            }
        },
    )
    assert patched.status_code == 200, patched.text
    shown = _preview(client, sid, "Hello.")
    assert shown["system_prompt"] == "session" and shown["persona"] is True
    placed = shown["author_note"]
    assert placed["text"] == "Aria is wounded." and placed["inserted"] is False
    assert "every 2 player messages" in placed["reason"]
    assert shown["used"] != plain["used"]  # a short system prompt, a persona
    # the note is world state: undo takes it away
    assert client.post(f"/api/sessions/{sid}/undo").status_code == 200
    assert _preview(client, sid, "Hello.")["author_note"] is None


def test_a_bad_body_is_refused(client: TestClient) -> None:
    sid = client.post("/api/sessions", json={}).json()["session"]["id"]
    bad = client.post(f"/api/sessions/{sid}/prompt/preview", json={"text": 3})
    assert bad.status_code == 422
    unknown = client.post(f"/api/sessions/{'0' * 32}/prompt/preview", json={})
    assert unknown.status_code == 404


def test_with_a_model_the_sessions_engine_is_used_and_never_called(
    make_client: Callable[..., TestClient], serve: Callable[..., ModelServer]
) -> None:
    server = serve(lambda request: "never")
    client = make_client(server)
    sid = client.post("/api/sessions", json={}).json()["session"]["id"]
    assert _preview(client, sid, "Hello.")["messages"] == 1
    assert server.requests == []
