"""build_engine, the one way an engine is made: the planner gets the planning call when
(and only when) the setup plans by model, and the engine closes the event loop's model
clients on aclose only when it is told to (a server closes them once, at shutdown)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

from mnemosyne import Store
from orchestrator import ModelConfig, PlannerFactory, TurnRequest, TurnSetup, build_engine
from orchestrator.gateway import litellm_module
from orchestrator.loopback import ModelServer
from planner import PlanCall, RuleBasedPlanner


def _clients() -> dict[str, Any]:
    return dict(getattr(litellm_module().in_memory_llm_clients_cache, "cache_dict", {}))


def _recording(given: list[PlanCall | None]) -> PlannerFactory:
    def make(call: PlanCall | None) -> RuleBasedPlanner:
        given.append(call)
        return RuleBasedPlanner()

    return make


def test_the_planner_gets_the_planning_call_only_when_planning_by_model(
    store: Store, serve: Callable[..., ModelServer]
) -> None:
    plan = json.dumps({"reasoning": "Recall the goblins.", "queries": ["goblins"]})
    server = serve(lambda request: plan)
    model = ModelConfig("openai/gm", api_base=server.url, retries=0)
    given: list[PlanCall | None] = []
    build_engine(store, TurnSetup(model=model), planner=_recording(given))
    engine = build_engine(
        store, TurnSetup(model=model, plan_by_model=True), planner=_recording(given)
    )
    assert given[0] is None
    call = given[1]
    assert call is not None

    async def ask() -> tuple[str, dict[str, Any]]:
        try:
            return await call({"topics": ["goblins"], "max_queries": 2, "messages": []})
        finally:
            await engine.aclose()  # the loop's model clients, before it ends

    answer, record = asyncio.run(ask())
    assert answer == plan and record["output"] == plan and record["model"] == "openai/gm"
    assert "goblins" in record["messages"][0]["content"]  # the plan template, rendered
    assert server.requests[0].messages == record["messages"]


def test_an_engine_closes_the_loop_clients_only_when_told(
    store: Store, serve: Callable[..., ModelServer]
) -> None:
    server = serve(lambda request: "Rain falls.")
    setup = TurnSetup(model=ModelConfig("openai/gm", api_base=server.url, retries=0))
    sid = store.create_session().id

    async def scenario() -> None:
        sharing = build_engine(store, setup, close_clients=False)
        await sharing.run(sid, TurnRequest("say", "Hello?"))
        clients = _clients()
        assert clients
        await sharing.aclose()
        assert sharing.closed and _clients() == clients  # left open for the others
        owning = build_engine(store, setup)
        await owning.run(sid, TurnRequest("say", "Anyone?"))
        await owning.aclose()
        assert owning.closed and _clients() == {}

    asyncio.run(scenario())
