"""The cast (clotho.cast), on SQLite and PostgreSQL: members added (a card with its
picture and book, a character written in place) in order, a name taken refused,
members removed (card and picture go, the book stays), scene changes (leave, join,
their refusals, nothing half-written), who is present rolling back with undo, redo and
checkout and not with an edit elsewhere, the cast's settings read back, and ``import
card`` refusing a session with a cast of several, a scene change in a SillyTavern chat
(a narrator's message) and back."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from clotho.cast import (
    SCENE,
    CastError,
    UnknownMemberError,
    add_member,
    cast_view,
    remove_member,
    scene_change,
    session_cast,
    update_cast,
    update_member,
    written_card,
)
from clotho.formats.stchat import export_chat, import_chat
from clotho.lore import AVATAR, CARD, LOREBOOK, import_card, import_lorebook, session_card
from clotho.sessionconfig import CastSettings, SessionSettings, updated_metadata
from clotho.stories import StoryError, new_story, session_avatar, stored_card
from mnemosyne import ConflictError, Store
from planner.cards import Card, load_card, parse_card
from planner.errors import CardError
from tests._fixtures import FIXTURES, SERAPHINA

CHARACTERS = FIXTURES / "sillytavern_user" / "characters"


def _card(path: Path) -> Card:
    return load_card(path.read_bytes(), path.name)


@pytest.fixture
def session_id(store: Store) -> str:
    """A story of Seraphina (her picture, her book Eldoria), then Bram (his book
    Northwatch) and Tobin (written in place) joining the cast."""
    session, _ = new_story(store, _card(SERAPHINA), picture=SERAPHINA.read_bytes())
    add_member(store, session.id, _card(CHARACTERS / "Bram.json"))
    add_member(store, session.id, written_card("Tobin", "A tinker with soot on his hands."))
    return session.id


def _present(store: Store, session_id: str) -> list[str]:
    return session_cast(store, session_id).present(store.state(session_id).present)


def _names(store: Store, session_id: str, kind: str) -> list[str]:
    return [document.name for document in store.documents(session_id, kind)]


def test_members_are_the_cards_in_the_order_added(store: Store, session_id: str) -> None:
    cast = session_cast(store, session_id)
    assert cast.names == ["Seraphina", "Bram", "Tobin"]
    card = session_card(store, session_id)
    assert card is not None and card.name == "Seraphina"  # the first is the character
    assert [m.books for m in cast.members] == [("Eldoria",), ("Northwatch",), ()]
    assert set(_names(store, session_id, LOREBOOK)) == {"Eldoria", "Northwatch"}
    tobin = cast.find("tobin")  # ignoring case when only one matches
    assert (tobin.name, tobin.card.description) == ("Tobin", "A tinker with soot on his hands.")
    assert tobin.as_dict()["description"] == "A tinker with soot on his hands."
    character = cast.find("Bram").character()
    assert (character.name, character.talkativeness, character.muted) == ("Bram", 0.5, False)
    assert character.books == ("Northwatch",)
    assert _present(store, session_id) == cast.names  # no one came or went: everyone

    # a picture is kept under its member's name; the session's is its first member's
    _, session = add_member(
        store, session_id, _card(CHARACTERS / "Mira.json"), avatar=SERAPHINA.read_bytes()
    )
    assert _names(store, session_id, AVATAR) == ["Seraphina", "Mira"]
    assert session.version == store.session(session_id).version
    avatar = session_avatar(store, session_id)
    assert avatar is not None and avatar.png.startswith(b"\x89PNG")


def test_a_name_taken_is_refused_and_nothing_changes(store: Store, session_id: str) -> None:
    version = store.session(session_id).version
    documents = store.documents(session_id)
    with pytest.raises(CastError, match="Bram is in the cast already") as refused:
        add_member(store, session_id, _card(CHARACTERS / "Bram.json"))
    assert refused.value.code == "cast"
    with pytest.raises(ConflictError):
        add_member(store, session_id, written_card("Ilse"), expected_version=version - 1)
    assert store.session(session_id).version == version
    assert store.documents(session_id) == documents


def test_removing_a_member_keeps_its_book_and_its_lines(store: Store, session_id: str) -> None:
    store.append(session_id, "assistant", "The gate is shut.", name="Bram")
    remove_member(store, session_id, "Seraphina")
    assert session_cast(store, session_id).names == ["Bram", "Tobin"]
    assert _names(store, session_id, AVATAR) == []  # her picture went with her
    assert session_avatar(store, session_id) is None
    assert set(_names(store, session_id, LOREBOOK)) == {"Eldoria", "Northwatch"}
    card = session_card(store, session_id)
    assert card is not None and card.name == "Bram"  # the character is now the first
    assert [n.name for n in store.projection(session_id)] == ["Seraphina", "Bram"]

    version = store.session(session_id).version
    with pytest.raises(
        CastError, match=r"no member of the cast is named 'Nobody' \(the cast: Bram, Tobin\)"
    ):
        remove_member(store, session_id, "Nobody")
    assert store.session(session_id).version == version


def test_scene_changes_and_their_refusals(store: Store, session_id: str) -> None:
    node, session = scene_change(store, session_id, "Bram", "leaves")
    assert (node.role, node.name, node.content) == ("system", None, "Bram leaves the scene.")
    assert node.metadata[SCENE] == {"leaves": "Bram"}
    assert session.head_id == node.id
    assert store.state(session_id).present == ["Seraphina", "Tobin"]  # the first leave sets
    scene_change(store, session_id, "tobin", "leaves")
    assert store.state(session_id).present == ["Seraphina"]

    version, nodes = store.session(session_id).version, len(store.tree(session_id).nodes)
    for name, move, why in [
        ("Bram", "leaves", r"Bram is not in the scene \(present: Seraphina\)"),
        ("Seraphina", "joins", r"Seraphina is in the scene already \(present: Seraphina\)"),
        ("Nobody", "joins", "no member of the cast is named 'Nobody'"),
    ]:
        with pytest.raises(CastError, match=why):
            scene_change(store, session_id, name, move)  # type: ignore[arg-type]
    with pytest.raises(ConflictError):
        scene_change(store, session_id, "Bram", "joins", expected_version=version - 1)
    assert store.session(session_id).version == version  # nothing half-written
    assert len(store.tree(session_id).nodes) == nodes

    node, _ = scene_change(store, session_id, "Bram", "joins", expected_version=version)
    assert (node.content, node.metadata[SCENE]) == ("Bram joins the scene.", {"joins": "Bram"})
    assert store.state(session_id).present == ["Seraphina", "Bram"]  # in the order they came
    assert _present(store, session_id) == ["Seraphina", "Bram"]
    assert [entry.action for entry in store.history(session_id)][-3:] == [
        "leave",
        "leave",
        "join",
    ]

    # a member added while someone is away is not in the scene until it joins
    add_member(store, session_id, written_card("Ilse"))
    assert _present(store, session_id) == ["Seraphina", "Bram"]
    scene_change(store, session_id, "Ilse", "joins")
    assert _present(store, session_id) == ["Seraphina", "Bram", "Ilse"]


def test_who_is_present_rolls_back_with_the_story(store: Store, session_id: str) -> None:
    greeting = store.session(session_id).head_id or ""
    left, _ = scene_change(store, session_id, "Bram", "leaves")
    with store.transaction(session_id) as tx, tx.journaled("say"):
        tx.append("user", "Where did Bram go?", name="Wren")
        reply = tx.append("assistant", "To the gate.", name="Seraphina")
    with store.transaction(session_id) as tx, tx.journaled("reroll"):
        tx.add_sibling(reply.id, "He did not say.")

    # an undo elsewhere (the reroll, the say) leaves the scene as it is
    store.undo(session_id)
    assert store.session(session_id).head_id == reply.id
    assert store.state(session_id).present == ["Seraphina", "Tobin"]
    store.undo(session_id)
    assert store.session(session_id).head_id == left.id
    assert store.state(session_id).present == ["Seraphina", "Tobin"]
    # undoing the leave brings Bram back; redo takes him away again
    store.undo(session_id)
    assert store.session(session_id).head_id == greeting
    assert store.state(session_id).present is None
    assert _present(store, session_id) == ["Seraphina", "Bram", "Tobin"]
    store.redo(session_id)
    assert store.session(session_id).head_id == left.id
    assert store.state(session_id).present == ["Seraphina", "Tobin"]
    store.redo(session_id)
    assert store.session(session_id).head_id == reply.id

    # a checkout across the leave: the cast is as it was at that point
    store.checkout(session_id, greeting)
    assert _present(store, session_id) == ["Seraphina", "Bram", "Tobin"]
    store.checkout(session_id, reply.id)
    assert _present(store, session_id) == ["Seraphina", "Tobin"]
    # a branch from before the leave has everyone; Bram may leave there too, on its own
    store.checkout(session_id, greeting)
    other, _ = scene_change(store, session_id, "Tobin", "leaves")
    assert store.state(session_id).present == ["Seraphina", "Bram"]
    assert store.state(session_id, reply.id).present == ["Seraphina", "Tobin"]
    assert other.parent_id == greeting


def test_the_cast_settings_are_read_back(store: Store, session_id: str) -> None:
    settings = CastSettings(order="round_robin", muted=["Bram"], talkativeness={"Tobin": 0.9})
    metadata = updated_metadata(store.session(session_id).metadata, SessionSettings(cast=settings))
    store.update_session(session_id, metadata=metadata)
    cast = session_cast(store, session_id)
    assert cast.settings == settings
    assert [(m.name, m.muted, m.talkativeness) for m in cast.members] == [
        ("Seraphina", False, 0.5),
        ("Bram", True, 0.5),
        ("Tobin", False, 0.9),  # the settings' over the card's
    ]
    assert cast.find("Bram").character().muted is True
    assert cast.find("Tobin").character().talkativeness == 0.9
    # the other settings stay as they were
    again = updated_metadata(metadata, SessionSettings(system_prompt="Be brief."))
    store.update_session(session_id, metadata=again)
    assert session_cast(store, session_id).settings == settings


def test_members_are_muted_and_the_order_set_in_one_write_each(
    store: Store, session_id: str
) -> None:
    version = store.session(session_id).version
    member, session = update_member(store, session_id, "bram", muted=True, talkativeness=0.8)
    assert (member.name, member.muted, member.talkativeness) == ("Bram", True, 0.8)
    assert session.version == version + 1
    same, unchanged = update_member(store, session_id, "Bram", muted=True)
    assert same.muted and unchanged.version == session.version  # nothing to write
    assert update_cast(store, session_id, order="narrator").version == session.version + 1
    assert update_cast(store, session_id, order="narrator").version == session.version + 1
    with pytest.raises(ConflictError):
        update_cast(store, session_id, order="manual", expected_version=version)
    recapped = update_cast(store, session_id, recap_missed=True)
    assert recapped.version == session.version + 2
    with pytest.raises(ConflictError):
        update_member(store, session_id, "Bram", muted=False, expected_version=version)
    with pytest.raises(UnknownMemberError, match="the cast: Seraphina, Bram, Tobin") as raised:
        update_member(store, session_id, "Nobody", muted=True)
    assert raised.value.code == "unknown_member"
    view = cast_view(store, store.session(session_id))
    assert view["order"] == "narrator" and view["present"] is None and view["recap_missed"]
    assert [(m["name"], m["muted"], m["source"], m["first"]) for m in view["members"]] == [
        ("Seraphina", False, "card", True),
        ("Bram", True, "card", False),
        ("Tobin", False, "written", False),
    ]


def test_the_first_member_of_an_empty_story_greets(store: Store) -> None:
    session = store.create_session(title="empty")
    add_member(store, session.id, _card(CHARACTERS / "Bram.json"))
    (greeting,) = store.projection(session.id)
    assert (greeting.name, greeting.content) == (
        "Bram",
        "*Bram stands at the gate.* Halt. State your business.",
    )
    add_member(store, session.id, _card(CHARACTERS / "Mira.json"))
    assert len(store.projection(session.id)) == 1  # the story has begun: no more greetings


def test_a_cards_talkativeness_is_kept_within_0_and_1(store: Store, session_id: str) -> None:
    mira = _card(CHARACTERS / "Mira.json")
    for name, talkativeness in [("Mira", "0.25"), ("Loud", "7"), ("Odd", "lots")]:
        data = {**mira.raw["data"], "name": name, "extensions": {"talkativeness": talkativeness}}
        add_member(store, session_id, parse_card({**mira.raw, "data": data}, name))
    cast = session_cast(store, session_id)
    assert [cast.find(n).talkativeness for n in ("Mira", "Loud", "Odd")] == [0.25, 1.0, 0.5]


def test_import_card_refuses_a_cast_of_several(store: Store, session_id: str) -> None:
    mira = (CHARACTERS / "Mira.json").read_bytes()
    version = store.session(session_id).version
    with pytest.raises(CardError, match=r"cast of 3 \(Seraphina, Bram, Tobin\).*clotho cast add"):
        import_card(store, session_id, mira, "Mira.json")
    assert store.session(session_id).version == version
    assert session_cast(store, session_id).names == ["Seraphina", "Bram", "Tobin"]

    # a session of one character: the card replaces it, as before; its picture goes
    # with it, and what the lists read names the new one
    one, _ = new_story(store, _card(SERAPHINA), picture=SERAPHINA.read_bytes())
    import_card(store, one.id, mira, "Mira.json")
    assert _names(store, one.id, CARD) == ["Mira"]
    assert _names(store, one.id, AVATAR) == [] and session_avatar(store, one.id) is None
    metadata = store.session(one.id).metadata
    assert metadata["names"]["character"] == "Mira" and "avatar" not in metadata


def test_a_members_book_is_found_where_it_was_kept(store: Store, session_id: str) -> None:
    """A book whose name another book had is kept as "Name (2)", and one whose lore the
    session had already is kept once under the other name: each member's book is the
    one that holds its lore."""
    bram = _card(CHARACTERS / "Bram.json")
    assert bram.book is not None
    twin_raw = {**bram.raw, "data": {**bram.raw["data"], "name": "Other Bram"}}
    twin_raw["data"]["character_book"] = {
        **bram.raw["data"]["character_book"],
        "entries": [{"id": 0, "keys": ["wall"], "content": "Another wall.", "extensions": {}}],
    }
    member, _ = add_member(store, session_id, parse_card(twin_raw, "Other Bram"))
    assert member.books == ("Northwatch (2)", "Northwatch")  # its own, and the book it links
    same = {**bram.raw, "data": {**bram.raw["data"], "name": "Bram Again"}}
    same["data"]["character_book"] = {**same["data"]["character_book"], "name": "Gatehouse"}
    member, _ = add_member(store, session_id, parse_card(same, "Bram Again"))
    assert member.books == ("Northwatch",)  # the same lore: kept once
    cast = session_cast(store, session_id)
    assert [cast.find(n).books for n in ("Bram", "Other Bram", "Bram Again")] == [
        ("Northwatch",),
        ("Northwatch (2)", "Northwatch"),  # its own book, and the book its card links
        ("Northwatch",),
    ]


def test_a_scene_change_exports_as_narration_and_comes_back(store: Store, session_id: str) -> None:
    """In a SillyTavern chat a scene change is a narrator's message (``/sys``: named
    System, ``extra.type`` narrator, sent to the model as a system message); imported,
    such a message is narration again, and names no one of the story."""
    scene_change(store, session_id, "Bram", "leaves")
    store.append(session_id, "assistant", "The gate creaks.", name="Seraphina")
    exported = export_chat(store, session_id).text
    lines = [json.loads(line) for line in exported.splitlines()[1:]]
    scene = lines[-2]
    assert (scene["name"], scene["is_user"], scene["is_system"], scene["mes"]) == (
        "System",
        False,
        False,
        "Bram leaves the scene.",
    )
    assert scene["extra"] == {"type": "narrator"}
    assert lines[-1]["name"] == "Seraphina"

    # the narrator's line first: it names no one, the character is the first who speaks
    narrated = "\n".join([exported.splitlines()[0], json.dumps(scene), json.dumps(lines[-1])])
    again = import_chat(store, narrated, "narrated.jsonl")
    nodes = store.projection(again.id)
    assert [(n.role, n.name) for n in nodes] == [("system", "System"), ("assistant", "Seraphina")]
    assert again.metadata["names"] == {"character": "Seraphina"}
    assert again.title == "Seraphina (SillyTavern)"
    back = export_chat(store, again.id).text.splitlines()[1:]
    assert [json.loads(line) for line in back] == [scene, lines[-1]]


def test_a_members_card_makes_another_story(store: Store, session_id: str) -> None:
    """The new-story picker's stored card: a member's by name (with its own picture),
    else the session's character's."""
    add_member(store, session_id, _card(CHARACTERS / "Mira.json"), avatar=SERAPHINA.read_bytes())
    card, picture = stored_card(store, session_id)
    assert card.name == "Seraphina" and picture is not None
    card, picture = stored_card(store, session_id, "Bram")
    assert (card.name, card.book.name if card.book else None, picture) == (
        "Bram",
        "Northwatch",
        None,
    )
    card, picture = stored_card(store, session_id[:12], "Mira")
    assert card.name == "Mira" and picture is not None and picture.startswith(b"\x89PNG")
    with pytest.raises(StoryError, match="no character card named 'Nobody'"):
        stored_card(store, session_id, "Nobody")
    story, _ = new_story(store, card, picture=picture)
    assert session_cast(store, story.id).names == ["Mira"]
    assert _names(store, story.id, AVATAR) == ["Mira"]


def test_the_book_a_card_links_is_its_members_own(store: Store, session_id: str) -> None:
    """SillyTavern's character lore: the World Info book a card links
    (``extensions.world``) is its member's own once the session has it."""
    mira = _card(CHARACTERS / "Mira.json")
    data = {**mira.raw["data"], "extensions": {"world": "Inn Rumours"}}
    add_member(store, session_id, parse_card({**mira.raw, "data": data}, "Mira"))
    assert session_cast(store, session_id).find("Mira").books == ()  # not in the session
    rumours = FIXTURES / "sillytavern_user" / "worlds" / "Inn Rumours.json"
    import_lorebook(store, session_id, rumours.read_bytes(), "Inn Rumours")
    cast = session_cast(store, session_id)
    assert cast.find("Mira").books == ("Inn Rumours",)
    assert cast.find("Bram").books == ("Northwatch",)  # his card's book, which he links too


