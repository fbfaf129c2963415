"""The tree editor and its journal, on SQLite and PostgreSQL."""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule, run_state_machine_as_test
from sqlalchemy import text

from mnemosyne import (
    ForeignNodeError,
    InvalidDeltaError,
    InvalidOperationError,
    Store,
    edits,
    schema_from_mapping,
)
from mnemosyne.editor import JournalMismatchError
from mnemosyne.edits import Copy, Delete, Graft, Inject, Move, Prune, Restore, Rewrite, Toggle

SCHEMA = schema_from_mapping(
    {
        "variables": {
            "hp": {"type": "int", "default": 100, "min": 0, "max": 100},
            "flags": {"type": "set"},
        }
    }
)


def chain(store: Store, sid: str, *specs: tuple[str, list[dict[str, Any]] | None]) -> list[str]:
    made = []
    for i, (content, delta) in enumerate(specs):
        node, _ = store.append(sid, "user" if i % 2 else "assistant", content, delta=delta)
        made.append(node.id)
    return made


def contents(store: Store, sid: str) -> list[str]:
    return [n.content for n in store.projection(sid)]


@pytest.fixture
def sid(store: Store) -> str:
    return store.create_session(schema=SCHEMA).id


def test_prune_and_graft_rebase_the_state(store: Store, sid: str) -> None:
    a, b, c, d = chain(
        store,
        sid,
        ("a", None),
        ("b", [{"op": "inc", "path": "hp", "value": -10}]),
        ("c", None),
        ("d", [{"op": "inc", "path": "hp", "value": -5}]),
    )
    result, _ = store.edit(sid, Prune(node_id=c))
    assert result.head_moved and result.head_id == b and result.note
    assert [[n.id for n in f] for f in store.fragments(sid)] == [[c, d]]
    assert contents(store, sid) == ["a", "b"]
    assert [n.id for n in store.tree(sid).nodes] == [a, b]
    with pytest.raises(InvalidOperationError, match="fragment"):
        store.checkout(sid, d)
    store.edit(sid, Graft(node_id=c, parent_id=a))  # under a: the -10 of b is no longer above it
    store.checkout(sid, d)
    assert contents(store, sid) == ["a", "c", "d"]
    assert store.state(sid).variables["hp"] == 95
    assert store.fragments(sid) == []


def test_head_taken_out_of_the_tree_goes_where_its_branch_hung(store: Store, sid: str) -> None:
    root, b, c, d = chain(store, sid, ("r", None), ("b", None), ("c", None), ("d", None))
    other_root, _ = store.add_sibling(sid, root, "another beginning")
    store.append(sid, "user", "its own branch")
    store.checkout(sid, d)
    result, _ = store.edit(sid, Delete(node_id=c))
    assert (result.head_id, result.head_moved) == (b, True)
    assert other_root.id not in [n.id for n in store.projection(sid)]


def test_refusals_name_the_reason_and_change_nothing(store: Store, sid: str) -> None:
    a, b, c = chain(store, sid, ("a", None), ("b", None), ("c", None))
    before = store.tree(sid)
    with pytest.raises(InvalidOperationError, match="cycle"):
        store.edit(sid, Graft(node_id=a, parent_id=c))
    with pytest.raises(InvalidOperationError, match="under itself"):
        store.edit(sid, Move(node_id=b, parent_id=b))
    other = store.create_session().id
    foreign, _ = store.append(other, "user", "elsewhere")
    with pytest.raises(ForeignNodeError, match="belongs to session"):
        store.edit(sid, Prune(node_id=foreign.id))
    with pytest.raises(InvalidOperationError, match="nothing to undo"):
        store.undo(sid)
    store.edit(sid, Delete(node_id=c))
    with pytest.raises(InvalidOperationError, match="trash"):
        store.edit(sid, Graft(node_id=b, parent_id=c))
    with pytest.raises(InvalidOperationError, match="trash"):
        store.edit(sid, Graft(node_id=c, parent_id=a))
    store.undo(sid)
    assert store.tree(sid).nodes == before.nodes


