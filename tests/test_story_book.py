"""The story as a book (clotho.formats.story), on SQLite and PostgreSQL: only the
exported branch's path is told, the greeting in and a hidden message out, speakers named
(the player's name for the player's messages, a node's own name first), a scene change
as a narration line, ``*actions*`` kept, a hostile text escaped in the HTML page (which
has no script and no external URL), CJK kept, and state notes (every N messages, at
nodes given) saying what changed since the previous note."""

from __future__ import annotations

import re

import pytest
from markdown_it import MarkdownIt

from clotho.cast import SCENE
from clotho.formats.names import SessionNames
from clotho.formats.story import StoryExportError, story_book, story_format
from mnemosyne import Store

HOSTILE = '<script>alert("x")</script> <img src=x onerror=alert(1)> [link](javascript:alert(1))'
NAMES = SessionNames(player="Aria", character="Seraphina")


@pytest.fixture
def story(store: Store) -> dict[str, str]:
    """greeting -> player -> reply (hp 10 -> 7) -> hidden -> scene change -> player ->
    reply (a fork: the other alternative is not on the branch)."""
    sid = store.create_session(title="The *Glade* & <Co>").id
    ids = {"sid": sid}
    ids["greeting"] = store.append(
        sid, "assistant", "*She smiles.* Welcome.", delta=[{"op": "set", "path": "hp", "value": 10}]
    )[0].id
    ids["hello"] = store.append(sid, "user", 'I wave. "Hi!"')[0].id
    ids["reply"] = store.append(
        sid,
        "assistant",
        "*She bows.* 你好，旅人。",
        delta=[{"op": "set", "path": "hp", "value": 7}],
    )[0].id
    ids["hidden"] = store.append(sid, "user", "an OOC aside", enabled=False)[0].id
    ids["scene"] = store.append(
        sid,
        "system",
        "Bram joins the scene.",
        metadata={SCENE: {"joins": "Bram"}},
        delta=[{"op": "set", "path": "present", "value": ["Seraphina", "Bram"]}],
    )[0].id
    ids["hostile"] = store.append(sid, "user", HOSTILE)[0].id
    ids["other"] = store.append(sid, "assistant", "The road not taken.")[0].id
    ids["bram"] = store.add_sibling(sid, ids["other"], "*Bram nods.* Aye.", name="Bram")[0].id
    return ids


def test_the_branch_as_markdown(store: Store, story: dict[str, str]) -> None:
    book = story_book(store, story["sid"], names=NAMES)
    text = book.markdown()
    assert text.startswith("# The \\*Glade\\* & \\<Co\\>\n")
    assert "**Seraphina**\n\n*She smiles.* Welcome." in text  # the greeting, italics kept
    assert '**Aria**\n\nI wave. "Hi!"' in text  # the player by the player's name
    assert "*She bows.* 你好，旅人。" in text
    assert "\n\n*Bram joins the scene.*\n\n" in text  # narration, its own line
    assert "**Bram**\n\n*Bram nods.* Aye." in text  # the node's own name
    assert "OOC aside" not in text  # hidden
    assert "road not taken" not in text  # the other alternative
    assert book.messages == 6
    order = [text.index(s) for s in ("Welcome", "I wave", "你好", "Bram joins", "<script>", "Aye")]
    assert order == sorted(order)


def test_to_any_node(store: Store, story: dict[str, str]) -> None:
    text = story_book(store, story["sid"], story["other"], names=NAMES).markdown()
    assert "The road not taken." in text
    assert "Aye." not in text
    text = story_book(store, story["sid"], story["hello"], names=NAMES).markdown()
    assert "I wave" in text and "你好" not in text


def test_the_html_page_escapes_every_text(store: Store, story: dict[str, str]) -> None:
    page = story_book(store, story["sid"], names=NAMES).html()
    assert "<title>The *Glade* &amp; &lt;Co&gt;</title>" in page
    assert "&lt;script&gt;alert(" in page
    assert "<script" not in page.lower()
    assert "<img" not in page.lower()
    assert "javascript:" not in page.replace("[link](javascript:alert(1))", "")
    assert "<a " not in page
    assert not re.search(r"<[^>]*\s(src|href)=", page)  # nothing loaded from anywhere
    assert "http" not in page
    assert "&lt;img src=x onerror=alert(1)&gt;" in page
    assert '<p class="speaker">Aria</p>' in page
    assert "<em>She bows.</em> 你好，旅人。" in page
    assert '<p class="narration">Bram joins the scene.</p>' in page
    assert "max-width" in page  # a column a phone can read
    assert "OOC aside" not in page and "road not taken" not in page


