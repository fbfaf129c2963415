"""The cast over HTTP (clotho/api/cast.py), on both databases: its reads, members added
from a card (raw or a multipart form) and written in place, removed, muted, the speaker
order, leaving and joining the scene (undone, rolled back by a checkout), pictures, the
refusals; and a four-character story played against the loopback model."""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from typing import Any
from urllib.parse import quote

from fastapi.testclient import TestClient

from mnemosyne import Store
from orchestrator.loopback import ModelServer
from tests._cast import Voices, chat
from tests._fixtures import ELDORIA, SERAPHINA

PNG = b"\x89PNG\r\n\x1a\n"
MARLA = {
    "spec": "chara_card_v2",
    "spec_version": "2.0",
    "data": {
        "name": "Marla",
        "description": "An innkeeper who hears everything.",
        "first_mes": "Welcome to the Drowned Lantern.",
    },
}


def story(client: TestClient) -> str:
    """A story whose character (the cast's first member) is Marla: its id."""
    data = json.dumps(MARLA).encode()
    card = {"filename": "marla.json", "data": base64.b64encode(data).decode()}
    made = client.post("/api/stories", json={"card": card, "campaign": "none"})
    assert made.status_code == 201, made.text
    return str(made.json()["session"]["id"])


def tag(answer: Any) -> str:
    return str(answer.headers["etag"])


def members(client: TestClient, sid: str) -> dict[str, dict[str, Any]]:
    cast = client.get(f"/api/sessions/{sid}/cast")
    assert cast.status_code == 200, cast.text
    return {member["name"]: member for member in cast.json()["members"]}


def test_the_cast_grows_from_cards_and_written_characters(client: TestClient, store: Store) -> None:
    sid = story(client)
    base = f"/api/sessions/{sid}/cast"
    first = client.get(base)
    assert first.status_code == 200 and first.headers["etag"]
    assert first.json() == {
        "order": "natural",
        "recap_missed": False,
        "present": None,
        "members": [
            {
                "name": "Marla",
                "description": "An innkeeper who hears everything.",
                "talkativeness": 0.5,
                "muted": False,
                "present": True,
                "avatar": False,
                "books": [],
                "source": "card",
                "first": True,
            }
        ],
    }
    assert client.get(base, headers={"if-none-match": tag(first)}).status_code == 304

    written = client.post(
        base,
        json={"name": "  Bram ", "description": "A ferryman.", "personality": "Gruff."},
        headers={"if-match": tag(first)},
    )
    assert written.status_code == 201, written.text
    assert written.json()["name"] == "Bram" and written.json()["first"] is False
    assert written.json()["present"] is True  # everyone is, while no one came or went
    assert int(tag(written).strip('"')) > int(tag(first).strip('"'))

    accented = client.post(base, json={"name": "Élodie Brun"})
    assert accented.status_code == 201, accented.text

    # A card as a multipart form's `file` (as a browser's FormData sends it): its
    # picture is the member's avatar, its name the card's.
    files = {"file": ("seraphina.png", SERAPHINA.read_bytes(), "image/png")}
    uploaded = client.post(f"{base}/card", files=files)
    assert uploaded.status_code == 201, uploaded.text
    assert uploaded.json()["name"] == "Seraphina" and uploaded.json()["avatar"] is True
    assert tag(uploaded) == client.get(f"/api/sessions/{sid}").headers["etag"]

    cast = members(client, sid)
    assert list(cast) == ["Marla", "Bram", "Élodie Brun", "Seraphina"]
    assert [m["first"] for m in cast.values()] == [True, False, False, False]
    picture = client.get(f"{base}/Seraphina/avatar")
    assert picture.status_code == 200 and picture.headers["content-type"] == "image/png"
    assert picture.content.startswith(PNG) and b"chara" not in picture.content
    assert "max-age" in picture.headers["cache-control"]
    # A name in the path is percent-encoded, and found ignoring case.
    none = client.get(f"{base}/{quote('élodie brun')}/avatar")
    assert none.status_code == 404 and "Élodie Brun has no picture" in none.json()["detail"]
    # The cards are the session's documents, in the order added.
    assert [d.name for d in store.documents(sid, "card")] == list(cast)


