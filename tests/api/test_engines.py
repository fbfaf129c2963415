"""What a server keeps per session: engines in a bounded cache (an engine let go is
closed, one playing a turn is kept), turn locks that last only while a turn holds or
waits for them, and the model clients the engines share closed once, at shutdown.
Real engines, a real store, a real model on loopback."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from clotho.api.context import ApiContext
from clotho.api.engines import EngineCache, TurnLocks
from mnemosyne import Store
from orchestrator import ModelConfig, TurnRequest, TurnSetup, build_engine
from orchestrator.gateway import litellm_module
from orchestrator.loopback import ModelServer

from .conftest import api_settings


@pytest.fixture
def sqlite_store(tmp_path: Path) -> Iterator[Store]:
    with Store.open(f"sqlite:///{tmp_path / 'engines.db'}") as store:
        yield store


def _engine(store: Store) -> Any:
    return build_engine(store, TurnSetup(model=ModelConfig("none")), close_clients=False)


def test_the_cache_lets_the_least_recently_used_go_and_hands_it_back(
    sqlite_store: Store,
) -> None:
    cache = EngineCache(2)
    a, b, c = (_engine(sqlite_store) for _ in range(3))
    assert cache.put("a", 1, a) == [] and cache.put("b", 1, b) == []
    assert cache.get("a", 1) is a  # a is now used more recently than b
    assert cache.put("c", 1, c) == [b]
    assert "b" not in cache and len(cache) == 2
    assert cache.get("a", 2) is None  # built for other documents: not this one
    newer = _engine(sqlite_store)
    assert cache.put("a", 2, newer) == [a]  # replaced: handed back to be closed
    assert cache.get("a", 2) is newer
    assert set(cache.clear()) == {newer, c} and len(cache) == 0


def test_a_busy_session_keeps_its_engine(sqlite_store: Store) -> None:
    busy = {"a"}
    cache = EngineCache(1, busy=busy.__contains__)
    a, b, c = (_engine(sqlite_store) for _ in range(3))
    cache.put("a", 1, a)
    assert cache.put("b", 1, b) == []  # a is playing a turn: kept, over the limit
    assert len(cache) == 2
    busy.clear()
    assert cache.put("c", 1, c) == [a, b]


def test_a_lock_is_forgotten_when_no_turn_holds_or_waits_for_it() -> None:
    async def scenario() -> None:
        locks = TurnLocks()
        order: list[str] = []

        async def turn(name: str, hold: asyncio.Event) -> None:
            async with locks("s"):
                order.append(name)
                await hold.wait()

        first_done, second_done = asyncio.Event(), asyncio.Event()
        first = asyncio.create_task(turn("first", first_done))
        await asyncio.sleep(0)
        assert locks("s").locked() and locks.in_use("s")
        second = asyncio.create_task(turn("second", second_done))
        waiting = asyncio.create_task(turn("cancelled", asyncio.Event()))
        await asyncio.sleep(0)
        waiting.cancel()  # gave up while waiting: it no longer counts
        await asyncio.gather(waiting, return_exceptions=True)
        first_done.set()
        await first
        await asyncio.sleep(0)
        assert order == ["first", "second"] and len(locks) == 1
        second_done.set()
        await second
        assert len(locks) == 0 and not locks.in_use("s") and not locks("s").locked()

    asyncio.run(scenario())


def _client_cache() -> dict[str, Any]:
    cache = litellm_module().in_memory_llm_clients_cache
    return dict(getattr(cache, "cache_dict", {}))


def test_an_evicted_engine_is_closed_and_shared_clients_are_closed_at_shutdown(
    sqlite_store: Store, tmp_path: Path, serve: Callable[..., ModelServer]
) -> None:
    server = serve(lambda request: "The torch gutters.")
    settings = api_settings(tmp_path, model="openai/gm", api_base=server.url, api_key="x")
    sids = [sqlite_store.create_session(title=name).id for name in "abcd"]

    async def scenario() -> None:
        ctx = ApiContext(settings, sqlite_store, None, max_engines=2)
        first = await ctx.engine(sids[0])
        assert await ctx.engine(sids[0]) is first  # kept while its documents stay
        async with ctx.turn_lock(sids[0]):  # a turn of the first session is running
            await first.run(sids[0], TurnRequest("say", "I light a torch."))
            second = await ctx.engine(sids[1])
            third = await ctx.engine(sids[2])
            assert not first.closed  # busy: kept beyond the limit
            assert second.closed and not third.closed  # the least recently used idle one
        assert len(ctx.turn_locks) == 0
        clients = _client_cache()
        assert clients  # the turn's HTTP client, shared by every engine of the loop
        await ctx.engine(sids[3])
        assert first.closed  # idle now: it went, closed
        assert _client_cache() == clients  # closing an engine left the shared ones open
        again = await ctx.engine(sids[0])
        assert again is not first and not again.closed
        result = await again.run(sids[0], TurnRequest("say", "And then?"))
        assert result.node.content == "The torch gutters."
        await ctx.aclose()
        assert again.closed
        assert _client_cache() == {}  # litellm's clients of the loop: closed, once

    asyncio.run(scenario())


def test_requests_that_ask_together_share_one_build(sqlite_store: Store, tmp_path: Path) -> None:
    settings = api_settings(tmp_path, model="openai/gm", api_base="http://127.0.0.1:9/v1")
    sid = sqlite_store.create_session().id

    async def scenario() -> None:
        ctx = ApiContext(settings, sqlite_store, None)
        impatient = asyncio.ensure_future(ctx.engine(sid))
        await asyncio.sleep(0)
        together = [asyncio.ensure_future(ctx.engine(sid)) for _ in range(3)]
        await asyncio.sleep(0)
        impatient.cancel()  # one request leaves: the build goes on for the others
        engines = await asyncio.gather(*together)
        assert len({id(engine) for engine in engines}) == 1
        assert not engines[0].closed  # the only one built, so none was replaced
        assert await ctx.engine(sid) is engines[0]
        await ctx.aclose()

    asyncio.run(scenario())


def test_the_locks_map_does_not_grow_with_the_sessions_played(
    make_client: Callable[..., TestClient], serve: Callable[..., ModelServer]
) -> None:
    client = make_client(serve(lambda request: "Nothing stirs."))
    ctx = client.app.state.clotho  # type: ignore[attr-defined]
    for n in range(4):
        sid = client.post("/api/sessions", json={"title": f"s{n}"}).json()["session"]["id"]
        played = client.post(f"/api/sessions/{sid}/turns", json={"kind": "say", "text": "Hi."})
        assert played.status_code == 201 and "event: node" in played.text
    assert len(ctx.turn_locks) == 0
