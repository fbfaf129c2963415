"""``clotho cast`` and who speaks, from the command line: the cast's commands and their
refusals (in this process, on SQLite), ``say --speaker``, a round of several speakers,
``reply``, and a four-character story played through ``clotho play`` with a character
who leaves and comes back (subprocesses, against a model server on loopback)."""

from __future__ import annotations

import io
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from clotho.cast import add_member, scene_change, written_card
from clotho.cli.playcommands import COMMANDS
from clotho.cli.playinput import completions
from clotho.cli.playscreen import ChatScreen
from clotho.sessions import new_session
from mnemosyne import Store
from orchestrator.loopback import ModelServer, Reply
from tests._fixtures import ELDORIA, SERAPHINA

from .terminal import Terminal
from .test_cli import InProcess, Run
from .test_play import played


@pytest.fixture
def clotho(tmp_path: Path) -> InProcess:
    return InProcess.on_sqlite(tmp_path)


def test_the_cast_commands_and_their_refusals(clotho: InProcess, tmp_path: Path) -> None:
    clotho("session", "new", "--title", "The Crossing")
    assert clotho.json("cast") == []
    assert "no cast yet" in clotho("cast").stdout
    ann = clotho.json("cast", "add", "--name", "Ann", "--description", "A ranger.")
    assert ann["name"] == "Ann" and ann["description"] == "A ranger."
    clotho("cast", "add", "--name", "Bram", "--personality", "Gruff.")
    seraphina = clotho.json("cast", "add", str(SERAPHINA))  # a PNG card: its picture too
    assert seraphina["name"] == "Seraphina"
    card = tmp_path / "cora.json"
    card.write_text(json.dumps({"spec": "chara_card_v2", "data": {"name": "Cora"}}))
    clotho("cast", "add", str(card))

    members = clotho.json("cast", "list")
    assert [m["name"] for m in members] == ["Ann", "Bram", "Seraphina", "Cora"]
    assert [m["source"] for m in members] == ["written", "written", "card", "card"]
    assert [m["avatar"] for m in members] == [False, False, True, False]
    assert members[2]["books"] and not members[0]["books"]  # Seraphina's own book
    assert all(m["present"] and not m["muted"] for m in members)
    listed = clotho("cast").stdout.splitlines()
    assert listed[0].split()[:3] == ["1", "Ann", "present"]
    assert "written in place" in listed[0] and "with a picture" in listed[2]
    assert listed[-1].startswith("speaker order  natural")

    # refusals: each one line naming what was wrong, nothing changed
    assert "Bram is in the cast already" in clotho.fails("cast", "add", "--name", "Bram")
    assert "a card file, or --name" in clotho.fails("cast", "add")
    assert "not both" in clotho.fails("cast", "add", str(card), "--name", "Dax")
    unknown = clotho.fails("cast", "leave", "Zed")
    assert "no member of the cast is named 'Zed'" in unknown
    assert "Ann, Bram, Seraphina, Cora" in unknown
    assert "no such file" in clotho.fails("cast", "add", str(tmp_path / "none.png"))
    misfiled = clotho.fails("cast", "add", str(ELDORIA))
    assert (
        "a World Info lorebook, not a character card: import it with `clotho import lorebook"
        in (" ".join(misfiled.split()))
    )
    assert len(clotho.json("cast")) == 4

    left = clotho.json("cast", "leave", "bram")  # any case
    assert left["role"] == "system" and left["name"] is None
    assert left["content"] == "Bram leaves the scene."
    assert left["metadata"] == {"scene": {"leaves": "Bram"}}
    assert "Bram is not in the scene" in clotho.fails("cast", "leave", "Bram")
    assert [m["present"] for m in clotho.json("cast")] == [True, False, True, True]
    assert clotho.json("state")["present"] == ["Ann", "Seraphina", "Cora"]
    joined = clotho("cast", "join", "Bram").stdout  # the narration node, as other nodes
    assert joined.split()[1:] == ["~", "Bram", "joins", "the", "scene.", "(HEAD)"]
    assert "Bram is in the scene already" in clotho.fails("cast", "join", "Bram")
    assert "#1" in clotho("log").stdout and "~ Bram leaves the scene." in clotho("log").stdout
    tree = clotho("tree").stdout
    assert "~ Bram leaves the scene." in tree and "~ Bram joins the scene. (HEAD)" in tree
    assert "scene ~ Bram joins the scene." in " ".join(clotho("show").stdout.split())

    # the settings: mute, order, talkativeness; stale versions refused
    version = clotho.json("session", "list")[0]["version"]
    assert clotho.json("cast", "mute", "Cora") == {
        "name": "Cora",
        "muted": True,
        "version": version + 1,
    }
    assert "Cora is muted already" in clotho.fails("cast", "mute", "cora")
    assert clotho.json("cast", "unmute", "Cora")["muted"] is False
    assert "Cora is not muted already" in clotho.fails("cast", "unmute", "Cora")
    clotho("cast", "order", "round_robin")
    assert clotho.json("cast", "order") == {"order": "round_robin"}
    assert "invalid value" in clotho.fails("cast", "order", "loudest", code=2).lower()
    clotho("cast", "talk", "Ann", "0.9")
    assert "invalid value" in clotho.fails("cast", "talk", "Ann", "1.5", code=2).lower()
    stale = clotho.fails("cast", "mute", "Ann", "--expect-version", "1", code=3)
    assert "version" in stale
    members = clotho.json("cast")
    assert members[0]["talkativeness"] == 0.9
    assert [m["muted"] for m in members] == [False, False, False, False]
    assert clotho.json("cast", "recap") == {"recap_missed": False}
    clotho("cast", "recap", "on")
    assert "recaps" in clotho("cast").stdout.splitlines()[-1]
    settings = clotho.json("session", "list")[0]["metadata"]["settings"]["cast"]
    assert settings == {
        "order": "round_robin",
        "muted": [],
        "talkativeness": {"Ann": 0.9},
        "recap_missed": True,
    }

    # undo takes the join back, then the leave: the cast as it was
    clotho("undo")
    assert [m["present"] for m in clotho.json("cast")] == [True, False, True, True]
    clotho("undo")
    assert all(m["present"] for m in clotho.json("cast"))
    assert clotho.json("state")["present"] is None

    removed = clotho.json("cast", "remove", "seraphina")
    assert removed["name"] == "Seraphina"
    assert [m["name"] for m in clotho.json("cast")] == ["Ann", "Bram", "Cora"]
    assert "no member of the cast is named" in clotho.fails("cast", "remove", "Seraphina")