def test_a_card_as_the_body_with_its_book(client: TestClient, store: Store) -> None:
    sid = story(client)
    card = {
        **MARLA,
        "data": {
            "name": "Oswin",
            "description": "A cartographer.",
            "character_book": {
                "name": "Oswin's maps",
                "entries": [{"keys": ["map"], "content": "Oswin's maps lie.", "id": 1}],
            },
        },
    }
    uploaded = client.post(
        f"/api/sessions/{sid}/cast/card",
        content=json.dumps(card).encode(),
        params={"filename": "oswin.json"},
        headers={"content-type": "application/octet-stream"},
    )
    assert uploaded.status_code == 201, uploaded.text
    assert uploaded.json()["books"] == ["Oswin's maps"] and uploaded.json()["avatar"] is False
    books = [book["book"] for book in client.get(f"/api/sessions/{sid}/lore").json()]
    assert "Oswin's maps" in books


def test_the_cast_refuses_what_it_cannot_do_and_writes_nothing(
    client: TestClient, store: Store
) -> None:
    sid = story(client)
    base = f"/api/sessions/{sid}/cast"
    assert client.post(base, json={"name": "Bram"}).status_code == 201
    version = tag(client.get(f"/api/sessions/{sid}"))

    taken = client.post(base, json={"name": "Bram"})
    assert taken.status_code == 422 and taken.json()["code"] == "cast"
    assert "Bram is in the cast already" in taken.json()["detail"]
    for method, path in (
        ("DELETE", f"{base}/Nobody"),
        ("POST", f"{base}/Nobody/leave"),
        ("POST", f"{base}/Nobody/join"),
        ("GET", f"{base}/Nobody/avatar"),
    ):
        unknown = client.request(method, path)
        assert unknown.status_code == 404, (method, path, unknown.text)
        assert "no member of the cast is named 'Nobody'" in unknown.json()["detail"]
        assert "Marla, Bram" in unknown.json()["detail"]
    patched = client.patch(f"{base}/Nobody", json={"muted": True})
    assert patched.status_code == 404
    same = client.patch(f"{base}/Bram", json={})  # nothing to change: nothing written
    assert same.status_code == 200 and same.headers["etag"] == version
    assert client.patch(base, json={"order": "natural"}).headers["etag"] == version
    loud = client.patch(f"{base}/Bram", json={"talkativeness": 1.5})
    assert loud.status_code == 422 and loud.json()["errors"][0]["field"] == "body.talkativeness"
    bad_order = client.patch(base, json={"order": "loudest"})
    assert bad_order.status_code == 422
    assert client.post(base, json={"name": "  "}).status_code == 422

    joined = client.post(f"{base}/Bram/join")
    assert joined.status_code == 422 and joined.json()["code"] == "cast"
    assert "Bram is in the scene already" in joined.json()["detail"]

    book = client.post(f"{base}/card", content=ELDORIA.read_bytes(), params={"filename": "e.json"})
    assert book.status_code == 422 and "not a character card" in book.json()["detail"]
    broken = client.post(f"{base}/card", content=b"{not json", params={"filename": "x.json"})
    assert broken.status_code == 422, broken.text
    formless = client.post(f"{base}/card", files={"picture": ("a.png", b"x", "image/png")})
    assert formless.status_code == 422 and formless.json()["errors"][0]["field"] == "body.file"
    empty = client.post(f"{base}/card", content=b"")
    assert empty.status_code == 422 and empty.json()["code"] == "empty_upload"

    stale = '"1"'
    for method, path, body in (
        ("POST", base, {"name": "Cato"}),
        ("PATCH", f"{base}/Bram", {"muted": True}),
        ("PATCH", base, {"order": "narrator"}),
        ("POST", f"{base}/Bram/leave", None),
        ("DELETE", f"{base}/Bram", None),
    ):
        refused = client.request(method, path, json=body, headers={"if-match": stale})
        assert refused.status_code == 412, (method, path, refused.text)
        assert refused.json()["current_version"] == int(version.strip('"'))
    refused_card = client.post(
        f"{base}/card",
        files={"file": ("s.png", SERAPHINA.read_bytes(), "image/png")},
        headers={"if-match": stale},
    )
    assert refused_card.status_code == 412
    # Nothing of it was written.
    assert tag(client.get(f"/api/sessions/{sid}")) == version
    assert list(members(client, sid)) == ["Marla", "Bram"]
    assert [d.name for d in store.documents(sid, "avatar")] == []


