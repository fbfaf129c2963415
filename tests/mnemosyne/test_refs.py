"""Tags and branches (mnemosyne.refs), on SQLite and PostgreSQL: names taken wherever a
node is, validated and unique, each change one undo step, branches following HEAD when a
turn is played from their tip, and names following their node to the trash and away
with a purge."""

from __future__ import annotations

import pytest

from mnemosyne import ConflictError, InvalidOperationError, Node, Store, UnknownNodeError, refs
from mnemosyne._schema import refs as refs_table
from mnemosyne.edits import Checkout, Delete, Prune
from mnemosyne.nodenames import check_ref_name


def story(store: Store, length: int = 4) -> tuple[str, list[Node]]:
    sid = store.create_session().id
    nodes = [
        store.append(sid, "user" if i % 2 == 0 else "assistant", f"message {i}")[0]
        for i in range(length)
    ]
    return sid, nodes


def say(store: Store, sid: str, text: str, reply: str) -> str:
    with store.transaction(sid) as tx, tx.journaled("say"):
        tx.append("user", text)
        return tx.append("assistant", reply).id


def named(store: Store, sid: str) -> dict[str, tuple[str, str]]:
    return {ref.name: (ref.kind, ref.node_id) for ref in refs.listed(store, sid)}


def test_a_tag_is_taken_wherever_a_node_is(store: Store) -> None:
    sid, nodes = story(store)
    result, _ = refs.name_node(store, sid, "first-meeting", "tag", nodes[1].id[:8])
    assert result.node_id == nodes[1].id
    assert store.node(sid, "first-meeting").id == nodes[1].id
    assert store.node(sid, "first-meeting~1").id == nodes[0].id
    assert store.node(sid, "first-meeting^").id == nodes[0].id
    assert [n.id for n in store.projection(sid, "first-meeting")] == [n.id for n in nodes[:2]]
    moved, _ = store.checkout(sid, "first-meeting")
    assert moved.id == nodes[1].id
    result2, _ = store.edit(sid, Checkout(node_id="first-meeting~1"))
    assert result2.head_id == nodes[0].id
    with pytest.raises(UnknownNodeError, match=f"session {sid} has no tag or branch named 'x-y'"):
        store.node(sid, "x-y")
    with pytest.raises(UnknownNodeError, match=r"the path from the root to node .* has 2 nodes"):
        store.node(sid, "first-meeting~5")


@pytest.mark.parametrize(
    ("name", "why"),
    [
        ("HEAD", "reads as HEAD"),
        ("head", "reads as HEAD"),
        ("HEADS-up", "reads as HEAD"),
        ("cafe", "all hex digits"),
        ("deadbeef12", "all hex digits"),
        ("9lives", "starting with a letter"),
        ("with space", "no spaces"),
        ("x~2", "no spaces, '~'"),
        ("a" * 41 + "z", "too long"),
        ("", "1 to 40 characters"),
    ],
)
def test_a_name_that_reads_as_something_else_is_refused(name: str, why: str) -> None:
    with pytest.raises(InvalidOperationError, match=why):
        check_ref_name(name)


def test_names_are_unique_per_session_and_refusals_write_nothing(store: Store) -> None:
    sid, nodes = story(store)
    other, _ = story(store)
    refs.name_node(store, sid, "camp", "tag", nodes[0].id)
    refs.name_node(store, other, "camp", "tag", "HEAD")  # another session: its own names
    version = store.session(sid).version
    with pytest.raises(InvalidOperationError, match="tag 'camp' exists already"):
        refs.name_node(store, sid, "camp", "tag", nodes[2].id)
    with pytest.raises(InvalidOperationError, match="'camp' is a tag already"):
        refs.name_node(store, sid, "camp", "branch", nodes[2].id)
    with pytest.raises(InvalidOperationError, match="all hex digits"):
        refs.name_node(store, sid, "beef", "tag", nodes[2].id)
    with pytest.raises(ConflictError):
        refs.name_node(store, sid, "late", "tag", expected_version=version - 1)
    assert store.session(sid).version == version
    assert named(store, sid) == {"camp": ("tag", nodes[0].id)}
    refs.name_node(store, sid, "camp", "tag", nodes[2].id, force=True)
    assert named(store, sid) == {"camp": ("tag", nodes[2].id)}
    version, steps = store.session(sid).version, len(store.history(sid))
    refs.name_node(store, sid, "camp", "tag", nodes[2].id, force=True)  # where it is
    refs.rename_name(store, sid, "camp", "camp")
    assert (store.session(sid).version, len(store.history(sid))) == (version, steps)