def test_a_delta_that_no_longer_applies_refuses_the_edit(store: Store, sid: str) -> None:
    _, b, c = chain(
        store,
        sid,
        ("a", None),
        ("b", [{"op": "append", "path": "flags", "value": "key"}]),
        ("c", [{"op": "remove", "path": "flags", "value": "key"}]),
    )
    before = store.tree(sid)
    with pytest.raises(InvalidDeltaError, match=rf"{c}.*remove flags 'key'"):
        store.edit(sid, Toggle(node_id=b))
    assert store.tree(sid) == before
    assert store.history(sid) == []


def test_inject_move_copy_and_trash(store: Store, sid: str) -> None:
    a, b, c = chain(
        store, sid, ("a", None), ("b", [{"op": "inc", "path": "hp", "value": -10}]), ("c", None)
    )
    storm = [{"op": "inc", "path": "hp", "value": -1}]
    injected, _ = store.edit(
        sid, Inject(parent_id=a, role="system", content="A storm rolls in.", delta=storm)
    )
    assert contents(store, sid) == ["a", "A storm rolls in.", "b", "c"]
    assert store.state(sid).variables["hp"] == 89
    store.edit(sid, Move(node_id=b, parent_id=c))  # b alone under c; c goes up to b's old parent
    assert contents(store, sid)[:3] == ["a", "A storm rolls in.", "c"]
    copied, _ = store.edit(sid, Copy(node_id=c, parent_id=a, subtree=True))
    assert len(copied.created) == 2
    store.edit(sid, Rewrite(node_id=c, content="c, rewritten"))
    assert store.node(sid, c).content == "c, rewritten"
    store.edit(sid, Delete(node_id=injected.node_id))
    assert [n[0].id for n in store.trash(sid)] == [injected.node_id]
    store.edit(sid, Restore(node_id=injected.node_id))
    assert store.trash(sid) == []
    store.edit(sid, Delete(node_id=injected.node_id))
    count, _ = store.purge(sid)
    assert count == 3  # the injected node with c and b below it; the copies hang under a
    assert store.history(sid) == []  # purge cannot be undone, and clears the journal


def test_growing_the_tree_is_a_breakpoint(store: Store, sid: str) -> None:
    _, b = chain(store, sid, ("a", None), ("b", None))
    store.edit(sid, Rewrite(node_id=b, content="B"))
    assert [e.action for e in store.history(sid)] == ["rewrite"]
    store.append(sid, "user", "more")
    assert store.history(sid) == []
    with pytest.raises(InvalidOperationError, match="nothing to undo"):
        store.undo(sid)


def test_a_journal_that_disagrees_is_cleared_not_followed(store: Store, sid: str) -> None:
    _, b = chain(store, sid, ("a", None), ("b", None))
    store.edit(sid, Rewrite(node_id=b, content="B"))
    with store.write() as conn:  # a change behind the journal's back
        conn.execute(text("UPDATE nodes SET content = 'tampered' WHERE id = :i"), {"i": b})
    with pytest.raises(JournalMismatchError, match="cleared"):
        store.undo(sid)
    assert store.node(sid, b).content == "tampered"
    assert store.history(sid) == []


def test_the_journal_keeps_fifty_entries_and_snapshots(store: Store, sid: str) -> None:
    (a,) = chain(store, sid, ("a", None))
    for i in range(55):
        store.edit(sid, Rewrite(node_id=a, content=f"v{i}"))
    entries = store.history(sid)
    assert len(entries) == 50
    assert entries[-1].current and not entries[-1].undone
    snapshots = [e.position for e in entries if e.snapshot]
    assert snapshots and all(b - a == 15 for a, b in itertools.pairwise(snapshots))
    for _ in range(50):
        store.undo(sid)
    assert store.node(sid, a).content == "v4"
    with pytest.raises(InvalidOperationError, match="nothing to undo"):
        store.undo(sid)


# --- the stateful property -------------------------------------------------------------


