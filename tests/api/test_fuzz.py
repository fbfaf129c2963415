"""A schemathesis pass over the API's OpenAPI schema: whatever a client sends, the answer
is never a 500, and every documented answer matches its schema.

One app over one SQLite store for the module; each operation's test seeds fresh
sessions (a branching story with state and a lorebook, an empty one, one in the trash,
one with a fragment and a deleted subtree) and its generated requests use their real
ids (whole or as prefixes, in paths, queries and bodies) most of the time, so they get
past the 404s. Uploads and edit batches are mostly shaped like the real thing, and the
version headers (not in the schema) are sent right and wrong. Turns are played against a
model server on loopback that answers anything.

CLOTHO_FUZZ_EXAMPLES=300 runs more examples, new ones each run (to hunt, not for CI).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.python import asgi
from schemathesis.specs.openapi.checks import response_schema_conformance

from clotho import lore
from clotho.api import create_app
from mnemosyne import Store
from mnemosyne.edits import EDITS, Delete, Prune
from orchestrator.loopback import ModelServer

from .conftest import TOKEN, api_settings

AUTH = {"Authorization": f"Bearer {TOKEN}"}
# Examples per operation (each a positive or a negative case), the same every run;
# CLOTHO_FUZZ_EXAMPLES=500 digs deeper, with new examples each run.
DEEPER = os.environ.get("CLOTHO_FUZZ_EXAMPLES", "")
EXAMPLES = int(DEEPER) if DEEPER.isdigit() else 12
NODE_FIELDS = frozenset({"node_id", "parent_id"})
NODE_QUERIES = frozenset({"node_id", "from_id", "to_id", "head_id"})
BOOK = {
    "entries": {
        "0": {"uid": 0, "key": ["goblin"], "content": "Goblins hate light.", "comment": "g"},
        "1": {"uid": 1, "key": [], "content": "Always.", "constant": True},
    }
}

# The token is sent with every request: the fuzzing is of what comes with it.
CONFIG = schemathesis.Config.from_dict({"generation": {"with-security-parameters": False}})
schemathesis.serializer.alias("application/jsonl", "application/octet-stream")


def gm(request: dict[str, Any]) -> str:
    """A model that answers anything: no state change, or a line of story."""
    if "response_format" in request:
        return '{"operations": []}'
    return "The wind howls."


def seed(store: Store) -> list[str]:
    """Fresh sessions worth fuzzing; their ids."""
    story = store.create_session(title="Eldoria").id
    store.append(story, "system", "You narrate.")
    store.append(story, "user", "I attack the goblin.", name="Tom")
    hit, _ = store.append(
        story, "assistant", "You hit.", delta=[{"op": "set", "path": "hp", "value": 90}]
    )
    store.add_sibling(story, hit.id, "You miss.")
    store.checkout(story, hit.id)
    store.append(story, "user", "I run.")
    lore.import_lorebook(store, story, json.dumps(BOOK).encode(), "goblins")
    empty = store.create_session(title="empty").id
    trashed = store.create_session(title="old").id
    store.append(trashed, "user", "hello")
    store.trash_session(trashed)
    edited = store.create_session(title="edited").id
    root, _ = store.append(edited, "user", "one")
    two, _ = store.append(edited, "assistant", "two")
    three, _ = store.append(edited, "user", "three")
    with store.transaction(edited) as tx:
        tx.apply(Prune(node_id=three.id))
    store.checkout(edited, root.id)
    with store.transaction(edited) as tx:
        tx.apply(Delete(node_id=two.id))
    return [story, empty, trashed, edited]


class Ids:
    """The sessions of the current test's seed; their nodes are read at each draw (the
    requests change them)."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.sessions: list[str] = []

    def nodes(self, session: str) -> tuple[list[str], list[str]]:
        """The session's nodes in the tree, and the tops of its fragments and trash."""
        try:
            placed = [node.id for node in self.store.tree(session).nodes]
            tops = [
                subtree[0].id
                for subtrees in (self.store.fragments(session), self.store.trash(session))
                for subtree in subtrees
            ]
        except Exception:  # noqa: BLE001 - purged by a request
            return [], []
        return placed, tops


def ref(draw: st.DrawFn, pool: list[str]) -> str:
    """One of the ids, as a client may write it: whole, a 6-character prefix, or upper
    case. (The draws do not depend on the pool, which the requests change: hypothesis
    wants the same choices to make the same draws.)"""
    full = pool[draw(st.integers(0, 999)) % len(pool)]
    return [full, full[:6], full[:10].upper()][draw(st.integers(0, 2))]


NODE_ROUTE = "/api/sessions/{session_id}/nodes/{node_id}"


