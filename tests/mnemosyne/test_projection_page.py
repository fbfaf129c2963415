"""Store.projection_page, on SQLite and PostgreSQL: every window of the projection, by
cursor, is the slice of the whole one (disabled nodes in or out), and a window after a
turn reads only what the turn added to the path, never the whole path again."""

from __future__ import annotations

import pytest

from mnemosyne import InvalidOperationError, Store
from mnemosyne.edits import Prune, Toggle


def test_every_window_is_a_slice_of_the_whole(store: Store) -> None:
    sid = store.create_session(title="windows").id
    ids = []
    for i in range(13):
        node, _ = store.append(sid, "user" if i % 2 == 0 else "assistant", f"m{i}")
        ids.append(node.id)
    store.add_sibling(sid, ids[-1], "m12, again")
    store.checkout(sid, ids[-1])
    for hidden in (0, 5, 6):
        store.edit(sid, Toggle(node_id=ids[hidden]))
    for disabled in (False, True):
        _, whole = store.projection_turns(sid, disabled=disabled)
        shown = [turn.node.id for turn in whole]
        for limit in (1, 2, 5, 13, 100):
            for end, before in [(len(shown), None), *enumerate(ids)]:
                if before is not None and before in shown:
                    end = shown.index(before)
                elif before is not None:  # a hidden cursor: the window before it
                    end = sum(1 for i in ids[: ids.index(before)] if i in shown)
                page = store.projection_page(sid, before=before, limit=limit, disabled=disabled)
                start = max(end - limit, 0)
                assert [t.node.id for t in page.turns] == shown[start:end]
                assert [t.siblings for t in page.turns] == [t.siblings for t in whole[start:end]]
                assert (page.total, page.earlier) == (len(shown), start)


def test_a_window_after_a_turn_reads_only_the_turn(store: Store) -> None:
    sid = store.create_session(title="turns").id
    for i in range(40):
        store.append(sid, "user" if i % 2 == 0 else "assistant", f"m{i}")
    store.projection_page(sid, limit=5)
    assert store.paths.misses == 1
    for i in range(3):
        store.append(sid, "user", f"more {i}")
        store.append(sid, "assistant", f"reply {i}")
        page = store.projection_page(sid, limit=5)
        assert page.turns[-1].node.content == f"reply {i}"
    assert store.paths.misses == 1  # the path was read whole once; then only what was new
    store.projection_page(sid, limit=5, before=page.turns[0].node.id)
    assert store.paths.misses == 1 and store.paths.hits >= 1


def test_refusals(store: Store) -> None:
    sid = store.create_session(title="refusals").id
    first, _ = store.append(sid, "user", "hello")
    other, _ = store.add_sibling(sid, first.id, "hi")
    with pytest.raises(InvalidOperationError, match="limit"):
        store.projection_page(sid, limit=0)
    with pytest.raises(InvalidOperationError, match="not on the path"):
        store.projection_page(sid, before=first.id)
    with pytest.raises(InvalidOperationError, match="not on the path"):  # pruned
        store.projection_page(sid, before=other.id)  # fine while on the path...
        store.edit(sid, Prune(node_id=other.id))
        store.projection_page(sid, before=other.id)
    empty = store.create_session(title="empty").id
    page = store.projection_page(empty)
    assert (page.turns, page.total, page.earlier) == ([], 0, 0)