def test_members_are_muted_given_a_talkativeness_and_removed(
    client: TestClient, store: Store
) -> None:
    sid = story(client)
    base = f"/api/sessions/{sid}/cast"
    files = {"file": ("seraphina.png", SERAPHINA.read_bytes(), "image/png")}
    assert client.post(f"{base}/card", files=files).status_code == 201
    assert client.post(base, json={"name": "Bram"}).status_code == 201

    muted = client.patch(f"{base}/bram", json={"muted": True, "talkativeness": 0.9})
    assert muted.status_code == 200, muted.text
    assert muted.json()["muted"] is True and muted.json()["talkativeness"] == 0.9
    again = client.patch(f"{base}/Bram", json={"talkativeness": 0.2})
    assert again.json()["muted"] is True and again.json()["talkativeness"] == 0.2
    unmuted = client.patch(f"{base}/Bram", json={"muted": False}, headers={"if-match": tag(again)})
    assert unmuted.status_code == 200 and unmuted.json()["muted"] is False
    ordered = client.patch(base, json={"order": "round_robin"})
    assert ordered.status_code == 200 and ordered.json()["order"] == "round_robin"
    assert ordered.json()["recap_missed"] is False
    recapped = client.patch(base, json={"recap_missed": True}, headers={"if-match": tag(ordered)})
    assert recapped.json()["recap_missed"] is True and recapped.json()["order"] == "round_robin"
    settings = client.get(f"/api/sessions/{sid}").json()["metadata"]["settings"]["cast"]
    assert settings == {
        "order": "round_robin",
        "muted": [],
        "talkativeness": {"Bram": 0.2},
        "recap_missed": True,
    }
    ordered = recapped

    removed = client.delete(f"{base}/Seraphina", headers={"if-match": tag(ordered)})
    assert removed.status_code == 200, removed.text
    assert [m["name"] for m in removed.json()["members"]] == ["Marla", "Bram"]
    assert removed.headers["etag"] == client.get(f"/api/sessions/{sid}").headers["etag"]
    assert client.get(f"{base}/Seraphina/avatar").status_code == 404
    assert [d.name for d in store.documents(sid, "card")] == ["Marla", "Bram"]
    assert [d.name for d in store.documents(sid, "avatar")] == []


