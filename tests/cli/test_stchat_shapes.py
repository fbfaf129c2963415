"""SillyTavern chats of every shape players' files have: group chats (with a header and
without, empty), the greeting's swipes (``swipe_info: []``), ``swipe_info`` absent,
null, partial or full, CRLF and a missing final newline. Each comes back from an
unchanged import as it was; a changed one keeps each real entry at its own swipe."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from clotho.formats.names import SessionNames
from clotho.formats.stchat import ChatError, export_chat, import_chat, parse_chat
from mnemosyne import SessionTransaction, Store
from tests._fixtures import FIXTURES

from .test_cli import InProcess

CHATS = FIXTURES / "chats"
EVERY_CHAT = sorted(
    path
    for path in FIXTURES.rglob("*.jsonl")
    # a SillyTavern user folder holds broken files on purpose (tests/cli/test_stfolder.py)
    if "sillytavern_user" not in path.relative_to(FIXTURES).parts
)


def ordered(text: str) -> list[Any]:
    """Each line's JSON with its keys in their order (objects as lists of pairs); blank
    and ``null`` lines are no message."""
    values = (
        json.loads(line, object_pairs_hook=list) for line in text.splitlines() if line.strip()
    )
    return [value for value in values if value is not None]


def test_every_chat_file_comes_back_as_it_was() -> None:
    assert {p.parent.name for p in EVERY_CHAT} >= {"chats", "real"}, "the fixtures are missing"


@pytest.mark.parametrize("path", EVERY_CHAT, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_an_unchanged_import_exports_the_same_file(store: Store, path: Path) -> None:
    data = path.read_bytes()
    session = import_chat(store, data, path.name)
    text = export_chat(store, session.id).text
    assert ordered(text) == ordered(data.decode("utf-8-sig"))  # the same JSON, keys in order
    lines = data.removeprefix(b"\xef\xbb\xbf").split(b"\n")
    if all(line.strip() not in (b"", b"null") for line in lines[:-1]):  # blank: no message
        assert text.encode() == b"\n".join(lines)  # line endings, final newline


def messages_of(text: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in text.splitlines() if '"mes"' in line]


def test_a_group_chat_without_a_header_keeps_each_speaker(store: Store) -> None:
    path = CHATS / "group_no_header.jsonl"
    raw = messages_of(path.read_text())
    session = import_chat(store, path.read_bytes(), path.name)
    assert session.title == "Seraphina, Bran (SillyTavern group chat)"
    assert session.metadata["names"] == {"player": "Aldric", "character": "Seraphina"}
    nodes = store.tree(session.id).nodes
    assert {n.name for n in nodes} == {"SillyTavern System", "Seraphina", "Bran", "Aldric"}
    bran = next(n for n in nodes if n.content == raw[2]["mes"])
    assert bran.metadata["sillytavern"]["message"]["original_avatar"] == "Bran.png"
    assert not next(n for n in nodes if n.name == "SillyTavern System").enabled
    exported = export_chat(store, session.id)
    assert "chat_metadata" not in exported.lines[0]  # no header made up
    assert [m["name"] for m in messages_of(exported.text)] == [m["name"] for m in raw]


def test_a_group_chat_with_a_header_and_crlf(store: Store) -> None:
    path = CHATS / "group_with_header_crlf.jsonl"
    session = import_chat(store, path.read_bytes(), path.name)
    exported = export_chat(store, session.id)
    assert exported.newline == "\r\n" and exported.final_newline
    assert exported.text.count("\r\n") == len(exported.lines) == 6


@pytest.mark.parametrize("data", [b"", b"  \n\t\r\n"], ids=["0 bytes", "whitespace"])
def test_an_empty_group_chat_is_an_empty_session(store: Store, data: bytes) -> None:
    assert parse_chat(data, "g.jsonl") == (None, [])
    session = import_chat(store, data, "g.jsonl")
    assert session.head_id is None and store.tree(session.id).nodes == []
    assert export_chat(store, session.id).text == ""


def test_an_empty_group_chat_from_the_command_line(tmp_path: Path) -> None:
    run = InProcess(f"sqlite:///{tmp_path / 'cli.db'}", tmp_path / "home")
    out = run("import", "chat", str(CHATS / "group_empty.jsonl")).stdout
    assert "(0 nodes)" in out and "has no messages" in out
    assert "empty file" not in out


def test_the_greetings_come_back_as_swipes_with_no_info_made_up(store: Store) -> None:
    path = CHATS / "greeting_swipes.jsonl"
    greeting = messages_of(path.read_text())[0]
    session = import_chat(store, path.read_bytes(), path.name)
    roots = store.tree(session.id).children()[None]
    assert [n.content for n in roots] == greeting["swipes"]
    store.checkout(session.id, roots[2].id)  # the player picks the third greeting
    shown = messages_of(export_chat(store, session.id).text)[0]
    assert shown["swipe_id"] == 2 and shown["mes"] == greeting["swipes"][2]
    assert shown["swipe_info"] == []


def test_a_partial_swipe_info_stays_with_its_swipe(store: Store) -> None:
    path = CHATS / "swipe_info_partial.jsonl"
    message = messages_of(path.read_text())[2]
    assert len(message["swipes"]) == 3 and len(message["swipe_info"]) == 1
    session = import_chat(store, path.read_bytes(), path.name)
    swipes = store.tree(session.id).children()[store.node(session.id, session.head_id).parent_id]
    store.checkout(session.id, swipes[0].id)
    first = messages_of(export_chat(store, session.id).text)[2]
    assert first["swipe_info"] == message["swipe_info"]  # still at swipe 0, nothing added
    assert first["extra"] == message["swipe_info"][0]["extra"]  # shown as swipe 0 was
    store.add_sibling(session.id, swipes[1].id, "A fourth, from Clotho.")
    grown = messages_of(export_chat(store, session.id).text)[2]
    assert len(grown["swipes"]) == 4 and grown["swipe_info"] == message["swipe_info"]


def test_a_reroll_in_clotho_gets_its_own_entry_after_a_full_list(store: Store) -> None:
    data = (CHATS / "group_no_header.jsonl").read_bytes()
    session = import_chat(store, data, "g.jsonl")
    last = store.node(session.id, session.head_id)
    before = messages_of(export_chat(store, session.id).text)[-1]
    store.add_sibling(session.id, last.id, "Bran says nothing.")
    after = messages_of(export_chat(store, session.id, last.id).text)[-1]
    assert after["swipe_info"][:2] == before["swipe_info"] and len(after["swipe_info"]) == 3
    assert after["swipes"][2] == "Bran says nothing." and after["name"] == "Bran"


def test_a_chat_grown_in_clotho_exports_with_the_session_names(store: Store) -> None:
    sid = store.create_session(title="grown").id
    store.append(sid, "assistant", "Welcome.")
    store.append(sid, "user", "Hello.")
    names = SessionNames(player="Aldric", character="Seraphina")
    speakers = [m["name"] for m in messages_of(export_chat(store, sid, names=names).text)]
    assert speakers == ["Seraphina", "Aldric"]


SHAPES = st.fixed_dictionaries(
    {
        "swipes": st.integers(1, 4),
        "info": st.one_of(st.none(), st.just("absent"), st.integers(0, 4)),
        "chosen": st.integers(0, 3),
        "swipe_id_key": st.booleans(),
        "crlf": st.booleans(),
        "final": st.booleans(),
        "header": st.booleans(),
        "mes_unlike_its_swipe": st.booleans(),
    }
)


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(shape=SHAPES)
def test_any_swipe_shape_comes_back_as_it_was(store: Store, shape: dict[str, Any]) -> None:
    count = shape["swipes"]
    chosen = min(shape["chosen"], count - 1)
    swipes = [f"swipe {i}" for i in range(count)]
    shown = f"{swipes[chosen]}, edited" if shape["mes_unlike_its_swipe"] else swipes[chosen]
    message: dict[str, Any] = {"name": "Bran", "is_user": False, "mes": shown}
    message["swipes"] = swipes
    if shape["swipe_id_key"] or chosen:
        message["swipe_id"] = chosen
    if shape["info"] is None:
        message["swipe_info"] = None
    elif shape["info"] != "absent":
        message["swipe_info"] = [
            {"send_date": f"day {i}", "extra": {"n": i}} for i in range(min(shape["info"], count))
        ]
    lines = [json.dumps(message, separators=(",", ":"))]
    if shape["header"]:
        lines.insert(0, '{"chat_metadata":{}}')
    newline = "\r\n" if shape["crlf"] else "\n"
    data = newline.join(lines) + (newline if shape["final"] else "")
    session = import_chat(store, data.encode(), "shape.jsonl")
    assert store.messages(session.id)[-1].content == shown  # the story shows ``mes``
    assert export_chat(store, session.id).text == data


def test_given_names_and_documents_come_in_the_same_transaction(store: Store) -> None:
    data = (CHATS / "group_no_header.jsonl").read_bytes()

    def card(tx: SessionTransaction) -> None:
        tx.put_document("card", "Bran.json", '{"name": "Bran"}')

    session = import_chat(store, data, "g.jsonl", names={"player": "Mira"}, also=card)
    assert session.metadata["names"] == {"player": "Mira", "character": "Seraphina"}
    assert [d.name for d in store.documents(session.id, "card")] == ["Bran.json"]
    before = len(store.sessions())

    def broken(tx: SessionTransaction) -> None:
        raise ChatError("the card is broken")

    with pytest.raises(ChatError, match="the card is broken"):
        import_chat(store, data, "g.jsonl", also=broken)
    assert len(store.sessions()) == before  # nothing of it stored


@pytest.mark.parametrize(
    "text",
    [
        '{"chat_metadata":{}}\n{"mes":"a"}\n\n',
        '{"chat_metadata":{}}\r\n  \r\n{"mes":"a"}\r\n',
        '{"mes":"a"}\n\nnull\n{"mes":"b","is_user":true}',
    ],
    ids=["blank last line", "blank line CRLF", "blank and null lines, no header"],
)
def test_blank_lines_are_no_message_as_sillytavern_reads_them(store: Store, text: str) -> None:
    header, messages = parse_chat(text.encode(), "c.jsonl")
    session = import_chat(store, text.encode(), "c.jsonl")
    assert [n.content for n in store.messages(session.id)] == [m["mes"] for m in messages]
    assert ordered(export_chat(store, session.id).text) == ordered(text)
    assert (header is None) == text.startswith('{"mes"')


def test_a_bad_line_after_a_blank_one_is_named_by_its_own_line(store: Store) -> None:
    with pytest.raises(ChatError, match=r"^c.jsonl: line 4: mes: Input should be a valid string"):
        import_chat(store, b'{"chat_metadata":{}}\n\n{"mes":"a"}\n{"mes":5}\n', "c.jsonl")
