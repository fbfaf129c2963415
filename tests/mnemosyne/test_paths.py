"""The messages of recent paths kept in memory (mnemosyne._paths), on SQLite and
PostgreSQL: served again while nothing can have changed them, never once something has
(an edit here, a write by another store or another process), and extended from a
kept path instead of read whole after a turn."""

from __future__ import annotations

import pickle
import subprocess
import sys
import threading
from typing import Any

import pytest

from mnemosyne import InvalidOperationError, Message, Store, edits, schema_from_mapping
from mnemosyne.edits import Graft, Prune, Rewrite, Toggle

SCHEMA = schema_from_mapping({"variables": {"hp": {"type": "int", "default": 10}}})


def fresh(store: Store, sid: str, at: str | None = None) -> list[tuple[Any, ...]]:
    """The projection as the database has it, read without the cache (whole nodes)."""
    return [(n.id, n.role, n.name, n.content) for n in store.projection(sid, at)]


def cached(store: Store, sid: str, at: str | None = None) -> list[tuple[Any, ...]]:
    return [(m.id, m.role, m.name, m.content) for m in store.messages(sid, at)]


def counts(store: Store) -> tuple[int, int, int]:
    return store.paths.hits, store.paths.extended, store.paths.misses


def chat(store: Store, sid: str, turns: int) -> list[str]:
    made = []
    for i in range(turns):
        made.append(store.append(sid, "user", f"I go on ({i}).")[0].id)
        made.append(store.append(sid, "assistant", f"The road goes on ({i}).")[0].id)
    return made


@pytest.fixture
def sid(store: Store) -> str:
    return store.create_session(schema=SCHEMA).id


def test_a_path_read_again_comes_from_memory(store: Store, sid: str) -> None:
    chat(store, sid, 5)
    first = store.messages(sid)
    assert counts(store) == (0, 0, 1)
    again = store.messages(sid)
    assert counts(store) == (1, 0, 1)
    assert again == first and again is not first  # each reader has its own list
    again.append(Message("x", "user", None, "mine"))  # ... which it may change
    assert cached(store, sid) == fresh(store, sid)
    with pytest.raises(AttributeError, match="read-only"):
        first[0].content = "changed"  # type: ignore[misc]
    assert pickle.loads(pickle.dumps(first[0])) == first[0]


def test_after_a_turn_only_the_new_messages_are_read(store: Store, sid: str) -> None:
    chat(store, sid, 5)
    store.messages(sid)
    with store.transaction(sid) as tx:  # what a turn commits
        tx.append("user", "Onwards.")
        tx.append("assistant", "A wolf.", delta=[{"op": "set", "path": "hp", "value": 3}])
    assert cached(store, sid) == fresh(store, sid)
    assert counts(store) == (0, 1, 1)  # extended from the kept path, not read whole
    assert cached(store, sid)[-2:] == [
        (m.id, m.role, m.name, m.content) for m in store.projection(sid)[-2:]
    ]


def test_moving_head_and_growing_keep_every_kept_path_right(store: Store, sid: str) -> None:
    made = chat(store, sid, 4)
    fork = made[3]
    store.messages(sid)
    store.checkout(sid, fork)
    assert cached(store, sid) == fresh(store, sid)
    other, _ = store.add_sibling(sid, made[4], "Another way.")
    store.append(sid, "assistant", "Different.")
    store.switch_sibling(sid, "prev", other.id)
    for at in [None, fork, other.id, made[-1], made[0]]:
        assert cached(store, sid, at) == fresh(store, sid, at)
    hits = store.paths.hits
    assert cached(store, sid, made[-1]) == fresh(store, sid, made[-1])
    assert store.paths.hits == hits + 1


@pytest.mark.parametrize(
    "edit",
    [
        {"op": "rewrite", "node_id": 2, "content": "Rewritten."},
        {"op": "toggle", "node_id": 2},
        {"op": "delete", "node_id": 4},
        {"op": "prune", "node_id": 4},
        {"op": "inject", "parent_id": 1, "role": "system", "content": "Injected."},
        {"op": "move", "node_id": 5, "parent_id": 0},
        {"op": "copy", "node_id": 4, "parent_id": 1},
    ],
    ids=lambda edit: edit["op"],
)
def test_an_edit_is_seen_at_once(store: Store, sid: str, edit: dict[str, Any]) -> None:
    made = chat(store, sid, 4)
    for at in (None, made[5], made[2]):
        store.messages(sid, at)
    operation = edit["op"]
    fields = {key: made[v] if isinstance(v, int) else v for key, v in edit.items()}
    before = fresh(store, sid)
    store.edit(sid, edits.parse(fields))
    for at in (None, *made):
        try:
            expected = fresh(store, sid, at)
        except InvalidOperationError:
            continue
        assert cached(store, sid, at) == expected
    assert fresh(store, sid) != before or operation in ("copy", "prune", "delete")
    store.undo(sid)
    assert cached(store, sid) == fresh(store, sid) == before
    store.redo(sid)
    assert cached(store, sid) == fresh(store, sid)