def test_leaving_and_joining_are_scene_changes_that_roll_back(
    client: TestClient, store: Store
) -> None:
    sid = story(client)
    base = f"/api/sessions/{sid}/cast"
    for name in ("Bram", "Élodie Brun"):
        assert client.post(base, json={"name": name}).status_code == 201
    before = client.get(f"/api/sessions/{sid}").json()["head_id"]

    left = client.post(f"{base}/{quote('Élodie Brun')}/leave")
    assert left.status_code == 201, left.text
    node = left.json()["node"]
    assert node["role"] == "system" and node["name"] is None
    assert node["content"] == "Élodie Brun leaves the scene."
    assert node["metadata"]["scene"] == {"leaves": "Élodie Brun"}
    cast = left.json()["cast"]
    assert cast["present"] == ["Marla", "Bram"]
    assert {m["name"]: m["present"] for m in cast["members"]} == {
        "Marla": True,
        "Bram": True,
        "Élodie Brun": False,
    }
    assert left.headers["etag"] == client.get(f"/api/sessions/{sid}").headers["etag"]
    assert client.get(f"/api/sessions/{sid}").json()["head_id"] == node["id"]
    away = client.post(f"{base}/{quote('Élodie Brun')}/leave")
    assert away.status_code == 422 and away.json()["code"] == "cast"
    assert "is not in the scene" in away.json()["detail"]
    # Someone added while someone is away is away too, until it joins.
    late = client.post(base, json={"name": "Cato"})
    assert late.status_code == 201 and late.json()["present"] is False

    joined = client.post(f"{base}/{quote('élodie brun')}/join")
    assert joined.status_code == 201, joined.text
    assert joined.json()["node"]["content"] == "Élodie Brun joins the scene."
    assert joined.json()["cast"]["present"] == ["Marla", "Bram", "Élodie Brun"]

    # Undo takes the join back; a checkout before the leave brings everyone back.
    undone = client.post(f"/api/sessions/{sid}/undo")
    assert undone.status_code == 200 and undone.json()["results"][0]["action"] == "undo join"
    assert members(client, sid)["Élodie Brun"]["present"] is False
    assert client.put(f"/api/sessions/{sid}/head", json={"node_id": before}).status_code == 200
    back = client.get(base).json()
    assert back["present"] is None
    assert all(m["present"] for m in back["members"])


# -- a four-character story over HTTP ---------------------------------------------------


def turn(client: TestClient, sid: str, body: dict[str, Any]) -> dict[str, Any]:
    """Play a turn; its stored result (the `node` event's document)."""
    answer = client.post(f"/api/sessions/{sid}/turns", json=body)
    assert answer.status_code == 201, answer.text
    last = [block for block in answer.text.split("\n\n") if block.strip()][-1]
    fields = dict(line.split(": ", 1) for line in last.splitlines() if not line.startswith(":"))
    assert fields["event"] == "node", answer.text
    result: dict[str, Any] = json.loads(fields["data"])
    return result


def said(server: ModelServer) -> str:
    """Everything the last story request sent the model, as one text."""
    return json.dumps(chat(server)[-1].messages, ensure_ascii=False)


