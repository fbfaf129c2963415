"""`GET /api/sessions/{id}/exports/story`, on SQLite and PostgreSQL: Markdown by
default and HTML on asking, each a download (its media type, a Content-Disposition
naming the file, a CJK title too), the branch to another node, state notes, a hostile
text escaped, the cast's pictures inline on asking, and what it cannot use refused as a
problem naming it."""

from __future__ import annotations

import base64
from urllib.parse import quote

from fastapi.testclient import TestClient

from clotho.stories import new_story, session_avatar
from mnemosyne import Store
from planner.cards import load_card
from tests._fixtures import SERAPHINA


def _story(store: Store) -> tuple[str, list[str]]:
    sid = store.create_session(title='夜の "Watch"').id
    greeting = store.append(
        sid, "assistant", "*Bram looks up.* Who goes there?", name="Bram",
        delta=[{"op": "set", "path": "hp", "value": 10}],
    )[0]  # fmt: skip
    hello = store.append(sid, "user", "A friend.", name="Aria")[0]
    store.append(sid, "user", "(OOC: brb)", enabled=False)
    answer = store.append(sid, "assistant", "<script>alert(1)</script> Pass.", name="Bram")[0]
    return sid, [greeting.id, hello.id, answer.id]


def test_markdown_is_a_download(client: TestClient, store: Store) -> None:
    sid, _ = _story(store)
    got = client.get(f"/api/sessions/{sid}/exports/story")
    assert got.status_code == 200, got.text
    assert got.headers["content-type"] == "text/markdown; charset=utf-8"
    assert got.headers["content-disposition"] == (
        'attachment; filename="__ _Watch_.md"; '
        "filename*=UTF-8''" + quote('夜の "Watch".md', safe="")
    )
    assert got.headers["x-clotho-messages"] == "3"
    assert got.headers["etag"]
    assert "**Bram**\n\n*Bram looks up.* Who goes there?" in got.text
    assert "**Aria**\n\nA friend." in got.text and "OOC" not in got.text


def test_html_escapes_and_loads_nothing(client: TestClient, store: Store) -> None:
    sid, _ = _story(store)
    got = client.get(f"/api/sessions/{sid}/exports/story", params={"format": "html"})
    assert got.status_code == 200, got.text
    assert got.headers["content-type"] == "text/html; charset=utf-8"
    assert got.headers["content-disposition"].startswith('attachment; filename="__ _Watch_.html"')
    assert "&lt;script&gt;alert(1)&lt;/script&gt; Pass." in got.text
    assert "<script" not in got.text and "http" not in got.text
    assert "<em>Bram looks up.</em> Who goes there?" in got.text


def test_to_a_node_with_notes(client: TestClient, store: Store) -> None:
    sid, (greeting, hello, _answer) = _story(store)
    got = client.get(
        f"/api/sessions/{sid}/exports/story",
        params={"head_id": hello, "state_at": [greeting]},
    )
    assert got.status_code == 200, got.text
    assert "A friend." in got.text and "Pass." not in got.text
    assert "> State: hp: — → 10" in got.text
    every = client.get(f"/api/sessions/{sid}/exports/story", params={"state_every": 2})
    assert every.text.count("> State:") == 1


def test_what_it_cannot_use_is_refused(client: TestClient, store: Store) -> None:
    sid, (_greeting, hello, answer) = _story(store)
    path = f"/api/sessions/{sid}/exports/story"
    refused = client.get(path, params={"head_id": hello, "state_at": [answer]})
    assert refused.status_code == 422
    assert refused.json()["code"] == "invalid_story_export"
    assert "not on the exported branch" in refused.json()["detail"]
    for params in ({"format": "pdf"}, {"state_every": -1}):
        bad = client.get(path, params=params)
        assert (bad.status_code, bad.json()["code"]) == (422, "invalid_request")
    missing = client.get(path, params={"head_id": "0" * 32})
    assert missing.status_code == 404
    assert client.get(f"/api/sessions/{'f' * 32}/exports/story").status_code == 404


def test_the_casts_pictures_on_asking(client: TestClient, store: Store) -> None:
    card = load_card(SERAPHINA.read_bytes(), SERAPHINA.name)
    session, _ = new_story(store, card, picture=SERAPHINA.read_bytes())
    path = f"/api/sessions/{session.id}/exports/story"
    plain = client.get(path, params={"format": "html"})
    assert plain.status_code == 200, plain.text
    assert "<img" not in plain.text and "Seraphina" in plain.text  # the greeting
    page = client.get(path, params={"format": "html", "pictures": "true"}).text
    avatar = session_avatar(store, session.id, "Seraphina")
    assert avatar is not None
    face = f'src="data:image/png;base64,{base64.b64encode(avatar.png).decode()}">Seraphina'
    assert face in page
