"""Tree files (clotho export tree / import tree): a whole session out and back in,
losing nothing, on SQLite and PostgreSQL; ids taken refused (or made new); broken
documents refused with the place named, storing nothing."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from clotho.formats.treefile import (
    TreeFileError,
    TreeIdsTakenError,
    export_tree,
    import_tree,
    tree_text,
)
from mnemosyne import InvalidDeltaError, Store, refs, schema_from_mapping
from mnemosyne.edits import Delete, Prune, Restore, Toggle
from orchestrator import Character, Engine, ModelConfig, TurnSetup
from orchestrator.loopback import ModelServer
from planner.lore import LorePlanner

from ..orchestrator.test_lore_turn import BOOK
from ..orchestrator.test_turn import HIT, NOTHING, Scripted, play
from .test_cli import InProcess

SCHEMA = schema_from_mapping(
    {
        "variables": {
            "hp": {"type": "int", "default": 100, "min": 0, "max": 100},
            "gold": {"type": "int", "default": 10, "min": 0, "out_of_bounds": "refuse"},
            "flags": {"type": "set"},
        }
    }
)
WORLD_INFO = json.dumps({"entries": {"0": {"uid": 0, "key": ["goblin"], "content": "Goblins."}}})


@pytest.fixture
def other_store(backend: str, blank_database_url: Callable[[str], str]) -> Iterator[Store]:
    """A second, empty database of the same backend."""
    with Store.open(blank_database_url(backend), migrate=True) as opened:
        yield opened


def inc(path: str, value: int) -> list[dict[str, Any]]:
    return [{"op": "inc", "path": path, "value": value}]


def a_lived_in_session(store: Store, server: ModelServer) -> str:
    """Forks, disabled nodes, a fragment, trash, deltas, a schema, documents, and
    real traces of turns played against a model server."""
    sid = store.create_session(
        title="The valley",
        campaign="valley",
        metadata={"player": "Hero"},
        schema=SCHEMA,
        documents=[("lorebook", "valley", WORLD_INFO), ("card", "Seraphina", '{"name": "S"}')],
    ).id
    store.append(sid, "system", "You are the game master.", metadata={"source": "campaign"})
    setup = TurnSetup(
        model=ModelConfig("openai/gm", api_base=server.url, retries=0),
        character=Character(name="Seraphina", description="A forest guardian."),
        player="Hero",
    )
    engine = Engine(store, setup, planner=LorePlanner([BOOK], seed=7))
    first = play(engine, sid, "say", text="I attack the goblin.")
    play(engine, sid, "reroll")  # a fork of replies, each with its trace
    store.switch_sibling(sid, "prev")
    play(engine, sid, "say", text="I search the body.")
    quiet, _ = store.append(sid, "user", "I wait.", delta=inc("gold", 5), enabled=False)
    store.append(sid, "assistant", "Time passes.", name="Seraphina", delta=inc("hp", 3))
    pruned, _ = store.append(sid, "user", "I go home.", delta=inc("gold", -2))
    store.append(sid, "assistant", "The road is long.")
    store.edit(sid, Prune(node_id=pruned.id))  # a fragment
    assert first.user_node is not None
    store.add_sibling(sid, first.user_node.id, "I talk to the goblin.")  # a fork
    deleted, _ = store.append(sid, "assistant", "It spits.", delta=inc("hp", -1))
    store.edit(sid, Delete(node_id=deleted.id))  # to the trash
    store.checkout(sid, quiet.id)
    refs.name_node(store, sid, "main", "branch")  # names, one on a node of a fragment
    refs.name_node(store, sid, "fight", "tag", first.user_node.id)
    refs.name_node(store, sid, "going-home", "tag", pruned.id)
    return sid


@pytest.fixture
def lived(store: Store, serve: Callable[[Any], ModelServer]) -> str:
    replies = ["The goblin cuts you.", "The goblin misses.", "You find a coin."]
    return a_lived_in_session(store, serve(Scripted(replies, [HIT, NOTHING, NOTHING])))


def every_state(store: Store, sid: str, ids: list[str]) -> list[Any]:
    return [store.state(sid, node_id) for node_id in ids]


def test_import_then_export_gives_the_same_document(
    store: Store, other_store: Store, lived: str
) -> None:
    document = export_tree(store, lived)
    text = tree_text(document)
    assert json.loads(text) == document
    assert document["format"] == "clotho-tree" and document["version"] == 1
    places = [n["detached"]["place"] for n in document["nodes"] if n["detached"]]
    assert places == ["fragment", "trash"]
    assert len(document["traces"]) == 3 and document["blobs"]
    assert [d["kind"] for d in document["documents"]] == ["lorebook", "card"]
    assert [(r["name"], r["kind"]) for r in document["refs"]] == [
        ("fight", "tag"),
        ("going-home", "tag"),
        ("main", "branch"),
    ]

    session = import_tree(other_store, text.encode(), "valley.json")
    assert session.id == lived and session.version == 1
    assert export_tree(other_store, session.id) == document  # byte for byte the same JSON
    assert tree_text(export_tree(other_store, session.id)) == text

    ids = [n["id"] for n in document["nodes"]]
    assert every_state(other_store, lived, ids) == every_state(store, lived, ids)
    assert other_store.projection(lived) == store.projection(lived)
    for node_id in document["traces"]:
        imported, original = other_store.trace(lived, node_id), store.trace(lived, node_id)
        assert imported is not None and original is not None
        assert imported.verified and imported.messages == original.messages
        assert imported.document == original.document
    assert other_store.fragments(lived) == store.fragments(lived)
    assert other_store.trash(lived) == store.trash(lived)
    assert other_store.documents(lived) != []
    assert not other_store.history(lived)  # the undo journal is not exported
    assert other_store.node(lived, "fight~1").id == store.node(lived, "fight~1").id
    # the imported session works as any other: restore from the trash, then undo
    trashed = store.trash(lived)[0][0].id
    other_store.edit(lived, Restore(node_id=trashed))
    other_store.undo(lived)
    assert export_tree(other_store, lived)["nodes"] == document["nodes"]


def test_ids_taken_are_refused_and_new_ids_make_a_copy(store: Store, lived: str) -> None:
    document = export_tree(store, lived)
    before = store.node_counts()
    with pytest.raises(TreeIdsTakenError, match="--new-ids") as caught:
        import_tree(store, json.dumps(document), "valley.json")
    assert "session.id" in str(caught.value) or "nodes[0].id" in str(caught.value)
    assert store.node_counts() == before and len(store.sessions()) == 1

    copy_ = import_tree(store, json.dumps(document), "valley.json", new_ids=True)
    assert copy_.id != lived
    again = export_tree(store, copy_.id)
    old_ids = {n["id"] for n in document["nodes"]} | {lived}
    new_ids = [n["id"] for n in again["nodes"]]
    assert not old_ids & set(new_ids)
    mapping = dict(zip([n["id"] for n in document["nodes"]], new_ids, strict=True))
    mapping[lived] = copy_.id
    assert again == renamed(document, mapping)  # every reference follows
    for node_id in again["traces"]:
        trace = store.trace(copy_.id, node_id)
        assert trace is not None and trace.verified
    assert store.state(copy_.id) == store.state(lived)


def renamed(value: Any, mapping: dict[str, str]) -> Any:
    if isinstance(value, str):
        return mapping.get(value, value)
    if isinstance(value, list):
        return [renamed(v, mapping) for v in value]
    if isinstance(value, dict):
        return {mapping.get(k, k): renamed(v, mapping) for k, v in value.items()}
    return value


def broken(document: dict[str, Any], change: Callable[[dict[str, Any]], Any]) -> str:
    changed = copy.deepcopy(document)
    change(changed)
    return json.dumps(changed)


def node_at(document: dict[str, Any], content: str) -> int:
    return next(i for i, n in enumerate(document["nodes"]) if n["content"] == content)


def test_a_broken_document_is_refused_with_its_place_and_stores_nothing(
    store: Store, other_store: Store, lived: str
) -> None:
    document = export_tree(store, lived)
    nodes = document["nodes"]
    unknown = "f" * 32
    wait = node_at(document, "I wait.")
    time_passes = node_at(document, "Time passes.")
    home = node_at(document, "I go home.")
    traced = next(iter(document["traces"]))
    some_blob = next(iter(document["blobs"]))
    blob_part = next(i for i, p in enumerate(document["traces"][traced]["parts"]) if "blob" in p)

    def set_(path: list[Any], value: Any) -> Callable[[dict[str, Any]], None]:
        def change(doc: dict[str, Any]) -> None:
            target = doc
            for key in path[:-1]:
                target = target[key]
            target[path[-1]] = value

        return change

    cases: list[tuple[str, str]] = [
        ('{"format": "clotho-tree",\n  "version": 1,\n  "nodes": [1, 2,]\n}', "line 3, column"),
        (broken(document, set_(["version"], 2)), "version: 2 is newer than this Clotho reads (1)"),
        (broken(document, set_(["format"], "sillytavern")), "format: expected 'clotho-tree'"),
        (
            broken(document, set_(["nodes", 1, "parent_id"], unknown)),
            f"nodes[1].parent_id: unknown node '{unknown}'",
        ),
        (
            broken(document, set_(["nodes", 1, "parent_id"], nodes[2]["id"])),
            "nodes[1].parent_id: node",
        ),
        (broken(document, set_(["session", "head_id"], unknown)), "session.head_id: unknown node"),
        (
            broken(document, set_(["session", "head_id"], nodes[home]["id"])),
            "session.head_id: node",
        ),
        (
            broken(document, set_(["nodes", 0, "role"], "narrator")),
            "nodes[0].role: Input should be 'system', 'user' or 'assistant' (got 'narrator')",
        ),
        (broken(document, set_(["nodes", 0, "colour"], "red")), "nodes[0].colour: unknown key"),
        (
            broken(document, set_(["nodes", time_passes, "delta"], inc("gold", -500))),
            f"nodes[{time_passes}].delta: invalid delta at node {nodes[time_passes]['id']}",
        ),
        (
            broken(document, set_(["nodes", home, "detached", "state", "variables", "hp"], "x")),
            f"nodes[{home}].detached.state: variables.hp",
        ),
        (
            broken(document, set_(["nodes", wait, "active_child_id"], nodes[0]["id"])),
            f"nodes[{wait}].active_child_id",
        ),
        (
            broken(document, set_(["session", "created_at"], "2024-01-01T00:00:00")),
            "session.created_at: expected an ISO 8601 time with its zone",
        ),
        (
            broken(document, set_(["blobs", some_blob], "tampered")),
            f"blobs.{some_blob}: the text hashes to",
        ),
        (
            broken(document, set_(["traces", traced, "parts", blob_part, "blob"], "0" * 64)),
            f"traces.{traced}.parts[{blob_part}].blob",
        ),
        (
            broken(document, set_(["traces", traced, "parts"], [{"run": ["x"]}])),
            f"traces.{traced}: parts[0].run",
        ),
        (
            broken(document, set_(["traces", unknown], document["traces"][traced])),
            f"traces.{unknown}: not a node",
        ),
        (broken(document, set_(["traces", traced], {})), f"traces.{traced}.parts: missing; "),
        (broken(document, set_(["documents", 1, "kind"], "Card")), "documents[1].kind: lowercase"),
        (
            broken(document, set_(["session", "state_schema", "variables", "hp", "type"], "?")),
            "session.state_schema",
        ),
        (
            broken(document, set_(["nodes", 2, "id"], "x" * 32)),
            "nodes[2].id: expected an id (32 lowercase hex) (got 'xxxx",
        ),
        (
            broken(document, set_(["nodes", 1, "content"], "a\x00b")),
            "nodes[1].content: NUL characters (\\u0000) are not allowed (got 'a\\x00b')",
        ),
        (
            broken(document, set_(["nodes", 1, "created_at"], 1700000000)),
            "nodes[1].created_at: expected an ISO 8601 time with its zone, got 1700000000",
        ),
        (broken(document, set_(["nodes", 1, "enabled"], 1)), "nodes[1].enabled: Input should be"),
        (
            broken(document, set_(["nodes", 1, "metadata"], [])),
            "nodes[1].metadata: Input should be an object (got [])",
        ),
        (
            broken(document, lambda doc: doc["nodes"][1].pop("delta")),
            "nodes[1].delta: missing",
        ),
        (
            broken(document, set_(["nodes", 1, "contnet"], "")),
            "nodes[1].contnet: unknown key (did you mean 'content'?)",
        ),
        (
            broken(document, set_(["nodes", home, "detached", "place"], "attic")),
            f"nodes[{home}].detached.place: Input should be 'fragment' or 'trash' (got 'attic')",
        ),
        (
            broken(document, set_(["blobs", "not-a-hash"], "x")),
            "blobs.not-a-hash: a blob is named by the SHA-256 of its text",
        ),
        (
            broken(document, set_(["documents", 0, "name"], " ")),
            "documents[0].name: non-empty text",
        ),
        (broken(document, set_(["refs", 0, "name"], "cafe")), "refs[0].name: 'cafe' cannot be"),
        (broken(document, set_(["refs", 1, "name"], "fight")), "refs[1].name: 'fight' is refs[0]"),
        (broken(document, set_(["refs", 0, "node_id"], unknown)), "refs[0].node_id: unknown"),
        (broken(document, set_(["refs", 0, "kind"], "label")), "refs[0].kind: Input should be"),
    ]
    for text, expected in cases:
        with pytest.raises(TreeFileError) as caught:
            import_tree(other_store, text, "valley.json")
        assert expected in str(caught.value), (expected, str(caught.value))
        assert str(caught.value).startswith("valley.json: ")
        assert other_store.sessions() == [] and other_store.node_counts() == {}
    assert import_tree(other_store, json.dumps(document), "valley.json").id == lived


def test_a_tree_file_from_before_names_still_imports(
    store: Store, other_store: Store, lived: str
) -> None:
    document = export_tree(store, lived)
    del document["refs"]
    session = import_tree(other_store, json.dumps(document), "old.json")
    assert refs.listed(other_store, session.id) == []
    assert export_tree(other_store, session.id)["nodes"] == document["nodes"]


def test_many_problems_are_one_line_naming_the_first_three(
    store: Store, other_store: Store, lived: str
) -> None:
    document = export_tree(store, lived)
    for node in document["nodes"]:
        node["role"] = "narrator"
    with pytest.raises(TreeFileError) as caught:
        import_tree(other_store, json.dumps(document), "valley.json")
    message = str(caught.value)
    assert "\n" not in message and message.count("role: Input should be") == 3
    assert message.endswith(f"; and {len(document['nodes']) - 3} more")
    assert other_store.sessions() == []


def test_export_and_import_from_the_command_line(tmp_path: Path, serve: Any) -> None:
    url = f"sqlite:///{tmp_path / 'cli.db'}"
    with Store.open(url, migrate=True) as store:
        sid = a_lived_in_session(store, serve(Scripted(["Cut.", "Miss.", "Coin."])))
    run = InProcess(url, tmp_path / "home")
    target = tmp_path / "valley.tree.json"
    written = run.json("--session", sid, "export", "tree", str(target))
    document = json.loads(target.read_text(encoding="utf-8"))
    assert written == {
        "file": str(target),
        "session_id": sid,
        "nodes": len(document["nodes"]),
        "traces": 3,
    }
    message = run.fails("import", "tree", str(target))
    assert "is in this database already" in message and "--new-ids" in message
    imported = run.json("import", "tree", str(target), "--new-ids")
    assert imported["id"] != sid and imported["nodes"] == len(document["nodes"])
    assert run.json("tree")["session_id"] == imported["id"]  # it is the session now
    broken_file = tmp_path / "broken.json"
    broken_file.write_text('{"format": "clotho-tree", "version": 7}')
    assert "broken.json: version: 7 is newer" in run.fails("import", "tree", str(broken_file))


def test_what_edits_leave_behind_imports_too(store: Store, other_store: Store) -> None:
    """A disabled node whose delta no longer applies where it is (an edit above it
    since), and active pointers the file leaves off HEAD's path."""
    sid = store.create_session(schema=SCHEMA).id
    cursed, _ = store.append(sid, "assistant", "You are cursed.", delta=[add_flag("cursed")])
    lifted, _ = store.append(
        sid,
        "user",
        "The curse lifts.",
        delta=[{"op": "remove", "path": "flags", "value": "cursed"}],
        enabled=False,
    )
    store.edit(sid, Toggle(node_id=cursed.id))  # the disabled delta no longer applies under it
    document = export_tree(store, sid)
    session = import_tree(other_store, json.dumps(document), "curse.json")
    assert export_tree(other_store, session.id) == document
    assert other_store.state(sid, lifted.id) == store.state(sid, lifted.id)
    with pytest.raises(InvalidDeltaError):  # enabling it is checked then
        other_store.edit(sid, Toggle(node_id=lifted.id))

    elsewhere = store.create_session().id
    root, _ = store.append(elsewhere, "user", "root")
    left, _ = store.append(elsewhere, "assistant", "left")
    right, _ = store.add_sibling(elsewhere, left.id, "right")
    document = export_tree(store, elsewhere)
    assert document["nodes"][0]["active_child_id"] == right.id
    document["nodes"][0]["active_child_id"] = left.id  # off the path to HEAD (right)
    imported = import_tree(other_store, json.dumps(document), "pointers.json")
    assert other_store.node(imported.id, root.id).active_child_id == right.id


def add_flag(flag: str) -> dict[str, Any]:
    return {"op": "append", "path": "flags", "value": flag}
