"""PATCH a session: its title and its settings (profile, persona, system prompt), one
write with the version bumped; a stale If-Match, a bad body or a trashed session change
nothing."""

from __future__ import annotations

from fastapi.testclient import TestClient

from clotho.sessionconfig import session_settings
from mnemosyne import Store


def _new(client: TestClient) -> tuple[str, int]:
    made = client.post("/api/sessions", json={"title": "Eldoria"})
    assert made.status_code == 201
    return made.json()["session"]["id"], made.json()["session"]["version"]


def test_rename_and_settings_are_kept_field_by_field(client: TestClient, store: Store) -> None:
    sid, version = _new(client)
    renamed = client.patch(
        f"/api/sessions/{sid}", json={"title": "The ruins"}, headers={"If-Match": f'"{version}"'}
    )
    assert renamed.status_code == 200, renamed.text
    assert renamed.json()["session"]["title"] == "The ruins"
    assert renamed.headers["ETag"] == f'"{version + 1}"'

    persona = {"name": "Aria", "description": "A wandering bard."}
    first = client.patch(f"/api/sessions/{sid}", json={"settings": {"persona": persona}})
    assert first.status_code == 200, first.text
    second = client.patch(f"/api/sessions/{sid}", json={"settings": {"profile": "local"}})
    assert second.status_code == 200, second.text
    settings = session_settings(store.session(sid).metadata)
    assert settings.persona is not None and settings.persona.name == "Aria"
    assert settings.profile == "local"
    assert store.session(sid).title == "The ruins"

    cleared = client.patch(
        f"/api/sessions/{sid}", json={"settings": {"persona": None}, "title": None}
    )
    assert cleared.status_code == 200, cleared.text
    settings = session_settings(store.session(sid).metadata)
    assert settings.persona is None and settings.profile == "local"
    assert store.session(sid).title is None


def test_refused_patches_change_nothing(client: TestClient, store: Store) -> None:
    sid, version = _new(client)
    before = store.session(sid)
    stale = client.patch(
        f"/api/sessions/{sid}", json={"title": "x"}, headers={"If-Match": f'"{version + 5}"'}
    )
    assert stale.status_code == 412
    for body in ({}, {"settings": {"colour": "red"}}, {"settings": {"persona": {"name": ""}}}):
        refused = client.patch(f"/api/sessions/{sid}", json=body)
        assert refused.status_code == 422, (body, refused.text)
    assert store.session(sid) == before

    assert client.delete(f"/api/sessions/{sid}").status_code == 200
    trashed = client.patch(f"/api/sessions/{sid}", json={"title": "x"})
    assert trashed.status_code == 422
    assert "trash" in trashed.json()["detail"]
