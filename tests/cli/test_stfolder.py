"""``clotho import sillytavern DIR``: a whole SillyTavern user folder (the constructed
one in tests/fixtures/sillytavern_user, plus SillyTavern's own Seraphina card and
Eldoria book), on SQLite and PostgreSQL: characters, their chats, a group chat (played
with its members as the cast), World Info linked by card and by settings, personas,
bad files skipped with their reasons, a chat whose card is missing, and a second run
that imports nothing twice."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from clotho.cast import session_cast
from clotho.formats.stchat import export_chat
from clotho.lore import AVATAR, AVATAR_KEY, CARD, LOREBOOK, session_books
from clotho.sessions import PERSONA
from clotho.stfolder import GROUP, FolderError, Plan, PlannedSession, plan_folder, write_plan
from clotho.stories import session_avatar
from mnemosyne import Store
from orchestrator.loopback import ModelServer
from tests._fixtures import ELDORIA, FIXTURES, SERAPHINA

from .test_cli import InProcess, Run

USER = FIXTURES / "sillytavern_user"
BRAM_CHAT = "chats/Bram/Bram - 2026-10-01@18h00m00s.jsonl"
GHOST_CHAT = "chats/Ghost/Ghost - 2026-09-30@10h00m00s.jsonl"
GROUP_CHAT = "group chats/2026-10-02@20h00m00s.jsonl"
GROUP_FILE = "groups/1760000000000.json"
SKIPPED = {
    "characters/Broken.json": "data: expected an object",
    "worlds/broken.json": "not JSON",
    "chats/Bram/Bram - 2026-10-01@19h00m00s.jsonl": "not JSON",
}


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    """The fixture's user folder as SillyTavern keeps it (data/default-user), with
    SillyTavern's default character and her book added."""
    user = tmp_path / "data" / "default-user"
    shutil.copytree(USER, user)
    shutil.copy(SERAPHINA, user / "characters" / "Seraphina.png")
    shutil.copy(ELDORIA, user / "worlds" / "Eldoria.json")
    return user


@pytest.fixture
def run(database_url: str, tmp_path: Path) -> Run:
    run = InProcess(database_url, tmp_path / "home")
    run.env["CLOTHO_VECTORS"] = "false"
    return run


def _by_source(plan: Plan) -> dict[str, PlannedSession]:
    return {planned.source: planned for planned in plan.sessions}


def _documents(store: Store, session_id: str, kind: str) -> list[dict[str, object]]:
    return [json.loads(d.content) for d in store.documents(session_id, kind)]