class EditorMachine(RuleBasedStateMachine):
    """Random edits, turns, undos and redos on a random tree, against the list of states
    the journal should lead back and forth through; then undo all (the start, also from
    a reopened store) and redo all (the end)."""

    store: Store
    url: str

    def __init__(self) -> None:
        super().__init__()
        self.sid = self.store.create_session(schema=SCHEMA).id
        for i in range(6):
            delta = [{"op": "inc", "path": "hp", "value": -i}] if i % 2 else None
            self.store.append(self.sid, "user", f"n{i}", delta=delta)
        self.store.add_sibling(self.sid, self.ids()[2], "alt")
        self.turned: set[str] = set()  # the nodes turns made: undone, they lie in the trash
        self.states = [self.snapshot()]  # the state after each journal entry
        self.position = 0

    def ids(self) -> list[str]:
        return [n.id for n in self.store.tree(self.sid).nodes]

    def snapshot(self) -> tuple[Any, ...]:
        tree = self.store.tree(self.sid)
        states = {n.id: self.store.state(self.sid, n.id).as_dict() for n in tree.nodes}
        parked = sorted(
            [n.id for n in part]
            for part in self.store.fragments(self.sid) + self.store.trash(self.sid)
            if part[0].id not in self.turned  # an undone turn's nodes stay in the trash
        )
        shape = [(n.id, n.parent_id, n.content, n.enabled) for n in tree.nodes]
        return tree.head_id, shape, states, parked

    def _edit(self, op: str, **fields: Any) -> None:
        try:  # a refused field (a NUL in a text) is refused like a refused edit
            self.store.edit(self.sid, edits.parse({"op": op, **fields}))
        except InvalidOperationError:
            assert self.snapshot() == self.states[self.position]  # refused: nothing changed
            return
        del self.states[self.position + 1 :]
        self.states.append(self.snapshot())
        if len(self.states) > 51:  # the journal keeps 50 entries
            del self.states[0]
        self.position = len(self.states) - 1

    @rule(data=st.data(), op=st.sampled_from(["prune", "delete", "toggle", "rewrite"]))
    def one_node(self, data: st.DataObject, op: str) -> None:
        ids = self.ids()
        if not ids:
            return
        node = data.draw(st.sampled_from(ids))
        if op == "rewrite":
            self._edit(op, node_id=node, content=data.draw(st.text(max_size=4)))
        else:
            self._edit(op, node_id=node)

    @rule(data=st.data(), op=st.sampled_from(["graft", "move", "copy"]))
    def two_nodes(self, data: st.DataObject, op: str) -> None:
        ids = self.ids()
        parked = [part[0].id for part in self.store.fragments(self.sid)]
        if not ids:
            return
        node = data.draw(st.sampled_from(ids + parked))
        target = data.draw(st.sampled_from(ids))
        if op == "copy":
            self._edit(op, node_id=node, parent_id=target, subtree=data.draw(st.booleans()))
        else:
            self._edit(op, node_id=node, parent_id=target)

    @rule(data=st.data())
    def inject(self, data: st.DataObject) -> None:
        ids = self.ids()
        if ids:
            after = data.draw(st.sampled_from(ids))
            self._edit("inject", parent_id=after, role="system", content="injected")

    @rule(data=st.data())
    def restore(self, data: st.DataObject) -> None:
        trashed = [part[0].id for part in self.store.trash(self.sid)]
        if trashed:
            self._edit("restore", node_id=data.draw(st.sampled_from(trashed)))

    @rule(data=st.data(), kind=st.sampled_from(["say", "reroll"]))
    def turn(self, data: st.DataObject, kind: str) -> None:
        """A turn as the engine commits one: one journal entry, not a breakpoint."""
        ids = self.ids()
        with self.store.transaction(self.sid) as tx, tx.journaled(kind):
            if kind == "say" or not ids:
                tx.append("user", "said")
                tx.append("assistant", "reply", delta=[{"op": "inc", "path": "hp", "value": -1}])
            else:
                tx.add_sibling(data.draw(st.sampled_from(ids)), "rerolled")
        self.turned |= set(self.ids()) - set(ids)
        del self.states[self.position + 1 :]
        self.states.append(self.snapshot())
        if len(self.states) > 51:  # the journal keeps 50 entries
            del self.states[0]
        self.position = len(self.states) - 1

    @rule()
    def undo(self) -> None:
        if self.position == 0:
            with pytest.raises(InvalidOperationError, match="nothing to undo"):
                self.store.undo(self.sid)
            return
        self.store.undo(self.sid)
        self.position -= 1
        assert self.snapshot() == self.states[self.position]

    @rule()
    def redo(self) -> None:
        if self.position == len(self.states) - 1:
            with pytest.raises(InvalidOperationError, match="nothing to redo"):
                self.store.redo(self.sid)
            return
        self.store.redo(self.sid)
        self.position += 1
        assert self.snapshot() == self.states[self.position]

    @invariant()
    def the_tree_is_consistent(self) -> None:
        tree = self.store.tree(self.sid)
        ids = {n.id for n in tree.nodes}
        assert tree.head_id is None or tree.head_id in ids
        # the messages of every path, served from the store's memory when it can, are
        # the projection as it stands after each edit, undo and redo
        for at in [None, *sorted(ids)]:
            assert [(m.id, m.content) for m in self.store.messages(self.sid, at)] == [
                (n.id, n.content) for n in self.store.projection(self.sid, at)
            ]

    def teardown(self) -> None:
        # Undo everything, across a restart: a new store on the same database.
        with Store.open(self.url) as reopened:
            for _ in range(self.position):
                reopened.undo(self.sid)
        assert self.snapshot() == self.states[0]
        for _ in range(len(self.states) - 1):
            self.store.redo(self.sid)
        assert self.snapshot() == self.states[-1]