def test_a_campaigns_character_stays_the_first_member_when_a_card_comes(
    clotho: InProcess, tmp_path: Path
) -> None:
    folder = tmp_path / "cave"
    folder.mkdir()
    (folder / "campaign.toml").write_text(
        'title = "Cave"\n[character]\nname = "Marla"\ndescription = "An innkeeper."\n'
    )
    clotho("session", "new", "--campaign", str(folder))
    assert "the session's character is Marla, of no card" in clotho("cast").stdout
    added = clotho("cast", "add", "--name", "Ann").stdout
    assert "Marla, the campaign's character, stays the session's character" in " ".join(
        added.split()
    )
    cast = clotho.json("cast")
    assert [(m["name"], m["source"], m["first"]) for m in cast] == [
        ("Marla", "written", True),
        ("Ann", "written", False),
    ]
    assert cast[0]["description"] == "An innkeeper."
    assert "is in the cast already" in clotho.fails("cast", "add", "--name", "Marla")
    assert "is in the cast already" in clotho.fails("cast", "add", "--name", "marla")


def test_a_campaign_with_no_character_names_none_when_the_first_card_comes(
    clotho: InProcess, tmp_path: Path
) -> None:
    folder = tmp_path / "plain"
    folder.mkdir()
    (folder / "campaign.toml").write_text('title = "Plain"\n')  # no [character]
    clotho("session", "new", "--campaign", str(folder))
    assert "the session's character is the default one, of no card" in clotho("cast").stdout
    added = clotho("cast", "add", "--name", "Ann").stdout
    assert added.strip() == "Ann joins the cast"  # no one else stays first
    assert [(m["name"], m["first"]) for m in clotho.json("cast")] == [("Ann", True)]


def test_tab_completes_the_casts_names_after_the_commands_that_take_one() -> None:
    def offered(typed: str) -> list[tuple[str, int]]:
        cast = ["Ann", "Bram", "Old Tom"]
        found = completions(typed, COMMANDS, lambda: [], lambda: cast)
        return [(candidate.text, candidate.replace) for candidate in found]

    assert offered("/leave b") == [("Bram", 1)]  # any case
    assert offered("/join ") == [("Ann", 0), ("Bram", 0), ("Old Tom", 0)]
    assert offered("/speaker old t") == [("Old Tom", 5)]  # a name with a space
    assert offered("/mute Bram") == []  # typed whole already
    assert offered("/next A") == [("Ann", 1)]
    assert offered("/log A") == []  # a command that takes no name
    assert ("/unmute", 4) in [(c.text, c.replace) for c in completions("/unm", COMMANDS, list)]


