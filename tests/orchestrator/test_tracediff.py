"""Compare two moments (orchestrator.tracediff): real turns against the loopback model,
committed to SQLite and PostgreSQL, then their traces compared."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import pytest

from mnemosyne import ForeignNodeError, Store
from orchestrator import Character, Engine, ModelConfig, TurnSetup, build_engine
from orchestrator.loopback import ModelServer
from orchestrator.tracediff import (
    WORD_CELLS,
    NotGeneratedError,
    WordChange,
    diff_traces,
    load_traced,
    trace_diff,
    word_diff,
)
from planner.lore import LorePlanner

from .test_lore_turn import BOOK
from .test_turn import HIT, NOTHING, SCHEMA, Scripted, play


def lore_engine(store: Store, server: ModelServer, **params: Any) -> Engine:
    """The game master of tests/orchestrator/test_lore_turn.py, with sampler ``params``."""
    setup = TurnSetup(
        model=ModelConfig("openai/gm", api_base=server.url, retries=0, params=params),
        character=Character(name="Seraphina", description="A forest guardian."),
        player="Hero",
    )
    return build_engine(
        store, setup, planner=lambda call: LorePlanner([BOOK], seed=7, plan_call=call)
    )


@dataclass(frozen=True)
class Moments:
    """A small story's generated nodes: ``first`` (a goblin attacks, the hero loses 10
    hp), ``reroll`` (its sibling, at temperature 1.0), ``fork`` (the reply to the
    player's first message edited: a dragon, not a goblin), ``later`` (the next turn
    after ``fork``, a long way from ``first``) and the player's edited message ``user``."""

    session_id: str
    first: str
    reroll: str
    fork: str
    later: str
    user: str


def played_story(store: Store, server_for: Callable[[Any], ModelServer]) -> Moments:
    """Plays the turns of :class:`Moments` against a scripted model on loopback."""
    sid = store.create_session(schema=SCHEMA).id
    server = server_for(
        Scripted(
            ["The goblin cuts you.", "The goblin misses.", "A shadow passes.", "Wind."],
            [HIT, NOTHING, HIT, NOTHING],
        )
    )
    first = play(lore_engine(store, server, temperature=0.7), sid, "say", text="A goblin attacks!")
    reroll = play(lore_engine(store, server, temperature=1.0), sid, "reroll")
    assert first.user_node is not None
    fork = play(
        lore_engine(store, server, temperature=0.7),
        sid,
        "edit",
        node=first.user_node.id,
        text="A dragon attacks!",
    )
    later = play(lore_engine(store, server, temperature=0.7), sid, "say", text="I keep walking.")
    assert fork.user_node is not None
    return Moments(
        sid, first.node.id, reroll.node.id, fork.node.id, later.node.id, fork.user_node.id
    )


@pytest.fixture
def moments(store: Store, serve: Callable[..., ModelServer]) -> Moments:
    return played_story(store, serve)


def test_two_rerolls_differ_in_their_settings_and_tokens_only(
    store: Store, moments: Moments
) -> None:
    diff = trace_diff(store, moments.session_id, moments.first, moments.reroll)
    assert [pair.status for pair in diff.messages] == ["equal"] * len(diff.messages)
    assert diff.messages[-1].a == "A goblin attacks!"
    assert [(c.name, c.a, c.b) for c in diff.settings] == [("params.temperature", 0.7, 1.0)]
    assert diff.lore and all(c.status == "both" and not c.reason_changed for c in diff.lore)
    assert diff.state == []  # both started from the player's message
    assert diff.a.kind == "say" and diff.b.kind == "reroll"
    assert diff.a.delta[0] == {"op": "inc", "path": "hp", "value": -10}
    tokens = diff.tokens
    assert tokens["a"].prompt == tokens["b"].prompt and tokens["difference"].prompt == 0
    assert diff.summary().startswith("same messages, lore: +0 -0, temperature 0.7 -> 1.0, ")
    assert "same starting state" in diff.summary()


