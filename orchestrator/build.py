"""Putting an engine together: gateway → planner (given its model call) → engine.

:func:`build_engine` is the one way the command line, the server and the demo make an
engine: a planner that plans with a model call gets that call (:func:`plan_call`, made
from the engine's gateway and templates) when it is made, through its constructor.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

from mnemosyne import TurnStore
from planner import PlanCall, Planner, RuleBasedPlanner

from .gateway import Gateway
from .setup import TurnSetup
from .turn import Engine

__all__ = ["PlannerFactory", "build_engine", "plan_call"]

#: Makes a session's planner, given the model call to plan with (``None``: plan by rules).
PlannerFactory = Callable[[PlanCall | None], Planner]


def plan_call(gateway: Gateway, setup: TurnSetup) -> PlanCall:
    """The planning call: the ``plan`` template sent to the setup's planner model
    (``setup.plan_caller``) through ``gateway``."""

    async def call(scope: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        config = setup.plan_caller
        messages = [{"role": "system", "content": setup.templates.render("plan", scope)}]
        answer = await gateway.complete(config, messages)
        return answer.content, {
            "model": config.model,
            "messages": messages,
            "output": answer.content,
            "usage": answer.usage,
            "latency_ms": round(answer.latency_ms, 2),
        }

    return call


def build_engine(
    store: TurnStore,
    setup: TurnSetup,
    *,
    planner: PlannerFactory | None = None,
    close_clients: bool = True,
    rng: random.Random | None = None,
) -> Engine:
    """An engine that plays turns as ``setup`` says, with a gateway of its own and the
    planner ``planner`` makes (given the planning call when ``setup.plan_by_model``;
    ``None``: no lore, a :class:`planner.RuleBasedPlanner`).

    ``close_clients``: whether the engine's :meth:`~Engine.aclose` closes the model
    clients of the event loop (litellm's, shared by every engine of the process): a
    command that plays with one engine does; a server, which keeps many, passes
    ``False`` and closes them once at shutdown. ``rng``: the randomness of the speaker
    order (:class:`Engine`).
    """
    gateway = Gateway()
    call = plan_call(gateway, setup) if setup.plan_by_model else None
    made = planner(call) if planner is not None else RuleBasedPlanner()
    return Engine(store, setup, gateway=gateway, planner=made, close_clients=close_clients, rng=rng)