def test_each_member_speaks_in_a_colour_of_its_own_and_a_scene_change_is_narration(
    tmp_path: Path,
) -> None:
    cast = ["Ann", "Bram", "Cora", "Dax"]
    out = io.StringIO()
    screen = ChatScreen(out, io.StringIO(), terminal=True, color=True, width=lambda: 80, cast=cast)
    for name in [*cast, "Ann"]:
        screen.expect_reply(name)
        screen.on_event("token", "Hello.")
        screen.end_turn()
    headers = re.findall(r"\x1b\[([\d;]+)m(\w+):\x1b\[0m Hello\.", out.getvalue())
    assert [name for _, name in headers] == [*cast, "Ann"]
    colours = [codes for codes, _ in headers]
    assert len(set(colours[:4])) == 4 and colours[4] == colours[0]  # its own, every time

    store = Store.open(f"sqlite:///{tmp_path / 'scene.db'}")
    try:
        session = new_session(store, title="The Crossing")
        for name in cast[:2]:
            add_member(store, session.id, written_card(name))
        node, _ = scene_change(store, session.id, "Bram", "leaves")
        told = io.StringIO()
        screen = ChatScreen(told, io.StringIO(), terminal=True, color=True, cast=cast)
        screen.message(store.turn(session.id, node.id), details=False)
    finally:
        store.close()
    text = told.getvalue()
    assert re.sub(r"\x1b\[[\d;]*m", "", text) == "~ Bram leaves the scene.\n"  # no speaker
    assert set(re.findall(r"\x1b\[([\d;]+)m", text)) == {"2;3", "0"}  # dim and italic


# -- who speaks: turns against a model on loopback -------------------------------------


def _last_user_text(messages: list[dict[str, Any]]) -> str:
    return next((m["content"] for m in reversed(messages) if m["role"] == "user"), "")


def script(request: dict[str, Any]) -> str:
    """Each reply says what it answers (the player's last line as the model saw it)."""
    if "response_format" in request:
        return '{"operations": []}'
    return f"(on: {_last_user_text(request['messages'])[-40:]})"


@pytest.fixture
def model() -> Iterator[ModelServer]:
    with ModelServer(script) as server:
        yield server


def cast_session(clotho: InProcess, model: ModelServer, *names: str) -> Run:
    """A session whose cast is ``names`` (written in place), its model the one on
    loopback; the CLI as subprocesses on the same database and home (for ``play``)."""
    clotho.env.update({"CLOTHO_MODEL": "openai/gm", "CLOTHO_API_BASE": model.url})
    clotho("session", "new", "--title", "The Crossing")
    for name in names:
        clotho("cast", "add", "--name", name, "--description", f"{name} travels with you.")
    run = Run(clotho.env["CLOTHO_DATABASE_URL"], Path(clotho.env["HOME"]))
    run.env.update({"CLOTHO_MODEL": "openai/gm", "CLOTHO_API_BASE": model.url})
    return run


def _prompts(model: ModelServer) -> list[list[dict[str, Any]]]:
    """The messages of each reply's request (not the state's extraction calls)."""
    bodies = [json.loads(received.body) for received in model.requests]
    return [body["messages"] for body in bodies if "response_format" not in body]