def test_a_hostile_name_is_escaped(store: Store) -> None:
    sid = store.create_session(title="t").id
    store.append(sid, "assistant", "hi", name="<b>Eve</b> **x**")
    page = story_book(store, sid).html()
    assert "&lt;b&gt;Eve&lt;/b&gt; **x**" in page and "<b>" not in page
    assert "**\\<b\\>Eve\\</b\\> \\*\\*x\\*\\***" in story_book(store, sid).markdown()


def test_state_notes(store: Store, story: dict[str, str]) -> None:
    book = story_book(
        store, story["sid"], names=NAMES, state_at=[story["greeting"], story["scene"]]
    )
    notes = [e for e in book.entries if e.kind == "state"]
    assert [n.node_id for n in notes] == [story["greeting"], story["scene"]]
    assert notes[0].text == "State: hp: — → 10"
    assert notes[1].text == 'State: hp: 10 → 7; present: — → ["Seraphina", "Bram"]'
    text = book.markdown()
    assert text.index("> State: hp: — → 10") < text.index("I wave")
    every = story_book(store, story["sid"], names=NAMES, state_every=2)
    noted = [e.node_id for e in every.entries if e.kind == "state"]
    assert noted == [story["hello"], story["scene"], story["bram"]]  # the hidden one not counted
    assert [e.text for e in every.entries if e.kind == "state"][2] == "State: no change"
    assert '<p class="state">State: hp: — → 10</p>' in book.html()


def test_bad_requests_name_what_was_wrong(store: Store, story: dict[str, str]) -> None:
    with pytest.raises(StoryExportError, match="not on the exported branch"):
        story_book(store, story["sid"], state_at=[story["other"]])
    with pytest.raises(StoryExportError, match="state_every -1"):
        story_book(store, story["sid"], state_every=-1)
    with pytest.raises(StoryExportError, match="md or html") as caught:
        story_format("pdf")
    assert caught.value.code == "invalid_story_export"
    assert story_format(".HTM") == "html" and story_format("markdown") == "md"


def test_an_empty_session(store: Store) -> None:
    sid = store.create_session().id
    book = story_book(store, sid)
    assert book.entries == [] and book.markdown() == f"# {sid[:8]}\n"
    assert "<main>" in book.html()


def test_pictures_are_inline_and_only_in_html(store: Store, story: dict[str, str]) -> None:
    asked: list[str] = []

    def picture(name: str) -> bytes | None:
        asked.append(name)
        return b"\x89PNG<script>" if name == "Bram" else None

    book = story_book(store, story["sid"], names=NAMES, picture=picture)
    assert sorted(asked) == ["Aria", "Bram", "Seraphina"]  # once each
    page = book.html()
    face = '<img class="face" alt="" src="data:image/png;base64,iVBORzxzY3JpcHQ+">Bram'
    assert face in page and page.count("<img") == 1
    assert "<script" not in page
    assert "base64" not in book.markdown()


def test_a_code_block_left_open_ends_with_its_message(store: Store) -> None:
    """A message whose fence is never closed is closed in the Markdown book, so the next
    speaker's name is not read as code; a closed fence and a longer one are untouched."""
    sid = store.create_session().id
    store.append(sid, "assistant", "Look:\n````python\nprint('```')")
    store.append(sid, "user", "```\nclosed\n```")
    store.append(sid, "assistant", "~~~\nstill open")
    text = story_book(store, sid, names=NAMES).markdown()
    tokens = MarkdownIt("commonmark").parse(text)
    fences = [token.content for token in tokens if token.type == "fence"]
    assert fences == ["print('```')\n", "closed\n", "still open\n"]
    assert [t.content for t in tokens if t.type == "inline" and t.content.startswith("**")] == [
        "**Seraphina**",
        "**Aria**",
        "**Seraphina**",
    ]
