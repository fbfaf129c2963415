"""Lists read a page at a time (mnemosyne.pages), on SQLite and PostgreSQL: the
sessions, a tree, the undo journal. Pages concatenated are the whole list for every
page size; a cursor whose node or entry is gone is refused as stale; a session changed
while a client pages is not shown twice."""

from __future__ import annotations

from typing import Any

import pytest

from mnemosyne import InvalidOperationError, Page, StaleCursorError, Store
from mnemosyne.edits import Delete, Prune, Rewrite, Toggle


def every_page(read: Any, limit: int) -> tuple[list[Any], list[Page[Any]]]:
    """Read ``read(limit=, after=)`` page after page to the end."""
    items: list[Any] = []
    pages: list[Page[Any]] = []
    after = None
    while True:
        page = read(limit=limit, after=after)
        pages.append(page)
        items.extend(page.items)
        after = page.after
        if after is None:
            return items, pages
        assert len(pages) < 100


def branching(store: Store) -> str:
    """A session whose tree forks at several depths, with a fragment and some trash."""
    sid = store.create_session(title="branches").id
    first, _ = store.append(sid, "user", "u0")
    reply, _ = store.append(sid, "assistant", "a0")
    store.add_sibling(sid, reply.id, "a0, again")
    store.checkout(sid, reply.id)
    for i in range(1, 6):
        node, _ = store.append(sid, "user", f"u{i}")
        store.add_sibling(sid, node.id, f"u{i}, other")
        store.append(sid, "assistant", f"a{i} under the other")
        store.checkout(sid, node.id)
        store.append(sid, "assistant", f"a{i}")
    pruned, _ = store.add_sibling(sid, first.id, "a root beside")
    store.append(sid, "assistant", "under the pruned root")
    store.edit(sid, Prune(node_id=pruned.id))
    trashed, _ = store.add_sibling(sid, reply.id, "to the trash")
    store.edit(sid, Delete(node_id=trashed.id))
    return sid


def test_tree_pages_concatenated_are_the_tree(store: Store) -> None:
    sid = branching(store)
    whole = store.tree(sid)
    for limit in (1, 2, 3, 7, len(whole.nodes), 500):
        nodes, pages = every_page(lambda **kw: store.tree_page(sid, **kw), limit)
        assert [n.as_dict() for n in nodes] == [n.as_dict() for n in whole.nodes]
        assert all(p.total == len(whole.nodes) for p in pages)
        assert all(len(p.items) == limit for p in pages[:-1])
        assert all(p.after == p.items[-1].id for p in pages[:-1])
        assert pages[-1].session == whole.session
    empty = store.create_session(title="empty").id
    page = store.tree_page(empty)
    assert (page.items, page.total, page.after) == ([], 0, None)


def test_a_stale_tree_cursor_is_refused(store: Store) -> None:
    sid = branching(store)
    page = store.tree_page(sid, limit=4)
    assert page.after is not None
    # A node elsewhere changing does not stale the cursor.
    store.edit(sid, Rewrite(node_id=page.items[0].id, content="rewritten"))
    assert store.tree_page(sid, limit=4, after=page.after[:8]).items  # a prefix too
    store.edit(sid, Delete(node_id=page.after))
    with pytest.raises(StaleCursorError, match="no longer in the tree") as deleted:
        store.tree_page(sid, limit=4, after=page.after)
    assert deleted.value.code == "stale_cursor"
    store.purge(sid)
    with pytest.raises(StaleCursorError, match="changed since"):
        store.tree_page(sid, limit=4, after=page.after)
    with pytest.raises(InvalidOperationError, match="limit"):
        store.tree_page(sid, limit=0)