def test_undo_all_and_redo_all(store: Store, database_url: str) -> None:
    EditorMachine.store = store
    EditorMachine.url = database_url
    run_state_machine_as_test(
        EditorMachine,
        settings=settings(
            max_examples=12 if store.dialect == "sqlite" else 6,
            stateful_step_count=12,
            deadline=None,
            suppress_health_check=[HealthCheck.too_slow],
        ),
    )


def test_undo_back_into_a_fragment_keeps_its_states(store: Store, sid: str) -> None:
    """A fragment's delta need not apply at the root: undoing a graft must not replay
    it there (a fragment keeps the states it had where it hung)."""
    a, b = chain(
        store,
        sid,
        ("a", [{"op": "append", "path": "flags", "value": "key"}]),
        ("b", [{"op": "remove", "path": "flags", "value": "key"}]),
    )
    store.edit(sid, Prune(node_id=b))
    store.edit(sid, Graft(node_id=b, parent_id=a))
    store.undo(sid)
    assert [f[0].id for f in store.fragments(sid)] == [b]
    assert store.state(sid, b).variables["flags"] == []
    store.redo(sid)
    assert store.state(sid, b).variables["flags"] == []


def test_a_batch_of_edits_is_one_undo_step(store: Store) -> None:
    session = store.create_session()
    sid = session.id
    a = store.append(sid, "user", "a")[0]
    b = store.append(sid, "assistant", "b", delta=[{"op": "set", "path": "hp", "value": 5}])[0]
    c = store.append(sid, "user", "c")[0]
    before = store.tree(sid).as_dict()
    with store.transaction(sid) as tx, tx.batch():
        tx.apply(Toggle(node_id=b.id))
        tx.apply(Rewrite(node_id=a.id, content="a, rewritten"))
        tx.apply(Prune(node_id=c.id))
    assert [e.action for e in store.history(sid)] == ["batch"]
    assert store.state(sid).variables.get("hp") is None
    store.undo(sid)
    after_undo = store.tree(sid).as_dict()
    assert after_undo["nodes"] == before["nodes"]
    assert after_undo["head_id"] == before["head_id"]
    assert store.state(sid).variables["hp"] == 5
    store.redo(sid)
    assert store.node(sid, a.id).content == "a, rewritten"
    assert not store.node(sid, b.id).enabled


def test_a_refused_edit_in_a_batch_leaves_nothing(store: Store) -> None:
    sid = store.create_session().id
    a = store.append(sid, "user", "a")[0]
    version = store.session(sid).version
    with pytest.raises(InvalidOperationError), store.transaction(sid) as tx, tx.batch():
        tx.apply(Rewrite(node_id=a.id, content="changed"))
        tx.apply(Graft(node_id=a.id, parent_id=a.id))  # a cycle
    assert store.node(sid, a.id).content == "a"
    assert store.history(sid) == []
    assert store.session(sid).version == version


def test_the_top_of_a_fragment_or_of_the_trash_is_its_own_only_sibling(store: Store) -> None:
    sid = store.create_session().id
    store.append(sid, "user", "a")
    b = store.append(sid, "assistant", "b")[0]
    c = store.append(sid, "user", "c")[0]
    store.edit(sid, Prune(node_id=c.id))
    store.edit(sid, Delete(node_id=b.id))
    for top in (b, c):
        turn = store.turn(sid, top.id)
        assert turn.siblings == [top.id] and turn.index == 0
