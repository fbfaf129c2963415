"""SillyTavern chats in and out of the tree: swipes, hidden messages, lossless round
trips, branches exported with their forks as swipes, broken files refused whole."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from clotho.formats.stchat import ChatError, export_chat, import_chat
from mnemosyne import Store
from tests._fixtures import CHAT

from .test_cli import InProcess


def lines(data: bytes) -> list[str]:
    return data.decode().rstrip("\n").split("\n")


def test_import_then_export_gives_back_every_line(store: Store) -> None:
    data = CHAT.read_bytes()
    session = import_chat(store, data, CHAT.name)
    exported = export_chat(store, session.id)
    assert exported.lines == lines(data)  # the same JSON, keys in their order
    assert exported.dropped == 0


def test_swipes_are_siblings_and_hidden_messages_disabled(store: Store) -> None:
    data = CHAT.read_bytes()
    raw = [json.loads(line) for line in lines(data)[1:]]
    session = import_chat(store, data, CHAT.name)
    tree = store.tree(session.id)
    children = tree.children()
    roots = children[None]
    assert [n.content for n in roots] == raw[0]["swipes"]
    assert roots[0].metadata["sillytavern"]["swipe_info"] == raw[0]["swipe_info"][0]
    # the story goes on from the chosen swipe of the middle message
    middle = next(n for n in tree.nodes if n.content == raw[2]["mes"])
    siblings = children[middle.parent_id]
    assert [n.content for n in siblings] == raw[2]["swipes"]
    assert siblings.index(middle) == raw[2]["swipe_id"]
    assert middle.metadata["reasoning"] == raw[2]["extra"]["reasoning"]
    hidden = next(n for n in tree.nodes if n.content == raw[3]["mes"])
    assert not hidden.enabled and raw[3]["is_system"] is True
    assert [m.content for m in store.messages(session.id)] == [
        m["mes"] for m in raw if not m["is_system"]
    ]


def test_a_branch_exports_its_forks_as_swipes_and_counts_what_cannot_fit(store: Store) -> None:
    sid = store.create_session(title="forks").id
    store.append(sid, "assistant", "Welcome, traveler.", name="Seraphina")
    ask, _ = store.append(sid, "user", "Who are you?", name="Hero")
    first, _ = store.append(sid, "assistant", "A guardian.", name="Seraphina")
    store.append(sid, "user", "Thanks.")  # below the first reply: lost in the export
    store.append(sid, "assistant", "Rest now.")
    second, _ = store.add_sibling(sid, first.id, "The forest's keeper.")
    exported = export_chat(store, sid, second.id)
    messages = [json.loads(line) for line in exported.lines[1:]]
    assert [m["mes"] for m in messages] == [
        "Welcome, traveler.",
        "Who are you?",
        "The forest's keeper.",
    ]
    assert messages[2]["swipes"] == ["A guardian.", "The forest's keeper."]
    assert messages[2]["swipe_id"] == 1 and len(messages[2]["swipe_info"]) == 2
    assert messages[1]["is_user"] is True and messages[1]["name"] == "Hero"
    assert exported.dropped == 2
    assert store.node(sid, ask.id).content == "Who are you?"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('{"chat_metadata": {}}\n{"mes": "hi"\n', r"not JSON: .* \(line 2, column 13\)"),
        ('{"mes": "hi"}\n{"mes": 5}\n', "line 2: mes: Input should be a valid string"),
        ('{"chat_metadata": []}\n', "line 1: chat_metadata: expected an object"),
        ('{"chat_metadata": {}}\n{"mes": 5}\n', "line 2: mes: Input should be a valid string"),
        ('{}\n{"mes": "a"}\n[]\n', r"line 3: Input should be an object \(got \[\]\)"),
        ('{}\n{"mes": "a", "swipes": []}\n', "line 2: swipes: List should have at least 1 item"),
        (
            '{}\n{"mes": "a", "swipe_info": [1]}\n',
            r"line 2: swipe_info\[0\]: Input should be an obj",
        ),
        ('{}\n{"mes": "a", "name": null}\n', "line 2: name: Input should be a valid string"),
        ('{}\n{"mes": "a"}\n{"mes": "b", "is_user": "yes"}\n', "line 3: is_user"),
        ('{}\n{"mes": "a", "swipes": ["a"], "swipe_id": 2}\n', "swipe_id: 2 is not one of the 1"),
        (  # two chats joined (found in a real user folder: "line 3: mes: missing" before)
            '{"chat_metadata": {}}\n{"mes": "a"}\n{"user_name": "You", "chat_metadata": {}}\n',
            "line 3: a second header line",
        ),
    ],
)
def test_a_broken_chat_is_refused_and_nothing_is_stored(
    store: Store, text: str, expected: str
) -> None:
    before = len(store.sessions())
    with pytest.raises(ChatError, match=expected):
        import_chat(store, text.encode(), "broken.jsonl")
    assert len(store.sessions()) == before


def test_import_and_export_from_the_command_line(tmp_path: Path) -> None:
    run = InProcess(f"sqlite:///{tmp_path / 'cli.db'}", tmp_path / "home")
    imported = run.json("import", "chat", str(CHAT))
    assert imported["nodes"] == 9
    target = tmp_path / "out.jsonl"
    assert run.json("export", "chat", str(target)) == {
        "file": str(target),
        "messages": 6,
        "dropped": 0,
    }
    assert target.read_bytes() == CHAT.read_bytes().rstrip(b"\n") + b"\n"
    broken = tmp_path / "broken.jsonl"
    broken.write_text('{"chat_metadata": {}}\nnot json\n')
    assert "broken.jsonl: not JSON: Expecting value (line 2, column 1)" in run.fails(
        "import", "chat", str(broken)
    )


def test_many_bad_lines_are_one_line_naming_the_first_three(store: Store) -> None:
    text = "{}\n" + '{"mes": 5}\n' * 10
    with pytest.raises(ChatError) as caught:
        import_chat(store, text.encode(), "bad.jsonl")
    message = str(caught.value)
    assert message.startswith("bad.jsonl: line 2: mes: ") and "line 4: mes: " in message
    assert message.endswith("; and 7 more") and "\n" not in message
