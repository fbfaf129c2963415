"""The bulk write path (SessionTransaction.insert_nodes / insert_traces) and the
whole-session read (Store.dump), on SQLite and PostgreSQL: what it stores is what
growing the tree node by node stores, and a refused record writes nothing."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
from sqlalchemy import func, select

from mnemosyne import (
    ForeignNodeError,
    IdTakenError,
    InvalidDeltaError,
    InvalidOperationError,
    MnemosyneError,
    NodeRecord,
    Store,
    StoredTrace,
    UnknownNodeError,
    new_id,
    schema_from_mapping,
)
from mnemosyne import _queries as q
from mnemosyne._schema import journal, keyframes, nodes
from mnemosyne.edits import Delete, Graft, Prune, Restore, Rewrite
from mnemosyne.traces import history_message

SCHEMA = schema_from_mapping(
    {
        "variables": {
            "hp": {"type": "int", "default": 100, "min": 0, "max": 100},
            "gold": {"type": "int", "default": 10, "min": 0, "out_of_bounds": "refuse"},
            "flags": {"type": "set"},
        }
    }
)
EVERY = 3  # keyframes every 3 levels: a small tree crosses several


def inc(path: str, value: int) -> list[dict[str, Any]]:
    return [{"op": "inc", "path": path, "value": value}]


# (parent index or None, role, content, delta, enabled), parents first, in preorder.
SPEC: list[tuple[int | None, str, str, list[dict[str, Any]] | None, bool]] = [
    (None, "system", "You are the narrator.", None, True),  # 0
    (0, "user", "I enter the cave.", None, True),  # 1
    (1, "assistant", "A goblin hits you.", inc("hp", -10), True),  # 2
    (2, "user", "I pay it off.", inc("gold", -5), True),  # 3
    (
        3,
        "assistant",
        "It takes the gold.",
        [{"op": "append", "path": "flags", "value": "spared"}],
        True,
    ),  # 4
    (4, "user", "I rest.", inc("hp", 5), True),  # 5
    (5, "assistant", "You feel better.", None, True),  # 6
    (6, "user", "I go deeper.", inc("hp", -30), False),  # 7: disabled, delta not applied
    (7, "assistant", "Darkness.", inc("hp", -1), True),  # 8
    (3, "assistant", "It refuses the gold.", inc("hp", -20), True),  # 9: a fork at 3
    (9, "user", "I flee.", None, True),  # 10
    (1, "assistant", "The goblin misses.", None, True),  # 11: a fork at 1
    (11, "user", "I strike back.", inc("gold", 3), True),  # 12
    (None, "system", "Another beginning.", inc("hp", -50), True),  # 13: a second root
    (13, "user", "Again.", None, True),  # 14
]
HEAD = 10


def records(spec: list[Any] = SPEC, **overrides: Any) -> list[NodeRecord]:
    return [
        NodeRecord(role, content, parent=parent, delta=delta, enabled=enabled)
        for parent, role, content, delta, enabled in spec
    ]


def grow_node_by_node(store: Store, sid: str) -> list[str]:
    ids: list[str] = []
    for parent, role, content, delta, enabled in SPEC:
        if parent is None and ids:
            root = next(i for i, s in enumerate(SPEC) if s[0] is None)
            node, _ = store.add_sibling(
                sid, ids[root], content, role=role, delta=delta, enabled=enabled
            )
        else:
            if parent is not None:
                store.checkout(sid, ids[parent])
            node, _ = store.append(sid, role, content, delta=delta, enabled=enabled)
        ids.append(node.id)
    store.checkout(sid, ids[HEAD])
    return ids


@pytest.fixture
def small_store(database_url: str) -> Iterator[Store]:
    with Store.open(database_url, migrate=True, keyframe_every=EVERY) as opened:
        yield opened


def stored_nodes(store: Store, sid: str) -> list[tuple[Any, ...]]:
    """Each node of the session in creation order: (pk, id, parent_pk, active_child_pk)."""
    with store.read() as conn:
        record = q.session_record(conn, sid)
        return [
            tuple(row)
            for row in conn.execute(
                select(nodes.c.pk, nodes.c.id, nodes.c.parent_pk, nodes.c.active_child_pk)
                .where(nodes.c.session_pk == record.pk)
                .order_by(nodes.c.pk)
            )
        ]


def keyframes_by_index(store: Store, sid: str) -> dict[int, str]:
    """The session's keyframes, keyed by the node's place in creation order."""
    order = {row[0]: i for i, row in enumerate(stored_nodes(store, sid))}
    with store.read() as conn:
        rows = conn.execute(
            select(keyframes.c.node_pk, keyframes.c.state).where(
                keyframes.c.node_pk.in_(list(order))
            )
        ).all()
    return {order[pk]: state for pk, state in rows}


def shape(store: Store, sid: str) -> list[tuple[Any, ...]]:
    """(parent index, active child index) of each node in creation order."""
    rows = stored_nodes(store, sid)
    index = {row[0]: i for i, row in enumerate(rows)}
    return [(index.get(row[2]), index.get(row[3])) for row in rows]


def counts(store: Store) -> tuple[int, int, int]:
    with store.read() as conn:
        return (
            conn.execute(select(func.count()).select_from(nodes)).scalar_one(),
            conn.execute(select(func.count()).select_from(keyframes)).scalar_one(),
            conn.execute(select(func.count()).select_from(journal)).scalar_one(),
        )


def test_a_bulk_insert_stores_what_growing_node_by_node_stores(small_store: Store) -> None:
    store = small_store
    slow = store.create_session(schema=SCHEMA).id
    slow_ids = grow_node_by_node(store, slow)

    sid = store.create_session(schema=SCHEMA).id
    with store.transaction(sid) as tx:
        made = tx.insert_nodes(records(), head=HEAD)
    assert tx.session.version == 1  # one bump for the whole batch
    assert tx.session.head_id == made[HEAD].id == store.session(sid).head_id

    # the same tree, the same active pointers, the same HEAD
    assert shape(store, sid) == shape(store, slow)
    assert [n.parent_id for n in made] == [None if p is None else made[p].id for p, *_ in SPEC]
    bulk_tree, slow_tree = store.tree(sid), store.tree(slow)
    assert [(n.role, n.content, n.enabled, n.delta) for n in bulk_tree.nodes] == [
        (n.role, n.content, n.enabled, n.delta) for n in slow_tree.nodes
    ]
    assert [n.content for n in store.projection(sid)] == [n.content for n in store.projection(slow)]
    # the same states everywhere, the same keyframes in the same places
    for i in range(len(SPEC)):
        assert store.state(sid, made[i].id) == store.state(slow, slow_ids[i])
    assert keyframes_by_index(store, sid) == keyframes_by_index(store, slow)
    assert sorted(keyframes_by_index(store, sid)) == [0, 3, 6, 12, 13]
    assert store.state(sid, made[8].id).variables == {"hp": 94, "gold": 5, "flags": ["spared"]}
    assert store.state(sid).variables == {"hp": 70, "gold": 5, "flags": []}
    # what a read of the transaction returned is what is stored
    assert [n.id for n in made] == [row[1] for row in stored_nodes(store, sid)]
    stored = {n.id: n for n in bulk_tree.nodes}
    assert all(stored[n.id].active_child_id == n.active_child_id for n in made)


def test_records_grow_from_a_stored_node_and_keep_given_ids_and_times(
    small_store: Store,
) -> None:
    store = small_store
    sid = store.create_session(schema=SCHEMA).id
    slow = store.create_session(schema=SCHEMA).id
    for session in (sid, slow):
        for i in range(4):
            store.append(session, "user", f"step {i}", delta=inc("hp", -1))
    start = store.session(sid).head_id
    assert start is not None
    when = datetime(2024, 5, 1, 12, 30, 15, 123456, tzinfo=timezone(timedelta(hours=2)))
    given = [new_id(), new_id()]
    with store.transaction(sid) as tx:
        made = tx.insert_nodes(
            [
                NodeRecord("assistant", "a", parent=start, id=given[0], created_at=when),
                NodeRecord("user", "b", parent=given[0], id=given[1], delta=inc("hp", -1)),
            ]
        )
    assert [n.id for n in made] == given
    assert store.node(sid, given[0]).created_at == when.astimezone(UTC)
    for text, delta in (("a", None), ("b", inc("hp", -1))):
        store.append(slow, "user" if delta else "assistant", text, delta=delta)
    assert store.session(sid).head_id == given[1]
    assert store.state(sid).variables["hp"] == store.state(slow).variables["hp"] == 95
    assert keyframes_by_index(store, sid) == keyframes_by_index(store, slow)
    assert store.node(sid, start).active_child_id == given[0]


def test_active_children_as_named_and_head_repoints_the_path(store: Store) -> None:
    sid = store.create_session().id
    ids = [new_id() for _ in range(5)]
    with store.transaction(sid) as tx:
        tx.insert_nodes(
            [
                NodeRecord("user", "root", id=ids[0], active_child=2),
                NodeRecord("assistant", "first", parent=0, id=ids[1]),
                NodeRecord("assistant", "second", parent=ids[0], id=ids[2]),
                NodeRecord("assistant", "third", parent=0, id=ids[3]),
                NodeRecord("user", "under first", parent=1, id=ids[4]),
            ],
            head=ids[2],
        )
    assert store.node(sid, ids[0]).active_child_id == ids[2]
    assert store.session(sid).head_id == ids[2]
    assert [n.content for n in store.projection(sid)] == ["root", "second"]
    # HEAD's path wins over a pointer named otherwise
    with store.transaction(sid) as tx:
        tx.insert_nodes([NodeRecord("user", "more", parent=ids[4])])
    assert store.node(sid, ids[0]).active_child_id == ids[1]
    assert [n.content for n in store.projection(sid)] == ["root", "first", "under first", "more"]
    store.switch_sibling(sid, "next", ids[1])
    assert store.session(sid).head_id == ids[2]


def test_detached_records_are_fragments_and_trash(store: Store) -> None:
    sid = store.create_session(schema=SCHEMA).id
    ids = [new_id() for _ in range(6)]
    kept = {
        "variables": {"hp": 42, "gold": 7, "flags": ["cursed"]},
        "active_lore_ids": [],
        "present": ["Ann"],
    }
    when = datetime(2024, 1, 2, 3, 4, 5, tzinfo=UTC)
    with store.transaction(sid) as tx:
        tx.insert_nodes(
            [
                NodeRecord("user", "root", id=ids[0], delta=inc("hp", -10)),
                NodeRecord("assistant", "reply", parent=0, id=ids[1]),
                # pruned from under the reply: its state follows from there
                NodeRecord(
                    "user",
                    "pruned",
                    id=ids[2],
                    delta=inc("gold", -1),
                    detached="fragment",
                    detached_from=ids[1],
                ),
                NodeRecord("assistant", "below", parent=2, id=ids[3], delta=inc("hp", -1)),
                # deleted long ago, with the state it had then
                NodeRecord(
                    "user",
                    "deleted",
                    id=ids[4],
                    detached="trash",
                    detached_from=0,
                    detached_at=when,
                    detached_state=kept,
                ),
                NodeRecord("assistant", "gone", parent=4, id=ids[5], delta=inc("hp", 1)),
            ]
        )
    assert store.session(sid).head_id == ids[1]  # the last record in the tree
    assert [[n.id for n in f] for f in store.fragments(sid)] == [[ids[2], ids[3]]]
    assert [[n.id for n in t] for t in store.trash(sid)] == [[ids[4], ids[5]]]
    assert store.state(sid, ids[3]).variables == {"hp": 89, "gold": 9, "flags": []}
    assert store.state(sid, ids[5]).variables == {"hp": 43, "gold": 7, "flags": ["cursed"]}
    assert store.state(sid, ids[5]).present == ["Ann"]  # who was there is kept too
    dumped = {n.id: n for n in store.dump(sid).nodes}
    assert dumped[ids[4]].detached_at == when and dumped[ids[4]].detached_from == ids[0]
    # they behave as pruned and deleted subtrees do
    store.edit(sid, Restore(node_id=ids[4]))
    assert store.node(sid, ids[4]).parent_id == ids[0]
    assert store.state(sid, ids[5]).variables["hp"] == 91  # replayed on its new base
    store.edit(sid, Graft(node_id=ids[2], parent_id=ids[1]))
    assert store.state(sid, ids[3]).variables == {"hp": 89, "gold": 9, "flags": []}


def refused(store: Store, sid: str, batch: list[NodeRecord], **kwargs: Any) -> MnemosyneError:
    before = (store.session(sid), counts(store))
    with pytest.raises(MnemosyneError) as caught, store.transaction(sid) as tx:
        tx.insert_nodes(batch, **kwargs)
    assert (store.session(sid), counts(store)) == before  # nothing written
    return caught.value


def test_a_refused_record_writes_nothing_and_says_why_as_append_does(store: Store) -> None:
    sid = store.create_session(schema=SCHEMA).id
    other = store.create_session().id
    stranger, _ = store.append(other, "user", "elsewhere")
    store.append(sid, "user", "one")
    store.edit(
        sid, Rewrite(node_id=store.session(sid).head_id, content="one, edited")
    )  # a journal entry
    head = store.session(sid).head_id
    ok = NodeRecord("assistant", "fine", parent=head)

    for bad in (
        NodeRecord("narrator", "x", parent=head),
        NodeRecord("user", "nul \x00", parent=head),
        NodeRecord("user", "x", parent=head, name=5),  # type: ignore[arg-type]
        NodeRecord("user", "x", parent=head, metadata=[1]),  # type: ignore[arg-type]
        NodeRecord("user", "x", parent=head, delta="hp"),  # type: ignore[arg-type]
    ):
        error = refused(store, sid, [ok, bad])
        assert type(error) is InvalidOperationError and error.record_index == 1
        with pytest.raises(InvalidOperationError) as one_by_one:
            store.append(
                sid, bad.role, bad.content, name=bad.name, metadata=bad.metadata, delta=bad.delta
            )
        assert str(error) == str(one_by_one.value)

    overdrawn = NodeRecord("user", "x", parent=0, delta=inc("gold", -11), id=new_id())
    error = refused(store, sid, [ok, overdrawn])
    assert isinstance(error, InvalidDeltaError) and error.node_id == overdrawn.id
    assert error.record_index == 1 and "gold" in str(error)
    # a disabled node's delta is checked too (as append does), unless told otherwise
    refused(
        store, sid, [ok, NodeRecord("user", "x", parent=0, delta=inc("gold", -11), enabled=False)]
    )

    taken = refused(store, sid, [NodeRecord("user", "x", parent=head, id=stranger.id)])
    assert isinstance(taken, IdTakenError) and taken.record_index == 0
    assert taken.taken_id == stranger.id and "is taken" in str(taken)
    twice = new_id()
    error = refused(
        store,
        sid,
        [NodeRecord("user", "a", id=twice, parent=head), NodeRecord("user", "b", id=twice)],
    )
    assert "given twice" in str(error) and error.record_index == 1
    later = new_id()
    error = refused(
        store, sid, [NodeRecord("user", "a", parent=later), NodeRecord("user", "b", id=later)]
    )
    assert "after this one" in str(error) and error.record_index == 0
    assert "earlier record" in str(refused(store, sid, [NodeRecord("user", "a", parent=0)]))
    assert isinstance(
        refused(store, sid, [NodeRecord("user", "a", parent=new_id())]), UnknownNodeError
    )
    assert isinstance(
        refused(store, sid, [NodeRecord("user", "a", parent=stranger.id)]), ForeignNodeError
    )
    error = refused(store, sid, [NodeRecord("user", "a", parent=head, active_child=0)])
    assert "not one of its children" in str(error)
    error = refused(
        store, sid, [NodeRecord("user", "a", parent=head, created_at=datetime(2024, 1, 1))]
    )
    assert "time zone" in str(error)
    error = refused(store, sid, [NodeRecord("user", "a", detached="fragment")], head=0)
    assert "HEAD must be in the tree" in str(error)
    error = refused(store, sid, [NodeRecord("user", "a", detached="attic")])  # type: ignore[arg-type]
    assert "fragment" in str(error)
    bad_state = {"variables": {"hp": "lots"}}
    error = refused(
        store, sid, [NodeRecord("user", "a", detached="trash", detached_state=bad_state)]
    )
    assert "variables.hp" in str(error)
    twice = {"variables": {}, "present": ["Ann", "Ann"]}
    error = refused(store, sid, [NodeRecord("user", "a", detached="trash", detached_state=twice)])
    assert "present names 'Ann' more than once" in str(error)
    # the journal survived every refusal; a real insert clears it (growth is a breakpoint)
    assert store.history(sid)
    with store.transaction(sid) as tx:
        tx.insert_nodes([ok])
    assert not store.history(sid)


def test_an_empty_batch_changes_nothing(store: Store) -> None:
    sid = store.create_session().id
    with store.transaction(sid) as tx:
        assert tx.insert_nodes([]) == []
    assert store.session(sid).version == 0


def test_traces_in_their_stored_form_go_back_and_verify(store: Store) -> None:
    source = store.create_session().id
    store.append(source, "user", "I walk north.")
    store.append(source, "assistant", "The road goes on.")
    store.append(source, "user", "I keep walking.")
    history = store.messages(source)
    system = {"role": "system", "content": "You are the game master."}
    sent = [system, *({"role": m.role, "content": m.content} for m in history)]
    with store.transaction(source) as tx:
        reply = tx.append("assistant", "A wolf howls.")
        template = tx.put_blob("a long template")
        tx.put_trace(
            reply.id,
            messages=sent,
            sources=[None, 0, 1, 2],
            history=history,
            document={"model": "openai/gm", "templates": {"system": {"blob": template}}},
        )
    dumped = store.dump(source)
    assert [t.node_id for t in dumped.traces] == [reply.id]
    assert set(dumped.blobs) == {dumped.traces[0].parts[0]["blob"], template}

    # a copy with fresh ids: the references rewritten, the copy verifies
    fresh = {n.id: new_id() for n in dumped.nodes}

    def renamed(value: Any) -> Any:
        if isinstance(value, str):
            return fresh.get(value, value)
        if isinstance(value, list):
            return [renamed(v) for v in value]
        if isinstance(value, dict):
            return {k: renamed(v) for k, v in value.items()}
        return value

    copy = store.create_session().id
    trace = dumped.traces[0]
    with store.transaction(copy) as tx:
        tx.insert_nodes(
            [
                NodeRecord(n.role, n.content, parent=renamed(n.parent), id=fresh[n.id])
                for n in dumped.nodes
            ]
        )
        moved = StoredTrace(
            fresh[trace.node_id], renamed(trace.parts), trace.messages_hash, trace.document
        )
        assert tx.insert_traces([moved], dumped.blobs) == 1
    rebuilt = store.trace(copy, fresh[reply.id])
    assert rebuilt is not None and rebuilt.verified and rebuilt.messages == sent

    # refused: a second trace, a blob that does not hash to its name, a missing blob
    def refuse(items: list[StoredTrace], texts: dict[str, str]) -> str:
        with pytest.raises(MnemosyneError) as caught, store.transaction(copy) as tx:
            tx.insert_traces(items, texts)
        return str(caught.value)

    assert "already has a trace" in refuse([moved], {})
    leaf = fresh[dumped.nodes[0].id]
    assert "hashes to" in refuse([], {template: "another text"})
    missing = StoredTrace(leaf, [{"blob": "0" * 64}], trace.messages_hash, {})
    assert "neither given nor stored" in refuse([missing], {})
    assert "parts[0].run" in refuse([StoredTrace(leaf, [{"run": [leaf]}], "0" * 64, {})], {})
    named = {"run": [leaf, leaf, 1], "named": 1}
    assert "parts[0].named" in refuse([StoredTrace(leaf, [named], "0" * 64, {})], {})
    assert store.trace(copy, leaf) is None


def test_a_trace_of_named_replies_goes_back_and_verifies(store: Store) -> None:
    source = store.create_session().id
    store.append(source, "user", "Who is there?", name="Player")
    store.append(source, "assistant", "Only me.", name="Bram")
    history = store.messages(source)
    sent = [history_message(m, named=True) for m in history]
    with store.transaction(source) as tx:
        reply = tx.append("assistant", "And me.", name="Cora")
        tx.put_trace(
            reply.id, messages=sent, sources=[0, 1], history=history, document={}, named=True
        )
    dumped = store.dump(source)
    copy = store.create_session().id
    fresh = {n.id: new_id() for n in dumped.nodes}
    with store.transaction(copy) as tx:
        tx.insert_nodes(
            [
                NodeRecord(
                    n.role,
                    n.content,
                    parent=fresh.get(n.parent) if n.parent else None,
                    name=n.name,
                    id=fresh[n.id],
                )
                for n in dumped.nodes
            ]
        )
        trace = dumped.traces[0]
        parts = [
            {**part, "run": [fresh[part["run"][0]], fresh[part["run"][1]], part["run"][2]]}
            for part in trace.parts
        ]
        assert parts[0]["named"] is True
        stored = StoredTrace(fresh[trace.node_id], parts, trace.messages_hash, trace.document)
        assert tx.insert_traces([stored], dumped.blobs) == 1
    rebuilt = store.trace(copy, fresh[reply.id])
    assert rebuilt is not None and rebuilt.verified and rebuilt.messages == sent


def test_the_dump_lists_every_node_parents_first(store: Store) -> None:
    sid = store.create_session(schema=SCHEMA).id
    a, _ = store.append(sid, "user", "a", delta=inc("hp", -5))
    b, _ = store.append(sid, "assistant", "b")
    c, _ = store.append(sid, "user", "c")
    d, _ = store.add_sibling(sid, b.id, "d")
    store.edit(sid, Prune(node_id=c.id))
    store.edit(sid, Delete(node_id=d.id))
    dumped = store.dump(sid)
    assert [n.id for n in dumped.nodes] == [a.id, b.id, c.id, d.id]
    by_id = {n.id: n for n in dumped.nodes}
    assert by_id[c.id].detached == "fragment" and by_id[c.id].detached_from == b.id
    assert by_id[d.id].detached == "trash" and by_id[d.id].detached_from == a.id
    assert by_id[c.id].detached_state == store.state(sid, c.id).as_dict()
    assert by_id[a.id].detached_state is None and by_id[a.id].delta == inc("hp", -5)
    assert dumped.state_schema is not None and "hp" in dumped.state_schema["variables"]
    assert dumped.session == store.session(sid)


def test_a_new_session_may_take_the_identity_it_had_elsewhere(store: Store) -> None:
    old = store.create_session().id
    wanted, then = new_id(), datetime(2023, 3, 4, 5, 6, 7, 89, tzinfo=UTC)
    later = then + timedelta(days=2)

    def fill(tx: Any) -> None:
        tx.adopt_identity(wanted, created_at=then, updated_at=later)
        tx.insert_nodes([NodeRecord("user", "hello")])

    made = store.create_session(title="kept", fill=fill)
    assert (made.id, made.created_at, made.updated_at, made.version) == (wanted, then, later, 1)
    assert store.session(wanted) == made
    with pytest.raises(IdTakenError):
        store.create_session(fill=lambda tx: tx.adopt_identity(old))
    with pytest.raises(InvalidOperationError, match="not new"), store.transaction(old) as tx:
        tx.insert_nodes([NodeRecord("user", "hello")])
        tx.adopt_identity(new_id())
    assert len(store.sessions()) == 2 and store.session(old).version == 0