def test_sessions_pages_and_a_session_changed_meanwhile(store: Store) -> None:
    made = [store.create_session(title=f"s{i}").id for i in range(7)]
    store.trash_session(made[0])
    whole = store.sessions()
    assert len(whole) == 6
    for limit in (1, 2, 4, 6, 50):
        listed, pages = every_page(lambda **kw: store.sessions_page(**kw), limit)
        assert [s.id for s in listed] == [s.id for s in whole]
        assert all(p.total == 6 and p.session is None for p in pages)
    trashed, _ = every_page(lambda **kw: store.sessions_page(trashed=True, **kw), 1)
    assert [s.id for s in trashed] == [made[0]]

    first = store.sessions_page(limit=2)
    assert [s.id for s in first.items] == [made[6], made[5]]
    store.append(made[5], "user", "played meanwhile")  # it moves to the top
    store.append(made[2], "user", "played meanwhile too")
    rest: list[Any] = []
    after = first.after
    while after is not None:
        page = store.sessions_page(limit=2, after=after)
        rest.extend(page.items)
        after = page.after
    assert [s.id for s in rest] == [made[4], made[3], made[1]]  # none twice
    for bad in ("", "later", "12", "1-2-3", "-1-2", "9" * 19 + "-1", "9" * 18 + "-1", "١-٢"):
        with pytest.raises(InvalidOperationError, match="not a cursor"):
            store.sessions_page(after=bad)


def test_history_pages(store: Store) -> None:
    sid = store.create_session(title="journal").id
    node, _ = store.append(sid, "user", "hello")
    for i in range(7):
        store.edit(sid, Rewrite(node_id=node.id, content=f"hello {i}"))
    store.edit(sid, Toggle(node_id=node.id))
    store.undo(sid)
    store.undo(sid)
    whole = store.history(sid)
    assert len(whole) == 8
    for limit in (1, 3, 8, 50):
        entries, pages = every_page(lambda **kw: store.history_page(sid, **kw), limit)
        assert entries == whole
        assert all(p.total == 8 for p in pages)
    page = store.history_page(sid, limit=3)
    assert page.after == str(whole[2].position)
    store.append(sid, "assistant", "a turn clears the journal")
    with pytest.raises(StaleCursorError, match="no entry"):
        store.history_page(sid, after=page.after)
    with pytest.raises(InvalidOperationError, match="not a cursor"):
        store.history_page(sid, after="two")
    assert store.history_page(sid).items == []


def test_a_trees_pages_read_its_order_once_per_version(store: Store, database_url: str) -> None:
    sid = branching(store)
    misses = store.tree_orders.misses
    nodes, pages = every_page(lambda **kw: store.tree_page(sid, **kw), 3)
    assert len(pages) > 3 and store.tree_orders.misses == misses + 1
    store.edit(sid, Rewrite(node_id=nodes[0].id, content="a write bumps the version"))
    again, _ = every_page(lambda **kw: store.tree_page(sid, **kw), 3)
    assert store.tree_orders.misses == misses + 2
    assert again[0].content == "a write bumps the version"
    with Store.open(database_url) as elsewhere:  # another process, say
        grown, _ = elsewhere.append(sid, "assistant", "grown elsewhere")
    assert grown.id in [n.id for n in every_page(lambda **kw: store.tree_page(sid, **kw), 3)[0]]


def test_a_purged_sessions_order_is_not_another_sessions(store: Store) -> None:
    doomed = store.create_session(title="doomed").id
    for i in range(4):
        store.append(doomed, "user", f"doomed {i}")
    version = store.session(doomed).version
    assert store.tree_page(doomed).total == 4  # its order kept at this version
    store.trash_session(doomed)
    store.purge_session(doomed)
    # SQLite may hand the purged session's key to the next one: same key, same version.
    fresh = store.create_session(title="fresh").id
    first, _ = store.append(fresh, "user", "fresh")
    while store.session(fresh).version < version:
        store.checkout(fresh, first.id)  # a write that adds no node
    assert store.session(fresh).version == version
    page = store.tree_page(fresh)
    assert [n.id for n in page.items] == [n.id for n in store.tree(fresh).nodes]
    assert page.total == len(store.tree(fresh).nodes)