def test_a_whole_folder_comes_in(store: Store, folder: Path) -> None:
    plan = plan_folder(folder.parent, store)  # data/ holding one user
    assert plan.folder == folder
    write_plan(store, plan)
    found = _by_source(plan)
    assert set(found) == {
        BRAM_CHAT,
        GHOST_CHAT,
        GROUP_CHAT,
        "characters/Mira.json",
        "characters/Seraphina.png",
    }
    assert {p.status for p in plan.sessions} == {"imported"}
    assert {s.file: s.reason for s in plan.skipped}.keys() == SKIPPED.keys()
    for skipped in plan.skipped:
        assert SKIPPED[skipped.file] in skipped.reason
    assert plan.available_books == ["Old Maps"]  # linked by no one
    assert [p.name for p in plan.personas] == ["Alex", "Wren"]
    assert len(store.sessions()) == 5

    # a chat: its card kept with it, the book the card links (the world file, not the
    # older copy inside the card), the default persona, its messages under their names
    bram = found[BRAM_CHAT].session_id or ""
    assert store.session(bram).title == "Bram - 2026-10-01@18h00m00s"
    assert [d.name for d in store.documents(bram, CARD)] == ["Bram"]
    [northwatch] = session_books(store, bram)
    assert (northwatch.name, len(northwatch.entries)) == ("Northwatch", 2)
    assert _documents(store, bram, PERSONA)[0]["name"] == "Alex"
    assert store.session(bram).metadata["names"] == {"player": "Alex", "character": "Bram"}
    said = [(n.role, n.name, n.content) for n in store.projection(bram)]
    assert said[1:] == [
        ("user", "Alex", "I seek the archive."),
        ("assistant", "Bram", "The gate opens at dawn."),
    ]
    assert len(store.tree(bram).nodes) == 4  # the other swipe is an alternative

    # a chat whose card is missing comes in without one, and says so
    ghost = found[GHOST_CHAT]
    assert store.documents(ghost.session_id or "", CARD) == []
    assert "characters/Ghost.png" in ghost.notes[0] and "missing" in ghost.notes[0]

    # the group chat: the group's name and members, its members' books, the persona
    # locked to the chat, every speaker's name
    group = found[GROUP_CHAT].session_id or ""
    assert store.session(group).title == "The Northwatch Inn: 2026-10-02@20h00m00s"
    [kept] = _documents(store, group, GROUP)
    assert (kept["name"], kept["members"]) == ("The Northwatch Inn", ["Bram", "Mira"])
    assert [b.name for b in session_books(store, group)] == ["Northwatch", "Inn Rumours"]
    assert _documents(store, group, PERSONA)[0]["name"] == "Wren"
    assert store.session(group).metadata["names"]["player"] == "Wren"
    assert [n.name for n in store.projection(group)] == ["Mira", "Wren", "Bram"]

    # a character with no chat: a session from its card, starting with its greetings;
    # the book settings.json links to it (charLore), the persona connected to it
    mira = found["characters/Mira.json"].session_id or ""
    roots = [n for n in store.tree(mira).nodes if n.parent_id is None]
    assert [n.name for n in roots] == ["Mira"] * 3  # the greeting and two alternatives
    assert [b.name for b in session_books(store, mira)] == ["Inn Rumours"]
    assert _documents(store, mira, PERSONA)[0] == {
        "name": "Wren",
        "description": "A young scout of the Northwatch.",
    }
    assert store.session(mira).metadata["names"] == {"player": "Wren", "character": "Mira"}

    # SillyTavern's own card: Eldoria from worlds/ (the card links it), kept once
    seraphina = found["characters/Seraphina.png"].session_id or ""
    assert [d.name for d in store.documents(seraphina, LOREBOOK)] == ["Eldoria"]


def test_a_second_run_imports_nothing_twice(store: Store, folder: Path) -> None:
    write_plan(store, plan_folder(folder, store))
    again = plan_folder(folder, store)
    assert {p.status for p in again.sessions} == {"already there"}
    write_plan(store, again)
    assert len(store.sessions()) == 5

    # a chat played on in SillyTavern since: imported again, as a new session
    chat = folder / BRAM_CHAT
    line = {"name": "Alex", "is_user": True, "mes": "At dawn, then.", "extra": {}}
    chat.write_text(chat.read_text() + json.dumps(line) + "\n")
    third = _by_source(plan_folder(folder, store))
    assert third[BRAM_CHAT].status == "changed"
    assert {p.status for s, p in third.items() if s != BRAM_CHAT} == {"already there"}
    fourth = plan_folder(folder, store)
    write_plan(store, fourth)
    assert _by_source(fourth)[BRAM_CHAT].status == "imported"
    assert len(store.sessions()) == 6


def test_a_session_that_fails_does_not_stop_the_others(store: Store, folder: Path) -> None:
    (folder / "group chats" / "lost.jsonl").write_text("")  # no group lists it
    plan = plan_folder(folder, store)
    assert {s.file: s.reason for s in plan.skipped}["group chats/lost.jsonl"] == (
        "no group in groups/ lists this chat"
    )
    chat = folder / BRAM_CHAT
    chat.write_text(chat.read_text().replace("archive", "library"))  # after the plan
    write_plan(store, plan)
    found = _by_source(plan)
    assert found[BRAM_CHAT].status == "failed"
    assert "changed since it was read" in found[BRAM_CHAT].notes[-1]
    assert {p.status for s, p in found.items() if s != BRAM_CHAT} == {"imported"}
    assert len(store.sessions()) == 4  # nothing of the failed one