def test_say_with_a_speaker_a_round_of_several_and_reply(
    model: ModelServer, clotho: InProcess
) -> None:
    cast_session(clotho, model, "Ann", "Bram", "Cora")
    run = clotho
    # natural order: the names mentioned, in order, then whoever's talkativeness rolls
    run("cast", "talk", "Ann", "1")
    run("cast", "talk", "Bram", "0")
    run("cast", "talk", "Cora", "0")
    said = run.json("say", "Cora and Bram, what now?")
    replies = [said["node"], *(turn["node"] for turn in said["replies"])]
    assert [node["name"] for node in replies] == ["Cora", "Bram", "Ann"]
    assert said["user_node"]["content"] == "Cora and Bram, what now?"
    assert [turn["user_node"] for turn in said["replies"]] == [None, None]
    log = run.json("log")
    assert [(n["role"], n["name"]) for n in log[1:]] == [
        ("assistant", "Cora"),
        ("assistant", "Bram"),
        ("assistant", "Ann"),
    ]
    # to a pipe each reply's text as it is, its footer naming who spoke
    piped = run("say", "--speaker", "bram", "Bram, the rope.").stdout.splitlines()
    assert piped[0] == "(on: Bram, the rope.)"
    assert piped[1].startswith("Bram · reply 1/1 · ")
    assert run.json("log")[-1]["name"] == "Bram"

    nudged = run.json("reply", "--speaker", "Cora")  # no message of the player's
    assert nudged["user_node"] is None and nudged["node"]["name"] == "Cora"
    assert nudged["node"]["parent_id"] == run.json("log")[-2]["id"]
    run("cast", "mute", "Cora")
    refused = run.fails("say", "--speaker", "Cora", "Cora?")
    assert "Cora" in refused and "muted" in refused
    assert refused == "error: Cora is muted: a muted member never speaks (unmute it first)"
    unknown = run.fails("reply", "--speaker", "Zed")
    assert unknown == "error: no member of the cast is named 'Zed' (the cast: Ann, Bram, Cora)"
    assert run.json("log")[-1]["id"] == nudged["node"]["id"]  # nothing stored


def test_the_trace_says_the_lore_of_an_absent_owner_was_left_out(
    model: ModelServer, clotho: InProcess
) -> None:
    clotho.env["CLOTHO_VECTORS"] = "false"  # by keywords: the forest's entry fires
    cast_session(clotho, model, "Ann")
    clotho("cast", "add", str(SERAPHINA))  # her own book: Eldoria
    clotho("say", "--speaker", "Ann", "We walk into the forest.")
    assert "Eldoria:0" in [hit["id"] for hit in clotho.json("trace")["lore"]]
    clotho("cast", "leave", "Seraphina")
    clotho("say", "--speaker", "Ann", "Deeper into the forest.")
    trace = clotho.json("trace")
    assert trace["lore"] == []
    assert "Eldoria:0" in [lore["id"] for lore in trace["scene"]["lore_left_out"]]
    text = " ".join(clotho("trace").stdout.split())
    assert "lore left out: Eldoria:0: " in text
    assert "Seraphina" in text.split("lore left out: Eldoria:0: ")[1]


def test_a_four_character_story_in_play_with_one_who_leaves_and_comes_back(
    model: ModelServer, clotho: InProcess
) -> None:
    player = cast_session(clotho, model, "Ann", "Bram", "Cora", "Dax")
    run = clotho
    run("cast", "order", "manual")  # unnamed, the first present answers: Ann
    before = run.json("state")["present"]
    shown = played(
        player,
        "We light a fire by the river.",
        "/leave Bram",
        "/speaker Bram",  # refused: he is away
        "We hide the map under the stone.",
        "Ann, is anyone following us?",
        "/join bram",
        "/speaker Bram",
        "Bram, what did you see out there?",
        "/cast",
        "/quit",
    ).stdout
    assert "~ Bram leaves the scene." in shown and "~ Bram joins the scene." in shown
    assert "Bram is not in the scene: /join Bram first" in shown
    assert shown.count("Bram answers your messages now") == 1
    prompts = _prompts(model)
    assert len(prompts) == 4
    bram = " ".join(m["content"] for m in prompts[-1])
    assert "We light a fire by the river." in bram  # before he left: witnessed
    assert "Bram, what did you see out there?" in bram
    assert "hide the map" not in bram and "anyone following" not in bram  # away
    ann = " ".join(m["content"] for m in prompts[2])
    assert "hide the map" in ann  # she was there

    log = run.json("log")
    away = [n["id"] for n in log if "hide the map" in n["content"] or "following" in n["content"]]
    assert len(away) == 4  # two messages and their replies
    reply = log[-1]
    assert reply["name"] == "Bram"
    trace = run.json("trace")
    assert trace["scene"]["speaker"] == "Bram"
    assert set(trace["scene"]["present"]) == {"Ann", "Bram", "Cora", "Dax"}
    spans = trace["scene"]["left_out"]
    assert sum(span["count"] for span in spans) == len(away) == 4
    assert [(span["first"], span["last"]) for span in spans] == [(away[0], away[-1])]
    text = " ".join(run("trace").stdout.split())
    assert "scene: Bram speaks; present: Ann, Bram, Cora, Dax" in text
    assert (
        f"left out: 4 messages Bram did not witness (away): {away[0][:8]}..{away[-1][:8]} (4)"
        in text
    )

    # resumed: Ann muted (the engine made again: manual order skips her), Dax nudged
    played(player, "/mute Ann", "Is anyone awake?", "/next Dax", "/unmute ann", "/quit")
    *_, awake, bram, dax = run.json("log")
    assert (awake["content"], bram["name"], dax["name"]) == ("Is anyone awake?", "Bram", "Dax")
    assert dax["parent_id"] == bram["id"]
    assert not any(member["muted"] for member in run.json("cast"))

    # back across the join and the leave: the cast as it was
    undone = played(player, *["/undo"] * 7, "/cast", "/quit").stdout
    assert undone.count("undone") == 7
    assert all(member["present"] for member in run.json("cast"))
    assert run.json("state")["present"] == before
    assert run.json("log")[0]["content"] == "We light a fire by the river."