def test_an_edit_changes_the_players_message_word_by_word_and_the_lore(
    store: Store, moments: Moments
) -> None:
    diff = trace_diff(store, moments.session_id, moments.first, moments.fork)
    changed = [pair for pair in diff.messages if pair.status == "changed"]
    assert [(p.role, p.a, p.b) for p in changed] == [
        ("user", "A goblin attacks!", "A dragon attacks!")
    ]
    assert [(w.op, w.text) for w in changed[0].words] == [
        ("equal", "A "),
        ("removed", "goblin"),
        ("added", "dragon"),
        ("equal", " attacks!"),
    ]
    # "Goblins fear fire." left the prompt; the dragon's entry, placed at a depth, came in
    assert [p.b for p in diff.messages if p.status == "added"] == [
        "The dragon sleeps under the mountain."
    ]
    assert any("Goblins fear fire." in (p.a or "") for p in diff.messages if p.status == "removed")
    lore = {c.id: c for c in diff.lore}
    assert lore["valley:1"].status == "only_a" and "goblin" in (lore["valley:1"].reason_a or "")
    assert lore["valley:2"].status == "only_b" and "dragon" in (lore["valley:2"].reason_b or "")
    assert lore["valley:0"].status == "both" and lore["valley:0"].reason_a == "constant"
    assert diff.counts()["lore_added"] == 1 and diff.counts()["lore_removed"] == 1
    assert "1 message changed" in diff.summary() and "lore: +1 -1" in diff.summary()


def test_moments_far_apart_started_from_other_states(store: Store, moments: Moments) -> None:
    diff = trace_diff(store, moments.session_id, moments.first, moments.later)
    state = {c.path: (c.a, c.b) for c in diff.state}
    assert state["hp"] == (100, 90)  # the fork's reply cost 10 hp before the later turn
    # the dragon's entry is sticky: its timer, a map in a map, shown as a dotted path
    assert "lore_timers.sticky.valley:2" in state
    assert state["lore_timers.sticky.valley:2"][0] is None
    # the goblin's entry left; the state message changed; the player's first message is
    # the edited one; the history since, and the dragon's entry at a depth, came in
    assert [(p.status, p.role) for p in diff.messages[3:]] == [
        ("removed", "system"),
        ("changed", "system"),
        ("changed", "user"),
        ("added", "assistant"),
        ("added", "system"),
        ("added", "user"),
    ]
    assert "Goblins fear fire." in (diff.messages[3].a or "")
    state_message = diff.messages[4]
    assert (state_message.a or "").startswith("The state of the game now")
    assert ("added", "90") in [(w.op, w.text.strip(" ,.\n")) for w in state_message.words]
    assert [p.b for p in diff.messages[5:]] == [
        "A dragon attacks!",
        "A shadow passes.",
        "The dragon sleeps under the mountain.",
        "I keep walking.",
    ]
    tokens = diff.tokens
    assert tokens["a"].prompt is not None and tokens["b"].prompt is not None
    assert tokens["difference"].prompt == tokens["b"].prompt - tokens["a"].prompt
    assert f"tokens: {tokens['a'].prompt}+{tokens['a'].completion} -> " in diff.summary()
    assert f"state: {len(diff.state)} keys differ" in diff.summary()


def test_node_names_work_and_the_document_is_json(store: Store, moments: Moments) -> None:
    store.checkout(moments.session_id, moments.later)
    by_name = trace_diff(store, moments.session_id, "HEAD~2", moments.later[:8])
    assert by_name.a.node_id == moments.fork and by_name.b.node_id == moments.later
    document = by_name.as_dict()
    assert document["summary"] == by_name.summary()
    assert document["a"]["node_id"] == moments.fork
    assert document["tokens"]["difference"]["prompt"] == by_name.tokens["difference"].prompt
    same = diff_traces(*[load_traced(store, moments.session_id, moments.first)] * 2)
    assert same.settings == [] and same.state == [] and same.lore[0].status == "both"


def test_a_node_without_a_trace_is_refused_by_name(store: Store, moments: Moments) -> None:
    with pytest.raises(NotGeneratedError, match=f"node {moments.user} .*player's message"):
        trace_diff(store, moments.session_id, moments.user, moments.first)
    written, _ = store.append(moments.session_id, "assistant", "Written by hand.")
    with pytest.raises(NotGeneratedError, match=f"node {written.id} .*no trace") as caught:
        trace_diff(store, moments.session_id, moments.first, written.id[:10])
    assert caught.value.code == "no_trace"
    elsewhere = store.create_session().id
    stranger, _ = store.append(elsewhere, "assistant", "Another story.")
    with pytest.raises(ForeignNodeError, match=stranger.id):
        trace_diff(store, moments.session_id, moments.first, stranger.id)