def test_every_change_is_one_undo_step(store: Store) -> None:
    sid, nodes = story(store)
    refs.name_node(store, sid, "start", "tag", nodes[0].id)
    refs.name_node(store, sid, "main", "branch")
    refs.rename_name(store, sid, "start", "opening")
    refs.unname(store, sid, "main", "branch")
    assert named(store, sid) == {"opening": ("tag", nodes[0].id)}
    assert [entry.action for entry in store.history(sid)][-4:] == [
        "tag",
        "branch",
        "rename",
        "delete branch",
    ]
    store.checkout(sid, nodes[1].id)
    store.undo(sid)  # a name's undo leaves HEAD where it is
    assert named(store, sid) == {"opening": ("tag", nodes[0].id), "main": ("branch", nodes[3].id)}
    assert store.session(sid).head_id == nodes[1].id
    store.undo(sid)
    assert named(store, sid) == {"start": ("tag", nodes[0].id), "main": ("branch", nodes[3].id)}
    store.undo(sid)
    store.undo(sid)
    assert named(store, sid) == {}
    store.redo(sid)
    store.redo(sid)
    assert named(store, sid) == {"start": ("tag", nodes[0].id), "main": ("branch", nodes[3].id)}
    with pytest.raises(UnknownNodeError, match="no branch named 'start'"):
        refs.unname(store, sid, "start", "branch")


def test_a_branch_follows_a_turn_played_from_its_tip_and_undo_takes_it_back(
    store: Store,
) -> None:
    sid, nodes = story(store)
    refs.name_node(store, sid, "main", "branch")
    refs.name_node(store, sid, "mark", "tag")
    reply = say(store, sid, "onward", "the road goes on")
    assert named(store, sid) == {"main": ("branch", reply), "mark": ("tag", nodes[3].id)}
    # a reroll of the tip: the branch follows HEAD to the new alternative
    with store.transaction(sid) as tx, tx.journaled("reroll"):
        again = tx.add_sibling("HEAD", "the road turns").id
    assert store.node(sid, "main").id == again
    store.undo(sid)  # the reroll undone: the branch back on the first reply
    assert store.node(sid, "main").id == reply
    store.undo(sid)  # the turn undone: the branch back where it was
    assert store.node(sid, "main").id == nodes[3].id
    store.redo(sid)
    assert store.node(sid, "main").id == reply
    # HEAD elsewhere: a turn played there leaves the branch alone
    store.checkout(sid, "mark~2")
    side = say(store, sid, "a side path", "elsewhere")
    assert store.node(sid, "main").id == reply
    assert store.node(sid, "HEAD").id == side
    store.checkout(sid, "main")
    assert store.session(sid).head_id == reply


def test_a_branch_stays_when_an_earlier_message_is_rerolled(store: Store) -> None:
    sid, nodes = story(store)
    refs.name_node(store, sid, "main", "branch")
    store.add_sibling(sid, nodes[1].id, "another early reply")  # HEAD leaves the branch
    assert store.node(sid, "main").id == nodes[3].id


def test_a_name_follows_its_node_to_the_trash_and_goes_with_a_purge(store: Store) -> None:
    sid, nodes = story(store)
    refs.name_node(store, sid, "camp", "tag", nodes[2].id)
    refs.name_node(store, sid, "start", "tag", nodes[0].id)
    store.edit(sid, Prune(node_id=nodes[2].id))
    (camp,) = [ref for ref in refs.listed(store, sid) if ref.name == "camp"]
    assert (camp.node_id, camp.place) == (nodes[2].id, "fragment")
    store.undo(sid)
    store.edit(sid, Delete(node_id="camp"))
    assert {ref.name: ref.place for ref in refs.listed(store, sid)} == {
        "camp": "trash",
        "start": "tree",
    }
    with pytest.raises(InvalidOperationError, match="is in the trash: restore it first"):
        store.checkout(sid, "camp")
    store.purge(sid)
    assert named(store, sid) == {"start": ("tag", nodes[0].id)}


def test_the_journal_refuses_names_changed_outside_it(store: Store) -> None:
    sid, nodes = story(store)
    refs.name_node(store, sid, "camp", "tag", nodes[0].id)
    with store.write() as conn:  # behind the journal's back
        conn.execute(refs_table.delete())
    with pytest.raises(InvalidOperationError, match="no longer matches its tags and branches"):
        store.undo(sid)