def test_bad_settings_are_skipped_and_the_rest_comes_in(folder: Path) -> None:
    (folder / "settings.json").write_text('{"power_user": {"personas": ["Alex"]}}')
    plan = plan_folder(folder)
    reason = {s.file: s.reason for s in plan.skipped}["settings.json"]
    assert reason.startswith("power_user.personas: ")
    assert len(plan.sessions) == 5 and plan.personas == []
    assert {p.persona for p in plan.sessions} == {None}  # no one named
    (folder / "settings.json").write_text('{"username": "Kit"}')
    assert {p.persona.name for p in plan_folder(folder).sessions if p.persona} == {"Kit"}


def test_a_group_file_from_2023_with_numeric_ids_is_read(folder: Path) -> None:
    """SillyTavern wrote a group's id as a number in 2023 (``Date.now()``); found in a
    real user folder, refused then with "id: Input should be a valid string"."""
    path = folder / "groups" / "1760000000000.json"
    group = json.loads(path.read_text())
    group["id"] = 1760000000000
    path.write_text(json.dumps(group))
    plan = plan_folder(folder)
    assert "groups/1760000000000.json" not in {s.file for s in plan.skipped}
    assert GROUP_CHAT in _by_source(plan)


def test_where_the_user_folder_is(tmp_path: Path) -> None:
    data = tmp_path / "data"
    shutil.copytree(USER, data / "alice")
    assert plan_folder(data).folder == data / "alice"
    assert plan_folder(tmp_path).folder == data / "alice"  # SillyTavern's own folder
    shutil.copytree(USER, data / "bob")
    with pytest.raises(FolderError, match=r"several SillyTavern users.*alice.*bob"):
        plan_folder(data)
    with pytest.raises(FolderError, match="not a SillyTavern user folder"):
        plan_folder(tmp_path / "data" / "alice" / "worlds")
    with pytest.raises(FolderError, match="no such folder"):
        plan_folder(tmp_path / "nowhere")


def test_the_command(run: Run, folder: Path) -> None:
    planned = run.json("import", "sillytavern", str(folder), "--dry-run")
    assert planned["dry_run"] is True
    assert {s["status"] for s in planned["sessions"]} == {"new"}
    assert run.json("session", "list") == []  # a dry run changes nothing

    done = run.json("import", "sillytavern", str(folder))
    assert {s["status"] for s in done["sessions"]} == {"imported"}
    assert [s["file"] for s in done["skipped"]] == [s["file"] for s in planned["skipped"]]
    assert len(run.json("session", "list")) == 5

    said = run("import", "sillytavern", str(folder)).stdout
    assert "5 session(s): 5 already there; 3 skipped" in said
    assert "characters/Broken.json: data: expected an object" in said
    assert "no character links (clotho import lorebook FILE): Old Maps" in said
    assert len(run.json("session", "list")) == 5

    assert "not a SillyTavern user folder" in run.fails(
        "import", "sillytavern", str(folder / "worlds")
    )


