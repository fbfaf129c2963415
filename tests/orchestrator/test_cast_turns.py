"""A cast of several in one story: who speaks, the reply named for its speaker, the
refusals, and each character's prompt holding only what it witnessed (SQLite and
PostgreSQL, the model a real server on loopback)."""

from __future__ import annotations

import asyncio
import json
import os
import random
from collections.abc import Callable
from typing import Any

import pytest

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from mnemosyne import Store
from orchestrator import (
    NARRATOR,
    Character,
    Engine,
    ModelConfig,
    TurnError,
    TurnRequest,
    TurnResult,
    TurnSetup,
    build_engine,
)
from orchestrator.loopback import ModelServer, Received

CAST = (
    Character(name="Ann", description="A ranger with a bent bow.", talkativeness=0.0),
    Character(name="Bram", description="A smith who hums.", talkativeness=0.0),
    Character(name="Cora", description="A thief, quiet.", talkativeness=0.0),
    Character(name="Dag", description="An old priest.", talkativeness=0.0),
)


class Voices:
    """Each story request answered with a numbered line; extraction: nothing changes."""

    def __init__(self) -> None:
        self.count = 0

    def __call__(self, request: dict[str, Any]) -> str:
        if "response_format" in request:
            return json.dumps({"operations": []})
        self.count += 1
        return f"Line {self.count}."


def chat(server: ModelServer) -> list[Received]:
    return [r for r in server.requests if "response_format" not in r.json]


def engine_for(
    store: Store, server: ModelServer, cast: tuple[Character, ...] = CAST, **setup: Any
) -> Engine:
    model = ModelConfig("openai/gm", api_base=server.url, retries=0)
    turn_setup = TurnSetup(model=model, character=cast[0], cast=cast, extract=False, **setup)
    return build_engine(store, turn_setup, rng=random.Random(3))


def play(engine: Engine, sid: str, kind: str, **kwargs: Any) -> TurnResult:
    async def turn() -> TurnResult:
        try:
            return await engine.run(sid, TurnRequest(kind, **kwargs))  # type: ignore[arg-type]
        finally:
            await engine.aclose()

    return asyncio.run(turn())


def scene(store: Store, sid: str, name: str, move: str, op: dict[str, Any]) -> str:
    """A scene change as clotho.cast.scene_change commits it."""
    node, _ = store.append(sid, "system", f"{name} {move} the scene.", delta=[op])
    return node.id


@pytest.fixture
def sid(store: Store) -> str:
    return store.create_session().id


def test_a_named_speaker_replies_as_itself_and_the_node_carries_its_name(
    store: Store, sid: str, serve: Callable[..., ModelServer]
) -> None:
    server = serve(Voices())
    engine = engine_for(store, server)
    result = play(engine, sid, "say", text="Who forged this?", speaker="bram")
    assert result.node is not None and result.node.name == "Bram"
    assert result.user_node is not None and result.user_node.name == "Player"
    system = "\n".join(m["content"] for m in chat(server)[0].messages if m["role"] == "system")
    assert "About Bram:\nA smith who hums." in system
    assert "About Ann:" not in system

    # a reply: no message of the player's, appended at HEAD, named for its speaker
    reply = play(engine, sid, "reply", speaker="Cora")
    assert reply.user_node is None and reply.node is not None
    assert reply.node.parent_id == result.node.id and reply.node.name == "Cora"
    assert [entry.action for entry in store.history(sid)][-1] == "reply"

    # a reroll keeps its speaker; another one named is refused
    again = play(engine, sid, "reroll")
    assert again.node is not None and again.node.name == "Cora"
    with pytest.raises(TurnError, match="keeps its speaker"):
        play(engine, sid, "reroll", speaker="Dag")


def test_turns_a_speaker_cannot_take_are_refused_and_store_nothing(
    store: Store, sid: str, serve: Callable[..., ModelServer]
) -> None:
    server = serve(Voices())
    muted = (*CAST[:3], Character(name="Dag", muted=True))
    engine = engine_for(store, server, muted)
    with pytest.raises(TurnError, match="is empty"):
        play(engine, sid, "reply", speaker="Ann")
    play(engine, sid, "say", text="Hello.", speaker="Ann")
    scene(store, sid, "Bram", "leaves", {"op": "set", "path": "present", "value": ["Ann", "Cora"]})
    version = store.session(sid).version
    with pytest.raises(TurnError, match=r"no member of the cast is named 'Eve'.*Ann, Bram"):
        play(engine, sid, "say", text="Eve?", speaker="Eve")
    with pytest.raises(TurnError, match="Dag is muted"):
        play(engine, sid, "reply", speaker="Dag")
    with pytest.raises(TurnError, match=r"Bram is not in the scene \(present: Ann, Cora\)"):
        play(engine, sid, "say", text="Bram?", speaker="Bram")
    assert store.session(sid).version == version
    assert len(chat(server)) == 1


def test_next_speakers_follow_the_order_and_who_is_present(
    store: Store, sid: str, serve: Callable[..., ModelServer]
) -> None:
    server = serve(Voices())
    engine = engine_for(store, server)
    assert engine.next_speakers(sid, "Dag and ann, listen.") == ["Dag", "Ann"]
    play(engine, sid, "say", text="Dag?", speaker="Dag")
    scene(store, sid, "Ann", "leaves", {"op": "set", "path": "present", "value": ["Bram", "Dag"]})
    assert engine.next_speakers(sid, "Ann and Bram, listen.") == ["Bram"]
    # with no message, the one who spoke last does not answer again
    talkative = tuple(Character(name=c.name, talkativeness=1.0) for c in CAST)
    assert engine_for(store, server, talkative).next_speakers(sid) == ["Bram"]
    robin = engine_for(store, server, speaker_order="round_robin")
    assert robin.next_speakers(sid) == ["Bram"]  # after Dag, Ann is away: Bram
    assert engine_for(store, server, speaker_order="narrator").next_speakers(sid) == [NARRATOR]
    assert engine_for(store, server, speaker_order="manual").next_speakers(sid) == ["Bram"]
    lone = engine_for(store, server, (CAST[0],))
    assert lone.next_speakers(sid, "Bram?") == ["Ann"]
    # with no speaker named, the first of them answers
    result = play(robin, sid, "say", text="Anyone?")
    assert result.node is not None and result.node.name == "Bram"
