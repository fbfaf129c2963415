"""Store.search: full-text search over every branch, on SQLite (FTS5) and PostgreSQL."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from alembic import command
from alembic.config import Config

from mnemosyne import InvalidOperationError, NodeRecord, Store, UnknownSessionError
from mnemosyne._engine import MIGRATIONS, upgrade
from mnemosyne._search import MAX_QUERY_LENGTH, snippet
from mnemosyne.edits import Delete, Prune, Rewrite, Toggle


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
    ['"', 'say "hi', "lamp*", "NEAR(a b)", "-lamp", "a OR b", "col:umn", "(", "^x", "AND"],
)
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
        store.append(sid, "user", "A keeper written before the upgrade.")
        upgrade(engine)
        assert len(store.search("keeper")) == 2
        assert store.search("lighthouse")[0].node_id == node.id


def test_snippet_offsets_hold_after_a_letter_that_lowers_longer() -> None:
    shown, matches = snippet("İİİ wyvern here", ["WYVERN"])
    assert [shown[a:b] for a, b in matches] == ["wyvern"]
    assert matches == ((4, 10),)