def test_a_four_character_story_played_over_http(
    make_client: Callable[..., TestClient], serve: Callable[..., ModelServer], store: Store
) -> None:
    server = serve(Voices())
    client = make_client(server)
    sid = story(client)
    base = f"/api/sessions/{sid}/cast"
    assert client.post(base, json={"name": "Bram", "description": "A ferryman."}).status_code == 201
    assert (
        client.post(base, json={"name": "Élodie Brun", "description": "A spy."}).status_code == 201
    )
    files = {"file": ("seraphina.png", SERAPHINA.read_bytes(), "image/png")}
    assert client.post(f"{base}/card", files=files).status_code == 201
    # Only those named speak unnamed, but Marla, who always does (no dice in this test).
    for name, value in (("Marla", 1.0), ("Bram", 0.0), ("Élodie Brun", 0.0), ("Seraphina", 0.0)):
        talk = client.patch(f"{base}/{quote(name)}", json={"talkativeness": value})
        assert talk.status_code == 200, talk.text

    # A say with a speaker: the reply is Bram's, written from his card.
    first = turn(client, sid, {"kind": "say", "text": "How deep is the river?", "speaker": "Bram"})
    assert first["node"]["name"] == "Bram" and first["user_node"]["role"] == "user"
    assert "A ferryman." in said(server)

    # The natural order: those named, in the order named, then the talkative.
    text = "Seraphina, Élodie Brun: can we cross tonight?"
    speakers = client.post(f"/api/sessions/{sid}/speakers", json={"text": text})
    assert speakers.status_code == 200, speakers.text
    names = speakers.json()["speakers"]
    assert names == ["Seraphina", "Élodie Brun", "Marla"]
    round_ = [turn(client, sid, {"kind": "say", "text": text, "speaker": names[0]})]
    round_ += [turn(client, sid, {"kind": "reply", "speaker": name}) for name in names[1:]]
    assert [played["node"]["name"] for played in round_] == names
    assert all(played["user_node"] is None for played in round_[1:])
    tree = store.projection(sid)
    assert [node.name for node in tree if node.role == "assistant"][-3:] == names

    # Bram leaves: while he is away he cannot be made to speak.
    left = client.post(f"{base}/Bram/leave")
    assert left.status_code == 201, left.text
    before_leave = left.json()["node"]["parent_id"]
    away = client.post(f"/api/sessions/{sid}/turns", json={"kind": "reply", "speaker": "Bram"})
    assert away.status_code == 422 and away.json()["code"] == "invalid_turn"
    assert "Bram" in away.json()["detail"]
    secret = "Marla, Bram is gone: the password is saffron."
    assert (
        "Bram"
        not in client.post(f"/api/sessions/{sid}/speakers", json={"text": secret}).json()[
            "speakers"
        ]
    )
    away_say = turn(client, sid, {"kind": "say", "text": secret, "speaker": "Marla"})
    away_reply = turn(client, sid, {"kind": "reply", "speaker": "Élodie Brun"})
    assert "saffron" in said(server)
    assert away_say["node"]["name"] == "Marla" and away_reply["node"]["name"] == "Élodie Brun"
    joined = client.post(f"{base}/Bram/join")
    assert joined.status_code == 201, joined.text

    # Bram's reply after he is back: his prompt lacks what was said while he was away.
    back = turn(client, sid, {"kind": "reply", "speaker": "Bram"})
    assert back["node"]["name"] == "Bram"
    prompt = said(server)
    assert "saffron" not in prompt and away_say["node"]["content"] not in prompt
    assert away_reply["node"]["content"] not in prompt
    assert first["node"]["content"] in prompt  # what he saw, he knows
    assert "Bram leaves the scene." in prompt and "Bram joins the scene." in prompt
    trace = client.get(f"/api/sessions/{sid}/nodes/{back['node']['id']}/trace")
    assert trace.status_code == 200, trace.text
    assert trace.json()["verified"] is True
    assert "saffron" not in json.dumps(trace.json()["messages"], ensure_ascii=False)
    scene = trace.json()["scene"]
    assert scene["speaker"] == "Bram"
    assert scene["present"] == ["Marla", "Bram", "Élodie Brun", "Seraphina"]
    assert scene["left_out"] == [
        {"first": away_say["user_node"]["id"], "last": away_reply["node"]["id"], "count": 3}
    ]
    # Élodie, who stayed, saw it all.
    stayed = turn(client, sid, {"kind": "reply", "speaker": "Élodie Brun"})
    assert "saffron" in said(server)
    stayed_trace = client.get(f"/api/sessions/{sid}/nodes/{stayed['node']['id']}/trace")
    assert stayed_trace.json()["scene"]["left_out"] == []

    # Rolled back across the leave: Bram is present again.
    moved = client.put(f"/api/sessions/{sid}/head", json={"node_id": before_leave})
    assert moved.status_code == 200
    cast = client.get(base).json()
    assert cast["present"] is None and members(client, sid)["Bram"]["present"] is True


def test_turns_refuse_a_speaker_who_cannot_speak(
    make_client: Callable[..., TestClient], serve: Callable[..., ModelServer]
) -> None:
    server = serve(Voices())
    client = make_client(server)
    sid = story(client)
    base = f"/api/sessions/{sid}/cast"
    assert client.post(base, json={"name": "Bram"}).status_code == 201
    assert client.patch(f"{base}/Bram", json={"muted": True}).status_code == 200
    version = client.get(f"/api/sessions/{sid}").headers["etag"]
    for body, words in (
        ({"kind": "say", "text": "Hello?", "speaker": "Nobody"}, "Nobody"),
        ({"kind": "say", "text": "Hello?", "speaker": "Bram"}, "muted"),
        ({"kind": "reply", "speaker": "Bram"}, "muted"),
    ):
        refused = client.post(f"/api/sessions/{sid}/turns", json=body)
        assert refused.status_code == 422, refused.text
        assert refused.json()["code"] == "invalid_turn" and words in refused.json()["detail"]
    bad = client.post(f"/api/sessions/{sid}/turns", json={"kind": "reply", "text": "Hi"})
    assert bad.status_code == 422 and bad.json()["code"] == "invalid_request"
    assert client.get(f"/api/sessions/{sid}").headers["etag"] == version  # nothing stored
    assert chat(server) == []
    # A muted member is never among the speakers; a reply's speaker is the turn's.
    assert client.post(f"/api/sessions/{sid}/speakers", json={}).json()["speakers"] == ["Marla"]
    played = client.post(f"/api/sessions/{sid}/turns", json={"kind": "reply", "speaker": "marla"})
    assert played.status_code == 201
    assert '"speaker":"marla"' in played.text.replace(" ", "")  # the turn as asked