def test_a_branch_made_or_brought_back_inside_a_transaction_is_followed(store: Store) -> None:
    """The session's "has it a branch" is read once per transaction, and again after its
    names change (a new branch, an undo bringing one back) within the same one."""
    sid, _ = story(store, 2)
    with store.transaction(sid) as tx:
        tx.append("user", "no branch yet")  # reads: none
        tx.name_node("main", "branch")
        tip = tx.append("assistant", "the branch follows").id
    assert named(store, sid) == {"main": ("branch", tip)}
    refs.unname(store, sid, "main")
    with store.transaction(sid) as tx:
        with tx.journaled("say"):
            tx.append("user", "no branch now")  # reads: none
        tx.undo()  # the say
        tx.undo()  # the branch deleted: back at its tip
        after = tx.append("user", "it follows again").id
    assert named(store, sid) == {"main": ("branch", after)}


def test_places_are_read_for_every_name_at_once_and_marks_without_them(store: Store) -> None:
    sid, nodes = story(store, 6)
    for name, node in [("ha", nodes[0]), ("hb", nodes[1]), ("hc", nodes[3]), ("hd", nodes[5])]:
        refs.name_node(store, sid, name, "tag", node.id)
    side = store.add_sibling(sid, nodes[1].id, "a side reply")[0]
    refs.name_node(store, sid, "he", "branch", side.id)
    store.edit(sid, Prune(node_id=nodes[2].id))  # c and d below the fragment's top
    store.edit(sid, Delete(node_id=side.id))
    assert {ref.name: ref.place for ref in refs.listed(store, sid)} == {
        "ha": "tree",
        "hb": "tree",
        "hc": "fragment",
        "hd": "fragment",
        "he": "trash",
    }
    assert [ref.name for ref in refs.listed(store, sid, "branch")] == ["he"]
    marks = [(m.name, m.kind, m.node_id) for m in refs.marked(store, sid)]
    assert marks == [(r.name, r.kind, r.node_id) for r in refs.listed(store, sid)]
    assert [(m.name, m.kind, m.node_id) for m in store.dump(sid).names] == marks


def test_names_restored_in_bulk_are_checked_and_no_undo_step(store: Store) -> None:
    sid, nodes = story(store)
    refs.name_node(store, sid, "camp", "tag", nodes[0].id)
    version, history = store.session(sid).version, store.history(sid)
    for rows, error, words in [
        (
            [("x-y", "tag", nodes[1].id), ("camp", "tag", nodes[2].id)],
            InvalidOperationError,
            "'camp' is named already",
        ),
        (
            [("x-y", "tag", nodes[1].id), ("x-y", "branch", nodes[2].id)],
            InvalidOperationError,
            "'x-y' is named already",
        ),
        ([("x-y", "tag", "0" * 32)], UnknownNodeError, "0" * 8),
        ([("cafe", "tag", nodes[1].id)], InvalidOperationError, "all hex"),
        ([("x-y", "label", nodes[1].id)], InvalidOperationError, "not 'label'"),
    ]:
        with pytest.raises(error, match=words), store.transaction(sid) as tx:
            tx.restore_names(rows)
    assert store.session(sid).version == version
    assert named(store, sid) == {"camp": ("tag", nodes[0].id)}
    with store.transaction(sid) as tx:
        tx.restore_names([("main", "branch", nodes[3].id), ("hi", "tag", nodes[1].id)])
    assert named(store, sid) == {
        "camp": ("tag", nodes[0].id),
        "hi": ("tag", nodes[1].id),
        "main": ("branch", nodes[3].id),
    }
    assert store.history(sid) == history and store.session(sid).version == version + 1
    store.append(sid, "user", "the branch follows")
    assert store.node(sid, "main").id == store.session(sid).head_id


def test_a_name_change_is_an_event_of_kind_refs(store: Store) -> None:
    sid, nodes = story(store)
    version = store.session(sid).version
    refs.name_node(store, sid, "camp", "tag", nodes[1].id)
    refs.rename_name(store, sid, "camp", "the-camp")
    with store.transaction(sid) as tx:
        tx.change_name("the-camp", ref=nodes[2].id)
    found = store.events(sid, after=version).events
    assert [(e.kind, e.payload["action"], e.payload["changed"]) for e in found] == [
        ("refs", "tag", [nodes[1].id]),
        ("refs", "rename", [nodes[1].id]),
        ("refs", "move", [nodes[1].id, nodes[2].id]),
    ]
