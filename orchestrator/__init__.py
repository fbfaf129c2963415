"""The turn loop (a LangGraph graph) and the model gateway (litellm).

:class:`Engine` plays turns (say, reroll, edit, continue, impersonate, reply) on the
sessions of a :class:`mnemosyne.Store`, each reply written as one member of the cast
(:mod:`orchestrator.speakers`: who speaks; :data:`NARRATOR`, one voice for all), and
:func:`build_engine` makes one (gateway, planner given its model call, engine);
:class:`Gateway` makes the model calls;
:mod:`orchestrator.loopback` serves a scripted model over the OpenAI protocol on
loopback (the demo and the tests use it).
"""

from .build import PlannerFactory, build_engine, plan_call
from .config import DEFAULT_CONTEXT_WINDOW, ModelConfig
from .errors import ModelError, OrchestratorError, TurnError, TurnInterrupted
from .gateway import Completion, Gateway
from .preview import PromptPreview
from .setup import Character, TurnSetup
from .speakers import NARRATOR
from .turn import Engine, TurnKind, TurnRequest, TurnResult

__all__ = [
    "DEFAULT_CONTEXT_WINDOW",
    "NARRATOR",
    "Character",
    "Completion",
    "Engine",
    "Gateway",
    "ModelConfig",
    "ModelError",
    "OrchestratorError",
    "PlannerFactory",
    "PromptPreview",
    "TurnError",
    "TurnInterrupted",
    "TurnKind",
    "TurnRequest",
    "TurnResult",
    "TurnSetup",
    "build_engine",
    "plan_call",
]
