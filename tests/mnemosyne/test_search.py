"""Store.search: full-text search over every branch, on SQLite (FTS5) and PostgreSQL."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import pytest
from alembic import command
from alembic.config import Config

from mnemosyne import (
    InvalidOperationError,
    NodeRecord,
    Store,
    UnknownNodeError,
    UnknownSessionError,
)
from mnemosyne._engine import MIGRATIONS, upgrade
from mnemosyne._search import CATCH_UP_BATCH, MAX_QUERY_LENGTH, catch_up, parse_moment, snippet
from mnemosyne.edits import Delete, Inject, Prune, Rewrite, Toggle


def _insert_raw(store: Store, sid: str, content: str) -> None:
    """A node written by SQL alone (a database at an older revision than the code)."""
    with store.engine.begin() as conn:
        conn.exec_driver_sql(
            "INSERT INTO nodes (id, session_pk, role, content, enabled, created_at, metadata)"
            " SELECT %s, pk, 'user', %s, true, '2026-11-25 10:00:00.000000', '{}'"
            " FROM sessions WHERE id = %s"
            if conn.dialect.name != "sqlite"
            else "INSERT INTO nodes (id, session_pk, role, content, enabled, created_at, metadata)"
            " SELECT ?, pk, 'user', ?, 1, '2026-11-25 10:00:00.000000', '{}'"
            " FROM sessions WHERE id = ?",
            (uuid.uuid4().hex, content, sid),
        )


def _index_is_whole(store: Store) -> None:
    """SQLite: the FTS index holds every node, as it now reads (FTS5's own check
    against the content table); and the watermark is at or above the largest key."""
    if store.engine.dialect.name != "sqlite":
        return
    with store.engine.begin() as conn:
        conn.exec_driver_sql("INSERT INTO nodes_fts(nodes_fts, rank) VALUES ('integrity-check', 1)")
        indexed, largest = conn.exec_driver_sql(
            "SELECT (SELECT indexed_pk FROM search_index), (SELECT coalesce(max(pk), 0) FROM nodes)"
        ).one()
    assert indexed >= largest


def _story(store: Store) -> dict[str, str]:
    """root -> reply (trunk, HEAD below it) and a sibling reply on a side branch."""
    sid = store.create_session(title="Search").id
    root, _ = store.append(sid, "user", "We enter the lighthouse at dusk.")
    trunk, _ = store.append(sid, "assistant", "The keeper lights the lamp.", name="Mira")
    side, _ = store.add_sibling(sid, trunk.id, "A wyvern circles the lantern room.", name="Mira")
    store.checkout(sid, trunk.id)
    tip, _ = store.append(sid, "user", "I ask the keeper about the wreck.")
    return {"sid": sid, "root": root.id, "trunk": trunk.id, "side": side.id, "tip": tip.id}


def test_a_word_in_a_side_branch_is_found_and_placed(store: Store) -> None:
    ids = _story(store)
    [hit] = store.search("wyvern")
    assert (hit.node_id, hit.session_id, hit.role, hit.name) == (
        ids["side"],
        ids["sid"],
        "assistant",
        "Mira",
    )
    assert hit.on_trunk is False and hit.enabled is True
    hits = store.search("keeper")
    assert [h.node_id for h in hits] == [ids["tip"], ids["trunk"]]  # newest first
    assert all(h.on_trunk for h in hits)
    assert hits[0].created_at >= hits[1].created_at


def test_the_match_is_case_insensitive_and_every_word_must_be_there(store: Store) -> None:
    ids = _story(store)
    assert [h.node_id for h in store.search("LIGHTHOUSE dusk")] == [ids["root"]]
    assert store.search("lighthouse wyvern") == []


def test_the_snippet_marks_where_the_words_are(store: Store) -> None:
    _story(store)
    [hit] = store.search("lantern")
    start, end = hit.matches[0]
    assert hit.snippet[start:end] == "lantern"


def test_a_disabled_node_is_found_and_marked(store: Store) -> None:
    ids = _story(store)
    store.edit(ids["sid"], Toggle(node_id=ids["root"]))
    [hit] = store.search("lighthouse")
    assert hit.enabled is False and hit.on_trunk is True


def test_trashed_subtrees_and_trashed_sessions_are_not_found(store: Store) -> None:
    ids = _story(store)
    other = store.create_session().id
    store.append(other, "user", "Another wyvern, another story.")
    assert len(store.search("wyvern")) == 2
    store.edit(ids["sid"], Delete(node_id=ids["side"]))
    assert [h.session_id for h in store.search("wyvern")] == [other]
    store.trash_session(other)
    assert store.search("wyvern") == []
    store.restore_session(other)
    assert [h.session_id for h in store.search("wyvern")] == [other]


def test_a_pruned_fragment_is_found_off_the_trunk(store: Store) -> None:
    ids = _story(store)
    store.edit(ids["sid"], Prune(node_id=ids["side"]))
    [hit] = store.search("wyvern")
    assert hit.node_id == ids["side"] and not hit.on_trunk


def test_a_trashed_subtree_does_not_eat_the_limit(store: Store) -> None:
    sid = store.create_session().id
    for i in range(5):
        store.append(sid, "user", f"gold coin {i}")
    first = store.search("coin", session_id=sid)[-1]
    store.edit(sid, Delete(node_id=first.node_id))  # its four descendants go too
    assert store.search("coin", limit=2) == []
    kept = store.create_session().id
    for i in range(3):
        store.append(kept, "user", f"gold coin {i}")
    assert len(store.search("coin", limit=2)) == 2


def test_role_and_session_filters(store: Store) -> None:
    ids = _story(store)
    other = store.create_session().id
    store.append(other, "user", "The keeper is asleep.")
    assert {h.role for h in store.search("keeper", role="user")} == {"user"}
    assert [h.node_id for h in store.search("keeper", role="assistant")] == [ids["trunk"]]
    assert {h.session_id for h in store.search("keeper", session_id=ids["sid"])} == {ids["sid"]}
    assert len(store.search("keeper")) == 3
    assert len(store.search("keeper", limit=1)) == 1
    with pytest.raises(UnknownSessionError):
        store.search("keeper", session_id="ffffffffffff")


@pytest.mark.parametrize(
    "query",
    ['"', 'say "hi', "lamp*", "NEAR(a b)", "-lamp", "a OR b", "col:umn", "(", "^x", "AND",
     "l'eau", "c:\\dir\\x", "a&b", "!x|y", "foo:*", "it's-a\\'b"],
)  # fmt: skip
def test_search_syntax_is_text_never_an_error(store: Store, query: str) -> None:
    sid = store.create_session().id
    node, _ = store.append(sid, "user", f"She wrote {query} on the wall.")
    store.append(sid, "user", "Nothing here but lamp oil and NEAR silence.")
    hits = store.search(query)
    assert node.id in [h.node_id for h in hits]
    assert all(query.lower() in store.node(sid, h.node_id).content.lower() for h in hits)


def test_cjk_text_is_found(store: Store) -> None:
    sid = store.create_session().id
    node, _ = store.append(sid, "assistant", "灯台守は古い魔法の本を開いた。")
    store.append(sid, "user", "등대지기가 문을 열었다.")
    assert [h.node_id for h in store.search("魔法の本")] == [node.id]
    assert [h.node_id for h in store.search("魔法")] == [node.id]  # two characters
    assert len(store.search("문을")) == 1


def test_an_edit_in_place_is_found_by_its_new_text_only(store: Store) -> None:
    ids = _story(store)
    store.edit(ids["sid"], Rewrite(node_id=ids["trunk"], content="The warden snuffs the candle."))
    assert [h.node_id for h in store.search("warden")] == [ids["trunk"]]
    assert [h.node_id for h in store.search("lamp")] == []


def test_a_purged_session_leaves_nothing_to_find(store: Store) -> None:
    ids = _story(store)
    store.trash_session(ids["sid"])
    store.purge_session(ids["sid"])
    assert store.search("keeper") == []


def test_bad_queries_are_refused_clearly(store: Store) -> None:
    with pytest.raises(InvalidOperationError, match="at least one word"):
        store.search("   ")
    with pytest.raises(InvalidOperationError, match=str(MAX_QUERY_LENGTH)):
        store.search("x" * (MAX_QUERY_LENGTH + 1))
    with pytest.raises(InvalidOperationError, match="limit"):
        store.search("x", limit=0)
    with pytest.raises(InvalidOperationError, match="role"):
        store.search("x", role="narrator")
    with pytest.raises(InvalidOperationError, match="NUL"):
        store.search("a\x00b")
    with pytest.raises(InvalidOperationError, match="UTF-8"):
        store.search("caf\udcff")  # a lone surrogate: a byte not UTF-8, as argv decodes it


def test_snippets_are_cut_around_the_first_match() -> None:
    text = "a" * 200 + " dragon " + "b" * 200
    shown, matches = snippet(text, ["DRAGON"])
    assert shown.startswith("…") and shown.endswith("…") and len(shown) < 200
    [(start, end)] = matches
    assert shown[start:end] == "dragon"


def test_an_import_is_found(store: Store) -> None:
    sid = store.create_session().id
    with store.transaction(sid) as tx:
        made = tx.insert_nodes(
            [
                NodeRecord(role="user", content="The ferry leaves at noon."),
                NodeRecord(role="assistant", content="A gull steals the map.", parent=0),
                NodeRecord(role="assistant", content="The map is safe.", parent=0),
            ],
            head=1,
        )
    hits = store.search("map")
    assert [h.node_id for h in hits] == [made[2].id, made[1].id]
    assert [h.on_trunk for h in hits] == [False, True]


def test_the_migration_indexes_the_nodes_already_there(
    backend: str, blank_database_url: Callable[[str], str]
) -> None:
    url = blank_database_url(backend)
    with Store.open(url, migrate=True) as store:
        sid = store.create_session().id
        node, _ = store.append(sid, "user", "An old lighthouse keeper.")
        engine = store.engine
        config = Config()
        config.set_main_option("script_location", str(MIGRATIONS))
        with engine.connect().execution_options(mnemosyne_write=True) as conn, conn.begin():
            config.attributes["connection"] = conn
            command.downgrade(config, "0007")  # no search index: as before this feature
        _insert_raw(store, sid, "A keeper written before the upgrade.")
        upgrade(engine)
        assert len(store.search("keeper")) == 2
        assert store.search("lighthouse")[0].node_id == node.id


def test_snippet_offsets_hold_after_a_letter_that_lowers_longer() -> None:
    shown, matches = snippet("İİİ wyvern here", ["WYVERN"])
    assert [shown[a:b] for a, b in matches] == ["wyvern"]
    assert matches == ((4, 10),)


# -- the lazy index (SQLite): what a search indexes, and what writes keep --------------


def _unindexed(store: Store) -> int:
    with store.engine.connect() as conn:
        return int(
            conn.exec_driver_sql(
                "SELECT count(*) FROM nodes WHERE pk > (SELECT indexed_pk FROM search_index)"
            ).scalar_one()
        )


def test_a_write_is_indexed_by_the_next_search_not_by_the_write(store: Store) -> None:
    sid = store.create_session().id
    store.append(sid, "user", "The ferry leaves at noon.")
    if store.engine.dialect.name == "sqlite":
        assert _unindexed(store) == 1  # no trigger indexed it
    [hit] = store.search("ferry")
    assert hit.snippet == "The ferry leaves at noon."
    _index_is_whole(store)
    if store.engine.dialect.name == "sqlite":
        assert _unindexed(store) == 0


def test_edits_and_deletes_of_nodes_not_indexed_yet_keep_the_index_whole(store: Store) -> None:
    ids = _story(store)
    store.search("keeper")  # the story indexed
    sid = ids["sid"]
    late, _ = store.append(sid, "assistant", "A late reply about the harbour.")
    store.edit(sid, Rewrite(node_id=late.id, content="A late reply about the lighthouse."))
    gone, _ = store.append(sid, "user", "A question about the harbour.")
    store.edit(sid, Delete(node_id=gone.id))
    store.purge(sid)  # the newest node's row deleted before any search saw it
    store.edit(sid, Rewrite(node_id=ids["tip"], content="I ask about the storm."))
    assert store.search("harbour") == []
    assert {h.node_id for h in store.search("lighthouse")} == {ids["root"], late.id}
    assert [h.node_id for h in store.search("storm")] == [ids["tip"]]
    assert gone.id not in {h.node_id for h in store.search("question")}
    _index_is_whole(store)


def test_a_key_taken_again_after_the_newest_nodes_are_purged_is_indexed(store: Store) -> None:
    kept = store.create_session().id
    store.append(kept, "user", "An old map of the coast.")
    newest = store.create_session().id
    for i in range(3):
        store.append(newest, "user", f"A purged page {i}.")
    assert len(store.search("page")) == 3  # indexed up to the newest node
    store.trash_session(newest)
    store.purge_session(newest)  # the largest keys are free again (SQLite: max + 1),
    # under the watermark: the insert trigger indexes a row that takes one
    made, _ = store.append(kept, "user", "A new page of the map.")
    assert [h.node_id for h in store.search("page")] == [made.id]
    _index_is_whole(store)


def test_a_node_put_back_by_a_redo_under_the_watermark_is_indexed(store: Store) -> None:
    sid = store.create_session().id
    root, _ = store.append(sid, "user", "We land on the island.")
    store.append(sid, "assistant", "Palms sway.")
    store.edit(sid, Inject(parent_id=root.id, role="assistant", content="A jade idol glints."))
    other = store.create_session().id
    store.append(other, "user", "Elsewhere, later: a larger key.")
    [idol] = store.search("jade")  # indexed up to the other session's node
    store.undo(sid)  # the injected row deleted
    assert store.search("jade") == []
    store.redo(sid)  # put back with its old key, under the watermark
    assert [h.node_id for h in store.search("jade")] == [idol.node_id]
    store.edit(sid, Rewrite(node_id=idol.node_id, content="A jade mask glints."))
    assert [h.snippet for h in store.search("jade")] == ["A jade mask glints."]
    _index_is_whole(store)


def test_a_large_import_is_indexed_in_batches_by_one_search(store: Store) -> None:
    sid = store.create_session().id
    count = CATCH_UP_BATCH * 2 + 5
    with store.transaction(sid) as tx:
        tx.insert_nodes(
            [
                NodeRecord(
                    role="user", content=f"line n{i}n of the ledger", parent=i - 1 if i else None
                )
                for i in range(count)
            ]
        )
    assert len(store.search("ledger", limit=500)) == 500
    [newest] = store.search("ledger", limit=1)
    assert newest.snippet == f"line n{count - 1}n of the ledger"
    assert [h.snippet for h in store.search("n17n")] == ["line n17n of the ledger"]
    _index_is_whole(store)


def test_two_processes_searching_at_once_index_once(
    backend: str, database_url: str, store: Store
) -> None:
    sid = store.create_session().id
    with store.transaction(sid) as tx:
        tx.insert_nodes([NodeRecord(role="user", content=f"coin {i}") for i in range(3000)])
    others = [Store.open(database_url) for _ in range(2)]
    start = threading.Barrier(2)
    indexed: list[int] = []

    def search(other: Store) -> None:
        start.wait()
        indexed.append(catch_up(other.read, other.write))

    try:
        threads = [threading.Thread(target=search, args=(other,)) for other in others]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        for other in others:
            other.close()
    assert sum(indexed) == (3000 if backend == "sqlite" else 0)
    assert len(store.search("coin", limit=500)) == 500
    _index_is_whole(store)


def test_migration_0009_keeps_the_index_0008_built(
    backend: str, blank_database_url: Callable[[str], str]
) -> None:
    url = blank_database_url(backend)
    with Store.open(url, migrate=True) as store:
        sid = store.create_session().id
        store.append(sid, "user", "A keeper of the old lamp.")
        store.search("keeper")
        config = Config()
        config.set_main_option("script_location", str(MIGRATIONS))
        with store.engine.connect().execution_options(mnemosyne_write=True) as conn, conn.begin():
            config.attributes["connection"] = conn
            command.downgrade(config, "0008")  # back to the index kept by triggers
        _insert_raw(store, sid, "A keeper indexed by 0008's trigger.")
        upgrade(store.engine)
        _insert_raw(store, sid, "A keeper written after the upgrade.")
        assert len(store.search("keeper")) == 3
        assert len(store.search("trigger")) == 1
        _index_is_whole(store)
        _insert_raw(store, sid, "A keeper not indexed when the database goes back to 0008.")
        with store.engine.connect().execution_options(mnemosyne_write=True) as conn, conn.begin():
            config.attributes["connection"] = conn
            command.downgrade(config, "0008")
        if backend == "sqlite":
            with store.engine.begin() as conn:  # 0008's index holds every node again
                conn.exec_driver_sql(
                    "INSERT INTO nodes_fts(nodes_fts, rank) VALUES ('integrity-check', 1)"
                )
        upgrade(store.engine)
        assert len(store.search("keeper")) == 4


# -- the filters: the trunk, under a node, a time span ----------------------------------


def test_the_trunk_filter_keeps_the_path_to_head_of_each_session(store: Store) -> None:
    ids = _story(store)
    other = store.create_session().id
    first, _ = store.append(other, "user", "A wyvern at the gate.")
    store.add_sibling(other, first.id, "A wyvern on the roof.")  # HEAD moves to it
    assert {h.node_id for h in store.search("wyvern")} >= {ids["side"], first.id}
    trunk_hits = store.search("wyvern", trunk=True)
    assert [h.session_id for h in trunk_hits] == [other]
    assert all(h.on_trunk for h in trunk_hits)
    assert [h.node_id for h in store.search("the", trunk=True, session_id=ids["sid"])] == [
        ids["tip"],
        ids["trunk"],
        ids["root"],
    ]


def test_the_under_filter_keeps_a_node_and_its_subtree(store: Store) -> None:
    ids = _story(store)
    sid = ids["sid"]
    below, _ = store.append(sid, "assistant", "The keeper points at the wreck.")
    found = store.search("keeper", session_id=sid, under=ids["tip"])
    assert [h.node_id for h in found] == [below.id, ids["tip"]]  # the node itself too
    assert store.search("wyvern", session_id=sid, under=ids["trunk"]) == []
    assert [h.node_id for h in store.search("wyvern", session_id=sid, under=ids["side"])] == [
        ids["side"]
    ]
    assert len(store.search("the", session_id=sid, under="HEAD~1")) == 2  # tip and below
    with pytest.raises(InvalidOperationError, match="session"):
        store.search("keeper", under=ids["tip"])
    with pytest.raises(UnknownNodeError):
        store.search("keeper", session_id=sid, under="ffffffffffff")


def test_the_time_span_filter(store: Store) -> None:
    ids = _story(store)
    created = {h.node_id: h.created_at for h in store.search("the", session_id=ids["sid"])}
    middle = created[ids["trunk"]]
    later = store.search("the", since=middle)
    assert {h.node_id for h in later} == {n for n, at in created.items() if at >= middle}
    earlier = store.search("the", until=middle)
    assert {h.node_id for h in earlier} == {n for n, at in created.items() if at < middle}
    assert store.search("the", since=datetime.now(UTC) + timedelta(minutes=1)) == []
    span = store.search("the", since=middle, until=middle + timedelta(microseconds=1))
    assert [h.node_id for h in span] == [ids["trunk"]]
    with pytest.raises(InvalidOperationError, match="after"):
        store.search("the", since=middle, until=middle)
    with pytest.raises(InvalidOperationError, match="aware"):
        store.search("the", since=datetime(2026, 1, 1))


def test_moments_a_search_takes() -> None:
    now = datetime(2026, 11, 25, 12, 0, tzinfo=UTC)
    assert parse_moment("2026-11-20") == datetime(2026, 11, 20, tzinfo=UTC)
    assert parse_moment("2026-11-20", end=True) == datetime(2026, 11, 21, tzinfo=UTC)
    assert parse_moment("2026-11-20T18:30") == datetime(2026, 11, 20, 18, 30, tzinfo=UTC)
    assert parse_moment("2026-11-20T18:30+02:00") == datetime(2026, 11, 20, 16, 30, tzinfo=UTC)
    assert parse_moment("2d", now=now) == datetime(2026, 11, 23, 12, 0, tzinfo=UTC)
    assert parse_moment("90m", now=now) == datetime(2026, 11, 25, 10, 30, tzinfo=UTC)
    assert parse_moment("1w", now=now) == datetime(2026, 11, 18, 12, 0, tzinfo=UTC)
    for bad in ("yesterday", "2d3h", "-2d", "2026-13-01", "", "5y"):
        with pytest.raises(InvalidOperationError, match="ISO date"):
            parse_moment(bad)


@pytest.mark.parametrize(
    ("text", "end"),
    [("999999w", False), ("9999-12-31", True), ("0001-01-01T00:00+05:00", False),
     ("9999-12-31T23:59-05:00", False)],
)  # fmt: skip
def test_a_moment_out_of_range_is_refused_by_name(text: str, end: bool) -> None:
    with pytest.raises(InvalidOperationError, match=r"^until: .* out of range"):
        parse_moment(text, end=end, what="until")


def test_an_early_year_compares_as_a_year(store: Store) -> None:
    sid = store.create_session().id
    store.append(sid, "user", "The lamp is lit.")
    assert len(store.search("lamp", since=datetime(999, 1, 1, tzinfo=UTC))) == 1
    assert store.search("lamp", until=datetime(999, 1, 1, tzinfo=UTC)) == []


# -- mends ------------------------------------------------------------------------------


@pytest.mark.parametrize(("stored", "query"), [("Öl", "öl"), ("öl", "ÖL"), ("Ωμ", "ωΜ")])
def test_a_short_word_beyond_ascii_is_found_in_either_case(
    store: Store, stored: str, query: str
) -> None:
    sid = store.create_session().id
    node, _ = store.append(sid, "user", f"Das {stored} ist teuer.")
    store.append(sid, "user", "Nothing else here.")
    assert [h.node_id for h in store.search(query)] == [node.id]
    assert [h.node_id for h in store.search(f"{query} teuer")] == [node.id]  # with the index
    [hit] = store.search(query)
    start, end = hit.matches[0]
    assert hit.snippet[start:end] == stored


def _live_nodes(store: Store, sid: str) -> dict[str, str]:
    """Every node of the session out of the trash (fragments too): id -> content."""
    trashed = {n.id for subtree in store.trash(sid) for n in subtree}
    found = {n.id: n.content for n in store.tree(sid).nodes}
    found.update({n.id: n.content for subtree in store.fragments(sid) for n in subtree})
    return {node_id: text for node_id, text in found.items() if node_id not in trashed}


SEED, STEPS = 25, 150


def test_random_writes_and_searches_keep_the_index_whole(store: Store) -> None:
    """Seeded random appends, rewrites, injects, undos and redos, deletions, purges,
    sessions purged, each followed now and then by a search checked against the
    nodes themselves (and, on SQLite, FTS5's own check of the index)."""
    import random

    rng = random.Random(SEED)
    words = ["amber", "basalt", "cobalt", "damask"]
    sessions = [store.create_session().id for _ in range(2)]
    for step in range(STEPS):
        sid = rng.choice(sessions)
        on_tree = {n.id for n in store.tree(sid).nodes}
        nodes = sorted(set(_live_nodes(store, sid)) & on_tree)
        action = rng.random()
        try:
            if action < 0.3 or not nodes:
                store.append(sid, "user", f"{rng.choice(words)} {step}")
            elif action < 0.4:
                node = rng.choice(nodes)
                store.edit(sid, Rewrite(node_id=node, content=f"{rng.choice(words)} r{step}"))
            elif action < 0.55:
                store.edit(
                    sid,
                    Inject(
                        parent_id=rng.choice(nodes),
                        role="assistant",
                        content=f"{rng.choice(words)} i",
                    ),
                )
            elif action < 0.7:
                store.undo(sid)
            elif action < 0.82:
                store.redo(sid)
            elif action < 0.88:
                store.edit(sid, Delete(node_id=rng.choice(nodes)))
                if rng.random() < 0.5:
                    store.purge(sid)
            elif action < 0.92:
                store.trash_session(sid)
                store.purge_session(sid)
                sessions[sessions.index(sid)] = store.create_session().id
        except InvalidOperationError:
            continue  # nothing to undo or redo...
        if rng.random() < 0.5:
            word = rng.choice(words)
            found = {h.node_id for h in store.search(word, limit=500)}
            expected = {
                node_id
                for s in sessions
                for node_id, text in _live_nodes(store, s).items()
                if word in text
            }
            assert found == expected, (step, word)
            _index_is_whole(store)
    store.search("amber")
    _index_is_whole(store)


def test_a_search_of_a_few_sessions_keeps_their_paths_for_the_next(store: Store) -> None:
    """A search whose hits are in a few sessions (at most half of what the cache keeps)
    reads their paths through the cache: the next search walks none again."""
    for i in range(3):
        sid = store.create_session().id
        store.append(sid, "user", f"The lamp {i} is lit.")
    store.search("lamp")
    misses, hits = store.paths.misses, store.paths.hits
    for _ in range(2):
        assert all(hit.on_trunk for hit in store.search("lamp"))
        assert len(store.search("lamp", trunk=True)) == 3
    assert store.paths.misses == misses
    assert store.paths.hits == hits + 4 * 3  # each search read the 3 paths kept


def test_a_search_across_sessions_leaves_the_path_cache_as_it_was(store: Store) -> None:
    """More sessions than the cache keeps, each with a hit: searching them all (on the
    trunk or not) stores none of their paths, so the one a player reads stays kept."""
    sessions = []
    for i in range(store.paths.max_sessions + 4):
        sid = store.create_session().id
        store.append(sid, "user", f"The lamp {i} is lit.")
        side, _ = store.append(sid, "assistant", f"The lamp {i} flickers.")
        store.add_sibling(sid, side.id, "A moth.")
        sessions.append(sid)
    played = sessions[0]
    store.messages(played)  # the session a player is in: its path kept
    kept = list(store.paths._entries)
    misses = store.paths.misses
    for _ in range(2):
        on_trunk = store.search("lamp", trunk=True, limit=500)
        assert len(on_trunk) == len(sessions) and all(h.on_trunk for h in on_trunk)
        every = store.search("lamp", limit=500)
        assert len(every) == 2 * len(sessions)
        assert {h.node_id for h in every if h.on_trunk} == {h.node_id for h in on_trunk}
    assert list(store.paths._entries) == kept
    assert store.paths.misses == misses
    hits = store.paths.hits
    store.messages(played)
    assert store.paths.hits == hits + 1
    [aside] = store.search("flickers", session_id=played)  # HEAD moved to the moth
    assert not aside.on_trunk


@pytest.mark.parametrize(
    ("content", "query"),
    [("foo-bar-baz here", "foo-bar"), ("foo-bar-baz here", "bar-baz"),
     ("foo-bar-baz here", "Foo-Bar-Baz"), ("foo-bar-baz here", "baz here"),
     ("Öl-Preis-Bremse", "öl-preis"), ("pages 3-4-5", "3-4"), ("see v1.2.3 now", "v1.2.3"),
     ("at example.com/path", "example.com/path")],
)  # fmt: skip
def test_a_hyphenated_word_is_found_inside_a_longer_one(
    store: Store, content: str, query: str
) -> None:
    """PostgreSQL's parser makes ``foo-bar`` a compound the longer ``foo-bar-baz``
    does not hold: the index is asked for its parts, the punctuation checked after;
    a token it keeps whole (a version, a host, a path) is asked for whole."""
    sid = store.create_session().id
    node, _ = store.append(sid, "user", content)
    assert [h.node_id for h in store.search(query)] == [node.id]


@pytest.mark.parametrize("query", ["foo-baz", "bar--baz", "foo bar-here", "baz-foo"])
def test_a_hyphenated_word_keeps_its_punctuation(store: Store, query: str) -> None:
    sid = store.create_session().id
    store.append(sid, "user", "foo-bar-baz here")
    assert store.search(query) == []


def test_sqlite_connections_fold_case_from_the_start(backend: str, store: Store) -> None:
    """clotho_casefold is given to each SQLite connection as it opens (not by each
    search): a connection that never searched has it."""
    if backend != "sqlite":
        pytest.skip("a SQLite function")
    with store.read() as conn:
        assert conn.exec_driver_sql("SELECT clotho_casefold('ÖL Straße')").scalar() == "öl strasse"