@st.composite
def realized(draw: st.DrawFn, case: schemathesis.Case, ids: Ids) -> schemathesis.Case:
    """``case`` with, mostly, the ids of one seeded session and of its nodes in place of
    the generated ones (in its path, query and body)."""
    if draw(st.integers(0, 4)) == 4:  # (hypothesis favours small numbers: 0 is real ids)
        return case
    session = ids.sessions[draw(st.integers(0, len(ids.sessions) - 1))]
    placed, tops = ids.nodes(session)

    def node_ref(detached: bool = True) -> str:
        return ref(draw, (placed + tops if detached else placed) or ["0" * 32])

    def body(value: Any) -> Any:
        if isinstance(value, list):
            return [body(item) for item in value]
        if not isinstance(value, dict):
            return value
        return {
            key: node_ref() if key in NODE_FIELDS and draw(st.integers(0, 3)) < 3 else body(item)
            for key, item in value.items()
        }

    header = draw(st.sampled_from([None, None, None, "If-Match", "If-None-Match"]))
    if header is not None:  # not in the schema: the version headers, right and wrong
        case.headers = {**(case.headers or {}), header: draw(VERSION_TAGS)}
    if isinstance(case.path_parameters, dict):
        params = dict(case.path_parameters)
        if "session_id" in params:
            params["session_id"] = ref(draw, [session])
        if "node_id" in params:
            params["node_id"] = node_ref(detached=True)
        case.path_parameters = params
    if isinstance(case.query, dict):
        case.query = {
            key: node_ref() if key in NODE_QUERIES and draw(st.integers(0, 3)) < 3 else value
            for key, value in case.query.items()
        }
    if isinstance(case.body, (dict, list)):
        case.body = body(case.body)
    return case


VERSION_TAGS = st.one_of(
    st.integers(0, 12).map(lambda n: f'"{n}"'),
    st.sampled_from(["*", 'W/"1"', '"1", "2"', "1", '""', '"-1"', '"99999999999999999999"']),
    st.text(st.characters(min_codepoint=32, max_codepoint=255), max_size=12).map(str.strip),
    st.text(st.sampled_from("0123456789\xb2\xb9"), min_size=1, max_size=6000).map(
        lambda digits: f'"{digits}"'
    ),
)
JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner),
    max_leaves=12,
)
TEXTS = st.text(max_size=30)


def _chat() -> st.SearchStrategy[bytes]:
    message = st.fixed_dictionaries(
        {"mes": st.one_of(TEXTS, JSON)},
        optional={
            "name": st.one_of(TEXTS, JSON),
            "is_user": st.one_of(st.booleans(), JSON),
            "is_system": st.booleans(),
            "swipes": st.one_of(st.lists(TEXTS, max_size=3), JSON),
            "swipe_id": st.one_of(st.integers(-1, 3), JSON),
            "swipe_info": st.one_of(st.lists(st.dictionaries(TEXTS, JSON), max_size=3), JSON),
            "extra": JSON,
        },
    )
    header = st.fixed_dictionaries(
        {"user_name": TEXTS, "character_name": TEXTS},
        optional={"chat_metadata": st.one_of(st.dictionaries(TEXTS, JSON), JSON)},
    )
    lines = st.tuples(header, st.lists(st.one_of(message, JSON), max_size=5))
    return lines.map(
        lambda parts: "\n".join(json.dumps(line) for line in [parts[0], *parts[1]]).encode()
    )


def _book() -> st.SearchStrategy[bytes]:
    entry = st.fixed_dictionaries(
        {},
        optional={
            "uid": st.one_of(st.integers(), JSON),
            "key": st.one_of(st.lists(TEXTS, max_size=3), JSON),
            "keysecondary": st.one_of(st.lists(TEXTS, max_size=2), JSON),
            "content": st.one_of(TEXTS, JSON),
            "comment": st.one_of(TEXTS, JSON),
            "constant": st.one_of(st.booleans(), JSON),
            "disable": st.one_of(st.booleans(), JSON),
            "order": st.one_of(st.integers(), JSON),
            "position": st.one_of(st.integers(), JSON),
            "selective": st.one_of(st.booleans(), JSON),
        },
    )
    entries = st.one_of(st.dictionaries(st.integers(0, 9).map(str), entry, max_size=3), JSON)
    book = st.one_of(st.fixed_dictionaries({"entries": entries}), JSON)
    return book.map(lambda value: json.dumps(value).encode())


def _card() -> st.SearchStrategy[bytes]:
    data = st.fixed_dictionaries(
        {"name": st.one_of(TEXTS, JSON)},
        optional={
            "description": st.one_of(TEXTS, JSON),
            "first_mes": st.one_of(TEXTS, JSON),
            "alternate_greetings": st.one_of(st.lists(TEXTS, max_size=2), JSON),
            "character_book": st.one_of(
                st.fixed_dictionaries({"entries": st.lists(st.dictionaries(TEXTS, JSON))}), JSON
            ),
        },
    )
    card = st.one_of(
        st.fixed_dictionaries(
            {"spec": st.sampled_from(["chara_card_v2", "chara_card_v3", "x"]), "data": data}
        ),
        data,
        JSON,
    )
    return card.map(lambda value: json.dumps(value).encode())


