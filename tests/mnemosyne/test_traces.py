"""PromptTraces: stored by reference, rebuilt exactly, checked against their hash."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from sqlalchemy import func, select

from mnemosyne import InvalidOperationError, Message, Store
from mnemosyne._schema import blobs, traces
from mnemosyne.edits import Delete, Rewrite, Toggle
from mnemosyne.traces import _sent_json, canonical_json, history_message, messages_hash

SYSTEM = {"role": "system", "content": "You are the game master of a grim little valley."}


def grow(store: Store, sid: str, turns: int) -> None:
    for i in range(turns):
        store.append(sid, "user", f"I walk north ({i}).")
        store.append(sid, "assistant", f"The road goes on ({i}).")


def prompt(store: Store, sid: str, tail: str = "state: hp 10") -> tuple[list[Any], list[Any], Any]:
    history = store.messages(sid)
    messages = [SYSTEM, *({"role": m.role, "content": m.content} for m in history)]
    messages.append({"role": "system", "content": tail})
    sources = [None, *range(len(history)), None]
    return messages, sources, history


def generate(store: Store, sid: str, **kwargs: Any) -> tuple[str, list[Any]]:
    messages, sources, history = prompt(store, sid, **kwargs)
    with store.transaction(sid) as tx:
        reply = tx.append("assistant", "A wolf howls.")
        tx.put_trace(
            reply.id,
            messages=messages,
            sources=sources,
            history=history,
            document={"model": "openai/gm", "system": tx.put_blob("a long template")},
        )
    return reply.id, messages


def test_a_trace_rebuilds_exactly_what_was_sent(store: Store) -> None:
    sid = store.create_session().id
    grow(store, sid, 5)
    store.append(sid, "user", 'Ünïcode & "quotes" — fine?')
    node, sent = generate(store, sid)
    trace = store.trace(sid, node)
    assert trace is not None
    assert trace.messages == sent
    assert trace.verified and not trace.problems
    assert trace.messages_hash == messages_hash(sent)
    assert trace.document["model"] == "openai/gm"
    assert store.dump(sid).blobs[trace.document["system"]] == "a long template"
    # the history is one reference, the two other messages blobs
    assert [next(iter(part)) for part in trace.parts] == ["blob", "run", "blob"]


def test_a_node_that_was_not_generated_has_no_trace(store: Store) -> None:
    sid = store.create_session().id
    node, _ = store.append(sid, "user", "hello")
    assert store.trace(sid, node.id) is None


def test_storage_per_trace_does_not_grow_with_depth(store: Store) -> None:
    sid = store.create_session().id
    sizes = []
    for depth in (5, 60):
        grow(store, sid, depth)
        generate(store, sid)
        with store.read() as conn:
            sizes.append(
                conn.execute(select(func.max(func.length(traces.c.messages)))).scalar_one()
            )
    assert sizes[1] - sizes[0] <= 2  # the same three parts (the count has more digits)
    with store.read() as conn:
        # the system prompt and the template are stored once; the tails are equal too
        assert conn.execute(select(func.count()).select_from(blobs)).scalar_one() == 3


def test_an_edit_in_place_since_is_reported(store: Store) -> None:
    sid = store.create_session().id
    grow(store, sid, 3)
    old = store.messages(sid)[2]
    node, _ = generate(store, sid)
    store.edit(sid, Rewrite(node_id=old.id, content="I walk south instead."))
    trace = store.trace(sid, node)
    assert trace is not None and not trace.verified
    assert "edited in place" in trace.problems[0]
    store.undo(sid)
    trace = store.trace(sid, node)
    assert trace is not None and trace.verified


def test_a_toggled_message_since_is_reported(store: Store) -> None:
    sid = store.create_session().id
    grow(store, sid, 3)
    old = store.messages(sid)[3]
    node, _ = generate(store, sid)
    store.edit(sid, Toggle(node_id=old.id))
    trace = store.trace(sid, node)
    assert trace is not None and not trace.verified
    assert "5 enabled messages, not the 6 sent" in trace.problems[0]


def test_gaps_in_the_sources_make_separate_runs(store: Store) -> None:
    sid = store.create_session().id
    grow(store, sid, 3)
    history = store.messages(sid)
    sent = [{"role": m.role, "content": m.content} for m in history]
    sent.insert(3, {"role": "system", "content": "[lore at depth 3]"})
    sources = [0, 1, 2, None, 4, 5]  # history[3] left out
    del sent[4]
    with store.transaction(sid) as tx:
        reply = tx.append("assistant", "ok")
        tx.put_trace(reply.id, messages=sent, sources=sources, history=history, document={})
    trace = store.trace(sid, reply.id)
    assert trace is not None and trace.verified and trace.messages == sent
    assert [next(iter(part)) for part in trace.parts] == ["run", "blob", "run"]


def test_replies_sent_with_their_speakers_name_are_kept_as_named_runs(store: Store) -> None:
    sid = store.create_session().id
    store.append(sid, "user", "Who is there?", name="Player")
    store.append(sid, "assistant", "Only me.", name="Bram")
    store.append(sid, "system", "Cora joins the scene.")
    store.append(sid, "assistant", "And me.", name="Cora")
    history = store.messages(sid)
    sent = [history_message(m, named=True) for m in history]
    assert [m["content"] for m in sent] == [
        "Who is there?",
        "Bram: Only me.",
        "Cora joins the scene.",
        "Cora: And me.",
    ]
    with store.transaction(sid) as tx:
        reply = tx.append("assistant", "ok")
        tx.put_trace(
            reply.id, messages=sent, sources=[0, 1, 2, 3], history=history, document={}, named=True
        )
    trace = store.trace(sid, reply.id)
    assert trace is not None and trace.verified and trace.messages == sent
    assert trace.parts == [{"run": [history[0].id, history[3].id, 4], "named": True}]
    # sent without names, the same history is no named run: a reply's text alone differs
    with store.transaction(sid) as tx:
        other = tx.append("assistant", "ok")
        tx.put_trace(other.id, messages=sent, sources=[0, 1, 2, 3], history=history, document={})
    trace = store.trace(sid, other.id)
    assert trace is not None and trace.verified
    assert [next(iter(part)) for part in trace.parts] == ["run", "blob", "run", "blob"]


def test_a_message_that_differs_from_its_source_is_kept_whole(store: Store) -> None:
    sid = store.create_session().id
    grow(store, sid, 1)
    history = store.messages(sid)
    sent = [{"role": "user", "content": "Tom: " + history[0].content}, {"role": "assistant"}]
    sent[1]["content"] = history[1].content
    with store.transaction(sid) as tx:
        reply = tx.append("assistant", "ok")
        tx.put_trace(reply.id, messages=sent, sources=[0, 1], history=history, document={})
    trace = store.trace(sid, reply.id)
    assert trace is not None and trace.verified and trace.messages == sent
    assert [next(iter(part)) for part in trace.parts] == ["blob", "run"]


def test_purging_a_generated_node_removes_its_trace(store: Store) -> None:
    sid = store.create_session().id
    grow(store, sid, 1)
    node, _ = generate(store, sid)
    store.edit(sid, Delete(node_id=node))
    store.purge(sid)
    with store.read() as conn:
        assert conn.execute(select(func.count()).select_from(traces)).scalar_one() == 0


@pytest.mark.parametrize(
    ("messages", "sources", "error"),
    [
        ([SYSTEM], [], "one source per message"),
        ([SYSTEM], [7], "not an index"),
        (["text"], [None], "must be an object"),
    ],
)
def test_a_malformed_trace_is_refused_and_nothing_is_stored(
    store: Store, messages: list[Any], sources: list[Any], error: str
) -> None:
    sid = store.create_session().id
    grow(store, sid, 1)
    before = store.session(sid)
    history = store.messages(sid)
    with pytest.raises(InvalidOperationError, match=error), store.transaction(sid) as tx:
        reply = tx.append("assistant", "lost")
        tx.put_trace(reply.id, messages=messages, sources=sources, history=history, document={})
    assert store.session(sid) == before
    assert len(store.messages(sid)) == 2


def test_a_node_has_one_trace(store: Store) -> None:
    sid = store.create_session().id
    grow(store, sid, 1)
    node, _ = generate(store, sid)
    messages, sources, history = prompt(store, sid)
    with pytest.raises(InvalidOperationError, match="already has a trace"):  # noqa: SIM117
        with store.transaction(sid) as tx:
            tx.put_trace(node, messages=messages, sources=sources, history=history, document={})


TRICKY = [
    'Ünïcode & "quotes" — fine?',
    "a\\backslash, a\ttab, a\nnewline and \x01 a control character",
    "emoji 🐉 and a lone </script>",
    "",
]


def test_the_hash_is_of_exactly_the_messages_sent_turn_after_turn(store: Store) -> None:
    """The hash is taken piece by piece, each history message's canonical JSON kept on
    the (shared, read-only) message from one turn to the next: it must stay the hash of
    the canonical JSON of the whole list, whatever the texts and however the prompt
    mixes history, other messages and history messages sent otherwise."""
    sid = store.create_session().id
    for text in TRICKY:
        store.append(sid, "user", text)
        store.append(sid, "assistant", text[::-1])
    for turn in range(3):
        history = store.messages(sid)  # the same Message objects each turn (kept)
        sent: list[Any] = [SYSTEM]
        sources: list[Any] = [None]
        for index, message in enumerate(history):
            if index == 3:  # sent otherwise: an extra key, so not a reference
                sent.append({"role": message.role, "content": message.content, "name": "Tom"})
            else:
                sent.append({"role": message.role, "content": message.content})
            sources.append(index)
            if index == 5:
                sent.append({"role": "system", "content": f"[lore {turn}] 🐉"})
                sources.append(None)
        sent.append({"content": "state: ünï", "role": "system"})
        sources.append(None)
        with store.transaction(sid) as tx:
            reply = tx.append("assistant", f"reply {turn}")
            digest = tx.put_trace(
                reply.id, messages=sent, sources=sources, history=history, document={}
            )
        assert digest == messages_hash(sent)
        trace = store.trace(sid, reply.id)
        assert trace is not None and trace.verified and trace.messages == sent
        assert trace.messages_hash == digest
        kinds = [next(iter(part)) for part in trace.parts]
        assert kinds == ["blob", "run", "blob", "run", "blob", "run", "blob"]
        store.checkout(sid, history[-1].id)


@given(
    content=st.text(alphabet=st.characters(exclude_categories=["Cs"]), max_size=40),
    role=st.sampled_from(["system", "user", "assistant"]),
)
def test_a_history_message_is_hashed_as_its_canonical_json(content: str, role: str) -> None:
    """Each history message's piece of the hash is spelled out by hand (it is kept on
    the message): it must be exactly the canonical JSON of the message sent."""
    message = Message("0" * 32, role, None, content)  # type: ignore[arg-type]
    expected = canonical_json(history_message(message)).encode("utf-8")
    assert _sent_json(message) == expected
    assert _sent_json(message) is _sent_json(message)  # computed once
