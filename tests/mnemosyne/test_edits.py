"""The edit operations as typed commands (mnemosyne.edits): each model's checks, and a
batch of them applied by the store, on SQLite and PostgreSQL."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from mnemosyne import InvalidOperationError, Store, UnknownNodeError
from mnemosyne.edits import (
    EDITS,
    Checkout,
    EditCommand,
    Graft,
    Inject,
    Prune,
    Rewrite,
    Toggle,
    parse,
)

NODE = "a1b2c3" * 5 + "d4"

#: A valid body of every operation (the test below insists that none is missing).
VALID: dict[str, dict[str, Any]] = {
    "prune": {"node_id": NODE},
    "delete": {"node_id": NODE},
    "restore": {"node_id": NODE},
    "toggle": {"node_id": NODE},
    "checkout": {"node_id": NODE},
    "graft": {"node_id": NODE, "parent_id": NODE},
    "move": {"node_id": NODE, "parent_id": NODE},
    "copy": {"node_id": NODE, "parent_id": NODE, "subtree": True},
    "rewrite": {"node_id": NODE, "content": "new text"},
    "note": {"node_id": NODE, "note": {"text": "Keep it grim.", "depth": 2, "role": "user"}},
    "inject": {
        "parent_id": NODE,
        "role": "system",
        "content": "A storm.",
        "name": "Narrator",
        "delta": [{"op": "inc", "path": "hp", "value": -1}],
    },
}


def test_every_operation_has_a_valid_example_here() -> None:
    assert set(VALID) == set(EDITS)


@pytest.mark.parametrize("op", sorted(EDITS))
def test_an_operation_takes_its_fields(op: str) -> None:
    edit = parse({"op": op, **VALID[op]})
    assert type(edit) is EDITS[op] and edit.op == op
    assert EDITS[op](**VALID[op]) == edit  # op defaults to the class's own


@pytest.mark.parametrize("op", sorted(EDITS))
def test_an_unknown_key_is_refused_by_name(op: str) -> None:
    with pytest.raises(ValidationError, match="colour"):
        EDITS[op](**VALID[op], colour="red")
    with pytest.raises(InvalidOperationError, match=rf"^{op}: colour: Extra inputs"):
        parse({"op": op, **VALID[op], "colour": "red"})
    with pytest.raises(InvalidOperationError, match=rf"^{op}: colour: Extra inputs"):
        EDITS[op].checked(**VALID[op], colour="red")


@pytest.mark.parametrize("op", sorted(EDITS))
def test_a_missing_field_is_refused_by_name(op: str) -> None:
    required = [name for name, f in EDITS[op].model_fields.items() if f.is_required()]
    assert required, f"{op} takes no field"
    for name in required:
        body = {key: value for key, value in VALID[op].items() if key != name}
        with pytest.raises(InvalidOperationError, match=rf"^{op}: {name}: Field required"):
            parse({"op": op, **body})
        with pytest.raises(ValidationError, match=name):
            EDITS[op](**body)


def test_the_fields_are_checked_strictly() -> None:
    refused = {
        "node_id: Value error, node id prefix 'abc' is too short": {
            "op": "prune",
            "node_id": "abc",
        },
        "node_id: Value error, 'not-hex!' is not a node name": {
            "op": "toggle",
            "node_id": "not-hex!",
        },
        "subtree: Input should be a valid boolean": {**VALID["copy"], "op": "copy", "subtree": 1},
        "role: Input should be 'system', 'user' or 'assistant'": {
            **VALID["inject"],
            "op": "inject",
            "role": "narrator",
        },
        "content: Value error, content must not contain NUL": {
            "op": "rewrite",
            "node_id": NODE,
            "content": "a\x00b",
        },
        "delta.0.value: Value error, numbers must be finite": {
            **VALID["inject"],
            "op": "inject",
            "delta": [{"op": "set", "path": "hp", "value": float("nan")}],
        },
        "delta.0.op: Input should be": {
            **VALID["inject"],
            "op": "inject",
            "delta": [{"op": "multiply", "path": "hp", "value": 2}],
        },
    }
    for message, body in refused.items():
        with pytest.raises(InvalidOperationError, match=message):
            parse(body)


def test_an_unknown_operation_names_the_known_ones() -> None:
    with pytest.raises(InvalidOperationError, match=r"op: .*'prune'.*'checkout'"):
        parse({"op": "explode", "node_id": NODE})
    with pytest.raises(InvalidOperationError, match="op: "):
        parse(["not", "an", "object"])


def test_the_commands_are_frozen_values() -> None:
    edit = Prune(node_id=NODE)
    with pytest.raises(ValidationError):
        edit.node = "b" * 32  # type: ignore[misc]
    assert edit == Prune(node_id=NODE) and hash(edit) == hash(Prune(node_id=NODE))
    assert isinstance(edit, EditCommand)


# -- applied by the store ------------------------------------------------------------------


def story(store: Store) -> tuple[str, list[str]]:
    sid = store.create_session().id
    made = []
    for i, text in enumerate(["a", "b", "c", "d"]):
        delta = [{"op": "set", "path": "gold", "value": 5}] if i == 1 else None
        node, _ = store.append(sid, "user" if i % 2 == 0 else "assistant", text, delta=delta)
        made.append(node.id)
    return sid, made


def test_a_batch_is_one_undo_step(store: Store) -> None:
    sid, (a, b, c, _d) = story(store)
    before = store.tree(sid)
    results, session = store.edits(
        sid,
        [
            Rewrite(node_id=a, content="a2"),
            Toggle(node_id=b),
            Prune(node_id=c),
            Inject(parent_id=a, role="system", content="(a note)"),
        ],
        expected_version=before.session.version,
    )
    assert [r.action for r in results] == ["rewrite", "toggle", "prune", "inject"]
    assert session.version == before.session.version + 1
    assert [e.action for e in store.history(sid)] == ["batch"]
    store.undo(sid)
    assert store.tree(sid).nodes == before.nodes


def test_a_batch_with_one_refused_operation_changes_nothing(store: Store) -> None:
    sid, (a, b, _c, d) = story(store)
    store.edit(sid, Rewrite(node_id=a, content="a, once"))
    before, history = store.tree(sid), store.history(sid)
    batch = [
        Rewrite(node_id=b, content="changed"),
        Toggle(node_id=b),
        Graft(node_id=a, parent_id=d),  # a cycle
        Prune(node_id=d),
    ]
    with pytest.raises(InvalidOperationError, match="cycle") as refused:
        store.edits(sid, batch)
    assert refused.value.operation == 2  # type: ignore[attr-defined]
    with pytest.raises(UnknownNodeError) as unknown:
        store.edits(sid, [Toggle(node_id=b), Prune(node_id="ffffff")])
    assert unknown.value.operation == 1  # type: ignore[attr-defined]
    assert store.tree(sid) == before
    assert store.history(sid) == history


def test_checkout_moves_head_and_undo_brings_it_back_with_the_batch(store: Store) -> None:
    sid, (a, b, c, d) = story(store)
    result, session = store.edit(sid, Checkout(node_id=b))
    assert (result.action, result.node_id, result.head_id, result.head_moved) == (
        "checkout",
        b,
        b,
        True,
    )
    assert session.head_id == b and store.history(sid) == []  # not an undo step alone
    assert store.edit(sid, Checkout(node_id=b))[0].head_moved is False
    results, session = store.edits(sid, [Checkout(node_id=d), Rewrite(node_id=a, content="A")])
    assert session.head_id == d and [r.action for r in results] == ["checkout", "rewrite"]
    store.undo(sid)
    assert store.session(sid).head_id == b and store.node(sid, a).content == "a"
    store.edit(sid, Prune(node_id=c))
    with pytest.raises(InvalidOperationError, match="in a fragment"):
        store.edit(sid, Checkout(node_id=d))


def test_commands_checked_from_loose_values_refuse_bad_fields_as_refused_edits(
    store: Store,
) -> None:
    sid, (a, *_rest) = story(store)
    before = store.tree(sid)
    nul = r"content: .*NUL"
    with pytest.raises(InvalidOperationError, match=nul), store.transaction(sid) as tx:
        tx.apply(Rewrite.checked(node_id=a, content="a\x00"))
    with pytest.raises(InvalidOperationError, match="role"), store.transaction(sid) as tx:
        tx.apply(Inject.checked(parent_id=a, role="narrator", content="text"))
    assert store.tree(sid) == before