def _edits() -> st.SearchStrategy[dict[str, Any]]:
    """Editor batches with the fields each operation needs (the ids, placeholders here,
    become real ones in ``realized``)."""

    def operation(op: str) -> st.SearchStrategy[dict[str, Any]]:
        values = {
            "node_id": st.just("000000"),
            "parent_id": st.just("000000"),
            "role": st.sampled_from(["user", "assistant", "system"]),
            "content": TEXTS,
            "note": st.one_of(  # the author's note: some out of bounds, refused (422)
                st.none(),
                st.fixed_dictionaries(
                    {"text": TEXTS},
                    optional={
                        "depth": st.integers(-2, 1002),
                        "position": st.sampled_from(["in_chat", "after_story", "top"]),
                        "interval": st.integers(-1, 5),
                        "role": st.sampled_from(["system", "user", "assistant", "narrator"]),
                    },
                ),
            ),
        }
        fields = EDITS[op].model_fields
        needed = [name for name, field in fields.items() if field.is_required()]
        return st.fixed_dictionaries(
            {"op": st.just(op), **{name: values[name] for name in needed}},
            optional={"subtree": st.booleans()} if "subtree" in fields else {},
        )

    ops = st.sampled_from(sorted(EDITS)).flatmap(operation)
    return st.fixed_dictionaries({"operations": st.lists(ops, min_size=1, max_size=3)})


def _tree(store: Store, ids: Ids) -> st.SearchStrategy[bytes]:
    """A real tree file (exported from a seeded session), or one with a field changed."""

    def build(choice: tuple[int, int, Any]) -> bytes:
        which, change, value = choice
        from clotho.formats.treefile import export_tree

        try:
            document = export_tree(store, ids.sessions[which % len(ids.sessions)])
        except Exception:  # noqa: BLE001 - purged by a request
            document = {}
        if change and document:
            keys = sorted(document)
            document[keys[change % len(keys)]] = value
        return json.dumps(document).encode()

    return st.tuples(st.integers(0, 99), st.integers(0, 99), JSON).map(build)


def _operations() -> list[str]:
    """Every operation of the schema, as "METHOD /path" (read once, at collection)."""
    spec = create_app(api_settings(Path("/nonexistent")), token=TOKEN).openapi()
    return [f"{m.upper()} {p}" for p, ops in spec["paths"].items() for m in ops]


@pytest.fixture(scope="module")
def model() -> Iterator[ModelServer]:
    with ModelServer(gm) as server:
        yield server


@pytest.fixture(scope="module")
def fuzzed(
    tmp_path_factory: pytest.TempPathFactory, model: ModelServer
) -> Iterator[tuple[Any, Store, Ids]]:
    """The schema of one app over one store, with hooks that put real ids in requests."""
    folder = tmp_path_factory.mktemp("fuzz")
    with Store.open(f"sqlite:///{folder / 'fuzz.db'}", migrate=True) as store:
        given_settings = {"model": "openai/gm", "api_base": model.url, "api_key": "x"}
        app = create_app(api_settings(folder, **given_settings), store=store, token=TOKEN)
        loaded = schemathesis.openapi.from_asgi("/openapi.json", app, config=CONFIG)
        ids = Ids(store)
        uploads = {
            "/api/imports/chat": _chat(),
            "/api/imports/tree": _tree(store, ids),
            "/api/sessions/{session_id}/imports/lorebook": _book(),
            "/api/sessions/{session_id}/imports/card": _card(),
            "/api/sessions/{session_id}/edits": _edits(),
        }

        @loaded.hook("flatmap_body")
        def upload(context: Any, body: Any) -> st.SearchStrategy[Any]:
            """Uploads (and edit batches): mostly shaped like the real thing, or as
            generated."""
            path = context.operation.path if context.operation is not None else ""
            if path in uploads:
                return st.one_of(uploads[path], uploads[path], st.just(body))
            return st.just(body)

        @loaded.hook("flatmap_case")
        def real_ids(context: Any, case: schemathesis.Case) -> st.SearchStrategy[Any]:
            return realized(case, ids)

        yield loaded, store, ids
        # Stop the app and the event loop schemathesis ran it in (with what the turns
        # left there, litellm's logging task) now, not at exit, after other tests.
        asgi._shutdown()