def test_the_speaker_orders_over_http(
    make_client: Callable[..., TestClient], serve: Callable[..., ModelServer]
) -> None:
    server = serve(Voices())
    client = make_client(server)
    sid = story(client)
    base = f"/api/sessions/{sid}/cast"
    for name in ("Bram", "Cato"):
        assert client.post(base, json={"name": name}).status_code == 201

    def speakers(**body: str | None) -> list[str]:
        answer = client.post(f"/api/sessions/{sid}/speakers", json=body)
        assert answer.status_code == 200, answer.text
        return list(answer.json()["speakers"])

    assert client.patch(base, json={"order": "round_robin"}).status_code == 200
    turn(client, sid, {"kind": "say", "text": "Who keeps watch?", "speaker": "Bram"})
    assert speakers(text="And now?") == ["Cato"] == speakers() == speakers(text=None)
    turn(client, sid, {"kind": "reply"})  # no speaker named: the order's
    assert speakers() == ["Marla"]

    assert client.patch(base, json={"order": "manual"}).status_code == 200
    assert client.post(f"{base}/Marla/leave").status_code == 201
    assert speakers(text="Anyone?") == ["Bram"]

    assert client.patch(base, json={"order": "narrator"}).status_code == 200
    assert speakers(text="What do I see?") == ["Narrator"]
    told = turn(client, sid, {"kind": "say", "text": "What do I see?"})
    assert told["node"]["name"] == "Narrator"
    unknown = client.post(f"/api/sessions/{sid}/speakers", json={"extra": "1"})
    assert unknown.status_code == 422  # a field it does not take
    assert "extra" in unknown.text
    # The message is the body, as long as a turn's: far past what a URL may hold.
    assert client.patch(base, json={"order": "natural"}).status_code == 200
    long = "Cato, " + "the river rises. " * 12_000
    assert len(long) > 200_000
    assert speakers(text=long)[0] == "Cato"
    asked = client.get(f"/api/sessions/{sid}/speakers", params={"text": "Cato?"})
    assert asked.status_code == 405


def test_a_reroll_keeps_its_speaker(
    make_client: Callable[..., TestClient], serve: Callable[..., ModelServer]
) -> None:
    server = serve(Voices())
    client = make_client(server)
    sid = story(client)
    assert client.post(f"/api/sessions/{sid}/cast", json={"name": "Bram"}).status_code == 201
    said_by_bram = turn(client, sid, {"kind": "say", "text": "Row on.", "speaker": "Bram"})
    again = turn(client, sid, {"kind": "reroll"})
    assert again["node"]["name"] == "Bram"
    assert again["node"]["parent_id"] == said_by_bram["user_node"]["id"]
    other = client.post(f"/api/sessions/{sid}/turns", json={"kind": "reroll", "speaker": "Marla"})
    assert other.status_code == 422 and other.json()["code"] == "invalid_turn"
    assert "Bram" in other.json()["detail"]