def test_the_cast_and_its_settings_reach_the_turn_setup(store: Store, session_id: str) -> None:
    from clotho.settings import Settings
    from clotho.wiring import turn_setup

    update_member(store, session_id, "Bram", muted=True)
    update_cast(store, session_id, order="round_robin", recap_missed=True)
    cast = session_cast(store, session_id)
    setup = turn_setup(Settings(model="openai/gm"), None, cast.members[0].card, cast=cast)
    assert [(c.name, c.muted) for c in setup.members] == [
        ("Seraphina", False),
        ("Bram", True),
        ("Tobin", False),
    ]
    assert setup.character.name == "Seraphina" and setup.cast[1].books == ("Northwatch",)
    assert (setup.speaker_order, setup.recap_missed) == ("round_robin", True)


def test_the_lists_hints_follow_the_casts_first_member(store: Store) -> None:
    """A list of sessions reads the character's name and whether there is a picture
    from the metadata: they follow the first member as the cast changes."""
    from clotho.formats.names import NAMES
    from clotho.lore import AVATAR_KEY

    session = store.create_session(title="empty")
    add_member(store, session.id, _card(SERAPHINA), avatar=SERAPHINA.read_bytes())
    metadata = store.session(session.id).metadata
    assert metadata[NAMES]["character"] == "Seraphina" and metadata[AVATAR_KEY] is True
    add_member(store, session.id, written_card("Tobin"))
    remove_member(store, session.id, "Seraphina")
    metadata = store.session(session.id).metadata
    assert metadata[NAMES]["character"] == "Tobin" and AVATAR_KEY not in metadata
    assert session_avatar(store, session.id) is None  # not Seraphina's face on Tobin
    remove_member(store, session.id, "Tobin")  # no one left: no name, no picture
    metadata = store.session(session.id).metadata
    assert NAMES not in metadata and AVATAR_KEY not in metadata


def test_muting_again_writes_nothing(store: Store, session_id: str) -> None:
    update_member(store, session_id, "Seraphina", muted=True)
    _, session = update_member(store, session_id, "Bram", muted=True)
    _, again = update_member(store, session_id, "Seraphina", muted=True)
    assert again.version == session.version
    assert session_cast(store, session_id).settings.muted == ["Seraphina", "Bram"]