def test_names_from_the_files_are_shown_as_they_are(
    folder: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from clotho.cli.stfolder import _summary

    (folder / BRAM_CHAT).rename(folder / "chats" / "Bram" / "[bold red]Bram[-].jsonl")
    _summary(plan_folder(folder), dry_run=True)
    shown = capsys.readouterr().out
    assert "[bold red]Bram[-]" in shown  # not read as Rich markup
    assert "Dry run: nothing changed. 5 session(s): 5 would import; 3 skipped" in shown


def _group(folder: Path, **changes: object) -> None:
    path = folder / GROUP_FILE
    path.write_text(json.dumps({**json.loads(path.read_text()), **changes}))


def _say(folder: Path, *messages: dict[str, object]) -> None:
    chat = folder / GROUP_CHAT
    lines = [json.dumps({"is_user": False, "extra": {}, **m}) for m in messages]
    chat.write_text(chat.read_text() + "\n".join(lines) + "\n")


def test_a_group_chat_plays_with_its_members_as_the_cast(store: Store, folder: Path) -> None:
    """Each member's card in the group's order (a missing one written in place), its
    picture, its own book once; its muted members muted; its speakers named by the
    cast (a renamed character by its card file); its activation strategy the order."""
    _group(
        folder,
        members=["Bram.png", "Mira.png", "Seraphina.png", "Ghost.png"],
        disabled_members=["Mira.png"],
        activation_strategy=1,
    )
    bram = folder / "characters" / "Bram.json"
    bram.write_text(bram.read_text().replace('"talkativeness": "0.5"', '"talkativeness": "0.8"'))
    _say(
        folder,
        {"name": "Sera", "original_avatar": "Seraphina.png", "mes": "Be welcome."},
        {"name": "Ghost", "original_avatar": "Ghost.png", "mes": "Boo."},
        {"name": "Stranger", "mes": "Who are you all?"},
    )
    plan = plan_folder(folder, store)
    planned = _by_source(plan)[GROUP_CHAT]
    assert planned.members == ["Bram", "Mira", "Seraphina", "Ghost"]
    assert any("Ghost.png" in note and "written in place" in note for note in planned.notes)
    assert any("list order" in note and "round robin" in note for note in planned.notes)
    write_plan(store, plan)
    session_id = planned.session_id or ""

    cast = session_cast(store, session_id)
    assert cast.names == ["Bram", "Mira", "Seraphina", "Ghost"]
    assert cast.settings.order == "round_robin"
    assert [(m.name, m.muted, m.talkativeness) for m in cast.members] == [
        ("Bram", False, 0.8),
        ("Mira", True, 0.5),
        ("Seraphina", False, 0.5),  # SillyTavern's default card has none: the default
        ("Ghost", False, 0.5),
    ]
    ghost = cast.find("Ghost").card
    assert (ghost.description, ghost.first_mes) == ("", "")
    # each own book once: Bram's linked book (worlds/, not his card's older copy),
    # Seraphina's Eldoria (worlds/: her card links it), Mira's from settings.json
    assert [b.name for b in session_books(store, session_id)] == [
        "Northwatch",
        "Inn Rumours",
        "Eldoria",
    ]
    assert cast.find("Bram").books == ("Northwatch",)
    assert cast.find("Seraphina").books == ("Eldoria",)
    # the one PNG card's picture, named by its member; the session's picture is its
    # character's (Bram, the first: a JSON card), so the list shows none
    assert [d.name for d in store.documents(session_id, AVATAR)] == ["Seraphina"]
    assert AVATAR_KEY not in store.session(session_id).metadata
    assert session_avatar(store, session_id) is None
    avatar = session_avatar(store, session_id, "Seraphina")
    assert avatar is not None and avatar.png.startswith(b"\x89PNG")
    assert store.session(session_id).metadata["names"]["character"] == "Bram"

    # the renamed one speaks as her member; a name that is no member stays as it is
    said = [n.name for n in store.projection(session_id)]
    assert said == ["Mira", "Wren", "Bram", "Seraphina", "Ghost", "Stranger"]
    # and the chat exports as it came (the message keeps the name it was saved with)
    exported = [json.loads(line) for line in export_chat(store, session_id).text.splitlines()]
    assert [m["name"] for m in exported][-3:] == ["Sera", "Ghost", "Stranger"]


@pytest.mark.parametrize(
    ("strategy", "order"),
    [
        (None, "natural"),
        (False, "natural"),  # as real groups hold it (SillyTavern reads Number(false): 0)
        (0, "natural"),
        (1, "round_robin"),
        ("2", "manual"),
        (3, "round_robin"),
        ("fast", "natural"),
    ],
)
def test_a_group_plays_in_its_order(folder: Path, strategy: object, order: str) -> None:
    _group(folder, activation_strategy=strategy)
    planned = _by_source(plan_folder(folder))[GROUP_CHAT]
    assert planned.cast_settings is not None and planned.cast_settings.order == order


def test_a_group_whose_members_are_all_muted_says_so(folder: Path) -> None:
    """A shape found in a real user folder: every member disabled."""
    _group(folder, disabled_members=["Bram.png", "Mira.png"], activation_strategy=False)
    planned = _by_source(plan_folder(folder))[GROUP_CHAT]
    assert planned.cast_settings is not None
    assert planned.cast_settings.muted == ["Bram", "Mira"]
    assert any("every member is muted" in note for note in planned.notes)
    _group(folder, disabled_members=["Mira.png"])
    assert not any("muted" in note for note in _by_source(plan_folder(folder))[GROUP_CHAT].notes)


def test_a_group_of_2023_names_its_members_by_name(folder: Path) -> None:
    """Before 2023 a group listed its members by their characters' names; an unknown
    strategy number is read as natural, and what does not map is said (self responses,
    append mode)."""
    _group(
        folder,
        members=["Mira", "Bram", "Mira"],
        activation_strategy=9,
        allow_self_responses=True,
        generation_mode=1,
    )
    planned = _by_source(plan_folder(folder))[GROUP_CHAT]
    assert [card.name for card in planned.cast] == ["Mira", "Bram"]
    assert planned.cast_settings is not None and planned.cast_settings.order == "natural"
    assert any("activation strategy 9" in note for note in planned.notes)
    assert any("lets a member answer itself" in note for note in planned.notes)
    assert any("append mode" in note for note in planned.notes)
    assert not any("not in characters/" in note for note in planned.notes)


def test_a_chat_and_a_character_keep_the_card_picture(store: Store, folder: Path) -> None:
    shutil.copy(SERAPHINA, folder / "characters" / "Ghost.png")  # the chat's card now
    plan = plan_folder(folder, store)
    write_plan(store, plan)
    found = _by_source(plan)
    for source in (GHOST_CHAT, "characters/Seraphina.png"):
        session_id = found[source].session_id or ""
        [card] = store.documents(session_id, CARD)
        assert [d.name for d in store.documents(session_id, AVATAR)] == [card.name]
        assert store.session(session_id).metadata[AVATAR_KEY] is True
        assert session_cast(store, session_id).names == [card.name]
    assert store.documents(found[BRAM_CHAT].session_id or "", AVATAR) == []  # a JSON card


def test_an_imported_group_chat_plays_on(
    run: Run, folder: Path, serve: Callable[..., ModelServer]
) -> None:
    """After the import the group's story goes on: a member named answers as itself,
    its card in the prompt and the others in the scene; a muted member is refused."""
    _group(folder, disabled_members=["Mira.png"], activation_strategy=2)
    model = serve(lambda request: '{"operations": []}' if "response_format" in request else "Aye.")
    run.env.update({"CLOTHO_MODEL": "openai/gm", "CLOTHO_API_BASE": model.url})
    done = run.json("import", "sillytavern", str(folder))
    [group] = [s["session_id"] for s in done["sessions"] if s["kind"] == "group"]
    cast = run.json("--session", group, "cast")
    assert [(m["name"], m["muted"]) for m in cast] == [("Bram", False), ("Mira", True)]
    said = run.json("--session", group, "say", "--speaker", "bram", "And the gate?")
    assert (said["node"]["name"], said["node"]["content"]) == ("Bram", "Aye.")
    [prompt] = [
        json.loads(r.body)["messages"]
        for r in model.requests
        if "response_format" not in json.loads(r.body)
    ]
    system = " ".join(m["content"] for m in prompt if m["role"] == "system")
    assert "knight of the Northwatch" in system and "Mira" in system
    refused = run.fails("--session", group, "say", "--speaker", "Mira", "Mira?")
    assert "Mira is muted" in refused


def test_a_groups_members_books_of_one_name_are_kept_apart_and_names_read_whole() -> None:
    from clotho.stfolder import _member_stem
    from planner.cards import load_card, parse_card

    path = FIXTURES / "sillytavern_user" / "characters" / "Bram.json"
    bram = load_card(path.read_bytes(), path.name)
    assert bram.book is not None
    twin = {**bram.raw, "data": {**bram.raw["data"], "name": "Other Bram"}}
    twin["data"]["character_book"] = {
        **bram.raw["data"]["character_book"],
        "entries": [{"id": 0, "keys": ["wall"], "content": "Another wall.", "extensions": {}}],
    }
    same = {**bram.raw, "data": {**bram.raw["data"], "name": "Bram Again"}}
    planned = PlannedSession("group", "group chats/1.jsonl", "0", "Gate")
    planned.cast = [bram, parse_card(twin, "Other Bram"), parse_card(same, "Bram Again")]
    books = planned.lorebooks()
    assert [book.name for book in books] == [bram.book.name, f"{bram.book.name} (2)"]
    assert books[1].entries[0].content == "Another wall."  # the twin's, not dropped
    assert _member_stem("Bram.png") == "Bram"
    assert _member_stem("Mr. Smith") == "Mr. Smith"  # a name, as old groups give it