def test_a_rolled_back_transaction_leaves_the_kept_paths_right(store: Store, sid: str) -> None:
    made = chat(store, sid, 3)
    store.messages(sid)
    with pytest.raises(RuntimeError), store.transaction(sid) as tx:
        tx.append("user", "Lost.")
        tx.apply(Rewrite(node_id=made[1], content="Also lost."))
        raise RuntimeError("the turn failed")
    assert cached(store, sid) == fresh(store, sid)
    assert store.paths.hits == 1


def test_a_write_through_another_store_is_seen(store: Store, sid: str, database_url: str) -> None:
    made = chat(store, sid, 3)
    store.messages(sid)
    with Store.open(database_url) as other:
        other.edit(sid, Rewrite(node_id=made[1], content="Changed elsewhere."))
        assert cached(store, sid) == fresh(store, sid)
        assert cached(store, sid)[1][3] == "Changed elsewhere."
        # a growth elsewhere: this store did not make it, so it does not trust its paths
        other.append(sid, "user", "Elsewhere.")
        other.edit(sid, Toggle(node_id=made[0]))
    assert cached(store, sid, made[2]) == fresh(store, sid, made[2])
    assert made[0] not in [m.id for m in store.messages(sid)]


def test_a_write_by_another_process_is_seen(store: Store, sid: str, database_url: str) -> None:
    made = chat(store, sid, 3)
    assert cached(store, sid) == fresh(store, sid)
    probe = (
        "import sys\n"
        "from mnemosyne import Store\n"
        "from mnemosyne.edits import Rewrite\n"
        "with Store.open(sys.argv[1]) as s:\n"
        "    s.edit(sys.argv[2], Rewrite(node_id=sys.argv[3], content='From another process.'))\n"
    )
    subprocess.run([sys.executable, "-c", probe, database_url, sid, made[2]], check=True)
    assert cached(store, sid)[2][3] == "From another process."
    assert cached(store, sid) == fresh(store, sid)


def test_a_purged_session_is_forgotten(store: Store, sid: str) -> None:
    chat(store, sid, 2)
    store.messages(sid)
    store.trash_session(sid)
    store.purge_session(sid)
    assert store.paths._entries == {}


def test_the_memory_is_bounded(store: Store) -> None:
    store.paths.max_sessions, store.paths.max_tips = 2, 3
    sessions = [store.create_session().id for _ in range(3)]
    made = {s: chat(store, s, 3) for s in sessions}
    for s in sessions:
        for at in made[s]:
            assert cached(store, s, at) == fresh(store, s, at)
    assert len(store.paths._entries) == 2
    assert all(len(entry.tips) <= 3 for entry in store.paths._entries.values())
    store.paths.max_messages = 7  # fewer than two sessions' paths of 6
    for s in sessions:
        assert cached(store, s) == fresh(store, s)
    assert len(store.paths._entries) == 1  # the one read last
    store.paths.max_messages = 3  # the one read last is kept even if it is longer
    assert cached(store, sessions[0]) == fresh(store, sessions[0])
    assert cached(store, sessions[0]) == fresh(store, sessions[0])
    assert len(store.paths._entries) == 1 and store.paths.hits > 0


def test_a_prune_and_graft_are_seen(store: Store, sid: str) -> None:
    made = chat(store, sid, 3)
    store.messages(sid)
    store.messages(sid, made[3])
    store.edit(sid, Prune(node_id=made[2]))
    assert cached(store, sid) == fresh(store, sid) == fresh(store, sid)[:2]
    store.edit(sid, Graft(node_id=made[2], parent_id=made[0]))
    for at in (None, *made):
        assert cached(store, sid, at) == fresh(store, sid, at)
    assert [m[0] for m in cached(store, sid, made[3])] == [made[0], made[2], made[3]]


def test_readers_in_threads_see_every_write(store: Store, sid: str) -> None:
    made = chat(store, sid, 3)
    written = {made[1]: {"The road goes on (0)."}}
    errors: list[BaseException] = []
    stop = threading.Event()

    def read() -> None:
        try:
            while not stop.is_set():
                seen = store.messages(sid, made[-1])
                assert [m.id for m in seen] == made  # the shape never changes here
                assert seen[1].content in written[made[1]]
        except BaseException as error:  # noqa: BLE001 - handed to the test
            errors.append(error)

    readers = [threading.Thread(target=read) for _ in range(2)]
    for thread in readers:
        thread.start()
    try:
        for i in range(12):
            store.append(sid, "user", f"more {i}")
            if i % 3 == 0:
                written[made[1]].add(f"edited {i}")
                store.edit(sid, Rewrite(node_id=made[1], content=f"edited {i}"))
            store.checkout(sid, made[-1])
    finally:
        stop.set()
        for thread in readers:
            thread.join()
    assert not errors
    assert cached(store, sid)[1][3] == "edited 9"
    for at in (None, *made):
        assert cached(store, sid, at) == fresh(store, sid, at)
