"""Undo covers growth done as a turn (``SessionTransaction.journaled``), on SQLite and
PostgreSQL: undo sends the new nodes to the trash and HEAD back, redo brings them back,
and what was journaled before stays undoable."""

from __future__ import annotations

import pytest

from mnemosyne import InvalidOperationError, Store, schema_from_mapping
from mnemosyne.edits import Rewrite

SCHEMA = schema_from_mapping(
    {"variables": {"hp": {"type": "int", "default": 100, "min": 0, "max": 100}}}
)
HIT = [{"op": "inc", "path": "hp", "value": -10}]


@pytest.fixture
def sid(store: Store) -> str:
    return store.create_session(schema=SCHEMA).id


def say(store: Store, sid: str, text: str, reply: str, delta=None) -> tuple[str, str]:
    """A turn as the engine commits one: the player's message and the reply, one entry."""
    with store.transaction(sid) as tx, tx.journaled("say"):
        user = tx.append("user", text)
        answer = tx.append("assistant", reply, delta=delta)
    return user.id, answer.id


def reroll(store: Store, sid: str, of: str, reply: str, delta=None) -> str:
    with store.transaction(sid) as tx, tx.journaled("reroll"):
        return tx.add_sibling(of, reply, delta=delta).id


def contents(store: Store, sid: str) -> list[str]:
    return [node.content for node in store.projection(sid)]


def trashed(store: Store, sid: str) -> list[str]:
    return [top.id for top, *_ in store.trash(sid)]


def test_a_turn_is_one_undo_step_to_the_trash_and_back(store: Store, sid: str) -> None:
    first_user, first_reply = say(store, sid, "hello", "hi", HIT)
    user, reply = say(store, sid, "attack", "the goblin bites", HIT)
    assert store.state(sid).variables["hp"] == 80
    assert [entry.action for entry in store.history(sid)] == ["say", "say"]

    undone, _ = store.undo(sid)
    assert undone.action == "undo say"
    session = store.session(sid)
    assert session.head_id == first_reply and contents(store, sid) == ["hello", "hi"]
    assert store.state(sid).variables["hp"] == 90
    assert trashed(store, sid) == [user]  # the turn's nodes: in the trash, not gone
    assert store.node(sid, reply).content == "the goblin bites"

    store.redo(sid)
    assert store.session(sid).head_id == reply
    assert contents(store, sid) == ["hello", "hi", "attack", "the goblin bites"]
    assert store.state(sid).variables["hp"] == 80 and trashed(store, sid) == []

    store.undo(sid)
    store.undo(sid)  # the first turn too: the session is empty again
    assert store.session(sid).head_id is None and contents(store, sid) == []
    assert set(trashed(store, sid)) == {first_user, user}
    with pytest.raises(InvalidOperationError, match="nothing to undo"):
        store.undo(sid)
    store.redo(sid)
    store.redo(sid)
    assert contents(store, sid) == ["hello", "hi", "attack", "the goblin bites"]


def test_edits_before_a_turn_stay_undoable(store: Store, sid: str) -> None:
    _, reply = say(store, sid, "hello", "hi")
    store.edit(sid, Rewrite(node_id=reply, content="hi there"))
    say(store, sid, "attack", "bite", HIT)
    assert [entry.action for entry in store.history(sid)] == ["say", "rewrite", "say"]
    store.undo(sid)
    store.undo(sid)
    assert contents(store, sid) == ["hello", "hi"]
    store.redo(sid)
    assert contents(store, sid) == ["hello", "hi there"]


def test_a_reroll_undone_puts_the_old_reply_back(store: Store, sid: str) -> None:
    user, reply = say(store, sid, "attack", "miss")
    other = reroll(store, sid, reply, "hit", HIT)
    assert store.state(sid).variables["hp"] == 90
    store.undo(sid)
    assert store.session(sid).head_id == reply and store.state(sid).variables["hp"] == 100
    assert store.turn(sid, reply).siblings == [reply]
    store.redo(sid)
    assert store.session(sid).head_id == other and store.state(sid).variables["hp"] == 90
    assert store.turn(sid, other).siblings == [reply, other]
    assert store.node(sid, other).parent_id == user


def test_plain_growth_is_still_a_breakpoint(store: Store, sid: str) -> None:
    say(store, sid, "hello", "hi")
    store.append(sid, "user", "more")  # the editor's add: not a turn
    assert store.history(sid) == []


def test_a_turn_after_an_undo_drops_what_could_be_redone(store: Store, sid: str) -> None:
    say(store, sid, "hello", "hi")
    say(store, sid, "attack", "bite")
    store.undo(sid)
    say(store, sid, "flee", "you run")
    with pytest.raises(InvalidOperationError, match="nothing to redo"):
        store.redo(sid)
    store.undo(sid)
    store.undo(sid)
    assert contents(store, sid) == []


def test_an_edit_turn_undone_puts_the_old_message_back(store: Store, sid: str) -> None:
    user, reply = say(store, sid, "I fight.", "You are hit.", HIT)
    with store.transaction(sid) as tx, tx.journaled("edit"):  # the player's message forked
        fork = tx.add_sibling(user, "I run.")
        answer = tx.append("assistant", "You get away.")
    assert store.state(sid).variables["hp"] == 100
    assert contents(store, sid) == ["I run.", "You get away."]
    store.undo(sid)
    assert store.session(sid).head_id == reply and store.state(sid).variables["hp"] == 90
    assert contents(store, sid) == ["I fight.", "You are hit."]
    assert trashed(store, sid) == [fork.id]  # the fork and its reply, together
    store.redo(sid)
    assert store.session(sid).head_id == answer.id
    assert store.turn(sid, fork.id).siblings == [user, fork.id]