def test_a_word_diff_gives_back_both_texts() -> None:
    a, b = "The goblin  swings\nits club.", "The old goblin swings\nits rusty club!"
    runs = word_diff(a, b)
    assert "".join(w.text for w in runs if w.op != "added") == a
    assert "".join(w.text for w in runs if w.op != "removed") == b
    assert [(w.op, w.text) for w in runs][:3] == [
        ("equal", "The "),
        ("added", "old "),
        ("equal", "goblin"),
    ]
    assert word_diff("same text", "same text") == [WordChange("equal", "same text")]
    # punctuation apart from words; in Chinese (no spaces), each character a word
    assert [(w.op, w.text) for w in word_diff("into the cave.", "into the cave quietly.")] == [
        ("equal", "into the cave"),
        ("added", " quietly"),
        ("equal", "."),
    ]
    assert [(w.op, w.text) for w in word_diff("哥布林攻击了你。", "巨龙攻击了你！")] == [
        ("removed", "哥布林"),
        ("added", "巨龙"),
        ("equal", "攻击了你"),
        ("removed", "。"),
        ("added", "！"),
    ]


def test_the_lores_seed_is_listed_but_left_out_of_the_summary(
    store: Store, moments: Moments
) -> None:
    first = load_traced(store, moments.session_id, moments.first)
    document = first.trace.document
    reseeded = replace(
        first,
        trace=replace(
            first.trace, document={**document, "retrieval": {**document["retrieval"], "seed": 8}}
        ),
    )
    diff = diff_traces(first, reseeded)
    assert [(c.name, c.a, c.b) for c in diff.settings] == [("lore_seed", 7, 8)]
    assert "seed" not in diff.summary()


def test_a_pair_of_messages_too_long_to_compare_word_by_word_is_shown_whole(
    store: Store, moments: Moments
) -> None:
    long = " ".join(f"word{n % 97}" for n in range(2_500))
    edited = long.replace("word5 ", "changed ", 1) + " more."
    assert len(long.split()) * len(edited.split()) > WORD_CELLS
    first = load_traced(store, moments.session_id, moments.first)
    messages = first.trace.messages
    longer = replace(first, trace=replace(first.trace, messages=[*messages, _user(long)]))
    edit = replace(first, trace=replace(first.trace, messages=[*messages, _user(edited)]))
    diff = diff_traces(longer, edit)
    [changed] = [pair for pair in diff.messages if pair.status == "changed"]
    assert changed.whole and (changed.a, changed.b) == (long, edited)
    assert changed.words == [WordChange("removed", long), WordChange("added", edited)]
    assert diff.as_dict()["messages"][-1]["whole"] is True
    short_a = replace(first, trace=replace(first.trace, messages=[*messages, _user("a b c")]))
    short_b = replace(first, trace=replace(first.trace, messages=[*messages, _user("a x c")]))
    [short] = [pair for pair in diff_traces(short_a, short_b).messages if pair.status == "changed"]
    assert not short.whole  # a short edit is compared word by word
    assert word_diff(long, edited) == changed.words  # word_diff itself keeps the bound


def _user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def test_an_edited_chinese_message_is_paired_with_its_original_by_likeness(
    store: Store, moments: Moments
) -> None:
    first = load_traced(store, moments.session_id, moments.first)
    messages = first.trace.messages
    original = "哥布林从山洞里冲出来攻击了你。"
    a = replace(first, trace=replace(first.trace, messages=[*messages, _user(original)]))
    b = replace(
        first,
        trace=replace(
            first.trace,
            messages=[
                *messages,
                _user("巨龙在山顶上睡觉。"),  # added, unrelated
                _user("哥布林从山洞里冲出来咬了你。"),  # the original, edited
            ],
        ),
    )
    diff = diff_traces(a, b)
    changed = [(p.a, p.b) for p in diff.messages if p.status == "changed"]
    assert changed == [(original, "哥布林从山洞里冲出来咬了你。")]
    assert [p.b for p in diff.messages if p.status == "added"] == ["巨龙在山顶上睡觉。"]


def test_combining_marks_stay_in_their_word() -> None:
    # Devanagari's vowel signs and virama are marks (\p{M}), not letters: one word each
    runs = word_diff("नमस्ते दुनिया", "नमस्ते मित्र")
    assert [(w.op, w.text) for w in runs] == [
        ("equal", "नमस्ते "),
        ("removed", "दुनिया"),
        ("added", "मित्र"),
    ]
    # an accent written as a combining mark after its letter: still one word
    accented = word_diff("cafe\u0301 noir", "cafe\u0301 blanc")
    assert accented[0] == WordChange("equal", "cafe\u0301 ")


def test_white_space_goes_with_the_words_around_it_when_it_changed() -> None:
    runs = word_diff("a  b c", "a b c d")
    assert "".join(w.text for w in runs if w.op != "added") == "a  b c"
    assert "".join(w.text for w in runs if w.op != "removed") == "a b c d"
    assert [(w.op, w.text) for w in runs] == [
        ("equal", "a"),
        ("removed", "  "),
        ("added", " "),
        ("equal", "b c"),
        ("added", " d"),
    ]