def test_an_edit_and_a_continue_are_answered_by_who_was_there_under_the_name_shown(
    model: ModelServer, clotho: InProcess
) -> None:
    player = cast_session(clotho, model, "Ann", "Bram")
    clotho("cast", "leave", "Bram")
    hello = clotho.json("say", "Hello there.")
    assert hello["node"]["name"] == "Ann"  # the one present
    clotho("cast", "join", "Bram")
    clotho("cast", "leave", "Ann")  # at HEAD, Bram alone is here; at the hello, Ann alone

    # the edit's reply grows where the hello was said: Ann answers, and is shown so
    with Terminal(["edit", hello["user_node"]["id"][:8], "Hello again."], player.env) as term:
        assert term.wait_exit(timeout=60) == 0
        shown = term.display()
    assert shown[0] == "Ann: (on: Hello again.)"
    assert clotho.json("log")[-1]["name"] == "Ann"

    # a continue at a line of the scene: who is here answers (not the first member)
    clotho("cast", "join", "Bram")
    clotho("cast", "leave", "Ann")
    with Terminal(["continue"], player.env) as term:
        assert term.wait_exit(timeout=60) == 0
        shown = term.display()
    assert shown[0].startswith("Bram: (on: ")
    assert clotho.json("log")[-1]["name"] == "Bram"


def test_muting_the_picked_speaker_gives_the_choice_back_to_the_order(
    model: ModelServer, clotho: InProcess
) -> None:
    player = cast_session(clotho, model, "Ann", "Bram")
    clotho("cast", "order", "manual")  # unnamed, the first present and unmuted answers
    shown = played(player, "/speaker Bram", "/mute Bram", "Who keeps watch?", "/quit").stdout
    assert "Bram was to answer: the speaker order decides again" in shown
    assert "error" not in shown
    log = clotho.json("log")
    assert (log[-2]["content"], log[-1]["name"]) == ("Who keeps watch?", "Ann")


def test_say_json_prints_the_replies_stored_before_one_of_the_round_failed(
    clotho: InProcess,
) -> None:
    replies = 0

    def second_fails(request: dict[str, Any]) -> str | Reply:
        nonlocal replies
        if "response_format" in request:
            return '{"operations": []}'
        replies += 1
        return "Ann nods." if replies == 1 else Reply(status=400, error="the model refused")

    with ModelServer(second_fails) as server:
        cast_session(clotho, server, "Ann", "Bram")
        clotho("cast", "talk", "Ann", "0")
        clotho("cast", "talk", "Bram", "0")
        done = clotho("--json", "say", "Ann and Bram, hello.", code=1)
    said = json.loads(done.stdout)  # Ann's turn, stored; Bram's failed
    assert (said["node"]["name"], said["node"]["content"]) == ("Ann", "Ann nods.")
    assert said["replies"] == []
    assert "the model refused" in done.stderr
    assert clotho.json("log")[-1]["id"] == said["node"]["id"]


def test_an_undo_that_sends_the_picked_speaker_away_gives_the_choice_back(
    model: ModelServer, clotho: InProcess
) -> None:
    player = cast_session(clotho, model, "Ann", "Bram")
    clotho("cast", "order", "manual")
    clotho("cast", "leave", "Bram")
    clotho("cast", "join", "Bram")
    shown = played(player, "/speaker Bram", "/undo", "Who keeps watch?", "/quit").stdout
    assert "Bram was to answer: the speaker order decides again" in shown
    assert "error" not in shown
    log = clotho.json("log")
    assert (log[-2]["content"], log[-1]["name"]) == ("Who keeps watch?", "Ann")