# The app runs in schemathesis's event-loop thread, where what a turn leaves running
# (litellm's callbacks, the SDK) may use `random` while hypothesis draws the next case.
@pytest.mark.filterwarnings(
    "ignore:Do not use the .random. module inside strategies"
    ":hypothesis.errors.HypothesisDeprecationWarning"
)
@pytest.mark.parametrize("label", _operations())
def test_never_a_server_error(
    fuzzed: tuple[Any, Store, Ids], label: str, events_end_at_once: None
) -> None:
    """Valid and invalid requests to every operation: no 500, and the documented
    responses match their schema (a stream of a session's events ends after what it
    has)."""
    loaded, store, ids = fuzzed
    ids.sessions = seed(store)
    method, path = label.split(" ", 1)
    operation = loaded[path][method]
    cases = st.one_of(
        operation.as_strategy(GenerationMode.POSITIVE),
        operation.as_strategy(GenerationMode.NEGATIVE),
    )

    @given(case=cases)
    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        suppress_health_check=list(HealthCheck),
        derandomize=not DEEPER,
        database=None,
    )
    def fuzz(case: schemathesis.Case) -> None:
        case.call_and_validate(
            headers=AUTH, checks=[not_a_server_error, response_schema_conformance]
        )

    fuzz()


NASTY_TAGS = [
    '"\xb2"',
    '"1\xb9"',
    '"' + "9" * 5000 + '"',
    '"99999999999999999999"',
    '"-1"',
    "W/",
    ",",
]


def test_version_headers_are_never_a_server_error(fuzzed: tuple[Any, Store, Ids]) -> None:
    """The headers the schema does not list: odd digits (``"²".isdigit()``), numbers too
    long for ``int()``, lists and empty tags are refused (400) or ignored, never a 500."""
    loaded, store, _ = fuzzed
    sid = seed(store)[0]
    write = loaded["/api/sessions/{session_id}/messages"]["POST"]
    read = loaded["/api/sessions/{session_id}/tree"]["GET"]
    for header in ("If-Match", "If-None-Match"):
        for tag in NASTY_TAGS:
            cases = [
                write.Case(
                    path_parameters={"session_id": sid},
                    headers={header: tag},
                    body={"role": "user", "content": "hello"},
                ),
                read.Case(path_parameters={"session_id": sid}, headers={header: tag}),
            ]
            for case in cases:
                response = case.call_and_validate(
                    headers=AUTH, checks=[not_a_server_error, response_schema_conformance]
                )
                assert response.status_code in (200, 201, 304, 400, 412), response.text


def _call(loaded: Any, path: str, method: str, **given: Any) -> Any:
    case = loaded[path][method].Case(**given)
    return case.call_and_validate(headers=AUTH, checks=[not_a_server_error])


DEEP_NUMBER = (
    '{"role": "user", "content": "x", '
    '"delta": [{"op": "set", "path": "hp", "value": [1, {"deep": NUMBER}]}]}'
)


def test_nan_and_infinity_in_a_delta_are_refused(fuzzed: tuple[Any, Store, Ids]) -> None:
    """Python's JSON reads NaN and Infinity; stored, they would break every response
    that shows them (no JSON document can hold them). They are refused, naming where."""
    loaded, store, _ = fuzzed
    sid = seed(store)[0]
    head = store.session(sid).head_id
    for number in ("NaN", "Infinity", "-Infinity"):
        body = DEEP_NUMBER.replace("NUMBER", number)
        refused = _call(
            loaded,
            "/api/sessions/{session_id}/messages",
            "POST",
            path_parameters={"session_id": sid},
            body=body.encode(),
            media_type="application/json",
        )
        assert refused.status_code == 422, refused.text
        assert "body.delta.0.value" in refused.json()["detail"]
    session = store.session(sid)
    assert session.head_id == head
    state = _call(
        loaded, "/api/sessions/{session_id}/state", "GET", path_parameters={"session_id": sid}
    )
    assert state.status_code == 200


def test_nan_in_a_chat_is_refused(fuzzed: tuple[Any, Store, Ids]) -> None:
    loaded, _, _ = fuzzed
    chat = b'{"user_name": "a", "character_name": "b", "chat_metadata": {"x": Infinity}}\n'
    chat += b'{"mes": "hi", "is_user": true, "extra": NaN}\n'
    refused = _call(loaded, "/api/imports/chat", "POST", body=chat)
    assert refused.status_code == 422, refused.text


def test_a_detached_node_is_shown(fuzzed: tuple[Any, Store, Ids]) -> None:
    """The top of a pruned fragment and of a deleted subtree, read as nodes."""
    loaded, store, ids = fuzzed
    edited = seed(store)[3]
    _, tops = ids.nodes(edited)
    assert len(tops) == 2
    for top in tops:
        shown = _call(
            loaded,
            NODE_ROUTE,
            "GET",
            path_parameters={"session_id": edited, "node_id": top},
        )
        assert shown.status_code == 200, shown.text
        assert shown.json()["siblings"] == [top]