def test_a_new_story_from_a_member_of_a_cast(client: TestClient, store: Store) -> None:
    sid = story(client)
    files = {"file": ("seraphina.png", SERAPHINA.read_bytes(), "image/png")}
    assert client.post(f"/api/sessions/{sid}/cast/card", files=files).status_code == 201
    # The picker offers the session's character (the first member), not the last added.
    listed = [card for card in client.get("/api/cards").json() if card["session_id"] == sid]
    assert [card["name"] for card in listed] == ["Marla"]
    # Any member's card makes a new story, with its own picture.
    made = client.post(
        "/api/stories", json={"card": {"session_id": sid, "name": "Seraphina"}, "campaign": "none"}
    )
    assert made.status_code == 201, made.text
    new = made.json()["session"]["id"]
    assert [m["name"] for m in client.get(f"/api/sessions/{new}/cast").json()["members"]] == [
        "Seraphina"
    ]
    assert client.get(f"/api/sessions/{new}/cast/Seraphina/avatar").status_code == 200
    character = client.post("/api/stories", json={"card": {"session_id": sid}})
    assert character.json()["imported"]["name"] == "Marla"
    nobody = client.post("/api/stories", json={"card": {"session_id": sid, "name": "Nobody"}})
    assert nobody.status_code == 422 and "Nobody" in nobody.json()["detail"]


def test_a_member_named_with_a_slash_is_reached_by_its_encoded_name(client: TestClient) -> None:
    # A server decodes %2F before routing: the member routes take the rest of the path.
    sid = story(client)
    base = f"/api/sessions/{sid}/cast"
    for name in ("AC/DC", "Bram/leave"):
        assert client.post(base, json={"name": name}).status_code == 201
    for name in ("AC/DC", "Bram/leave"):
        at = f"{base}/{quote(name, safe='')}"
        picture = client.get(f"{at}/avatar")
        assert picture.status_code == 404 and picture.json()["detail"] == f"{name} has no picture"
        muted = client.patch(at, json={"talkativeness": 0.25})
        assert muted.status_code == 200 and muted.json()["name"] == name, muted.text
        left = client.post(f"{at}/leave")
        assert left.status_code == 201, left.text
        assert left.json()["node"]["content"] == f"{name} leaves the scene."
        joined = client.post(f"{at}/join")
        assert joined.status_code == 201 and f"{name} joins" in joined.json()["node"]["content"]
    removed = client.delete(f"{base}/{quote('ac/dc', safe='')}")
    assert removed.status_code == 200, removed.text
    assert [m["name"] for m in removed.json()["members"]] == ["Marla", "Bram/leave"]


def test_the_card_picker_shows_the_first_members_picture_or_none(client: TestClient) -> None:
    from tests.fuzz._hostile import card_chunk, png_with

    picture = {"filename": "seraphina.png", "data": base64.b64encode(SERAPHINA.read_bytes())}
    made = client.post("/api/stories", json={"card": {**picture, "data": picture["data"].decode()}})
    assert made.status_code == 201, made.text
    sid = made.json()["session"]["id"]
    base = f"/api/sessions/{sid}/cast"

    def listed() -> dict[str, Any]:
        cards = [card for card in client.get("/api/cards").json() if card["session_id"] == sid]
        assert len(cards) == 1
        return dict(cards[0])

    own = listed()
    assert own["name"] == "Seraphina" and own["avatar_url"]
    shown = client.get(own["avatar_url"])
    assert shown.status_code == 200
    assert shown.content == client.get(f"{base}/Seraphina/avatar").content

    # Marla, without a picture, becomes the first member; Bram, with one, is after her.
    marla = {"file": ("marla.json", json.dumps(MARLA).encode(), "application/json")}
    assert client.post(f"{base}/card", files=marla).status_code == 201
    bram = json.dumps({**MARLA, "data": {"name": "Bram", "description": "A ferryman."}})
    files = {"file": ("bram.png", png_with([card_chunk(bram)]), "image/png")}
    assert client.post(f"{base}/card", files=files).status_code == 201
    assert client.delete(f"{base}/Seraphina").status_code == 200
    assert client.get(f"{base}/Bram/avatar").status_code == 200
    marlas = listed()
    assert marlas["name"] == "Marla"
    # Her picture or none: never Bram's face on Marla's card.
    url = marlas["avatar_url"]
    assert url is None or client.get(url).status_code == 404
